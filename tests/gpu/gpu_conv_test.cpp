// Convolutions on the gpu target without a device: split_conv_bias moves the bias into an
// add, the lowering makes gpu::cudnn_conv of every static float32 convolution (1-3 spatial
// dims, groups, resolved auto padding) with a planned workspace, the bias with what
// follows it becomes one generated epilogue that NVRTC builds and that agrees with the
// reference on the host, KILN_GPU_CUDNN=0 keeps convolutions on the host, and the op's
// attributes survive a round trip through its value. (tests/gpu_device runs them on cuDNN.)
#include "gpu_test_util.hpp"

#include "targets/gpu/kernels/cudnn_conv.hpp"
#include "unit/env_override.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/register_op.hpp>

using namespace kiln;
using namespace kiln::gpu_test;

namespace {

value arr(const std::vector<std::int64_t>& v) { return value(value::array(v.begin(), v.end())); }

std::size_t count(const module& m, const std::string& name) {
    std::size_t n = 0;
    for (auto& ins : m) n += ins.name() == name;
    return n;
}

std::vector<const gpu::cudnn_conv*> convs(const module& m) {
    std::vector<const gpu::cudnn_conv*> out;
    for (auto& ins : m)
        if (const auto* c = ins.get_operator().any_cast<gpu::cudnn_conv>()) out.push_back(c);
    return out;
}

// A ResNet basic block: relu(conv2(relu(conv1(x) + b1)) + b2 + x), 3x3 convs, pads 1.
program basic_block(std::size_t n, std::size_t c, std::size_t hw) {
    program p;
    auto* m = p.get_main_module();
    const auto f = type::float32;
    auto x = m->add_parameter("x", shape(f, {n, c, hw, hw}));
    auto conv = [&](instruction_ref in, unsigned seed) {
        auto w = m->add_literal(literal(random_tensor(shape(f, {c, c, 3, 3}), seed)));
        auto b = m->add_literal(literal(random_tensor(shape(f, {c}), seed + 1)));
        return m->add_instruction(make_op("convolution", {{"padding", arr({1, 1, 1, 1})}}), {in, w, b});
    };
    auto h = m->add_instruction(make_op("relu"), {conv(x, 1)});
    auto y = m->add_instruction(make_op("add"), {conv(h, 3), x});
    m->add_return({m->add_instruction(make_op("relu"), {y})});
    return p;
}

}  // namespace

TEST(gpu_conv, bias_and_what_follows_become_one_generated_epilogue_per_convolution) {
    auto p = basic_block(2, 8, 9);
    compile_for_gpu(p);
    auto& m = *p.get_main_module();
    EXPECT_EQ(count(m, "gpu::cudnn_conv"), 2u) << m;
    EXPECT_EQ(count(m, "gpu::host_kernel"), 0u) << m;
    // conv1's epilogue: + b1, relu. conv2's: + b2, + x, relu.
    EXPECT_EQ(count(m, "gpu::fused_kernel"), 2u) << m;
    for (const auto* c : convs(m)) {
        EXPECT_EQ(c->pad_begin, (std::vector<std::int64_t>{1, 1}));
        EXPECT_EQ(c->pad_end, (std::vector<std::int64_t>{1, 1}));
        EXPECT_EQ(c->stride, (std::vector<std::int64_t>{1, 1}));
        EXPECT_EQ(c->group, 1);
    }
    // Each convolution's workspace is a planned buffer, and so is the result (plan_results:
    // an eval's buffers at fixed addresses, for CUDA graphs): no allocation per eval.
    EXPECT_EQ(count(m, "gpu::allocate"), 0u) << m;
    // The epilogues compile for sm_90 without spills and agree with the reference.
    const auto rep = check_kernels(m, "basic block epilogues");
    EXPECT_EQ(rep.kernels, 2u);
}

TEST(gpu_conv, every_geometry_a_model_uses_goes_to_cudnn) {
    const auto f = type::float32;
    struct conv_case {
        const char* what;
        shape x, w;
        value::object attrs;
        std::vector<std::int64_t> pad_begin, pad_end;
    };
    const std::vector<conv_case> cases = {
        {"7x7 stride 2 pad 3 (ResNet stem)", shape(f, {1, 3, 32, 32}), shape(f, {8, 3, 7, 7}),
         {{"padding", arr({3, 3, 3, 3})}, {"stride", arr({2, 2})}}, {3, 3}, {2, 2}},  // the last window ends 1 short of the end pad
        {"1x1", shape(f, {2, 16, 7, 7}), shape(f, {32, 16, 1, 1}), {}, {0, 0}, {0, 0}},
        {"depthwise 3x3 stride 2", shape(f, {1, 16, 15, 15}), shape(f, {16, 1, 3, 3}),
         {{"padding", arr({1, 1, 1, 1})}, {"stride", arr({2, 2})}, {"group", value(std::int64_t{16})}}, {1, 1}, {1, 1}},
        {"grouped 2", shape(f, {1, 8, 10, 10}), shape(f, {6, 4, 3, 3}), {{"group", value(std::int64_t{2})}}, {0, 0}, {0, 0}},
        {"dilation 2, asymmetric pads", shape(f, {1, 4, 12, 12}), shape(f, {4, 4, 3, 3}),
         {{"padding", arr({0, 1, 2, 3})}, {"dilation", arr({2, 2})}}, {0, 1}, {2, 3}},
        // 16x16 patches of 224 (ViT's embedding): no padding, no overlap.
        {"16x16 stride 16 (ViT patches)", shape(f, {1, 3, 224, 224}), shape(f, {8, 3, 16, 16}), {{"stride", arr({16, 16})}},
         {0, 0}, {0, 0}},
        // An end pad no window reaches is dropped (cuDNN derives the output size from it).
        {"stride 2 with an unused end pad", shape(f, {1, 2, 8, 8}), shape(f, {2, 2, 3, 3}),
         {{"padding", arr({1, 1, 1, 1})}, {"stride", arr({2, 2})}}, {1, 1}, {0, 0}},
        {"1-D (audio)", shape(f, {1, 4, 50}), shape(f, {8, 4, 5}), {{"padding", arr({2, 2})}}, {2}, {2}},
        {"3-D", shape(f, {1, 2, 6, 6, 6}), shape(f, {3, 2, 3, 3, 3}), {{"padding", arr({1, 1, 1, 1, 1, 1})}},
         {1, 1, 1}, {1, 1, 1}},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.what);
        program p;
        auto* m = p.get_main_module();
        auto x = m->add_parameter("x", c.x);
        auto w = m->add_literal(literal(random_tensor(c.w, 5)));
        m->add_return({m->add_instruction(make_op("convolution", c.attrs), {x, w})});
        const auto want = m->get_output_shapes();
        compile_for_gpu(p);
        auto& mm = *p.get_main_module();
        ASSERT_EQ(count(mm, "gpu::cudnn_conv"), 1u) << mm;
        EXPECT_EQ(count(mm, "gpu::host_kernel"), 0u) << mm;
        const auto* k = convs(mm).front();
        EXPECT_EQ(k->pad_begin, c.pad_begin);
        EXPECT_EQ(k->pad_end, c.pad_end);
        EXPECT_EQ(mm.get_output_shapes().front().lens(), want.front().lens());
    }
}

TEST(gpu_conv, auto_padding_is_resolved_from_the_input_size) {
    program p;
    auto* m = p.get_main_module();
    const auto f = type::float32;
    auto x = m->add_parameter("x", shape(f, {1, 3, 224, 224}));
    auto w = m->add_literal(literal(random_tensor(shape(f, {8, 3, 3, 3}), 7)));
    // SAME_UPPER with stride 2 on an even size: 0 before, 1 after (the extra pad at the end).
    m->add_return({m->add_instruction(
        make_op("convolution", {{"stride", arr({2, 2})}, {"padding_mode", value(std::int64_t{1})}}), {x, w})});
    compile_for_gpu(p);
    const auto ks = convs(*p.get_main_module());
    ASSERT_EQ(ks.size(), 1u) << *p.get_main_module();
    EXPECT_EQ(ks.front()->pad_begin, (std::vector<std::int64_t>{0, 0}));
    EXPECT_EQ(ks.front()->pad_end, (std::vector<std::int64_t>{1, 1}));
}

TEST(gpu_conv, what_cudnn_does_not_take_stays_on_the_host) {
    const auto f = type::float32;
    {
        // KILN_GPU_CUDNN=0: the reference convolution (bias and all) between copies.
        test::env_override off("KILN_GPU_CUDNN", "0");
        auto p = basic_block(1, 4, 6);
        compile_for_gpu(p);
        EXPECT_EQ(count(*p.get_main_module(), "gpu::cudnn_conv"), 0u) << *p.get_main_module();
        EXPECT_EQ(count(*p.get_main_module(), "gpu::host_kernel"), 2u) << *p.get_main_module();
    }
    {
        // float64 is not on cuDNN's list here.
        program p;
        auto* m = p.get_main_module();
        auto x = m->add_parameter("x", shape(type::float64, {1, 2, 5, 5}));
        auto w = m->add_parameter("w", shape(type::float64, {2, 2, 3, 3}));
        m->add_return({m->add_instruction(make_op("convolution"), {x, w})});
        compile_for_gpu(p);
        EXPECT_EQ(count(*p.get_main_module(), "gpu::cudnn_conv"), 0u);
    }
    (void)f;
}

TEST(gpu_conv, the_op_round_trips_through_its_value_and_checks_its_shapes) {
    gpu::cudnn_conv c;
    c.pad_begin = {0, 1};
    c.pad_end = {2, 3};
    c.stride = {2, 1};
    c.dilation = {1, 2};
    c.group = 4;
    const operation op(c);
    const auto back = make_op("gpu::cudnn_conv", op.to_value());
    const auto& d = back.get<gpu::cudnn_conv>();
    EXPECT_EQ(d.pad_begin, c.pad_begin);
    EXPECT_EQ(d.pad_end, c.pad_end);
    EXPECT_EQ(d.stride, c.stride);
    EXPECT_EQ(d.dilation, c.dilation);
    EXPECT_EQ(d.group, 4);
    const auto f = type::float32;
    const shape ws(type::uint8, {gpu::cudnn_workspace_bytes});
    EXPECT_NO_THROW((void)back.compute_shape({shape(f, {1, 8, 9, 9}), shape(f, {4, 2, 3, 3}), ws, shape(f, {1, 4, 5, 4})}));
    EXPECT_THROW((void)back.compute_shape({shape(f, {1, 6, 9, 9}), shape(f, {4, 2, 3, 3}), ws, shape(f, {1, 4, 5, 4})}),
                 error);
    EXPECT_THROW((void)back.compute_shape({shape(f, {1, 8, 9, 9}), shape(f, {4, 2, 3, 3}), shape(type::uint8, {16}),
                                           shape(f, {1, 4, 5, 4})}),
                 error);
}
