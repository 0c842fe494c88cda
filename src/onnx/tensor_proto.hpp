// TensorProto <-> literal/argument, for initializers, Constant nodes and the
// test-data files (input_N.pb / output_N.pb).
#pragma once
#include <kiln/argument.hpp>
#include <kiln/literal.hpp>

#include <string>

namespace onnx {
class TensorProto;
}

namespace kiln::onnx_frontend {

// `what` names the tensor in error messages; `base_dir` is where external data lives.
literal tensor_to_literal(const onnx::TensorProto& t, const std::string& what, const std::string& base_dir);
void argument_to_tensor(const argument& a, const std::string& name, onnx::TensorProto& t);

}  // namespace kiln::onnx_frontend
