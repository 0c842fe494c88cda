// Loading models (ONNX or .kiln, told apart by content), making inputs (random,
// .pb or .npy files) and writing outputs (.pb, .npy).
#pragma once
#include "cli_options.hpp"

#include <kiln/program.hpp>

#include <functional>
#include <string>
#include <vector>

namespace kiln::cli {

bool is_kiln_file(const std::string& path);
// Parses the .onnx (with the shape options) or loads the .kiln.
program load_model(const options& o);
compile_options make_compile_options(const options& o);
// Compiles for o.target unless the program is already compiled (a loaded .kiln), in
// which case a different --target is a usage error.
void compile_model(program& p, const options& o, bool target_given);

// One value per parameter: from --input-file, --input DIR, or seeded random data.
param_map make_inputs(const program& p, const options& o);
argument random_argument(const shape& s, std::uint64_t seed);

argument read_npy(const std::string& path);
void write_npy(const argument& a, const std::string& path);
// Runs a step that writes files (named by `what` in the message); its I/O failures become
// runtime errors (exit 4): the model and the command line were fine.
void writing(const std::string& what, const std::function<void()>& step);
// Writes output_N.pb / <name>.npy files for each result.
void write_outputs(const program& p, const std::vector<argument>& results, const options& o);

struct summary {
    double min = 0, max = 0, mean = 0;
    std::vector<double> first;
    bool numeric = true;
};
summary summarize(const argument& a, std::size_t first_count = 5);

}  // namespace kiln::cli
