#include "ops/control_flow.hpp"

#include "ops/common.hpp"
#include "ops/control_shapes.hpp"
#include "ops/control_tensor_util.hpp"

#include <kiln/module.hpp>
#include <kiln/register_op.hpp>

#include <algorithm>
#include <cstring>

namespace kiln::op {

namespace {

void check_modules(const std::string& op, const std::vector<module_ref>& mods, std::size_t n) {
    if (mods.size() != n || std::any_of(mods.begin(), mods.end(), [](module_ref m) { return m == nullptr; }))
        throw_error(error_code::shape, op + ": expected " + std::to_string(n) + " sub-module(s), got " +
                                           std::to_string(mods.size()));
}

void check_scalar(const std::string& op, const shape& s, const std::string& what, bool want_bool) {
    if (!s.is_tensor()) throw_error(error_code::shape, op + ": " + what + " must be a tensor, got " + s.to_string());
    if (want_bool ? s.get_type() != type::bool_ : !is_integer(s.get_type()))
        throw_error(error_code::type, op + ": " + what + " must be " + (want_bool ? "bool" : "an integer") + ", got " +
                                          std::string(type_name(s.get_type())));
    if (!s.dynamic() && s.elements() != 1)
        throw_error(error_code::shape, op + ": " + what + " must hold one value, got " + s.to_string());
}

// A carried value's result: what the body produces, widened by the initial value (a
// loop that runs zero times returns that). When the kinds differ (an optional that
// the body unwraps), the body's kind wins: it is what every non-empty run returns.
shape carried_result(const shape& initial, const shape& body_out, const std::string& what) {
    if (initial.get_kind() != body_out.get_kind()) return body_out;
    return merge_shapes(initial, body_out, what);
}

// The tensors of `parts` one after another along axis 0 (an appended carried value); their
// other dims must agree, as the body's Concat required.
argument concat_rows(const std::vector<argument>& parts, const std::string& what) {
    const shape& first = parts.front().get_shape();
    std::vector<std::size_t> lens = first.lens();
    if (lens.empty()) throw_error(error_code::shape, what + ": a scalar cannot be appended to");
    std::size_t total = 0;
    for (const auto& p : parts) {
        const auto& l = p.get_shape().lens();
        if (p.get_shape().get_type() != first.get_type() || l.size() != lens.size() ||
            !std::equal(l.begin() + 1, l.end(), lens.begin() + 1))
            throw_error(error_code::shape, what + ": rows " + p.get_shape().to_string() + " do not fit " +
                                               first.to_string() + " along axis 0");
        total += l[0];
    }
    lens[0] = total;
    argument out(shape(first.get_type(), lens));
    std::size_t at = 0;
    const std::size_t bytes = first.type_size();
    for (const auto& p : parts) {
        const argument c = p.contiguous();
        const std::size_t n = c.get_shape().elements() * bytes;
        if (n != 0) std::memcpy(out.data() + at, c.data(), n);
        at += n;
    }
    return out;
}

// dims with `d` inserted at position `axis`.
shape insert_dim(const shape& s, std::size_t axis, dynamic_dimension d) {
    if (is_unknown_element(s)) return s;
    auto dims = s.to_dynamic_dims();
    dims.insert(dims.begin() + static_cast<std::ptrdiff_t>(axis), d);
    return shape::make_dynamic(s.get_type(), dims);
}

shape remove_dim(const shape& s, std::size_t axis, const std::string& what) {
    if (!s.is_tensor() || s.ndim() <= axis)
        throw_error(error_code::shape, what + ": " + s.to_string() + " has no axis " + std::to_string(axis));
    auto dims = s.to_dynamic_dims();
    dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(axis));
    return shape::make_dynamic(s.get_type(), dims);
}

dynamic_dimension dim_of(const shape& s, std::size_t axis) { return s.to_dynamic_dims().at(axis); }

void check_count(const std::string& op, const std::vector<shape>& inputs, std::size_t n) {
    if (inputs.size() != n)
        throw_error(error_code::shape, op + ": expected " + std::to_string(n) + " inputs (with captured values), got " +
                                           std::to_string(inputs.size()));
}

}  // namespace

// ---- deferred_error ----

argument deferred_error::compute(const shape&, const std::vector<argument>&) const {
    auto c = static_cast<error_code>(code);
    if (code < 1 || code > static_cast<std::int64_t>(error_code::invalid_argument)) c = error_code::shape;
    throw_error(c, message);
}

shape empty_scan_output(const shape& per_iteration) {
    type t = per_iteration.is_tensor() ? per_iteration.get_type() : type::float32;
    std::vector<std::size_t> lens{0};
    if (per_iteration.is_tensor() && !is_unknown_element(per_iteration))
        for (auto& d : per_iteration.to_dynamic_dims()) lens.push_back(d.is_fixed() ? d.min : 0);
    return shape(t, lens);
}

// ---- If ----

shape if_op::compute_shape(const std::vector<shape>& inputs, const std::vector<module_ref>& mods) const {
    check_modules("if", mods, 2);
    check_count("if", inputs, 1 + then_captured.size() + else_captured.size());
    check_scalar("if", inputs[0], "the condition", true);
    auto t = mods[0]->get_output_shapes();
    auto e = mods[1]->get_output_shapes();
    if (t.size() != e.size())
        throw_error(error_code::shape, "if: the then branch has " + std::to_string(t.size()) +
                                           " outputs, the else branch " + std::to_string(e.size()));
    std::vector<shape> out;
    for (std::size_t i = 0; i < t.size(); ++i)
        out.push_back(merge_shapes(t[i], e[i], "if: output " + std::to_string(i) + " of the two branches"));
    return shape::tuple(out);
}

argument if_op::compute(const shape&, const std::vector<argument>& args, const std::vector<module_ref>& mods,
                        const run_module_fn& run) const {
    bool c = read_bool(args.at(0), "if: the condition");
    const auto& names = c ? then_captured : else_captured;
    std::size_t offset = c ? 1 : 1 + then_captured.size();
    param_map p;
    for (std::size_t i = 0; i < names.size(); ++i) p[names[i]] = args.at(offset + i);
    auto outs = run_body(run, c ? mods[0] : mods[1], std::move(p));
    return detach(argument::make_tuple(std::move(outs)), args);
}

// ---- Loop ----

shape loop::compute_shape(const std::vector<shape>& inputs, const std::vector<module_ref>& mods) const {
    check_modules("loop", mods, 1);
    std::size_t idx = 0;
    if (has_trip_count) check_scalar("loop", inputs.at(idx++), "the trip count", false);
    if (has_cond) check_scalar("loop", inputs.at(idx++), "the condition", true);
    check_count("loop", inputs, idx + num_carried + captured.size());
    if (body_inputs.size() != 2 + num_carried)
        throw_error(error_code::shape, "loop: the body takes " + std::to_string(body_inputs.size()) +
                                           " inputs, expected 2 + " + std::to_string(num_carried) + " carried");
    auto outs = mods[0]->get_output_shapes();
    if (outs.size() < 1 + num_carried)
        throw_error(error_code::shape, "loop: the body returns " + std::to_string(outs.size()) +
                                           " values, expected the condition and " + std::to_string(num_carried) +
                                           " carried values at least");
    std::vector<shape> result;
    for (std::size_t i = 0; i < num_carried; ++i) {
        auto out = outs[1 + i];
        // An appended value: the body gives the rows it adds; the value has any number of rows.
        if (is_appended(i) && out.is_tensor() && out.ndim() >= 1) {
            auto dims = out.to_dynamic_dims();
            dims[0] = {0, dynamic_dimension::unbounded, {}};
            out = shape::make_dynamic(out.get_type(), dims);
        }
        result.push_back(carried_result(inputs[idx + i], out, "loop: carried value " + std::to_string(i)));
    }
    dynamic_dimension trips{0, max_iterations >= 0 ? static_cast<std::size_t>(max_iterations) : dynamic_dimension::unbounded, {}};
    if (static_trip_count >= 0) trips = {std::size_t(static_trip_count), std::size_t(static_trip_count), {}};
    for (std::size_t k = 1 + num_carried; k < outs.size(); ++k) {
        if (!outs[k].is_tensor())
            throw_error(error_code::shape, "loop: scan output " + std::to_string(k - 1 - num_carried) +
                                               " must be a tensor, got " + outs[k].to_string());
        result.push_back(insert_dim(outs[k], 0, trips));
    }
    return shape::tuple(result);
}

argument loop::compute(const shape&, const std::vector<argument>& args, const std::vector<module_ref>& mods,
                       const run_module_fn& run) const {
    std::size_t idx = 0;
    std::optional<std::int64_t> trips;
    if (has_trip_count) trips = read_int64(args.at(idx++), "loop: the trip count");
    bool cond = has_cond ? read_bool(args.at(idx++), "loop: the condition") : true;
    if (!has_trip_count && !has_cond && max_iterations < 0)
        throw_error(error_code::invalid_argument, "loop: neither a trip count nor a condition: it would never end");
    std::vector<argument> carried(args.begin() + static_cast<std::ptrdiff_t>(idx),
                                  args.begin() + static_cast<std::ptrdiff_t>(idx + num_carried));
    idx += num_carried;
    param_map base;
    for (std::size_t i = 0; i < captured.size(); ++i) base[captured[i]] = args.at(idx + i);
    module_ref body = mods.at(0);
    auto out_shapes = body->get_output_shapes();
    const std::size_t num_scans = out_shapes.size() - 1 - num_carried;
    std::vector<std::vector<argument>> scans(num_scans);
    // Appended values: the initial value, then each iteration's rows.
    std::vector<std::vector<argument>> rows(num_carried);
    for (auto j : appended) rows.at(j).push_back(carried[j]);
    for (std::int64_t i = 0;; ++i) {
        if ((trips && i >= *trips) || !cond || (max_iterations >= 0 && i >= max_iterations)) break;
        param_map p = base;
        p[body_inputs[0]] = scalar_int64(i);
        p[body_inputs[1]] = scalar_bool(cond);
        for (std::size_t j = 0; j < num_carried; ++j) p[body_inputs[2 + j]] = carried[j];
        auto r = run_body(run, body, std::move(p));
        if (r.size() != out_shapes.size())
            throw_error(error_code::runtime, "loop: the body returned " + std::to_string(r.size()) + " values");
        cond = read_bool(r[0], "loop: the body's condition");
        for (std::size_t j = 0; j < num_carried; ++j) {
            if (is_appended(j)) rows[j].push_back(r[1 + j]);
            else carried[j] = r[1 + j];
        }
        for (std::size_t k = 0; k < num_scans; ++k) scans[k].push_back(r[1 + num_carried + k]);
    }
    for (auto j : appended) carried[j] = concat_rows(rows[j], "loop: carried value " + std::to_string(j));
    std::vector<argument> results = carried;
    for (std::size_t k = 0; k < num_scans; ++k)
        results.push_back(stack_axis(scans[k], 0, out_shapes[1 + num_carried + k], "loop: scan output"));
    return detach(argument::make_tuple(std::move(results)), args);
}

// ---- Scan ----

std::int64_t scan::input_axis(std::size_t i, std::size_t rank) const {
    if (batched) return 1;
    std::int64_t a = i < input_axes.size() ? input_axes[i] : 0;
    return static_cast<std::int64_t>(normalize_axis(a, rank, "scan"));
}

std::vector<shape> scan::body_input_shapes(const std::vector<shape>& inputs) const {
    std::size_t off = has_sequence_lens ? 1 : 0;
    std::vector<shape> out;
    for (std::size_t i = 0; i < num_states; ++i) {
        const auto& s = inputs.at(off + i);
        out.push_back(batched ? remove_dim(s, 0, "scan: state " + std::to_string(i)) : s);
    }
    for (std::size_t j = 0; j < num_scan_inputs; ++j) {
        const auto& s = inputs.at(off + num_states + j);
        if (!s.is_tensor()) throw_error(error_code::shape, "scan: scan input " + std::to_string(j) + " must be a tensor");
        auto axis = static_cast<std::size_t>(input_axis(j, s.ndim()));
        auto slice = remove_dim(s, axis, "scan: scan input " + std::to_string(j));
        out.push_back(batched ? remove_dim(slice, 0, "scan") : slice);
    }
    return out;
}

shape scan::compute_shape(const std::vector<shape>& inputs, const std::vector<module_ref>& mods) const {
    check_modules("scan", mods, 1);
    std::size_t off = has_sequence_lens ? 1 : 0;
    check_count("scan", inputs, off + num_states + num_scan_inputs + captured.size());
    if (num_scan_inputs == 0) throw_error(error_code::shape, "scan: needs at least one scan input");
    if (body_inputs.size() != num_states + num_scan_inputs)
        throw_error(error_code::shape, "scan: the body takes " + std::to_string(body_inputs.size()) + " inputs, expected " +
                                           std::to_string(num_states + num_scan_inputs));
    body_input_shapes(inputs);  // validates ranks and axes
    const auto& x0 = inputs[off + num_states];
    auto steps = dim_of(x0, static_cast<std::size_t>(input_axis(0, x0.ndim())));
    auto outs = mods[0]->get_output_shapes();
    if (outs.size() < num_states)
        throw_error(error_code::shape, "scan: the body returns fewer values than there are states");
    std::vector<shape> result;
    for (std::size_t i = 0; i < num_states; ++i) {
        auto s = outs[i];
        if (batched) s = insert_dim(s, 0, dim_of(inputs[off + i], 0));
        result.push_back(carried_result(inputs[off + i], s, "scan: state " + std::to_string(i)));
    }
    for (std::size_t k = num_states; k < outs.size(); ++k) {
        const auto& s = outs[k];
        if (!s.is_tensor()) throw_error(error_code::shape, "scan: scan outputs must be tensors");
        if (batched) {
            result.push_back(insert_dim(insert_dim(s, 0, steps), 0, dim_of(x0, 0)));
            continue;
        }
        std::size_t kk = k - num_states;
        std::int64_t a = kk < output_axes.size() ? output_axes[kk] : 0;
        result.push_back(insert_dim(s, normalize_axis(a, s.ndim() + 1, "scan"), steps));
    }
    return shape::tuple(result);
}

namespace {
struct scan_run {
    std::vector<argument> states;
    std::vector<std::vector<argument>> outputs;
};
}  // namespace

argument scan::compute(const shape&, const std::vector<argument>& args, const std::vector<module_ref>& mods,
                       const run_module_fn& run) const {
    std::size_t off = has_sequence_lens ? 1 : 0;
    module_ref body = mods.at(0);
    auto out_shapes = body->get_output_shapes();
    const std::size_t num_outs = out_shapes.size() - num_states;
    param_map base;
    for (std::size_t i = 0; i < captured.size(); ++i) base[captured[i]] = args.at(off + num_states + num_scan_inputs + i);

    // One scan over tensors whose scan axes are `axes`, `steps` iterations.
    auto run_one = [&](std::vector<argument> states, const std::vector<argument>& xs,
                       const std::vector<std::size_t>& axes, std::size_t steps) {
        scan_run r{std::move(states), std::vector<std::vector<argument>>(num_outs)};
        for (std::size_t t = 0; t < steps; ++t) {
            param_map p = base;
            for (std::size_t i = 0; i < num_states; ++i) p[body_inputs[i]] = r.states[i];
            for (std::size_t j = 0; j < num_scan_inputs; ++j) {
                bool reverse = j < input_directions.size() && input_directions[j] != 0;
                std::size_t len = xs[j].get_shape().lens()[axes[j]];
                p[body_inputs[num_states + j]] = take_axis(xs[j], axes[j], reverse ? len - 1 - t : t);
            }
            auto o = run_body(run, body, std::move(p));
            if (o.size() != out_shapes.size())
                throw_error(error_code::runtime, "scan: the body returned " + std::to_string(o.size()) + " values");
            for (std::size_t i = 0; i < num_states; ++i) r.states[i] = o[i];
            for (std::size_t k = 0; k < num_outs; ++k) r.outputs[k].push_back(o[num_states + k]);
        }
        return r;
    };
    auto steps_of = [&](const std::vector<argument>& xs, const std::vector<std::size_t>& axes) {
        std::size_t steps = xs[0].get_shape().lens()[axes[0]];
        for (std::size_t j = 1; j < xs.size(); ++j)
            if (xs[j].get_shape().lens()[axes[j]] != steps)
                throw_error(error_code::shape, "scan: scan inputs have different lengths (" + std::to_string(steps) +
                                                   " and " + std::to_string(xs[j].get_shape().lens()[axes[j]]) + ")");
        return steps;
    };

    std::vector<argument> states(args.begin() + static_cast<std::ptrdiff_t>(off),
                                 args.begin() + static_cast<std::ptrdiff_t>(off + num_states));
    std::vector<argument> xs;
    for (std::size_t j = 0; j < num_scan_inputs; ++j) xs.push_back(args.at(off + num_states + j).contiguous());
    std::vector<argument> results;
    if (!batched) {
        std::vector<std::size_t> axes;
        for (std::size_t j = 0; j < num_scan_inputs; ++j)
            axes.push_back(static_cast<std::size_t>(input_axis(j, xs[j].get_shape().ndim())));
        auto r = run_one(states, xs, axes, steps_of(xs, axes));
        results = r.states;
        for (std::size_t k = 0; k < num_outs; ++k) {
            auto items = r.outputs[k];
            if (k < output_directions.size() && output_directions[k] != 0) std::reverse(items.begin(), items.end());
            std::int64_t a = k < output_axes.size() ? output_axes[k] : 0;
            const auto& s = out_shapes[num_states + k];
            results.push_back(stack_axis(items, normalize_axis(a, s.ndim() + 1, "scan"), s, "scan: scan output"));
        }
        return detach(argument::make_tuple(std::move(results)), args);
    }
    // Opset 8: every batch entry is scanned on its own (sequence_lens[b] steps) and the
    // results are stacked on a new axis 0; steps past a sequence's length stay zero.
    const std::size_t batch = xs[0].get_shape().lens()[0];
    std::vector<std::size_t> axes(num_scan_inputs, 0);
    std::vector<std::vector<argument>> final_states(num_states), outs(num_outs);
    for (std::size_t b = 0; b < batch; ++b) {
        std::vector<argument> sb, xb;
        for (auto& s : states) sb.push_back(take_axis(s, 0, b));
        for (auto& x : xs) xb.push_back(take_axis(x, 0, b));
        std::size_t full = steps_of(xb, axes);
        std::size_t steps = full;
        if (has_sequence_lens) {
            auto n = args[0].get_int64(b);
            if (n < 0 || static_cast<std::size_t>(n) > full)
                throw_error(error_code::invalid_argument, "scan: sequence_lens[" + std::to_string(b) + "] = " +
                                                              std::to_string(n) + " is outside [0, " + std::to_string(full) + "]");
            steps = static_cast<std::size_t>(n);
        }
        auto r = run_one(sb, xb, axes, steps);
        for (std::size_t i = 0; i < num_states; ++i) final_states[i].push_back(r.states[i]);
        for (std::size_t k = 0; k < num_outs; ++k) {
            auto& items = r.outputs[k];
            const auto& s = out_shapes[num_states + k];
            while (items.size() < full) {
                if (items.empty()) throw_error(error_code::unsupported, "scan: a sequence of length 0 in a batch");
                items.push_back(argument(items[0].get_shape().as_standard()));
            }
            outs[k].push_back(stack_axis(items, 0, s, "scan: scan output"));
        }
    }
    for (std::size_t i = 0; i < num_states; ++i)
        results.push_back(stack_axis(final_states[i], 0, out_shapes[i], "scan: state"));
    for (std::size_t k = 0; k < num_outs; ++k)
        results.push_back(stack_axis(outs[k], 0, out_shapes[num_states + k], "scan: scan output"));
    return detach(argument::make_tuple(std::move(results)), args);
}

// ---- SequenceMap ----

shape sequence_map::compute_shape(const std::vector<shape>& inputs, const std::vector<module_ref>& mods) const {
    check_modules("sequence_map", mods, 1);
    check_count("sequence_map", inputs, num_inputs + captured.size());
    if (!inputs[0].is_sequence())
        throw_error(error_code::shape, "sequence_map: input 0 must be a sequence, got " + inputs[0].to_string());
    if (body_inputs.size() != num_inputs)
        throw_error(error_code::shape, "sequence_map: the body takes " + std::to_string(body_inputs.size()) +
                                           " inputs, expected " + std::to_string(num_inputs));
    std::vector<shape> out;
    for (auto& s : mods[0]->get_output_shapes()) out.push_back(shape::sequence(s));
    return shape::tuple(out);
}

argument sequence_map::compute(const shape& out, const std::vector<argument>& args, const std::vector<module_ref>& mods,
                               const run_module_fn& run) const {
    const std::size_t n = args.at(0).elements().size();
    for (std::size_t j = 1; j < num_inputs; ++j)
        if (args[j].get_shape().is_sequence() && args[j].elements().size() != n)
            throw_error(error_code::shape, "sequence_map: input " + std::to_string(j) + " has " +
                                               std::to_string(args[j].elements().size()) + " items, input 0 has " +
                                               std::to_string(n));
    param_map base;
    for (std::size_t i = 0; i < captured.size(); ++i) base[captured[i]] = args.at(num_inputs + i);
    auto out_shapes = mods.at(0)->get_output_shapes();
    std::vector<std::vector<argument>> items(out_shapes.size());
    for (std::size_t i = 0; i < n; ++i) {
        param_map p = base;
        for (std::size_t j = 0; j < num_inputs; ++j)
            p[body_inputs[j]] = args[j].get_shape().is_sequence() ? args[j].elements()[i] : args[j];
        auto r = run_body(run, mods[0], std::move(p));
        if (r.size() != out_shapes.size())
            throw_error(error_code::runtime, "sequence_map: the body returned " + std::to_string(r.size()) + " values");
        for (std::size_t k = 0; k < r.size(); ++k) items[k].push_back(r[k]);
    }
    std::vector<argument> results;
    for (std::size_t k = 0; k < items.size(); ++k)
        results.push_back(make_sequence_of(std::move(items[k]), out.sub_shapes().at(k).sub_shapes().at(0)));
    return detach(argument::make_tuple(std::move(results)), args);
}

KILN_REGISTER_OP(deferred_error)
KILN_REGISTER_OP(if_op)
KILN_REGISTER_OP(loop)
KILN_REGISTER_OP(scan)
KILN_REGISTER_OP(sequence_map)

}  // namespace kiln::op
