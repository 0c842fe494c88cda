// Small helpers every op family uses: input checks with clear errors, axis
// normalization, and multidirectional (NumPy) broadcasting.
#pragma once
#include <kiln/argument.hpp>
#include <kiln/errors.hpp>
#include <kiln/shape.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::op {

// Throws a shape error naming the op unless min <= inputs.size() <= max.
void check_num_inputs(const std::string& op_name, const std::vector<shape>& inputs, std::size_t min,
                      std::size_t max);
inline void check_num_inputs(const std::string& op_name, const std::vector<shape>& inputs, std::size_t n) {
    check_num_inputs(op_name, inputs, n, n);
}
// Throws a type error unless all listed inputs share one element type.
void check_same_type(const std::string& op_name, const std::vector<shape>& inputs);
// Throws a shape error unless input i is a tensor of the given rank range.
void check_rank(const std::string& op_name, const shape& s, std::size_t min_rank, std::size_t max_rank,
                const std::string& input_label = "input");

// Maps a possibly negative axis into [0, rank); throws naming the op when out of range.
std::size_t normalize_axis(std::int64_t axis, std::size_t rank, const std::string& op_name);
std::vector<std::size_t> normalize_axes(const std::vector<std::int64_t>& axes, std::size_t rank,
                                        const std::string& op_name);

// NumPy broadcasting of several lens (shape error naming the op when incompatible).
std::vector<std::size_t> broadcast_lens(const std::vector<std::vector<std::size_t>>& lens, const std::string& op_name);
// A view of `s` broadcast to `lens` (stride 0 on the broadcast dimensions).
shape broadcast_to(const shape& s, const std::vector<std::size_t>& lens);

// The row-major multi-index that follows `idx` within `lens`; false after the last.
bool next_index(std::vector<std::size_t>& idx, const std::vector<std::size_t>& lens);

// Reads an int64 vector from a constant 0-D/1-D integer argument.
std::vector<std::int64_t> to_int64_vector(const argument& a);

}  // namespace kiln::op
