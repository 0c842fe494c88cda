// Reduction kernels of the gpu target without a device: lone reductions, softmax and
// log_softmax (spelled out as reduction groups by the selection) and layer norm (fused into
// one group) become generated kernels, NVRTC builds them for sm_90 without spills, and
// their host build (a block's threads as fibers, tests/gpu/host_shim.hpp) agrees with the
// reference compute of each group on random non-zero data.
#include "gpu_test_util.hpp"
#include "reduction_cases.hpp"

#include "codegen/plan.hpp"
#include "targets/gpu/host_fallback.hpp"

#include <gtest/gtest-spi.h>

#include <map>

using namespace kiln;
using namespace kiln::gpu_test;

namespace {

// host_kernel ops by the op they wrap.
std::map<std::string, std::size_t> host_ops(module& m) {
    std::map<std::string, std::size_t> n;
    for (auto& ins : m)
        if (ins.name() == "gpu::host_kernel") ++n[ins.get_operator().get<gpu::host_kernel>().op.name()];
    return n;
}

std::string describe(const std::map<std::string, std::size_t>& n) {
    std::string s;
    for (const auto& [op, c] : n) s += op + "=" + std::to_string(c) + " ";
    return s;
}

// Compiles `p` for gpu (unplanned: each kernel its own buffers), expects every output to
// be one generated kernel, and checks them all.
void expect_kernels_match(program p, const std::string& what) {
    const std::size_t outputs = p.get_output_shapes().size();
    compile_options o;
    o.memory_planning = false;
    compile_for_gpu(p, o);
    auto& m = *p.get_main_module();
    EXPECT_TRUE(host_ops(m).empty()) << what << ": host kernels left: " << describe(host_ops(m));
    EXPECT_EQ(gpu_kernels(m).size(), outputs) << what;
    const auto rep = check_kernels(m, what);
    std::cout << "[ gpu      ] " << what << ": " << rep.kernels << " kernels, " << rep.elements
              << " elements checked on the host\n";
}

}  // namespace

TEST(gpu_reduction, softmax_over_rows_of_every_size_and_other_axes) {
    expect_kernels_match(softmax_cases("softmax"), "softmax");
}

TEST(gpu_reduction, log_softmax_too) { expect_kernels_match(softmax_cases("log_softmax"), "log_softmax"); }

TEST(gpu_reduction, layer_norm_as_exported_is_one_kernel) {
    auto p = layer_norm_cases();
    expect_kernels_match(p, "layer norm");
    compile_options o;
    o.memory_planning = false;
    compile_for_gpu(p, o);
    for (auto ins : gpu_kernels(*p.get_main_module())) {
        std::size_t means = 0;
        for (const auto& n : ins->get_operator().get<gpu::fused_kernel>().body.nodes)
            means += n.op.name() == "reduce_mean";
        EXPECT_EQ(means, 2u) << "mean and variance in one group";
    }
}

TEST(gpu_reduction, lone_reductions_of_every_kind_axes_and_keepdims) {
    expect_kernels_match(reduce_cases(), "reductions");
}

// Short rows take a warp each (no shared memory, no block barrier), long rows a block.
TEST(gpu_reduction, launch_shape_follows_the_row_length) {
    auto plan_for = [](std::size_t outer, std::size_t inner) {
        program p;
        auto* m = p.get_main_module();
        auto x = m->add_parameter("x", shape(type::float32, {outer, inner}));
        m->add_return({m->add_instruction(make_op("softmax", {{"axis", 1}}), {x})});
        compile_options o;
        o.memory_planning = false;
        compile_for_gpu(p, o);
        auto ins = gpu_kernels(*p.get_main_module()).at(0);
        const auto& k = ins->get_operator().get<gpu::fused_kernel>();
        auto shapes = to_shapes(ins->inputs());
        shapes.pop_back();
        return std::make_pair(codegen::make_plan(k.body, shapes, ins->get_shape(), true), k.grid);
    };
    const auto [short_rows, short_grid] = plan_for(512, 128);
    EXPECT_TRUE(gpu::codegen::warp_per_row(short_rows));
    EXPECT_EQ(short_grid, 512u / gpu::codegen::warp_rows);
    const auto short_text = gpu::codegen::emit_kernel(short_rows, "k");
    EXPECT_EQ(short_text.find("__syncthreads"), std::string::npos);
    EXPECT_EQ(short_text.find("__shared__"), std::string::npos);
    EXPECT_EQ(short_rows.passes, 2u);
    const auto [long_rows, long_grid] = plan_for(5, 20000);
    EXPECT_FALSE(gpu::codegen::warp_per_row(long_rows));
    EXPECT_EQ(long_grid, 5u);
    EXPECT_NE(gpu::codegen::emit_kernel(long_rows, "k").find("__syncthreads"), std::string::npos);
}

// The host emulation itself: shared memory and __syncthreads across a block, shuffles
// within warps, and a barrier that cannot be met (half a warp shuffles while the other
// half waits at __syncthreads) reported rather than hanging.
TEST(gpu_reduction, host_blocks_share_memory_meet_at_barriers_and_report_stuck_ones) {
    const std::string source = gpu::codegen::device_source({R"(
extern "C" __global__ void kiln_test_reverse(const kiln_args a_) {
  __shared__ float s[256];
  const float* in = (const float*)a_.in[0];
  float* out = (float*)a_.out;
  s[threadIdx.x] = in[blockIdx.x * 256 + threadIdx.x];
  __syncthreads();
  out[blockIdx.x * 256 + threadIdx.x] = s[255 - threadIdx.x] + (float)kiln_warp_sum((double)(threadIdx.x & 31));
}
extern "C" __global__ void kiln_test_stuck(const kiln_args a_) {
  float x = 1.0f;
  if ((threadIdx.x & 31) < 16) x = kiln_warp_max(x);
  __syncthreads();
  ((float*)a_.out)[threadIdx.x] = x;
}
)"});
    host_library lib(source);
    ASSERT_TRUE(lib.ok());
    const shape s(type::float32, {2 * 256});
    const auto in = random_tensor(s, 3);
    argument out(s);
    lib.run("kiln_test_reverse", {in}, out, 2, 256);
    const auto* x = reinterpret_cast<const float*>(in.data());
    const auto* y = reinterpret_cast<const float*>(out.data());
    for (unsigned b = 0; b < 2; ++b)
        for (unsigned t = 0; t < 256; ++t)
            ASSERT_EQ(y[b * 256 + t], x[b * 256 + 255 - t] + 496.0f) << b << " " << t;  // 0 + 1 + ... + 31
    EXPECT_NONFATAL_FAILURE(lib.run("kiln_test_stuck", {in}, out, 1, 256), "cannot all be met");
}

// Without fast math: libm-accurate exp and log in softmax, and NVRTC's other option set.
TEST(gpu_reduction, without_fast_math_too) {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(type::float32, {5, 1000}));
    auto y = m->add_parameter("y", shape(type::float32, {300, 37}));
    auto g = m->add_parameter("g", shape(type::float32, {37}));
    m->add_return({m->add_instruction(make_op("log_softmax", {{"axis", 1}}), {x}), layer_norm(*m, y, g, g)});
    compile_options o;
    o.fast_math = false;
    o.memory_planning = false;
    compile_for_gpu(p, o);
    const auto rep = check_kernels(*p.get_main_module(), "without fast math");
    EXPECT_EQ(rep.kernels, p.get_output_shapes().size());
}
