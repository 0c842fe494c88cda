// Helpers shared by the nn family (convolution, pooling, matrix products, geometric
// ops): reading inputs in a compute type, writing results back, and the window
// geometry (output sizes, auto_pad) that convolution and pooling agree on.
#pragma once
#include "ops/common.hpp"

#include <kiln/argument.hpp>
#include <kiln/shape.hpp>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln::op {

// A tensor's elements, row-major, as compute type A. Borrows the argument's memory when
// it already is standard and of storage type A; otherwise owns a converted copy.
template <class A>
struct compute_buffer {
    std::vector<A> owned;
    const A* ptr = nullptr;
    compute_buffer() = default;
    compute_buffer(const compute_buffer&) = delete;  // ptr may point into owned
    compute_buffer& operator=(const compute_buffer&) = delete;
    compute_buffer(compute_buffer&&) noexcept = default;
    compute_buffer& operator=(compute_buffer&&) noexcept = default;
    std::size_t size = 0;
    const A* data() const { return ptr; }
    A operator[](std::size_t i) const { return ptr[i]; }
};

template <class A>
compute_buffer<A> read_as(const argument& a) {
    compute_buffer<A> b;
    const auto& s = a.get_shape();
    b.size = s.elements();
    if (s.get_type() == type_of<A>() && s.standard()) {
        b.ptr = a.data_as<A>();
        return b;
    }
    b.owned.resize(b.size);
    visit_numeric(s.get_type(), [&](auto tag) {
        using C = typename decltype(tag)::type;
        const C* p = a.data_as<C>();
        if (s.standard()) {
            for (std::size_t i = 0; i < b.size; ++i) b.owned[i] = convert<A>(p[i]);
            return;
        }
        // Views (transposed, broadcast): offsets stepped per dim, no division per element.
        for_each_broadcast<1>(s.lens(), {s.strides()}, [&](std::size_t o, const std::array<std::size_t, 1>& off) {
            b.owned[o] = convert<A>(p[off[0]]);
        });
    }, "read_as");
    b.ptr = b.owned.data();
    return b;
}

// Allocates `out` (standard layout) and lets fill(A*) write its elements in compute
// type A; converts to the output's element type when that is not A.
template <class A, class F>
argument produce(const shape& out, F&& fill) {
    shape s = out.as_standard();
    argument r(s);
    if (s.get_type() == type_of<A>()) {
        fill(r.data_as<A>());
        return r;
    }
    std::vector<A> tmp(s.elements());
    fill(tmp.data());
    visit_numeric(s.get_type(), [&](auto tag) {
        using C = typename decltype(tag)::type;
        C* p = r.data_as<C>();
        for (std::size_t i = 0; i < tmp.size(); ++i) p[i] = convert<C>(tmp[i]);
    }, "produce");
    return r;
}

// Calls f(std::type_identity<A>{}) with the compute type of a floating element type:
// float for float32 and the 16-bit floats, double for float64. Other types throw a
// type error naming the op.
template <class F>
decltype(auto) visit_float_compute(type t, const std::string& op_name, F&& f) {
    switch (t) {
        case type::float16:
        case type::bfloat16:
        case type::float32: return f(std::type_identity<float>{});
        case type::float64: return f(std::type_identity<double>{});
        default: break;
    }
    throw_error(error_code::type, op_name + ": element type " + std::string(type_name(t)) +
                                      " is not supported (expected float16, bfloat16, float32 or float64)");
}

inline bool is_float_compute_type(type t) {
    return t == type::float16 || t == type::bfloat16 || t == type::float32 || t == type::float64;
}

// How padding is decided. ONNX auto_pad SAME_* depends on the input size, so it is
// resolved at parse time when shapes are static and kept symbolic otherwise.
enum class pad_mode : std::uint8_t { explicit_pads = 0, same_upper = 1, same_lower = 2 };

std::string to_string(pad_mode m);

// Spatial dims as int64 (dims 2.. of an N, C, spatial... tensor).
std::vector<std::int64_t> spatial_dims(const shape& s);

// Pads {begin..., end...} for auto_pad SAME_UPPER/SAME_LOWER: output = ceil(in / stride),
// the total padding split with the odd element at the end (upper) or the start (lower).
std::vector<std::int64_t> same_padding(pad_mode mode, const std::vector<std::int64_t>& in,
                                       const std::vector<std::int64_t>& kernel,
                                       const std::vector<std::int64_t>& stride,
                                       const std::vector<std::int64_t>& dilation);

// Output length of a sliding window: floor (or ceil) of
// (in + pb + pe - dilated_kernel) / stride + 1. With ceil_mode the last window must start
// inside the input or its begin padding, as ONNX (and PyTorch) require.
std::int64_t window_output_size(std::int64_t in, std::int64_t kernel, std::int64_t stride, std::int64_t dilation,
                                std::int64_t pad_begin, std::int64_t pad_end, bool ceil_mode,
                                const std::string& op_name);

// Checks an attribute vector has `rank` entries (or is empty, then fills `fallback`).
std::vector<std::int64_t> spatial_attr(const std::vector<std::int64_t>& v, std::size_t rank, std::int64_t fallback,
                                       const std::string& op_name, const std::string& attr_name,
                                       bool positive = true);
// Padding: empty means zeros; otherwise 2 * rank entries {begin..., end...}.
std::vector<std::int64_t> padding_attr(const std::vector<std::int64_t>& v, std::size_t rank,
                                       const std::string& op_name);

// NumPy broadcasting of two possibly dynamic dims (the result is the larger of the two
// at run time); a shape error naming the op when two fixed dims disagree.
dynamic_dimension broadcast_dim(const dynamic_dimension& a, const dynamic_dimension& b, const std::string& op_name);
bool any_dynamic(const std::vector<shape>& inputs);

// Row-major strides of `lens` in elements, as int64.
std::vector<std::int64_t> row_major_strides(const std::vector<std::int64_t>& lens);
std::int64_t product(const std::vector<std::int64_t>& v);
std::vector<std::int64_t> to_int64(const std::vector<std::size_t>& v);
std::vector<std::size_t> to_size(const std::vector<std::int64_t>& v);

}  // namespace kiln::op
