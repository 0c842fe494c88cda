// Pooling programs shared by the host checks (gpu_pool_test.cpp) and the device tests: one
// output per window geometry the models and the ONNX suite use.
#pragma once
#include <kiln/program.hpp>
#include <kiln/register_op.hpp>

#include <cstdint>
#include <vector>

namespace kiln::gpu_test {

inline program pool_cases() {
    auto arr = [](const std::vector<std::int64_t>& v) { return value(value::array(v.begin(), v.end())); };
    const auto f = type::float32;
    program p;
    auto* m = p.get_main_module();
    std::vector<instruction_ref> out;
    auto pool = [&](instruction_ref x, std::int64_t mode, value::object a) {
        a.emplace_back("mode", value(mode));
        out.push_back(m->add_instruction(make_op("pooling", a), {x}));
    };
    const std::int64_t avg = 0, max = 1;
    auto x4 = m->add_parameter("x4", shape(f, {2, 3, 17, 16}));
    // ResNet's stem pool: 3x3 stride 2 pad 1.
    pool(x4, max, {{"lengths", arr({3, 3})}, {"stride", arr({2, 2})}, {"padding", arr({1, 1, 1, 1})}});
    pool(x4, avg, {{"lengths", arr({3, 3})}, {"stride", arr({2, 2})}, {"padding", arr({1, 1, 1, 1})}});
    pool(x4, avg, {{"lengths", arr({3, 3})}, {"stride", arr({2, 2})}, {"padding", arr({1, 1, 1, 1})},
                   {"count_include_pad", value(true)}});
    pool(x4, max, {{"lengths", arr({2, 2})}, {"stride", arr({2, 2})}});
    pool(x4, avg, {{"lengths", arr({3, 2})}, {"stride", arr({2, 3})}, {"ceil_mode", value(true)}});
    pool(x4, max, {{"lengths", arr({3, 3})}, {"dilation", arr({2, 2})}, {"padding", arr({0, 1, 2, 0})}});
    // Global max pooling stays a window kernel (the reference keeps a window's first NaN).
    pool(x4, max, {{"global", value(true)}});
    // A strided input: the transposed view of a parameter.
    auto xt = m->add_parameter("xt", shape(f, {2, 16, 17, 3}));
    pool(m->add_instruction(make_op("transpose", {{"perm", arr({0, 3, 2, 1})}}), {xt}), max,
         {{"lengths", arr({3, 3})}, {"stride", arr({1, 1})}, {"padding", arr({1, 1, 1, 1})}});
    auto x3 = m->add_parameter("x3", shape(f, {1, 4, 50}));
    pool(x3, avg, {{"lengths", arr({4})}, {"stride", arr({3})}, {"padding", arr({1, 2})}});
    auto x5 = m->add_parameter("x5", shape(f, {1, 2, 6, 7, 5}));
    pool(x5, max, {{"lengths", arr({2, 3, 2})}, {"stride", arr({2, 2, 1})}});
    m->add_return(out);
    return p;
}

}  // namespace kiln::gpu_test
