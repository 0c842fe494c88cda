// Helpers shared by the reduction, softmax, normalization, loss and attention ops:
// reading any numeric tensor as doubles, writing doubles back in the output type, and
// splitting a shape around one axis. Reference kernels of this family compute in
// double: it is at least as accurate as the float32 arithmetic the ONNX reference
// uses, and one code path then serves float16, bfloat16, float and double alike.
#pragma once
#include <kiln/argument.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace kiln::op {

// Elements in row-major order as doubles (any layout, any numeric type).
std::vector<double> read_doubles(const argument& a);
// A standard-layout tensor of shape s (its type) holding `values` converted from double.
argument write_doubles(const shape& s, const std::vector<double>& values);

// lens = outer x n x inner around `axis`.
struct axis_split {
    std::size_t outer = 1, n = 1, inner = 1;
};
axis_split split_at(const std::vector<std::size_t>& lens, std::size_t axis);
// Product of lens[begin, end).
std::size_t product(const std::vector<std::size_t>& lens, std::size_t begin, std::size_t end);

// Throws a type error naming op and input unless s is a floating-point tensor.
void check_float(const std::string& op_name, const shape& s, const std::string& input_label = "input");

}  // namespace kiln::op
