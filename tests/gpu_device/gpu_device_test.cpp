// GPU-only tests (kiln_gpu_device_tests): each skips with "no CUDA device: <CUDA error>"
// where there is none, and none may skip on a machine with a GPU. The target is available
// there; a generated kernel's CUBIN, loaded through the runtime API by hand, computes what
// the reference computes; and then whole programs through program::eval against the ref
// target on random non-zero data: every op of the generator, broadcast and strided
// inputs, reduction kernels (softmax, log_softmax, layer norm, lone reductions over rows
// of 1 to 20000 elements, warp- and block-per-row), fused attention, LSTMs, cuBLASLt products of every layout plan_lt takes, host kernels between copies,
// literals uploaded, offload_copy on and off, device_id, save/load without NVRTC, two
// programs on one device, and the shared models (KILN_MODELS_DIR, else ../shared/models;
// KILN_GPU_DEVICE_MODELS="a,b" to choose, "none" to skip them). Each test names what it ran, so a first run on a GPU says which
// part works.
#include "gpu/gpu_test_util.hpp"
#include "gpu/attention_cases.hpp"
#include "gpu/lstm_cases.hpp"
#include "gpu/pool_cases.hpp"
#include "gpu/reduction_cases.hpp"

#include "targets/gpu/availability.hpp"

#include "targets/gpu/codegen/nvrtc.hpp"
#include "targets/gpu/context.hpp"
#include "targets/gpu/host_fallback.hpp"
#include "targets/gpu/kernels/cudnn_conv.hpp"
#include "targets/gpu/kernels/lt_matmul.hpp"
#include "unit/env_override.hpp"

#include <kiln/onnx.hpp>
#include <kiln/quantization.hpp>
#include <kiln/register_op.hpp>
#include <kiln/serialize.hpp>

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

using namespace kiln;
using namespace kiln::gpu_test;

namespace {

value arr(const std::vector<std::int64_t>& v) { return value(value::array(v.begin(), v.end())); }

// The reason to skip, or "" on a machine with a device.
std::string no_device() {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) return std::string("no CUDA device: ") + cudaGetErrorString(e);
    if (count == 0) return std::string("no CUDA device: ") + cudaGetErrorString(cudaErrorNoDevice);
    return {};
}

#define SKIP_WITHOUT_DEVICE()                                    \
    if (const auto why = no_device(); !why.empty()) GTEST_SKIP() << why

// KILN_GPU_DEVICE_DRY=1 on a machine without a device: the program-level tests build their
// programs, run them on ref and compile them for gpu, skipping only the gpu runs, so the
// tests themselves are checked before a device is lent.
bool dry() {
    const char* d = std::getenv("KILN_GPU_DEVICE_DRY");
    return d && std::string(d) == "1" && !no_device().empty();
}
#define SKIP_WITHOUT_DEVICE_UNLESS_DRY()                                           \
    if (const auto why = no_device(); !why.empty() && !dry()) GTEST_SKIP() << why

#define CUDA_OK(x) ASSERT_EQ((x), cudaSuccess) << #x << ": " << cudaGetErrorString(x)

// Random non-zero inputs for every parameter of `p` (seeded by position).
param_map random_inputs(const program& p, unsigned seed = 11) {
    param_map in;
    for (const auto& name : p.get_parameter_names()) {
        const auto s = p.get_parameter_shapes().at(name);
        in[name] = random_tensor(s.as_standard(), seed++);
    }
    return in;
}

struct comparison {
    std::size_t elements = 0, bad = 0;
    double max_abs = 0, max_rel = 0;
    std::string first_bad;
};

// got vs want, element by element: |g - w| <= atol + rtol * |w| (NaN equals NaN; other
// types bitwise).
comparison compare(const argument& got, const argument& want, double rtol, double atol) {
    comparison c;
    if (got.get_shape().lens() != want.get_shape().lens() || got.get_shape().get_type() != want.get_shape().get_type()) {
        c.bad = 1;
        c.first_bad = "shape " + got.get_shape().to_string() + " vs " + want.get_shape().to_string();
        return c;
    }
    const auto n = want.get_shape().elements();
    c.elements = n;
    const bool floats = want.get_shape().get_type() == type::float32;
    const auto g = got.contiguous(), w = want.contiguous();
    for (std::size_t i = 0; i < n; ++i) {
        bool ok = true;
        if (floats) {
            const double a = reinterpret_cast<const float*>(g.data())[i], b = reinterpret_cast<const float*>(w.data())[i];
            if (std::isnan(b) || std::isnan(a)) {
                ok = std::isnan(a) && std::isnan(b);
            } else if (std::isinf(b) || std::isinf(a)) {
                ok = a == b;
            } else {
                const double d = std::fabs(a - b);
                c.max_abs = std::max(c.max_abs, d);
                if (std::fabs(b) > 1e-6) c.max_rel = std::max(c.max_rel, d / std::fabs(b));
                ok = d <= atol + rtol * std::fabs(b);
            }
            if (!ok && c.first_bad.empty())
                c.first_bad = "element " + std::to_string(i) + ": gpu " + std::to_string(a) + ", ref " + std::to_string(b);
        } else {
            const auto ts = type_size(want.get_shape().get_type());
            ok = std::memcmp(g.data() + i * ts, w.data() + i * ts, ts) == 0;
            if (!ok && c.first_bad.empty()) c.first_bad = "element " + std::to_string(i) + " differs";
        }
        c.bad += !ok;
    }
    return c;
}

// Compiles a copy of `p` for ref and one for gpu, runs both on `in`, and checks every
// output. Returns the gpu program (for further checks).
program expect_matches_ref(const program& p, const param_map& in, const std::string& what, compile_options o = {},
                           double rtol = 1e-4, double atol = 1e-5) {
    program ref = p, gpu = p;
    ref.compile(*get_target("ref"), {});
    try {
        gpu.compile(*get_target("gpu"), o);
    } catch (const error& e) {
        ADD_FAILURE() << what << ": gpu compile: " << e.message();
        return gpu;
    }
    const auto want = ref.eval(in);
    if (dry()) return gpu;
    std::vector<argument> got;
    try {
        got = gpu.eval(in);
    } catch (const error& e) {
        ADD_FAILURE() << what << ": gpu eval: " << e.message();
        return gpu;
    }
    EXPECT_EQ(got.size(), want.size()) << what;
    for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
        EXPECT_EQ(got[i].location(), memory_location::host) << what << ": offload_copy returns host memory";
        const auto c = compare(got[i], want[i], rtol, atol);
        EXPECT_EQ(c.bad, 0u) << what << ": output " << i << ": " << c.bad << " of " << c.elements
                             << " elements differ; first: " << c.first_bad << " (max abs " << c.max_abs << ", max rel "
                             << c.max_rel << ")";
    }
    return gpu;
}

std::size_t count(const module& m, const std::string& name) {
    std::size_t n = 0;
    for (auto& ins : m) n += ins.name() == name;
    return n;
}

}  // namespace

TEST(gpu_device, the_target_is_available) {
    SKIP_WITHOUT_DEVICE();
    EXPECT_EQ(get_target("gpu")->unavailable_reason(), "");
}

TEST(gpu_device, a_generated_kernel_runs_from_its_cubin) {
    SKIP_WITHOUT_DEVICE();
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(type::float32, {33, 1000}));
    auto b = m->add_parameter("b", shape(type::float32, {1000}));
    auto a = m->add_instruction(make_op("add"), {x, b});
    m->add_return({m->add_instruction(make_op("gelu"), {a})});
    compile_options o;
    o.memory_planning = false;
    compile_for_gpu(p, o);
    const auto kernels = gpu_kernels(*m);
    ASSERT_EQ(kernels.size(), 1u);
    const auto& k = kernels[0]->get_operator().get<gpu::fused_kernel>();
    std::vector<argument> in = {random_tensor(x->get_shape(), 1), random_tensor(b->get_shape(), 2)};
    host_context ctx;
    const shape out_shape(type::float32, {33, 1000});
    const argument want = k.body.compute(ctx, out_shape, in);

    cudaLibrary_t lib = nullptr;
    CUDA_OK(cudaLibraryLoadData(&lib, k.cubin.get_binary().bytes.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    cudaKernel_t fn = nullptr;
    CUDA_OK(cudaLibraryGetKernel(&fn, lib, k.symbol.c_str()));
    kiln_args args{};
    std::vector<void*> device;
    for (auto& arg : in) {
        void* d = nullptr;
        CUDA_OK(cudaMalloc(&d, arg.get_shape().bytes()));
        CUDA_OK(cudaMemcpy(d, arg.data(), arg.get_shape().bytes(), cudaMemcpyHostToDevice));
        args.in[device.size()] = d;
        device.push_back(d);
    }
    void* out = nullptr;
    CUDA_OK(cudaMalloc(&out, out_shape.bytes()));
    args.out = out;
    void* params[] = {&args};
    CUDA_OK(cudaLaunchKernel(reinterpret_cast<const void*>(fn), dim3(k.grid), dim3(gpu::codegen::block_size), params, 0,
                             nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    argument got(out_shape);
    CUDA_OK(cudaMemcpy(got.data(), out, out_shape.bytes(), cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < out_shape.elements(); ++i)
        ASSERT_TRUE(nearly_equal(reinterpret_cast<const float*>(got.data())[i], reinterpret_cast<const float*>(want.data())[i]))
            << "element " << i;
    for (void* d : device) cudaFree(d);
    cudaFree(out);
    cudaLibraryUnload(lib);
}

TEST(gpu_device, every_op_of_the_generator_matches_ref) {
    SKIP_WITHOUT_DEVICE_UNLESS_DRY();
    // One program with every op (each its own output, broadcast second inputs), as the
    // host build checks it (tests/gpu): on the device through program::eval.
    auto p = every_op();
    auto gpu = expect_matches_ref(p, random_inputs(p), "every op");
    EXPECT_GT(count(*gpu.get_main_module(), "gpu::fused_kernel"), 40u);
    // And each op alone, so a failure names its op.
    for (const auto& c : op_cases()) {
        program q;
        auto* m = q.get_main_module();
        std::vector<instruction_ref> args;
        for (std::size_t i = 0; i < c.inputs.size(); ++i)
            args.push_back(m->add_parameter("x" + std::to_string(i), shape(c.inputs[i], {7, 129})));
        m->add_return({m->add_instruction(make_op(c.name), args)});
        (void)expect_matches_ref(q, random_inputs(q), c.name);
    }
}

TEST(gpu_device, fused_groups_with_broadcast_and_strided_inputs) {
    SKIP_WITHOUT_DEVICE_UNLESS_DRY();
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(type::float32, {33, 1000}));
    auto b = m->add_parameter("b", shape(type::float32, {1000}));
    auto y = m->add_parameter("y", shape(type::float32, {1000, 33}));
    auto yt = m->add_instruction(make_op("transpose", {{"perm", arr({1, 0})}}), {y});
    auto g = m->add_instruction(make_op("gelu"), {m->add_instruction(make_op("add"), {x, b})});
    m->add_return({m->add_instruction(make_op("mul"), {g, m->add_instruction(make_op("sigmoid"), {yt})})});
    auto gpu = expect_matches_ref(p, random_inputs(p), "gelu(x + b) * sigmoid(y^T)");
    EXPECT_GE(count(*gpu.get_main_module(), "gpu::fused_kernel"), 1u);
    if (dry()) return;
    // Large enough for the grid-stride loop to take several steps (65535*8 blocks cap).
    program big;
    auto* bm = big.get_main_module();
    auto z = bm->add_parameter("z", shape(type::float32, {std::size_t{1} << 28}));
    bm->add_return({bm->add_instruction(make_op("relu"), {z})});
    (void)expect_matches_ref(big, random_inputs(big), "relu over 2^28 elements");
}

// Data movement (codegen/emit_move.hpp): every kind and element type of every_move, then
// bert's attention reshape and embedding lookup at full size (negative ids included), a
// grid-stride concat, split parts as views, an out-of-range index reported after the eval
// (and the next eval clean), and the kernels through save/load.
TEST(gpu_device, data_movement_kernels_match_ref) {
    SKIP_WITHOUT_DEVICE_UNLESS_DRY();
    auto moves = every_move();
    auto gpu = expect_matches_ref(moves, random_inputs(moves), "every move");
    EXPECT_EQ(count(*gpu.get_main_module(), "gpu::host_kernel"), 0u) << gpu;
    auto layouts = random_moves(2024, 40);
    (void)expect_matches_ref(layouts, random_inputs(layouts), "40 random layouts");

    program bert;
    auto* m = bert.get_main_module();
    auto emb = m->add_literal(literal(random_tensor(shape(type::float32, {8000, 256}), 3)));
    auto ids = m->add_parameter("ids", shape(type::int64, {1, 128}));
    auto h = m->add_instruction(make_op("gather", {{"axis", 0}}), {emb, ids});
    auto heads = m->add_parameter("heads", shape(type::float32, {1, 4, 128, 64}));
    auto merged = m->add_instruction(make_op("reshape", {{"dims", arr({1, 128, 256})}}), {transposed(m, heads, {0, 2, 1, 3})});
    auto big = m->add_parameter("big", shape(type::float32, {3, 1 << 20}));
    auto cat = m->add_instruction(make_op("concat", {{"axis", 1}}), {big, big});
    auto qkv = m->add_parameter("qkv", shape(type::float32, {1, 4, 192}));
    auto parts = m->add_instruction(make_op("split", {{"axis", 2}, {"sizes", arr({64, 64, 64})}}), {qkv});
    auto k = m->add_instruction(make_op("get_tuple_elem", {{"index", 1}}), {parts});
    auto k4 = m->add_instruction(make_op("reshape", {{"dims", arr({1, 4, 4, 16})}}), {k});
    m->add_return({h, merged, cat, k4});
    auto in = random_inputs(bert);
    std::vector<std::int64_t> id(128);
    for (std::size_t i = 0; i < id.size(); ++i) id[i] = static_cast<std::int64_t>((i * 997) % 16000) - 8000;
    in["ids"] = literal(shape(type::int64, {1, 128}), id).get_argument();
    auto gpu_bert = expect_matches_ref(bert, in, "embedding gather, attention reshape, concat, split");
    EXPECT_EQ(count(*gpu_bert.get_main_module(), "gpu::host_kernel"), 0u) << gpu_bert;
    if (dry()) return;
    id[5] = 8000;
    in["ids"] = literal(shape(type::int64, {1, 128}), id).get_argument();
    try {
        (void)gpu_bert.eval(in);
        ADD_FAILURE() << "an out-of-range id was not reported";
    } catch (const error& e) {
        EXPECT_NE(e.message().find("index 8000, out of range for an axis of 8000"), std::string::npos) << e.message();
    }
    id[5] = -8000;
    in["ids"] = literal(shape(type::int64, {1, 128}), id).get_argument();
    EXPECT_NO_THROW((void)gpu_bert.eval(in)) << "the record is cleared after it is reported";

    const auto want = gpu.eval(random_inputs(moves, 21));
    const auto bytes = save_buffer(gpu);
    program loaded = load_buffer(bytes.data(), bytes.size());
    const auto got = loaded.eval(random_inputs(moves, 21));
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << "output " << i << " after load";
}

// Pooling (tests/gpu/pool_cases.hpp, checked on the host by tests/gpu/gpu_pool_test.cpp)
// as generated window kernels, and global average pooling as a reduction, on the device.
TEST(gpu_device, pooling_kernels_match_ref) {
    SKIP_WITHOUT_DEVICE_UNLESS_DRY();
    auto p = pool_cases();
    auto gpu = expect_matches_ref(p, random_inputs(p), "pooling windows");
    EXPECT_EQ(count(*gpu.get_main_module(), "gpu::host_kernel"), 0u) << gpu;
    program g;
    auto* m = g.get_main_module();
    auto x = m->add_parameter("x", shape(type::float32, {2, 32, 112, 112}));
    m->add_return({m->add_instruction(make_op("pooling", {{"mode", value(std::int64_t{0})}, {"global", value(true)}}), {x})});
    gpu = expect_matches_ref(g, random_inputs(g), "global average pooling of 112x112 planes");
    EXPECT_EQ(count(*gpu.get_main_module(), "gpu::host_kernel"), 0u) << gpu;
}

// The reduction kernels (tests/gpu/reduction_cases.hpp, checked on the host by
// tests/gpu/gpu_reduction_test.cpp) on the device: each output one generated kernel.
TEST(gpu_device, softmax_layer_norm_and_reductions_match_ref) {
    SKIP_WITHOUT_DEVICE_UNLESS_DRY();
    const std::vector<std::pair<std::string, program>> cases = {{"softmax", softmax_cases("softmax")},
                                                                 {"log_softmax", softmax_cases("log_softmax")},
                                                                 {"layer norm", layer_norm_cases()},
                                                                 {"reductions", reduce_cases()}};
    for (const auto& [what, p] : cases) {
        auto gpu = expect_matches_ref(p, random_inputs(p), what);
        const auto& m = *gpu.get_main_module();
        EXPECT_EQ(count(m, "gpu::host_kernel"), 0u) << what;
        EXPECT_EQ(count(m, "gpu::fused_kernel"), p.get_output_shapes().size()) << what;
    }
}

// The fused attention kernel (codegen/emit_attention.hpp) on every case of
// attention_cases.hpp (bert_small- and vit_tiny-like, one key, one query, head dims 48 to
// 80, rank 3), one program each: every attention one kernel, no product on cuBLASLt.
TEST(gpu_device, fused_attention_matches_ref) {
    SKIP_WITHOUT_DEVICE_UNLESS_DRY();
    for (const auto& c : attention_cases()) {
        const auto p = attention_program({c});
        auto gpu = expect_matches_ref(p, random_inputs(p), std::string("attention ") + c.name);
        const auto& m = *gpu.get_main_module();
        EXPECT_EQ(count(m, "gpu::host_kernel"), 0u) << c.name;
        EXPECT_EQ(count(m, "gpu::lt_matmul"), 0u) << c.name << ": the attention was not fused";
    }
}

// LSTMs (tests/gpu/lstm_cases.hpp, checked on the host by tests/gpu/gpu_lstm_test.cpp):
// a cuBLASLt projection and one generated recurrence kernel each, on the device; with no
// host kernel left, the program's evals are recorded as a CUDA graph and replayed.
TEST(gpu_device, lstm_matches_ref) {
    SKIP_WITHOUT_DEVICE_UNLESS_DRY();
    for (const auto& c : lstm_cases()) {
        std::vector<std::pair<std::string, argument>> values;
        const auto p = lstm_program({c}, values);
        param_map in;
        for (const auto& [name, v] : values)
            if (p.get_parameter_shapes().count(name)) in[name] = v;
        auto gpu = expect_matches_ref(p, in, "lstm " + c.name, {}, 1e-4, 1e-4);
        const auto& m = *gpu.get_main_module();
        EXPECT_EQ(count(m, "gpu::host_kernel"), 0u) << c.name;
        EXPECT_EQ(count(m, "gpu::lt_matmul"), 1u) << c.name << ": the input projection";
        if (dry()) continue;
        for (int i = 0; i < 3; ++i) (void)gpu.eval(in);
        const auto stats = dynamic_cast<gpu::gpu_context&>(gpu.get_context()).graph_statistics();
        EXPECT_EQ(stats.off, "") << c.name;
        EXPECT_GE(stats.replayed, 1u) << c.name;
    }
}

namespace {

program matmul_program(const shape& a, const shape& b, bool literal_b, bool then_relu, const std::string& transpose_b = "") {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("a", a);
    instruction_ref w = literal_b ? m->add_literal(literal(random_tensor(b, 99))) : m->add_parameter("b", b);
    if (transpose_b == "last2") {
        std::vector<std::int64_t> perm(b.ndim());
        for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<std::int64_t>(i);
        std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
        w = m->add_instruction(make_op("transpose", {{"perm", arr(perm)}}), {w});
    }
    auto r = m->add_instruction(make_op("matmul"), {x, w});
    if (then_relu) r = m->add_instruction(make_op("relu"), {r});
    m->add_return({r});
    return p;
}

}  // namespace

TEST(gpu_device, cublaslt_products_of_every_planned_layout_match_ref) {
    SKIP_WITHOUT_DEVICE_UNLESS_DRY();
    const auto fallbacks_before = gpu::lt_host_fallbacks();
    const auto f = type::float32;
    struct mm {
        const char* what;
        shape a, b;
        bool literal_b;
        const char* transpose_b;
    };
    const std::vector<mm> cases = {
        {"2-D 64x128 * 128x32", shape(f, {64, 128}), shape(f, {128, 32}), false, ""},
        {"2-D odd 17x33 * 33x9", shape(f, {17, 33}), shape(f, {33, 9}), false, ""},
        {"1 row 1x256 * 256x1000", shape(f, {1, 256}), shape(f, {256, 1000}), true, ""},
        {"batched 3x17x33 * 3x33x9", shape(f, {3, 17, 33}), shape(f, {3, 33, 9}), false, ""},
        {"batch folded 2x128x256 * 256x64 (literal)", shape(f, {2, 128, 256}), shape(f, {256, 64}), true, ""},
        {"transposed b 2x4x16x8 * (2x4x16x8)^T", shape(f, {2, 4, 16, 8}), shape(f, {2, 4, 16, 8}), false, "last2"},
        {"transposed literal b 8x32 * (16x32)^T", shape(f, {8, 32}), shape(f, {16, 32}), true, "last2"},
    };
    for (const auto& c : cases) {
        auto p = matmul_program(c.a, c.b, c.literal_b, true, c.transpose_b);
        // cuBLASLt's fp32 sums in another order than the reference: relative 1e-4 with a
        // small absolute floor for sums near zero.
        auto gpu = expect_matches_ref(p, random_inputs(p), c.what, {}, 1e-4, 1e-4);
        EXPECT_EQ(count(*gpu.get_main_module(), "gpu::lt_matmul"), 1u) << c.what << ": not on cuBLASLt\n" << gpu;
        if (c.literal_b) {
            EXPECT_EQ(count(*gpu.get_main_module(), "gpu::device_literal"), 1u) << c.what << ": weights not uploaded\n" << gpu;
        }
    }
    // gemm on cuBLASLt: alpha, transposes, and C as the bias epilogue (resnet50's classifier).
    for (bool trans_a : {false, true}) {
        program g;
        auto* gm = g.get_main_module();
        auto x = gm->add_parameter("x", trans_a ? shape(f, {2048, 3}) : shape(f, {3, 2048}));
        auto w = gm->add_literal(literal(random_tensor(shape(f, {1000, 2048}), 21)));
        auto c = gm->add_literal(literal(random_tensor(shape(f, {1000}), 22)));
        gm->add_return({gm->add_instruction(
            make_op("gemm", {{"alpha", 0.5}, {"beta", 1.0}, {"trans_a", trans_a}, {"trans_b", true}}), {x, w, c})});
        const std::string what = std::string("gemm 0.5 * x") + (trans_a ? "^T" : "") + " * w^T + bias";
        auto gpu = expect_matches_ref(g, random_inputs(g), what, {}, 1e-4, 1e-4);
        EXPECT_EQ(count(*gpu.get_main_module(), "gpu::lt_matmul"), 1u) << what << ": not on cuBLASLt\n" << gpu;
    }
    // Attention's layouts from a real model's shapes: heads as views of [batch, tokens, heads, dim].
    program att;
    auto* m = att.get_main_module();
    // Batch 1 (bert_small's): the heads are the one batch stride. (With batch 2 the two
    // batch dims do not collapse into one stride, and the product runs on the host.)
    auto q = m->add_parameter("q", shape(f, {1, 128, 4, 64}));
    auto k = m->add_parameter("k", shape(f, {1, 128, 4, 64}));
    auto qh = m->add_instruction(make_op("transpose", {{"perm", arr({0, 2, 1, 3})}}), {q});
    auto kt = m->add_instruction(make_op("transpose", {{"perm", arr({0, 2, 3, 1})}}), {k});
    m->add_return({m->add_instruction(make_op("matmul"), {qh, kt})});
    auto gpu = expect_matches_ref(att, random_inputs(att), "attention Q K^T on head views", {}, 1e-4, 1e-4);
    EXPECT_EQ(count(*gpu.get_main_module(), "gpu::lt_matmul"), 1u) << gpu;
    // A transposed a against one b: a batch with b's stride 0 (no folding).
    program bc;
    auto* bm = bc.get_main_module();
    auto a = bm->add_parameter("a", shape(f, {3, 4, 5}));
    auto at = bm->add_instruction(make_op("transpose", {{"perm", arr({0, 2, 1})}}), {a});
    auto w = bm->add_literal(literal(random_tensor(shape(f, {4, 6}), 31)));
    bm->add_return({bm->add_instruction(make_op("matmul"), {at, w})});
    gpu = expect_matches_ref(bc, random_inputs(bc), "a^T (batch 3) against one b (batch stride 0)", {}, 1e-4, 1e-4);
    EXPECT_EQ(count(*gpu.get_main_module(), "gpu::lt_matmul"), 1u) << gpu;
    EXPECT_EQ(gpu::lt_host_fallbacks(), fallbacks_before)
        << "cuBLASLt's heuristic had no algorithm for some products: they ran on the host (correct, slow)";
}

// Every convolution geometry the models use, on cuDNN (strict fp32 engines) with its bias,
// ReLU and residual add as one generated epilogue. A convolution cuDNN had no plan for runs
// on the host (correct, slow): the test fails then, printing cuDNN's reasons.
TEST(gpu_device, cudnn_convolutions_with_generated_epilogues_match_ref) {
    SKIP_WITHOUT_DEVICE_UNLESS_DRY();
    const auto fallbacks_before = gpu::cudnn_host_fallbacks();
    const auto f = type::float32;
    struct conv_case {
        const char* what;
        shape x, w;
        value::object attrs;
    };
    const std::vector<conv_case> cases = {
        {"7x7 stride 2 pad 3 (ResNet stem), batch 2", shape(f, {2, 3, 64, 64}), shape(f, {16, 3, 7, 7}),
         {{"padding", arr({3, 3, 3, 3})}, {"stride", arr({2, 2})}}},
        {"1x1 256 -> 64", shape(f, {1, 256, 14, 14}), shape(f, {64, 256, 1, 1}), {}},
        {"3x3 pad 1, 64 channels", shape(f, {1, 64, 28, 28}), shape(f, {64, 64, 3, 3}), {{"padding", arr({1, 1, 1, 1})}}},
        {"3x3 stride 2 pad 1", shape(f, {1, 32, 29, 29}), shape(f, {48, 32, 3, 3}),
         {{"padding", arr({1, 1, 1, 1})}, {"stride", arr({2, 2})}}},
        {"depthwise 3x3 (MobileNetV2)", shape(f, {1, 96, 28, 28}), shape(f, {96, 1, 3, 3}),
         {{"padding", arr({1, 1, 1, 1})}, {"group", value(std::int64_t{96})}}},
        {"depthwise 5x5 stride 2 (EfficientNet)", shape(f, {1, 40, 27, 27}), shape(f, {40, 1, 5, 5}),
         {{"padding", arr({2, 2, 2, 2})}, {"stride", arr({2, 2})}, {"group", value(std::int64_t{40})}}},
        {"grouped 4", shape(f, {1, 32, 12, 12}), shape(f, {16, 8, 3, 3}), {{"group", value(std::int64_t{4})}}},
        {"dilation 2, asymmetric pads", shape(f, {1, 8, 20, 20}), shape(f, {8, 8, 3, 3}),
         {{"padding", arr({0, 1, 2, 3})}, {"dilation", arr({2, 2})}}},
        {"16x16 stride 16 (ViT patches)", shape(f, {1, 3, 224, 224}), shape(f, {192, 3, 16, 16}), {{"stride", arr({16, 16})}}},
        {"1-D (audio)", shape(f, {2, 80, 300}), shape(f, {64, 80, 5}), {{"padding", arr({2, 2})}}},
        {"3-D", shape(f, {1, 4, 8, 10, 10}), shape(f, {8, 4, 3, 3, 3}), {{"padding", arr({1, 1, 1, 1, 1, 1})}}},
    };
    for (const auto& c : cases) {
        program p;
        auto* m = p.get_main_module();
        auto x = m->add_parameter("x", c.x);
        auto w = m->add_literal(literal(random_tensor(c.w, 41)));
        auto b = m->add_literal(literal(random_tensor(shape(f, {c.w.lens()[0]}), 42)));
        auto y = m->add_instruction(make_op("convolution", c.attrs), {x, w, b});
        auto r = m->add_parameter("r", y->get_shape());
        m->add_return({m->add_instruction(make_op("relu"), {m->add_instruction(make_op("add"), {y, r})})});
        // cuDNN sums in another order than the reference: relative 1e-4, absolute 1e-4.
        auto gpu = expect_matches_ref(p, random_inputs(p), c.what, {}, 1e-4, 1e-4);
        EXPECT_EQ(count(*gpu.get_main_module(), "gpu::cudnn_conv"), 1u) << c.what << ": not on cuDNN\n" << gpu;
        EXPECT_EQ(count(*gpu.get_main_module(), "gpu::fused_kernel"), 1u) << c.what << ": the epilogue\n" << gpu;
        for (auto& ins : *gpu.get_main_module()) {
            const auto* k = ins.get_operator().any_cast<gpu::cudnn_conv>();
            if (!k) continue;
            EXPECT_EQ(k->host_reason(), "") << c.what;
            std::cout << "[ gpu ] " << c.what << ": " << (k->engine().empty() ? "not planned" : k->engine()) << "\n";
        }
    }
    EXPECT_EQ(gpu::cudnn_host_fallbacks(), fallbacks_before)
        << "cuDNN had no strict-fp32 plan for some convolutions: they ran on the host (correct, slow)";
}

TEST(gpu_device, host_kernels_between_copies_and_uploaded_literals) {
    SKIP_WITHOUT_DEVICE_UNLESS_DRY();
    test::env_override no_cudnn("KILN_GPU_CUDNN", "0");  // the convolution is the host kernel here
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(type::float32, {2, 3, 16, 16}));
    auto w = m->add_literal(literal(random_tensor(shape(type::float32, {8, 3, 3, 3}), 5)));
    auto c = m->add_instruction(make_op("convolution", {{"padding", arr({1, 1, 1, 1})}}), {x, w});
    auto bias = m->add_literal(literal(random_tensor(shape(type::float32, {1, 8, 1, 1}), 6)));
    auto r = m->add_instruction(make_op("relu"), {m->add_instruction(make_op("add"), {c, bias})});
    auto pooled = m->add_instruction(make_op("reduce_mean", {{"axes", arr({2, 3})}, {"keepdims", false}}), {r});
    // hardmax has no device kernel: the device's results go back to the host once more.
    auto top = m->add_instruction(make_op("hardmax", {{"axis", 1}}), {pooled});
    m->add_return({top, pooled, r});
    auto gpu = expect_matches_ref(p, random_inputs(p),
                                  "conv (host) + bias + relu, reduce_mean (device) + hardmax (host)", {}, 1e-4, 1e-5);
    EXPECT_GE(count(*gpu.get_main_module(), "gpu::host_kernel"), 2u) << gpu;
    if (dry()) return;
    // Several evals reuse the arena and the uploaded literals.
    const auto in = random_inputs(p, 40);
    const auto first = gpu.eval(in);
    for (int i = 0; i < 3; ++i) {
        const auto again = gpu.eval(in);
        ASSERT_EQ(again.size(), first.size());
        for (std::size_t j = 0; j < first.size(); ++j) EXPECT_EQ(again[j], first[j]) << "eval " << i << " output " << j;
    }
}

TEST(gpu_device, offload_copy_off_takes_and_returns_device_memory) {
    SKIP_WITHOUT_DEVICE();
    auto p = matmul_program(shape(type::float32, {16, 64}), shape(type::float32, {64, 48}), true, true);
    program ref = p, gpu = p;
    ref.compile(*get_target("ref"), {});
    compile_options o;
    o.offload_copy = false;
    gpu.compile(*get_target("gpu"), o);
    const auto host_in = random_tensor(shape(type::float32, {16, 64}), 3);
    const auto want = ref.eval({{"a", host_in}});
    void* d = nullptr;
    CUDA_OK(cudaMalloc(&d, host_in.get_shape().bytes()));
    CUDA_OK(cudaMemcpy(d, host_in.data(), host_in.get_shape().bytes(), cudaMemcpyHostToDevice));
    std::vector<argument> got;
    try {
        got = gpu.eval({{"a", argument::borrow(host_in.get_shape(), d, memory_location::device, 0)}});
    } catch (const error& e) {
        cudaFree(d);
        FAIL() << "eval with device inputs: " << e.message();
    }
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].location(), memory_location::device) << "offload_copy off returns device memory";
    argument back(got[0].get_shape());
    CUDA_OK(cudaMemcpy(back.data(), got[0].data(), got[0].get_shape().bytes(), cudaMemcpyDeviceToHost));
    const auto c = compare(back, want[0], 1e-4, 1e-4);
    EXPECT_EQ(c.bad, 0u) << c.first_bad;
    // A second eval must not overwrite the first's result (it left the arena).
    const auto again = gpu.eval({{"a", argument::borrow(host_in.get_shape(), d, memory_location::device, 0)}});
    EXPECT_NE(again[0].data(), got[0].data());
    // Host memory where device memory is expected: a clear error, no crash.
    try {
        (void)gpu.eval({{"a", host_in}});
        ADD_FAILURE() << "ran on host memory with offload_copy off";
    } catch (const error& e) {
        EXPECT_NE(e.message().find("host memory"), std::string::npos) << e.message();
    }
    cudaFree(d);
}

TEST(gpu_device, device_id_is_honoured_and_a_missing_one_is_refused) {
    SKIP_WITHOUT_DEVICE();
    int count_devices = 0;
    CUDA_OK(cudaGetDeviceCount(&count_devices));
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(type::float32, {64}));
    m->add_return({m->add_instruction(make_op("exp"), {x})});
    compile_options o;
    o.device_id = count_devices;  // one past the last
    try {
        program q = p;
        q.compile(*get_target("gpu"), o);
        (void)q.eval(random_inputs(q));
        ADD_FAILURE() << "ran on device " << count_devices << " of " << count_devices;
    } catch (const error& e) {
        EXPECT_NE(e.message().find("does not exist"), std::string::npos) << e.message();
    }
    o.device_id = count_devices - 1;
    (void)expect_matches_ref(p, random_inputs(p), "exp on the last device", o);
}

TEST(gpu_device, a_saved_program_loads_without_nvrtc_and_runs_the_same) {
    SKIP_WITHOUT_DEVICE();
    auto p = matmul_program(shape(type::float32, {8, 32}), shape(type::float32, {32, 16}), true, true);
    program gpu = p;
    gpu.compile(*get_target("gpu"), {});
    const auto in = random_inputs(p);
    const auto want = gpu.eval(in);
    const auto bytes = save_buffer(gpu);
    const auto compiles = gpu::codegen::stats().compiles.load();
    program loaded = load_buffer(bytes.data(), bytes.size());
    EXPECT_EQ(gpu::codegen::stats().compiles.load(), compiles) << "loading ran NVRTC";
    const auto got = loaded.eval(in);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(got[0], want[0]);
}

TEST(gpu_device, a_program_compiled_for_another_arch_is_recompiled_or_jitted) {
    SKIP_WITHOUT_DEVICE();
    int major = 0, minor = 0;
    CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
    CUDA_OK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
    // An older arch than the device's: its CUBIN does not run here; the kept source is
    // compiled again for the device (or the PTX is JIT-compiled).
    const std::string older = major * 10 + minor > 80 ? "sm_80" : "sm_75";
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(type::float32, {1000}));
    m->add_return({m->add_instruction(make_op("tanh"), {m->add_instruction(make_op("exp"), {x})})});
    compile_options o;
    o.gpu_arch = older;
    (void)expect_matches_ref(p, random_inputs(p), "compiled for " + older, o);
}

TEST(gpu_device, two_programs_on_one_device_from_two_threads) {
    SKIP_WITHOUT_DEVICE();
    auto p1 = matmul_program(shape(type::float32, {32, 64}), shape(type::float32, {64, 32}), true, true);
    auto p2 = every_op();
    program r1 = p1, r2 = p2, g1 = p1, g2 = p2;
    r1.compile(*get_target("ref"), {});
    r2.compile(*get_target("ref"), {});
    g1.compile(*get_target("gpu"), {});
    g2.compile(*get_target("gpu"), {});
    const auto in1 = random_inputs(p1), in2 = random_inputs(p2);
    const auto w1 = r1.eval(in1), w2 = r2.eval(in2);
    std::atomic<int> failures{0};
    auto work = [&](program& g, const param_map& in, const std::vector<argument>& want) {
        for (int i = 0; i < 20; ++i) {
            try {
                const auto got = g.eval(in);
                for (std::size_t j = 0; j < want.size(); ++j)
                    if (compare(got[j], want[j], 1e-4, 1e-4).bad) ++failures;
            } catch (const error&) {
                ++failures;
            }
        }
    };
    std::thread t1(work, std::ref(g1), std::cref(in1), std::cref(w1));
    std::thread t2(work, std::ref(g2), std::cref(in2), std::cref(w2));
    std::thread t3(work, std::ref(g1), std::cref(in1), std::cref(w1));  // one program, two threads
    t1.join();
    t2.join();
    t3.join();
    EXPECT_EQ(failures.load(), 0);
}

namespace {

// A small transformer block: cuBLASLt products, a generated softmax and layer-norm-like
// reduction, pointwise kernels, and a convolution on cuDNN: what a graph records.
program graph_program() {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(type::float32, {4, 32, 64}));
    auto w = m->add_literal(literal(random_tensor(shape(type::float32, {64, 64}), 7)));
    auto q = m->add_instruction(make_op("matmul"), {x, m->add_instruction(make_op("broadcast", {{"dims", arr({4, 64, 64})}}), {w})});
    auto kt = m->add_instruction(make_op("transpose", {{"perm", arr({0, 2, 1})}}), {q});
    auto scores = m->add_instruction(make_op("matmul"), {q, kt});
    auto sm = m->add_instruction(make_op("softmax", {{"axis", -1}}), {scores});
    auto pv = m->add_instruction(make_op("matmul"), {sm, q});
    auto mean = m->add_instruction(make_op("reduce_mean", {{"axes", arr({2})}}), {pv});
    auto y = m->add_instruction(make_op("relu"), {m->add_instruction(make_op("sub"), {pv, m->add_instruction(make_op("broadcast", {{"dims", arr({4, 32, 64})}}), {mean})})});
    auto img = m->add_parameter("img", shape(type::float32, {2, 8, 12, 12}));
    auto cw = m->add_literal(literal(random_tensor(shape(type::float32, {16, 8, 3, 3}), 8)));
    auto c = m->add_instruction(make_op("convolution", {{"padding", arr({1, 1, 1, 1})}}), {img, cw});
    m->add_return({y, m->add_instruction(make_op("relu"), {c})});
    return p;
}

}  // namespace

// CUDA graphs (eval_graphs.hpp): the first eval of a key runs plainly, the second is
// recorded, later ones replay it; every eval, with new input values each time, matches ref.
TEST(gpu_device, cuda_graphs_record_and_replay_evals_that_match_ref) {
    SKIP_WITHOUT_DEVICE_UNLESS_DRY();
    auto p = graph_program();
    auto gpu = expect_matches_ref(p, random_inputs(p), "the graph program, first eval");
    if (dry()) return;
    program ref = p;
    ref.compile(*get_target("ref"), {});
    for (unsigned round = 0; round < 5; ++round) {
        const auto in = random_inputs(p, 100 + 10 * round);
        const auto want = ref.eval(in);
        const auto got = gpu.eval(in);
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t j = 0; j < want.size(); ++j) {
            const auto c = compare(got[j], want[j], 1e-4, 1e-5);
            EXPECT_EQ(c.bad, 0u) << "eval " << round + 2 << " output " << j << ": " << c.first_bad;
        }
    }
    const auto stats = dynamic_cast<gpu::gpu_context&>(gpu.get_context()).graph_statistics();
    std::cout << "[ graphs   ] plain " << stats.plain << ", captured " << stats.captured << ", replayed "
              << stats.replayed << (stats.off.empty() ? "" : ", off: " + stats.off) << "\n";
    EXPECT_EQ(stats.off, "");
    EXPECT_EQ(stats.plain, 1u);
    EXPECT_EQ(stats.captured, 1u);
    EXPECT_EQ(stats.replayed, 4u);
}

// A program with a host kernel cannot be recorded: the context stops trying after the
// first attempt and every eval still matches; KILN_GPU_GRAPHS=0 never records.
TEST(gpu_device, cuda_graphs_step_aside_for_host_kernels_and_when_turned_off) {
    SKIP_WITHOUT_DEVICE_UNLESS_DRY();
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(type::float32, {8, 10}));
    auto r = m->add_instruction(make_op("relu"), {x});
    m->add_return({m->add_instruction(make_op("hardmax", {{"axis", 1}}), {r})});  // hardmax: a host kernel
    auto host = expect_matches_ref(p, random_inputs(p), "relu + hardmax (host)");
    if (dry()) return;
    for (int i = 0; i < 3; ++i) (void)host.eval(random_inputs(p, 50 + i));
    auto stats = dynamic_cast<gpu::gpu_context&>(host.get_context()).graph_statistics();
    EXPECT_NE(stats.off.find("cannot be recorded"), std::string::npos) << stats.off;
    EXPECT_EQ(stats.captured + stats.replayed, 0u);
    auto q = graph_program();
    test::env_override off("KILN_GPU_GRAPHS", "0");
    auto plain = expect_matches_ref(q, random_inputs(q), "the graph program, KILN_GPU_GRAPHS=0");
    for (int i = 0; i < 3; ++i) (void)plain.eval(random_inputs(q, 60 + i));
    stats = dynamic_cast<gpu::gpu_context&>(plain.get_context()).graph_statistics();
    EXPECT_EQ(stats.captured + stats.replayed + stats.plain, 0u) << "run_eval is not used when graphs are off";
}

namespace {

// Where the shared models are (bench/gpu-check.sh sets KILN_MODELS_DIR), and which to run
// (KILN_GPU_DEVICE_MODELS, comma-separated; "none" for none).
std::filesystem::path shared_models_dir() {
    const char* models_env = std::getenv("KILN_MODELS_DIR");
    return models_env && *models_env ? std::filesystem::path(models_env)
                                     : std::filesystem::path(KILN_SHARED_DIR) / "models";
}
std::vector<std::string> models_to_run(std::vector<std::string> names) {
    if (const char* only = std::getenv("KILN_GPU_DEVICE_MODELS"); only && *only) {
        names.clear();
        std::stringstream ss(only);
        for (std::string n; std::getline(ss, n, ',');)
            if (!n.empty() && n != "none") names.push_back(n);
    }
    return names;
}

// A shared model parsed at the dims of its test inputs (test_data_set_0, ONNX input
// order), and those inputs (random where a file is missing). False when it is not there.
bool load_shared_model(const std::filesystem::path& dir, const std::string& name, program& p, param_map& in) {
    const auto file = dir / name / "model.onnx";
    if (!std::filesystem::exists(file)) return false;
    onnx_options oo;
    oo.default_dim_value = 1;
    const auto params = parse_onnx(file.string(), oo).get_parameter_names();
    for (std::size_t i = 0; i < params.size(); ++i) {
        const auto pb = dir / name / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb");
        if (!std::filesystem::exists(pb)) continue;
        in[params[i]] = read_tensor_proto(pb.string());
        oo.map_input_dims[params[i]] = in[params[i]].get_shape().lens();
    }
    p = parse_onnx(file.string(), oo);
    for (const auto& n : params)
        if (!in.count(n)) in[n] = random_tensor(p.get_parameter_shapes().at(n), 5);
    return true;
}

std::string where_it_ran(const program& gpu) {
    std::map<std::string, std::size_t> kinds;
    for (auto& ins : *gpu.get_main_module()) {
        const auto n = ins.name();
        if (n == "gpu::host_kernel") ++kinds["host:" + ins.get_operator().get<gpu::host_kernel>().op.name()];
        else if (n == "gpu::fused_kernel" || n == "gpu::lt_matmul" || n == "gpu::cudnn_conv" || n == "gpu::device_literal")
            ++kinds[n];
    }
    std::string line;
    for (auto& [k, c] : kinds) line += " " + k + "=" + std::to_string(c);
    line += " lt_host_fallbacks(so far)=" + std::to_string(gpu::lt_host_fallbacks());
    line += " cudnn_host_fallbacks(so far)=" + std::to_string(gpu::cudnn_host_fallbacks());
    return line;
}

}  // namespace

// The shared models at their test inputs (test_data_set_0), gpu against ref with the
// issue's FP32 tolerances (rtol 1e-3, atol 1e-4), and where their instructions ran.
TEST(gpu_device, the_shared_models_match_ref) {
    SKIP_WITHOUT_DEVICE_UNLESS_DRY();
    const auto dir = shared_models_dir();
    std::size_t ran = 0;
    for (const auto& name : models_to_run({"fashion_resnet", "lstm_seq", "bert_small", "vit_tiny", "mobilenet_v2",
                                           "efficientnet_b0", "resnet50"})) {
        SCOPED_TRACE(name);
        program p;
        param_map in;
        if (!load_shared_model(dir, name, p, in)) continue;
        const auto start = std::chrono::steady_clock::now();
        auto gpu = expect_matches_ref(p, in, name, {}, 1e-3, 1e-4);
        std::cout << "[ gpu-device ] " << name << " ("
                  << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
                  << " s with ref):" << where_it_ran(gpu) << "\n";
        ++ran;
    }
    if (ran == 0) GTEST_SKIP() << "no models in " << dir;
}

// The same models after quantize_fp16, gpu (16-bit kernels, cuBLASLt and cuDNN summing in
// fp32) against ref on the same fp16 program, within 2e-2 (absolute and relative): the
// device's sums run in another order, and a 16-bit intermediate that rounds the other
// way moves the rest by one fp16 ulp (~1e-3 relative).
TEST(gpu_device, fp16_models_match_ref_within_2e_2) {
    SKIP_WITHOUT_DEVICE_UNLESS_DRY();
    const auto dir = shared_models_dir();
    std::size_t ran = 0;
    for (const auto& name : models_to_run({"bert_small", "resnet50"})) {
        SCOPED_TRACE(name + " fp16");
        program p;
        param_map in;
        if (!load_shared_model(dir, name, p, in)) continue;
        quantize_fp16(p);
        const auto start = std::chrono::steady_clock::now();
        auto gpu = expect_matches_ref(p, in, name + " fp16", {}, 2e-2, 2e-2);
        std::cout << "[ gpu-device ] " << name << " fp16 ("
                  << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
                  << " s with ref):" << where_it_ran(gpu) << "\n";
        ++ran;
    }
    if (ran == 0) GTEST_SKIP() << "no models in " << dir;
}
