// Pooling on the gpu target without a device: every window geometry (max and average,
// padding, count_include_pad, ceil mode, dilation, 1-3 spatial dims, a strided input) is a
// generated window kernel that NVRTC builds for sm_90 and that agrees with the reference on
// the host; global average pooling is a reduction kernel; nothing stays on the host.
// (tests/gpu_device runs the same programs on the device.)
#include "gpu_test_util.hpp"
#include "pool_cases.hpp"

#include <kiln/register_op.hpp>

using namespace kiln;
using namespace kiln::gpu_test;

namespace {

std::size_t count(const module& m, const std::string& name) {
    std::size_t n = 0;
    for (auto& ins : m) n += ins.name() == name;
    return n;
}

}  // namespace

TEST(gpu_pool, every_window_geometry_is_a_generated_kernel_that_matches_the_reference) {
    auto p = pool_cases();
    const auto outputs = p.get_output_shapes().size();
    compile_for_gpu(p);
    auto& m = *p.get_main_module();
    EXPECT_EQ(count(m, "gpu::host_kernel"), 0u) << m;
    EXPECT_EQ(count(m, "gpu::fused_kernel"), outputs) << m;
    const auto rep = check_kernels(m, "pooling");
    EXPECT_EQ(rep.kernels, outputs);
}

TEST(gpu_pool, global_average_pooling_is_a_reduction_over_the_planes) {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(type::float32, {2, 32, 112, 112}));
    m->add_return({m->add_instruction(make_op("pooling", {{"mode", value(std::int64_t{0})}, {"global", value(true)}}), {x})});
    compile_for_gpu(p);
    auto& mm = *p.get_main_module();
    ASSERT_EQ(count(mm, "gpu::fused_kernel"), 1u) << mm;
    for (auto& ins : mm)
        if (const auto* k = ins.get_operator().any_cast<gpu::fused_kernel>()) {
            ASSERT_EQ(k->body.nodes.size(), 1u);
            EXPECT_EQ(k->body.nodes[0].op.name(), "reduce_mean");
        }
    (void)check_kernels(mm, "global average pooling");
}
