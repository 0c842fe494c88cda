// Helpers shared by the data-movement, shape and indexing ops (the "tensor" family):
// byte-level element copies (data movement never needs arithmetic), run-time shape
// values, and the static forms run-time ops turn into once their inputs are known.
#pragma once
#include "ops/common.hpp"

#include <kiln/operation.hpp>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln::op {

// Calls f(std::type_identity<U>{}) with an unsigned integer type of the element type's
// size (or std::string for strings): moving elements needs no arithmetic, and this
// keeps the number of template instantiations small.
template <class F>
decltype(auto) visit_bytes(type t, F&& f) {
    if (t == type::string) return f(std::type_identity<std::string>{});
    switch (type_size(t)) {
        case 1: return f(std::type_identity<std::uint8_t>{});
        case 2: return f(std::type_identity<std::uint16_t>{});
        case 4: return f(std::type_identity<std::uint32_t>{});
        default: return f(std::type_identity<std::uint64_t>{});
    }
}

// A dynamic shape of known rank whose dimensions are all unknown (value-dependent).
shape unknown_dims(type t, std::size_t rank);

// Rank of a 1-D shape-like input (its length), or a shape error naming the op when
// that length is itself unknown.
std::size_t static_length(const shape& s, const std::string& op_name, const std::string& what);

// Largest dimension (and |pad|, |offset|) the ops accept: shapes refuse more than 2^48
// elements, and checking values first keeps size arithmetic from overflowing.
inline constexpr std::int64_t max_dim = std::int64_t{1} << 48;
// Throws a shape error naming the op unless lo <= v <= max_dim (lo is 0 or -max_dim).
void check_dim_value(std::int64_t v, const std::string& op_name, const std::string& what, bool allow_negative = false);

// Reads a 0-D or 1-D integer tensor (run-time shape values, axes, ...).
std::vector<std::int64_t> read_ints(const argument& a, const std::string& op_name, const std::string& what);
// Reads a 0-D or 1-D float tensor as doubles.
std::vector<double> read_floats(const argument& a);

// Row-major element offsets: out[i] = product of lens after i.
std::vector<std::size_t> row_major_strides(const std::vector<std::size_t>& lens);

// Copies elements between standard-layout buffers: dst[i] = src[map(i)] for every output
// index i; map returning -1 writes `fill` (an element of the same type, or zero when null).
// `src` may have any layout (it is made contiguous first).
template <class Map>
argument copy_by_index(const shape& out, const argument& src_any, Map map, const argument* fill = nullptr) {
    argument src = src_any.contiguous();
    argument dst(out.as_standard());
    const std::size_t n = out.elements();
    visit_bytes(out.get_type(), [&](auto tag) {
        using U = typename decltype(tag)::type;
        const U* s = src.template data_as<U>();
        U* d = dst.template data_as<U>();
        U zero{};
        if (fill != nullptr) zero = *fill->template data_as<U>();
        for (std::size_t i = 0; i < n; ++i) {
            std::int64_t k = map(i);
            d[i] = k < 0 ? zero : s[k];
        }
    });
    return dst;
}

// What a run-time op becomes once its shape-determining inputs are literals: the static
// op and which of the original inputs it keeps (by index, in order).
struct static_form {
    operation op;
    std::vector<std::size_t> inputs;
};
// Values of an instruction's inputs that are literals (nullopt for the others).
using known_inputs = std::vector<std::optional<argument>>;

// A dynamic form's shape when some inputs' values are known at compile time (for shape
// inference over named dims): its static form's shape, else what the shapes alone say.
template <class Op>
shape shape_from_known(const Op& op, const std::vector<shape>& in, const known_inputs& k) {
    if (auto f = op.to_static(k)) {
        std::vector<shape> args;
        for (auto i : f->inputs) args.push_back(in.at(i));
        return f->op.compute_shape(args);
    }
    return op.compute_shape(in);
}

}  // namespace kiln::op
