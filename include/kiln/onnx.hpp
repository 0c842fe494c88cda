// The ONNX frontend: ModelProto -> program. Options mean what MIGraphX's
// onnx_options mean, so users can move their code over unchanged.
#pragma once
#include <kiln/program.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln {

struct onnx_options {
    // Size for every symbolic (dim_param) or unknown dimension of a graph input. Unset (the
    // default), those dims stay dynamic, as default_dyn_dim_value says.
    std::optional<std::size_t> default_dim_value;
    // The range of the symbolic/unknown input dims when default_dim_value is unset: 0 (an
    // empty batch, a first call with no past) to 4096, with 1 as the optimal (the shape
    // `shape::opt_lens()` gives, compiled ahead). A range with min == max fixes them.
    dynamic_dimension default_dyn_dim_value{0, 4096, {1}};
    // Input name -> static dims (overrides the model's declared dims).
    std::unordered_map<std::string, std::vector<std::size_t>> map_input_dims;
    // Input name -> per-dimension {min, max, optimals}: the program compiles per input shape.
    std::unordered_map<std::string, std::vector<dynamic_dimension>> map_dyn_input_dims;
    // Unknown operators become placeholders that fail only if executed.
    bool skip_unknown_operators = false;
    // Loop: the trip count used when a Loop has no static bound, and whether to cap
    // every Loop at that count.
    std::size_t max_loop_iterations = 10;
    bool limit_max_iterations = false;
    // Folder that external tensor data is read from (default: the model's folder).
    std::string external_data_path;
};

program parse_onnx(const std::string& path, const onnx_options& options = {});
program parse_onnx_buffer(const void* data, std::size_t size, const onnx_options& options = {});

// The ONNX operators the frontend understands, as "Op" (default domain) or "domain.Op".
std::vector<std::string> get_onnx_operators();
// Highest opset of the default domain the frontend accepts.
int max_supported_opset();

// TensorProto files (the ONNX test-data layout, input_N.pb / output_N.pb).
argument read_tensor_proto(const std::string& path);
argument parse_tensor_proto(const void* data, std::size_t size);
// Reads a .pb holding the message that `declared` calls for: TensorProto for tensors,
// SequenceProto for sequences, OptionalProto for optionals.
argument read_value_proto(const std::string& path, const shape& declared);
void write_tensor_proto(const argument& value, const std::string& name, const std::string& path);
// The inverse of read_value_proto: TensorProto, SequenceProto (of tensors) or OptionalProto, as
// the ONNX backend tests store outputs. Written atomically (a temporary file, then a rename).
void write_value_proto(const argument& value, const std::string& name, const std::string& path);

}  // namespace kiln
