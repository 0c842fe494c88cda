// The sampling under dynamic shape inference (dynamic_shape_inference.hpp): the inputs'
// dynamic dims and values as expressions over names, one sample point's inputs and result,
// and the fits of a result's dims and values as affine functions (or products) of names.
// Internal to src/core.
#pragma once
#include "core/dynamic_shape_inference.hpp"

#include <kiln/dim_expr.hpp>

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kiln::detail::sampling {

inline constexpr std::int64_t unbounded = std::numeric_limits<std::int64_t>::max();
// Sizes past this are not sampled (a value-dependent max is "unbounded" anyway).
inline constexpr std::int64_t largest_sample = std::int64_t{1} << 24;
// How far the check point moves every name (a prime, so divisions by smaller sizes show;
// small enough that a rank-6 tensor of such dims stays a valid shape).
inline constexpr std::int64_t far_step = 257;

struct name_range {
    std::int64_t lo = 0;
    std::int64_t hi = unbounded;
};

using assignment = std::map<std::string, std::int64_t>;

// A name no input wrote: an unnamed dim's ("#...") or an unknown value's ("#v...").
inline bool anonymous(const std::string& name) { return !name.empty() && name[0] == '#'; }

// An input value nothing is known about (Shape of a dim without a name: LRASPP's Resize to
// Concat(Slice(Shape(x), 0, 2), Shape(y)[2:])) stands for a name of its own, so the values
// around it still compute at each sample point. It may be any integer: a dim that depends
// on it has no bounds. Results of such shape arithmetic keep their unknown values ("?"),
// which marks them as values to follow; a tensor of data has no values at all.
std::string unknown_value_name(std::size_t input, std::size_t index);
inline bool unknown_value(const std::string& name) { return name.rfind("#v", 0) == 0; }

// One sample point's inputs.
struct point_inputs {
    std::vector<shape> shapes;
    std::vector<std::optional<argument>> values;  // per input, when all its values are known
};

// One sample point's result.
struct point {
    std::optional<shape> s;  // nullopt: the op refused this point
    bool dynamic = false;    // still dynamic at concrete inputs: depends on data values
    std::vector<std::optional<std::int64_t>> values;  // of a small integer result
};

// The inputs' dynamic dims and values as expressions over names, and each name's range.
struct symbolic_inputs {
    const std::vector<shape>& inputs;
    std::vector<std::vector<std::optional<dim_expr>>> dims;
    std::vector<std::vector<std::optional<dim_expr>>> values;
    std::map<std::string, name_range> ranges;
    // Input dims by their expression's text: an output dim with the same expression
    // keeps that dim's bounds and optimals.
    std::map<std::string, dynamic_dimension> by_expr;

    // `split`: every unnamed dim a name of its own (the fallback when shared names find no base).
    symbolic_inputs(const std::vector<shape>& in, bool split);
    // The inputs at one assignment of the names (nullopt: a dim would be negative).
    std::optional<point_inputs> instantiate(const assignment& a) const;
};

// v within r (and not past largest_sample).
std::int64_t clamp_to(const name_range& r, std::int64_t v);

// The op at one sample point; `first_error` keeps the first refusal's message.
point evaluate_at(const symbolic_inputs& sym, const assignment& a, const shape_functions& f, std::string& first_error);

// c0 + sum(c_i * name_i) through the base point and one step along each name, checked
// at the point where every name moved.
std::optional<dim_expr> fit(std::int64_t v0, const std::vector<std::string>& names, const std::vector<std::int64_t>& step,
                            const std::vector<std::int64_t>& moved, const assignment& a0, const assignment& av,
                            std::int64_t vv);

// The same with products of two names: c0 + sum(c_i * name_i) + sum(k_ij * name_i * name_j).
// k_ij is what the point with names i and j both moved adds beyond the two single moves
// (`pair(i, j)`, nullopt where that point has no value); the single moves' slopes at the
// base then give the c_i. Squares of one name are not tried.
std::optional<dim_expr> fit_products(std::int64_t v0, const std::vector<std::string>& names,
                                     const std::vector<std::int64_t>& step, const std::vector<std::int64_t>& moved,
                                     const assignment& a0,
                                     const std::function<std::optional<std::int64_t>(std::size_t, std::size_t)>& pair,
                                     const assignment& av, std::int64_t vv);

// The sizes of the inputs' static dims above 1, smallest first (at most 8): bases at which
// unnamed dims can meet a sized one (a product's inner dim).
std::vector<std::int64_t> static_sizes(const std::vector<shape>& inputs);

}  // namespace kiln::detail::sampling
