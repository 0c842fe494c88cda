// A model's optional config.pbtxt (Triton's ModelConfig text format, the fields listed in
// docs/server.md): read with protobuf's text-format parser over model_config.proto, so a
// field Kiln does not support is refused with its name and position, never ignored.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::serve {

// model_warmup { }: a sample request run before a version serves.
struct warmup_input {
    std::string name;
    std::string datatype;             // the protocol's name ("FP32", ...)
    std::vector<std::int64_t> shape;  // batch_size prepended when max_batch_size > 0
    enum source_kind { zero, random, file } source = zero;
    std::string file_name;  // input_data_file: a name in the model's warmup/ folder
};
struct warmup_sample {
    std::string name;
    std::vector<warmup_input> inputs;
    std::size_t count = 1;  // runs of this sample
};

enum class version_policy { latest, all, specific };

struct model_config {
    std::size_t max_batch_size = 0;  // 0: requests are not bounded along dim 0
    std::size_t instance_count = 1;  // concurrent executions of the model
    std::string target = "cpu";      // parameters { key: "kiln.target" }
    std::size_t threads = 0;         // parameters { key: "kiln.threads" }; 0: cores / instances
    version_policy policy = version_policy::latest;
    std::size_t latest_count = 1;           // latest { num_versions }
    std::vector<std::int64_t> versions;     // specific { versions }
    // dynamic_batching { }: requests are joined along dim 0 (serve/batcher.hpp).
    bool dynamic_batching = false;
    std::vector<std::size_t> preferred_batch_sizes;
    std::uint64_t max_queue_delay_us = 0;
    std::size_t max_queue_size = 0;  // 0: unbounded
    // Run in order before a version serves; none: one run on zeros at the default shapes.
    std::vector<warmup_sample> warmup;
};

// Parses the text of a config.pbtxt for model `model_name` (used in messages and checked
// against a `name` field). Throws serve_error (bad_request) naming what is wrong.
model_config parse_model_config(const std::string& text, const std::string& model_name);
// Reads DIR/config.pbtxt if there is one; the defaults otherwise.
model_config read_model_config(const std::string& model_dir, const std::string& model_name);
// The versions to serve among those on disk (ascending), by the policy.
std::vector<std::int64_t> select_versions(const model_config& c, std::vector<std::int64_t> available);

}  // namespace kiln::serve
