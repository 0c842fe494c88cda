// Shape inference over dynamic dimensions without every op having to implement it.
//
// The op's static compute_shape is evaluated at a few concrete sizes of the inputs'
// dynamic dims. Dims that share a symbol ("batch", "past") take the same size at every
// point, and dims spelled as expressions ("past + sequence") are evaluated from their
// names' sizes, so two inputs that agree in every run also agree at every sample.
// Each name is moved on its own, and one more point checks the fit: an output dim that
// is an affine function of the names gets that expression as its symbol (Concat along
// the cache axis gives "past + sequence"); other varying dims are anonymous, bounded by
// the results at the names' smallest and largest sizes. Unnamed input dims with equal
// bounds share one name (as before dims had names, they move together).
//
// Small integer tensors may carry values (shape::values): exporters' shape arithmetic
// (Shape, Gather, Concat feeding Reshape, Range, Slice). At each point those values are
// made concrete too; an op whose inputs all have values is computed, and an op that is
// shaped by an input's values (Reshape to a computed shape) gives its shape for them.
// The values of the result are fitted like the dims.
#pragma once
#include <kiln/argument.hpp>
#include <kiln/shape.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kiln::detail {

struct shape_functions {
    // The op's own compute_shape at concrete (static) inputs.
    std::function<shape(const std::vector<shape>&)> static_shape;
    // Its compute_shape given the inputs' values where known (nullopt: the op has none).
    std::function<std::optional<shape>(const std::vector<shape>&, const std::vector<std::optional<argument>>&)>
        shape_from_values;
    // Its reference compute (empty when it may not be run at compile time).
    std::function<argument(const shape&, const std::vector<argument>&)> compute;
};

// nullopt when the op's result at a sample point is still dynamic (it depends on data
// values nobody knows at compile time): the caller falls back to the op's own handling.
std::optional<shape> infer_dynamic_shape(const std::string& op_name, const std::vector<shape>& inputs,
                                         const shape_functions& f);

// Whether any input carries a value that is not a plain number.
bool has_symbolic_values(const std::vector<shape>& inputs);
// A value's text that is a plain (decimal, maybe negative) number.
bool is_number(const std::string& value);
// A static int32/int64/bool tensor small enough to carry its values (shape::max_valued_elements).
bool small_int(const shape& s);
// A static int32/int64/bool tensor without elements: its values are all known (there are none),
// though it carries none (Concat(Shape(x), Slice(Shape(y), 2, 2)) is shape arithmetic).
bool empty_int(const shape& s);

}  // namespace kiln::detail
