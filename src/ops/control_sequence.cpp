#include "ops/control_sequence.hpp"

#include "ops/common.hpp"
#include "ops/control_shapes.hpp"
#include "ops/control_tensor_util.hpp"

#include <kiln/register_op.hpp>

namespace kiln::op {

namespace {

const shape& element_of(const std::string& op, const shape& s) {
    if (!s.is_sequence()) throw_error(error_code::shape, op + ": input 0 must be a sequence, got " + s.to_string());
    return s.sub_shapes()[0];
}

// A tensor shape for a value read out of a container: the unknown element becomes
// "some tensor" (rank 1 dynamic; the evaluator recomputes shapes at run time).
shape as_tensor_shape(const shape& s) {
    if (is_unknown_element(s)) return shape::make_dynamic(s.get_type(), {{0, dynamic_dimension::unbounded, {}}});
    return s.is_tensor() && !s.dynamic() ? s.as_standard() : s;
}

void check_position(const std::string& op, const shape& s) {
    if (!s.is_tensor() || (s.get_type() != type::int32 && s.get_type() != type::int64))
        throw_error(error_code::type, op + ": the position must be an int32 or int64 scalar, got " + s.to_string());
    if (!s.dynamic() && s.elements() != 1)
        throw_error(error_code::shape, op + ": the position must be a scalar, got " + s.to_string());
}

void check_tensor_input(const std::string& op, const shape& s, const std::string& what) {
    if (!s.is_tensor()) throw_error(error_code::shape, op + ": " + what + " must be a tensor, got " + s.to_string());
}

// Position in [-n, n) (or [-n, n] when `inclusive`), as an index.
std::size_t resolve_position(const std::string& op, std::int64_t pos, std::size_t n, bool inclusive) {
    auto sn = static_cast<std::int64_t>(n);
    std::int64_t hi = inclusive ? sn : sn - 1;
    if (pos < -sn || pos > hi)
        throw_error(error_code::invalid_argument, op + ": position " + std::to_string(pos) +
                                                      " is out of range for a sequence of " + std::to_string(n) +
                                                      " items");
    return static_cast<std::size_t>(pos < 0 ? pos + sn : pos);
}

std::vector<argument> items_of(const argument& seq) { return seq.elements(); }

}  // namespace

// ---- construct / empty ----

shape sequence_construct::compute_shape(const std::vector<shape>& inputs) const {
    if (inputs.empty()) throw_error(error_code::shape, "sequence_construct: needs at least one input");
    shape e = inputs[0];
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        check_tensor_input("sequence_construct", inputs[i], "input " + std::to_string(i));
        e = merge_shapes(e, inputs[i], "sequence_construct");
    }
    return shape::sequence(as_tensor_shape(e));
}

argument sequence_construct::compute(const shape& out, const std::vector<argument>& args) const {
    std::vector<argument> items;
    for (auto& a : args) items.push_back(a.copy());
    return make_sequence_of(std::move(items), out.sub_shapes()[0]);
}

shape sequence_empty::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs("sequence_empty", inputs, 0);
    return shape::sequence(unknown_element(dtype));
}

argument sequence_empty::compute(const shape& out, const std::vector<argument>&) const {
    return argument::make_sequence(out.sub_shapes()[0], {});
}

// ---- at / insert / erase / length ----

shape sequence_at::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs("sequence_at", inputs, 2);
    const auto& e = element_of("sequence_at", inputs[0]);
    check_position("sequence_at", inputs[1]);
    return as_tensor_shape(e);
}

argument sequence_at::compute(const shape&, const std::vector<argument>& args) const {
    const auto& items = args[0].elements();
    auto i = resolve_position("sequence_at", args[1].get_int64(0), items.size(), false);
    return items[i];
}

shape sequence_insert::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs("sequence_insert", inputs, 2, 3);
    const auto& e = element_of("sequence_insert", inputs[0]);
    check_tensor_input("sequence_insert", inputs[1], "the inserted value");
    if (inputs.size() == 3) check_position("sequence_insert", inputs[2]);
    return shape::sequence(merge_shapes(e, inputs[1], "sequence_insert: the inserted tensor and the sequence"));
}

argument sequence_insert::compute(const shape& out, const std::vector<argument>& args) const {
    auto items = items_of(args[0]);
    std::size_t at = items.size();
    if (args.size() == 3) at = resolve_position("sequence_insert", args[2].get_int64(0), items.size(), true);
    items.insert(items.begin() + static_cast<std::ptrdiff_t>(at), args[1].copy());
    return make_sequence_of(std::move(items), out.sub_shapes()[0]);
}

shape sequence_erase::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs("sequence_erase", inputs, 1, 2);
    element_of("sequence_erase", inputs[0]);
    if (inputs.size() == 2) check_position("sequence_erase", inputs[1]);
    return inputs[0];
}

argument sequence_erase::compute(const shape& out, const std::vector<argument>& args) const {
    auto items = items_of(args[0]);
    if (items.empty()) throw_error(error_code::invalid_argument, "sequence_erase: the sequence is empty");
    std::size_t at = items.size() - 1;
    if (args.size() == 2) at = resolve_position("sequence_erase", args[1].get_int64(0), items.size(), false);
    items.erase(items.begin() + static_cast<std::ptrdiff_t>(at));
    return make_sequence_of(std::move(items), out.sub_shapes()[0]);
}

shape sequence_length::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs("sequence_length", inputs, 1);
    element_of("sequence_length", inputs[0]);
    return shape(type::int64);
}

argument sequence_length::compute(const shape&, const std::vector<argument>& args) const {
    return scalar_int64(static_cast<std::int64_t>(args[0].elements().size()));
}

// ---- split / concat ----

std::vector<std::size_t> split_to_sequence::piece_sizes(std::size_t len, const std::vector<std::int64_t>& sizes,
                                                        bool scalar) const {
    std::vector<std::size_t> out;
    if (scalar) {
        if (sizes.size() != 1 || sizes[0] <= 0)
            throw_error(error_code::invalid_argument, "split_to_sequence: a scalar split must be one positive size");
        auto c = static_cast<std::size_t>(sizes[0]);
        for (std::size_t at = 0; at < len; at += c) out.push_back(std::min(c, len - at));
        return out;
    }
    std::size_t total = 0;
    for (auto s : sizes) {
        if (s < 0) throw_error(error_code::invalid_argument, "split_to_sequence: negative split size " + std::to_string(s));
        out.push_back(static_cast<std::size_t>(s));
        total += static_cast<std::size_t>(s);
    }
    if (total != len)
        throw_error(error_code::invalid_argument, "split_to_sequence: split sizes add up to " + std::to_string(total) +
                                                      ", but the axis has length " + std::to_string(len));
    return out;
}

shape split_to_sequence::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs("split_to_sequence", inputs, 1, 2);
    check_tensor_input("split_to_sequence", inputs[0], "input 0");
    const auto& x = inputs[0];
    auto ax = normalize_axis(axis, x.ndim(), "split_to_sequence");
    auto dims = x.to_dynamic_dims();
    if (inputs.size() == 2) {
        if (!is_integer(inputs[1].get_type()))
            throw_error(error_code::type, "split_to_sequence: split must be integers");
        dims[ax] = {0, dims[ax].max, {}};
        return shape::sequence(shape::make_dynamic(x.get_type(), dims));
    }
    if (!has_split) {
        if (keepdims) dims[ax] = {1, 1, {}};
        else dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(ax));
        return shape::sequence(shape::make_dynamic(x.get_type(), dims));
    }
    if (!dims[ax].is_fixed()) {
        dims[ax] = {0, dims[ax].max, {}};
        return shape::sequence(shape::make_dynamic(x.get_type(), dims));
    }
    auto pieces = piece_sizes(dims[ax].min, split, split_scalar);
    bool same = std::all_of(pieces.begin(), pieces.end(), [&](auto p) { return p == pieces.front(); });
    if (same && !pieces.empty()) dims[ax] = {pieces.front(), pieces.front(), {}};
    else dims[ax] = {0, dims[ax].max, {}};
    return shape::sequence(shape::make_dynamic(x.get_type(), dims));
}

argument split_to_sequence::compute(const shape& out, const std::vector<argument>& args) const {
    const auto& x = args[0];
    auto ax = normalize_axis(axis, x.get_shape().ndim(), "split_to_sequence");
    const std::size_t len = x.get_shape().lens()[ax];
    std::vector<argument> items;
    if (args.size() == 1 && !has_split) {
        for (std::size_t i = 0; i < len; ++i) items.push_back(keepdims ? slice_axis(x, ax, i, 1) : take_axis(x, ax, i));
        return make_sequence_of(std::move(items), out.sub_shapes()[0]);
    }
    std::vector<std::int64_t> sizes = split;
    bool scalar = split_scalar;
    if (args.size() == 2) {
        sizes = to_int64_vector(args[1]);
        scalar = args[1].get_shape().ndim() == 0;
    }
    std::size_t at = 0;
    for (auto p : piece_sizes(len, sizes, scalar)) {
        items.push_back(slice_axis(x, ax, at, p));
        at += p;
    }
    return make_sequence_of(std::move(items), out.sub_shapes()[0]);
}

shape concat_from_sequence::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs("concat_from_sequence", inputs, 1);
    auto e = as_tensor_shape(element_of("concat_from_sequence", inputs[0]));
    auto dims = e.to_dynamic_dims();
    std::size_t rank = new_axis ? dims.size() + 1 : dims.size();
    auto ax = normalize_axis(axis, rank, "concat_from_sequence");
    if (new_axis) dims.insert(dims.begin() + static_cast<std::ptrdiff_t>(ax), dynamic_dimension{0, dynamic_dimension::unbounded, {}});
    else dims[ax] = {0, dynamic_dimension::unbounded, {}};
    return shape::make_dynamic(e.get_type(), dims);
}

argument concat_from_sequence::compute(const shape&, const std::vector<argument>& args) const {
    const auto& items = args[0].elements();
    if (items.empty()) throw_error(error_code::invalid_argument, "concat_from_sequence: the sequence is empty");
    std::size_t rank = items[0].get_shape().ndim() + (new_axis ? 1 : 0);
    auto ax = normalize_axis(axis, rank, "concat_from_sequence");
    if (new_axis) return stack_axis(items, ax, items[0].get_shape(), "concat_from_sequence");
    return concat_axis(items, ax, "concat_from_sequence");
}

// ---- optionals ----

shape make_optional::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs("optional", inputs, 0, 1);
    if (inputs.empty()) return shape::optional(element);
    if (inputs[0].is_optional() || inputs[0].is_tuple())
        throw_error(error_code::shape, "optional: cannot wrap a " + inputs[0].to_string());
    return shape::optional(inputs[0]);
}

argument make_optional::compute(const shape& out, const std::vector<argument>& args) const {
    if (args.empty()) return argument::make_optional(out.sub_shapes()[0], std::nullopt);
    const auto& a = args[0];
    argument owned = a.get_shape().is_tensor() ? a.copy() : a;
    return argument::make_optional(runtime_shape(owned), owned);
}

shape optional_has_element::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs("optional_has_element", inputs, 1);
    if (inputs[0].is_tuple()) throw_error(error_code::shape, "optional_has_element: input is a tuple");
    return shape(type::bool_);
}

argument optional_has_element::compute(const shape&, const std::vector<argument>& args) const {
    const auto& a = args[0];
    return scalar_bool(!a.get_shape().is_optional() || !a.elements().empty());
}

shape optional_get_element::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs("optional_get_element", inputs, 1);
    const auto& s = inputs[0];
    if (s.is_tuple()) throw_error(error_code::shape, "optional_get_element: input is a tuple");
    if (!s.is_optional()) return s;
    const auto& e = s.sub_shapes()[0];
    return e.is_tensor() ? as_tensor_shape(e) : e;
}

argument optional_get_element::compute(const shape&, const std::vector<argument>& args) const {
    const auto& a = args[0];
    if (!a.get_shape().is_optional()) return a;
    if (a.elements().empty())
        throw_error(error_code::invalid_argument, "optional_get_element: the optional is empty");
    return a.elements()[0];
}

KILN_REGISTER_OP(sequence_construct)
KILN_REGISTER_OP(sequence_empty)
KILN_REGISTER_OP(sequence_at)
KILN_REGISTER_OP(sequence_insert)
KILN_REGISTER_OP(sequence_erase)
KILN_REGISTER_OP(sequence_length)
KILN_REGISTER_OP(split_to_sequence)
KILN_REGISTER_OP(concat_from_sequence)
KILN_REGISTER_OP(make_optional)
KILN_REGISTER_OP(optional_has_element)
KILN_REGISTER_OP(optional_get_element)

}  // namespace kiln::op
