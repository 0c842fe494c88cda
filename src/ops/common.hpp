// Small helpers every op family uses: input checks with clear errors, axis
// normalization, and multidirectional (NumPy) broadcasting.
#pragma once
#include <kiln/argument.hpp>
#include <kiln/errors.hpp>
#include <kiln/shape.hpp>

#include <array>
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

// Calls f(out_index, offsets) for each element of `lens` in row-major order; offsets[k] is
// the element offset into input k, whose strides over `lens` are strides[k] (0 where it is
// broadcast). The innermost dimension runs as a plain strided loop.
template <std::size_t N, class F>
void for_each_broadcast(const std::vector<std::size_t>& lens, const std::array<std::vector<std::size_t>, N>& strides,
                        F&& f) {
    std::size_t total = 1;
    for (auto l : lens) total *= l;
    if (total == 0) return;
    std::array<std::size_t, N> off{};
    if (lens.empty()) {
        f(std::size_t{0}, off);
        return;
    }
    const std::size_t rank = lens.size();
    const std::size_t inner = lens[rank - 1];
    std::array<std::size_t, N> inner_stride{}, base{};
    for (std::size_t k = 0; k < N; ++k) inner_stride[k] = strides[k][rank - 1];
    std::vector<std::size_t> idx(rank - 1, 0);
    std::size_t o = 0;
    while (true) {
        for (std::size_t j = 0; j < inner; ++j) {
            for (std::size_t k = 0; k < N; ++k) off[k] = base[k] + j * inner_stride[k];
            f(o++, off);
        }
        if (rank == 1) return;
        // Advance the outer dimensions like an odometer; done when it wraps around.
        std::size_t d = rank - 1;
        bool wrapped = true;
        while (d > 0) {
            --d;
            if (++idx[d] < lens[d]) {
                for (std::size_t k = 0; k < N; ++k) base[k] += strides[k][d];
                wrapped = false;
                break;
            }
            for (std::size_t k = 0; k < N; ++k) base[k] -= (lens[d] - 1) * strides[k][d];
            idx[d] = 0;
        }
        if (wrapped) return;
    }
}

}  // namespace kiln::op
