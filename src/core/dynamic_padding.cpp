#include "core/dynamic_padding.hpp"

#include "ops/nn_conv.hpp"
#include "ops/nn_matmul.hpp"
#include "ops/nn_pooling.hpp"
#include "ops/normalization.hpp"
#include "ops/softmax.hpp"
#include "ops/tensor_gather.hpp"
#include "ops/tensor_select.hpp"
#include "ops/tensor_slice.hpp"
#include "ops/tensor_views.hpp"

#include <kiln/dim_expr.hpp>
#include <kiln/errors.hpp>
#include <kiln/instruction.hpp>

#include <algorithm>
#include <cstring>
#include <set>

namespace kiln {

namespace {

bool expr_mentions(const std::string& text, const std::string& dim) {
    if (text.empty()) return false;
    auto e = dim_expr::parse(text);
    return !e || e->names().count(dim) > 0;  // an unparsable text may hide it: assume it does
}

// Whether any dim or value of `s` depends on `dim`.
bool mentions(const shape& s, const std::string& dim) {
    if (s.is_tuple()) return std::any_of(s.sub_shapes().begin(), s.sub_shapes().end(),
                                         [&](const shape& e) { return mentions(e, dim); });
    if (!s.is_tensor()) return false;
    for (auto& d : s.dyn_dims())
        if (expr_mentions(d.symbol, dim)) return true;
    for (auto& v : s.values())
        if (!v.empty() && expr_mentions(v, dim)) return true;
    return false;
}

bool dims_mention(const shape& s, const std::string& dim) {
    if (!s.is_tensor()) return mentions(s, dim);
    for (auto& d : s.dyn_dims())
        if (expr_mentions(d.symbol, dim)) return true;
    return false;
}

// Axis 0 is exactly `dim` and no other dim depends on it.
bool rows_at_0(const shape& s, const std::string& dim) {
    if (!s.is_tensor() || !s.dynamic() || s.ndim() == 0) return false;
    const auto& dd = s.dyn_dims();
    if (dd[0].symbol != dim) return false;
    for (std::size_t i = 1; i < dd.size(); ++i)
        if (expr_mentions(dd[i].symbol, dim)) return false;
    return true;
}

std::int64_t attr_int(const value& attrs, const char* key, std::int64_t fallback) {
    const auto* v = attrs.find(key);
    return v && v->is_integer() ? v->get_int64() : fallback;
}

std::vector<std::int64_t> attr_ints(const value& attrs, const char* key) {
    std::vector<std::int64_t> out;
    if (const auto* v = attrs.find(key); v && v->is_array())
        for (auto& e : v->get_array()) out.push_back(e.is_integer() ? e.get_int64() : -1000000);
    return out;
}

bool is_axis_0(std::int64_t axis, std::size_t rank) {
    return axis == 0 || (rank > 0 && axis == -static_cast<std::int64_t>(rank));
}

bool any_axis_0(const std::vector<std::int64_t>& axes, std::size_t rank) {
    return std::any_of(axes.begin(), axes.end(), [&](std::int64_t a) { return is_axis_0(a, rank); });
}

// The number of elements in a row (the dims after axis 0) as a constant times named dims
// (bert's [sequence, 256] and [sequence, 4, 64] agree); nullopt with an unnamed range.
std::optional<std::pair<std::size_t, std::vector<std::string>>> row_elements(const shape& s) {
    std::size_t n = 1;
    std::vector<std::string> names;
    const auto& dd = s.to_dynamic_dims();
    for (std::size_t i = 1; i < dd.size(); ++i) {
        if (dd[i].is_fixed()) {
            n *= dd[i].min;
            continue;
        }
        if (dd[i].symbol.empty()) return std::nullopt;
        names.push_back(dd[i].symbol);
    }
    std::sort(names.begin(), names.end());
    return std::make_pair(n, names);
}

// The op of `ins` is one of `Ops` (their structs): asked of the type, not the name.
template <class... Ops>
bool is(const instruction& ins) {
    return ((ins.get_operator().any_cast<Ops>() != nullptr) || ...);
}

// Ops whose value inputs only size their result (a Reshape's shape).
bool takes_shape_input(const instruction& ins) { return is<op::reshape_dynamic, op::expand_dynamic>(ins); }

// Why `ins` does not map row i of its inputs to row i of its result along `dim`, or "".
std::string not_row_wise(const instruction& ins, const std::string& dim) {
    const auto& out = ins.get_shape();
    if (ins.is_param() || ins.is_literal()) return "";
    std::vector<bool> has(ins.inputs().size());
    bool any_in = false;
    for (std::size_t i = 0; i < ins.inputs().size(); ++i) {
        const auto& s = ins.inputs()[i]->get_shape();
        if (!dims_mention(s, dim)) continue;
        if (!rows_at_0(s, dim)) return "input " + std::to_string(i) + " has the dim elsewhere than axis 0";
        has[i] = any_in = true;
    }
    if (ins.is_return()) return "";
    if (!ins.module_inputs().empty()) return any_in ? "control flow over the dim" : "";
    const bool out_rows = rows_at_0(out, dim);
    if (!out_rows && dims_mention(out, dim)) return "its result has the dim elsewhere than axis 0";
    if (!out_rows) {
        // A result that does not depend on the dim: only shape arithmetic may read a
        // tensor of rows (shape_of, which reads none of its values).
        return any_in && !is<op::shape_of>(ins) ? "it reduces over the dim" : "";
    }
    auto only_first = [&] { return std::none_of(has.begin() + (has.empty() ? 0 : 1), has.end(), [](bool b) { return b; }); };
    const auto attrs = ins.get_operator().to_value();
    const std::size_t rank = out.ndim();
    if (ins.get_operator().traits().pointwise) return "";
    if (is<op::convolution, op::pooling, op::batch_norm_inference, op::lrn, op::instance_norm>(ins))
        return only_first() && has[0] ? "" : "its weights depend on the dim";
    if (is<op::flatten>(ins)) return "";  // its result's axis 0 is the dim alone: axis 1
    if (is<op::gemm>(ins))
        return has[0] && only_first() && !(attrs.find("trans_a") && attrs.find("trans_a")->get_bool()) ? ""
                                                                                                          : "gemm over the dim";
    if (is<op::matmul>(ins)) {
        // The rows of A, or a batch dim of both operands; never the inner dim.
        const auto ra = ins.inputs()[0]->get_shape().ndim();
        const auto rb = ins.inputs().size() > 1 ? ins.inputs()[1]->get_shape().ndim() : 0;
        const bool batch_of_both = ins.inputs().size() == 2 && has[1] && ra >= 3 && rb >= 3 && ra == rb;
        return has[0] && ra >= 2 && (only_first() || batch_of_both) ? "" : "matmul over the dim";
    }
    if (is<op::gather>(ins)) {
        // Rows of the data gathered along another axis, or rows of indices into fixed data
        // (an embedding table): row i of the result comes from row i either way.
        const bool along_0 = is_axis_0(attr_int(attrs, "axis", 0), ins.inputs()[0]->get_shape().ndim());
        if (has[0] && !has[1] && !along_0) return "";
        if (!has[0] && ins.inputs().size() > 1 && has[1]) return "";
        return "gathers along the dim";
    }
    if (is<op::softmax, op::log_softmax, op::layer_norm, op::concat, op::argmax, op::argmin>(ins))
        return is_axis_0(attr_int(attrs, "axis", 1), rank) ? "works along the dim" : "";
    if (ins.get_operator().traits().reduction) {
        auto axes = attr_ints(attrs, "axes");
        return axes.empty() || any_axis_0(axes, ins.inputs()[0]->get_shape().ndim()) ? "reduces over the dim" : "";
    }
    if (is<op::transpose>(ins)) {
        auto perm = attr_ints(attrs, "perm");
        return !perm.empty() && perm[0] == 0 ? "" : "moves the dim";
    }
    if (is<op::slice>(ins)) return any_axis_0(attr_ints(attrs, "axes"), rank) ? "slices the dim" : "";
    if (is<op::unsqueeze>(ins)) return any_axis_0(attr_ints(attrs, "axes"), rank) ? "unsqueezes before the dim" : "";
    if (is<op::squeeze>(ins)) {
        // With no axes it squeezes every dim of size 1: the dim too, when a call has one row.
        auto axes = attr_ints(attrs, "axes");
        return axes.empty() || any_axis_0(axes, rank + axes.size()) ? "may squeeze the dim" : "";
    }
    if (is<op::reshape, op::reshape_dynamic>(ins)) {
        auto a = row_elements(ins.inputs()[0]->get_shape());
        auto b = row_elements(out);
        return has[0] && only_first() && a && b && *a == *b ? "" : "reshapes across rows";
    }
    if (is<op::expand_dynamic, op::broadcast>(ins)) {
        // Every row the same broadcast of the input (a class token), or the input's own rows.
        return only_first() ? "" : "expands by the dim";
    }
    return "op '" + ins.name() + "' is not known to keep rows apart";
}

// Values that depend on the dim (shape arithmetic) may only size results: every user
// carries values itself or takes them as a shape input.
std::string values_escape(const instruction& ins, const std::string& dim) {
    const auto& s = ins.get_shape();
    if (!s.is_tensor() || s.dynamic() || !mentions(s, dim)) return "";
    for (auto user : ins.outputs()) {
        if (user->get_shape().is_tensor() && user->get_shape().has_values()) continue;
        if (takes_shape_input(*user) && !user->inputs().empty() && &*user->inputs()[0] != &ins) continue;
        return "its size reaches the data of " + user->name();
    }
    return "";
}

}  // namespace

std::optional<std::string> why_not_row_wise(const module& main, const std::string& dim) {
    bool any = false;
    std::size_t index = 0;
    for (auto& ins : main) {
        if (ins.is_param()) {
            ++index;
            if (dims_mention(ins.get_shape(), dim)) {
                if (!rows_at_0(ins.get_shape(), dim)) return "input '" + ins.param_name() + "' has it elsewhere than axis 0";
                any = true;
            }
            continue;
        }
        auto why = not_row_wise(ins, dim);
        if (why.empty()) why = values_escape(ins, dim);
        if (!why.empty()) return ins.name() + " (instruction " + std::to_string(index) + "): " + why;
        ++index;
    }
    if (!any) return "no input has it";
    return std::nullopt;
}

std::vector<bucket_padding> paddable_buckets(const module& main, const std::vector<dim_buckets>& buckets) {
    std::vector<bucket_padding> out;
    for (auto& b : buckets) {
        if (b.dim.empty() || b.sizes.empty() || why_not_row_wise(main, b.dim)) continue;
        bucket_padding p;
        p.dim = b.dim;
        p.sizes = b.sizes;
        std::sort(p.sizes.begin(), p.sizes.end());
        p.sizes.erase(std::unique(p.sizes.begin(), p.sizes.end()), p.sizes.end());
        for (auto& ins : main)
            if (ins.is_param() && rows_at_0(ins.get_shape(), b.dim)) {
                p.inputs.push_back(ins.param_name());
                const auto& d = ins.get_shape().dyn_dims()[0];
                std::erase_if(p.sizes, [&](std::size_t v) { return !d.contains(v); });  // buckets out of range
            }
        if (p.sizes.empty()) continue;
        const auto& ret = std::prev(main.end());
        for (std::size_t i = 0; i < ret->inputs().size(); ++i)
            if (rows_at_0(ret->inputs()[i]->get_shape(), b.dim)) p.outputs.push_back(i);
        out.push_back(std::move(p));
    }
    return out;
}

namespace {

// `a` (standard layout) with `rows` rows: its own rows, then its last row repeated.
argument pad_rows(const argument& a, std::size_t rows) {
    const auto& s = a.get_shape();
    auto lens = s.lens();
    const std::size_t have = lens[0];
    lens[0] = rows;
    argument out(shape(s.get_type(), lens));
    const std::size_t row_bytes = have == 0 ? 0 : s.bytes() / have;
    const auto* src = reinterpret_cast<const char*>(a.data());
    auto* dst = reinterpret_cast<char*>(out.data());
    if (row_bytes > 0) std::memcpy(dst, src, row_bytes * have);
    for (std::size_t r = have; r < rows; ++r) {
        if (have == 0) std::memset(dst + r * (out.get_shape().bytes() / rows), 0, out.get_shape().bytes() / rows);
        else std::memcpy(dst + r * row_bytes, src + (have - 1) * row_bytes, row_bytes);
    }
    return out;
}

}  // namespace

std::optional<padded_call> pad_call(const std::vector<bucket_padding>& padding, const param_map& checked) {
    std::optional<padded_call> call;
    for (auto& p : padding) {
        std::optional<std::size_t> rows;
        bool usable = true;
        for (auto& name : p.inputs) {
            auto it = checked.find(name);
            if (it == checked.end() || !it->second.get_shape().is_tensor() || it->second.get_shape().dynamic() ||
                it->second.get_shape().ndim() == 0 || !it->second.get_shape().standard() ||
                it->second.get_shape().get_type() == type::string) {
                usable = false;
                break;
            }
            auto n = it->second.get_shape().lens()[0];
            if (rows && *rows != n) usable = false;
            rows = n;
        }
        if (!usable || !rows) continue;
        auto bucket = std::lower_bound(p.sizes.begin(), p.sizes.end(), *rows);
        if (bucket == p.sizes.end() || *bucket == *rows) continue;
        if (!call) {
            call.emplace();
            call->inputs = checked;
        }
        for (auto& name : p.inputs) call->inputs[name] = pad_rows(call->inputs.at(name), *bucket);
        for (auto o : p.outputs) call->cut.emplace_back(o, *rows);
    }
    return call;
}

std::vector<argument> cut_outputs(std::vector<argument> results, const padded_call& call) {
    for (auto [index, rows] : call.cut) {
        if (index >= results.size()) continue;
        auto& r = results[index];
        const auto& s = r.get_shape();
        if (!s.is_tensor() || s.dynamic() || s.ndim() == 0 || s.lens()[0] < rows) continue;
        auto lens = s.lens();
        lens[0] = rows;
        // The first rows of a tensor are a prefix of its memory, strides unchanged.
        r = r.reshape(shape(s.get_type(), lens, s.strides()));
    }
    return results;
}

}  // namespace kiln
