// Command-line options of the kiln tool: one struct for all commands, a declarative
// table per command (name, value syntax, default, help) that drives both parsing and
// `--help`, so the two never disagree.
#pragma once
#include <kiln/compile_options.hpp>
#include <kiln/shape.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kiln::cli {

struct options {
    std::string command;
    std::string model;
    std::string target = "cpu";
    bool target_given = false;
    std::size_t batch = 0;  // 0: not given
    std::size_t default_dim_value = 0;
    std::map<std::string, std::vector<std::size_t>> input_dims;
    std::map<std::string, std::vector<dynamic_dimension>> dyn_input_dims;
    std::optional<dynamic_dimension> default_dyn_dim;  // --default-dyn-dim
    bool fp16 = false, bf16 = false, int8 = false, fp8 = false, int4_weights = false;
    std::string calibration;
    std::string calibration_method = "minmax";
    std::string int8_residual_adds = "fuse";
    std::string dump_scales;
    bool fast_math = true;
    bool exhaustive_tune = false;
    int device_id = 0;
    std::string gpu_arch;
    bool tf32 = false;
    bool offload_copy = true;
    std::size_t threads = 0;
    std::size_t specialize_after = compile_options{}.specialize_after;
    std::vector<dim_buckets> dynamic_buckets;
    std::size_t max_specializations = compile_options{}.max_specializations;
    std::size_t iterations = 50;
    std::size_t warmup = 5;
    std::uint64_t seed = 0;
    double atol = 1e-4;
    double rtol = 1e-3;
    bool json = false;
    bool quiet = false;
    bool optimize = false;
    bool per_instruction = false;
    std::string output_file;  // -o
    std::string input_dir;
    std::map<std::string, std::string> input_files;
    std::string output_dir;
    std::string output_npy_dir;
    std::string expected_dir;
    std::string passes;  // read --passes=a,b
    // perf --shapes: the sets of input shapes to run, in order; each maps input names to dims.
    std::vector<std::map<std::string, std::vector<std::size_t>>> shape_sets;
    // serve
    std::string model_repository;
    std::string host = "127.0.0.1";
    int http_port = 8000;
    int grpc_port = 8001;
    std::size_t max_message_mb = 64;
    std::string model_control_mode = "none";
    std::vector<std::string> load_models;
    int repository_poll_secs = 15;
    std::string auth_token_env, auth_token_file;  // where the token is, never the token
    std::string tls_cert, tls_key;
    int metrics_port = 8002;
    int exit_timeout_secs = 30;
    std::size_t http_threads = 64;
};

struct option_spec {
    std::string name;     // "--target"
    std::string syntax;   // "ref|cpu|gpu" ("" for a flag)
    std::string fallback; // shown as the default
    std::string help;
};

struct command_spec {
    std::string name;
    std::string summary;
    bool takes_model = true;
    std::vector<std::string> option_names;
};

const std::vector<command_spec>& commands();
const command_spec* find_command(const std::string& name);
const option_spec& find_option(const std::string& name);

// Parses argv (after the command name). Throws usage_error on bad syntax.
options parse(const std::string& command, const std::vector<std::string>& args);
std::string command_help(const command_spec& c);
std::string general_help();

struct usage_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// "[{min:1,max:8,optimals:[1,4]},3,224,224]"
std::vector<dynamic_dimension> parse_dyn_dims(const std::string& text, const std::string& option);

// perf --shapes: "input_ids=1x7,attention_mask=1x7;input_ids=1x33,attention_mask=1x33".
// ';' separates groups; in a group, "name=DxD" starts an input's list and a bare "DxD"
// adds another shape to the last named input. An input with k shapes gives k sets (the
// inputs of one group that list several must list equally many; one shape is used in
// every set of its group): "input_ids=1x1,1x17,2x128" is three sets.
std::vector<std::map<std::string, std::vector<std::size_t>>> parse_shape_sets(const std::string& text);

}  // namespace kiln::cli
