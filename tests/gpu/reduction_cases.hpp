// Programs of reductions, softmax and layer norm over the shapes the gpu reduction kernels
// must handle: rows of 1, 3, 37, 128, 1000, 4096 and 20000 elements (warp-per-row and
// block-per-row kernels, and a grid-stride loop over rows) times 1, 5 and 300 rows, other
// axes than the last, keepdims both ways, and transposed (strided) inputs. Shared by the
// host checks (tests/gpu) and the device tests (tests/gpu_device), which compare against
// the reference.
#pragma once
#include <kiln/program.hpp>
#include <kiln/register_op.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::gpu_test {

inline const std::vector<std::size_t>& reduction_inner_sizes() {
    static const std::vector<std::size_t> v = {1, 3, 37, 128, 1000, 4096, 20000};
    return v;
}
inline const std::vector<std::size_t>& reduction_outer_sizes() {
    static const std::vector<std::size_t> v = {1, 5, 300};
    return v;
}

inline value int_list(const std::vector<std::int64_t>& v) { return value(value::array(v.begin(), v.end())); }

// x [inner, outer] transposed: the rows of the result are strided in memory.
inline instruction_ref transposed_param(module& m, const std::string& name, std::size_t outer, std::size_t inner) {
    auto x = m.add_parameter(name, shape(type::float32, {inner, outer}));
    return m.add_instruction(make_op("transpose", {{"perm", int_list({1, 0})}}), {x});
}

// `op` ("softmax" or "log_softmax") over the last axis of every [outer, inner], then over
// other axes and a transposed input.
inline program softmax_cases(const std::string& op) {
    program p;
    auto* m = p.get_main_module();
    std::vector<instruction_ref> out;
    std::size_t k = 0;
    auto add = [&](instruction_ref x, std::int64_t axis) {
        out.push_back(m->add_instruction(make_op(op, {{"axis", axis}}), {x}));
    };
    for (auto o : reduction_outer_sizes())
        for (auto i : reduction_inner_sizes())
            add(m->add_parameter("x" + std::to_string(k++), shape(type::float32, {o, i})), 1);
    add(m->add_parameter("x" + std::to_string(k++), shape(type::float32, {5, 37, 3})), 1);
    add(m->add_parameter("x" + std::to_string(k++), shape(type::float32, {300, 4})), 0);
    add(m->add_parameter("x" + std::to_string(k++), shape(type::float32, {3, 2, 1000})), 0);
    add(transposed_param(*m, "x" + std::to_string(k++), 5, 1000), 1);
    add(transposed_param(*m, "x" + std::to_string(k++), 300, 128), 1);
    m->add_return(out);
    return p;
}

// Layer norm as ONNX exporters write it, over the last axis of x:
// (x - mean) / sqrt(mean((x - mean)^2) + eps) * gamma + beta.
inline instruction_ref layer_norm(module& m, instruction_ref x, instruction_ref gamma, instruction_ref beta) {
    const auto axes = int_list({static_cast<std::int64_t>(x->get_shape().ndim()) - 1});
    auto lit = [&](float v) { return m.add_literal(literal(shape(type::float32, {1}), std::vector<float>{v})); };
    auto mean = m.add_instruction(make_op("reduce_mean", {{"axes", axes}, {"keepdims", true}}), {x});
    auto d = m.add_instruction(make_op("sub"), {x, mean});
    auto var = m.add_instruction(make_op("reduce_mean", {{"axes", axes}, {"keepdims", true}}),
                                 {m.add_instruction(make_op("pow"), {d, lit(2.0f)})});
    auto den = m.add_instruction(make_op("sqrt"), {m.add_instruction(make_op("add"), {var, lit(1e-5f)})});
    auto y = m.add_instruction(make_op("div"), {d, den});
    return m.add_instruction(make_op("add"), {m.add_instruction(make_op("mul"), {y, gamma}), beta});
}

inline program layer_norm_cases() {
    program p;
    auto* m = p.get_main_module();
    std::vector<instruction_ref> out;
    std::size_t k = 0;
    auto add = [&](instruction_ref x) {
        const auto n = x->get_shape().lens().back();
        auto g = m->add_parameter("g" + std::to_string(k), shape(type::float32, {n}));
        auto b = m->add_parameter("b" + std::to_string(k), shape(type::float32, {n}));
        ++k;
        out.push_back(layer_norm(*m, x, g, b));
    };
    for (auto o : reduction_outer_sizes())
        for (auto i : reduction_inner_sizes())
            add(m->add_parameter("x" + std::to_string(k), shape(type::float32, {o, i})));
    add(m->add_parameter("x" + std::to_string(k), shape(type::float32, {2, 64, 256})));
    add(transposed_param(*m, "x" + std::to_string(k), 300, 128));
    m->add_return(out);
    return p;
}

// Lone reductions: reduce_mean (keepdims 0) and reduce_max (keepdims 1) over the last axis
// of every [outer, inner]; every kind over other axes and keepdims; a transposed input.
inline program reduce_cases() {
    program p;
    auto* m = p.get_main_module();
    std::vector<instruction_ref> out;
    std::size_t k = 0;
    auto param = [&](std::vector<std::size_t> lens) {
        return m->add_parameter("x" + std::to_string(k++), shape(type::float32, std::move(lens)));
    };
    auto add = [&](const std::string& op, instruction_ref x, std::vector<std::int64_t> axes, bool keep) {
        out.push_back(m->add_instruction(make_op(op, {{"axes", int_list(axes)}, {"keepdims", keep}}), {x}));
    };
    for (auto o : reduction_outer_sizes())
        for (auto i : reduction_inner_sizes()) {
            auto x = param({o, i});
            add("reduce_mean", x, {1}, false);
            add("reduce_max", x, {1}, true);
        }
    for (const char* kind : {"sum", "mean", "max", "min", "prod", "l1", "l2", "sum_square", "log_sum"}) {
        const std::string op = std::string("reduce_") + kind;
        auto x = param({5, 37, 3});
        add(op, x, {1}, true);
        add(op, x, {0, 2}, false);
        add(op, x, {2}, true);
        if (std::string(kind) != "prod") add(op, param({7, 4096}), {1}, false);
    }
    add("reduce_sum", param({4, 5, 6, 7}), {0, 1, 2, 3}, false);
    add("reduce_sum", param({4, 5, 6, 7}), {1, 3}, true);
    add("reduce_min", transposed_param(*m, "x" + std::to_string(k++), 300, 1000), {1}, false);
    m->add_return(out);
    return p;
}

}  // namespace kiln::gpu_test
