// Programs quantized to fp16 / bf16 on the gpu target (issue 21): generated kernels load
// and store 16-bit tensors and compute in float, rounding each 16-bit node once as the
// reference does; kiln_device.h's conversions agree with the reference's bit for bit.
#include "gpu_test_util.hpp"

#include "targets/gpu/codegen/device_header.hpp"
#include "targets/gpu/host_fallback.hpp"
#include "targets/gpu/kernels/cudnn_conv.hpp"
#include "targets/gpu/kernels/lt_matmul.hpp"

#include <kiln/float_types.hpp>
#include <kiln/onnx.hpp>
#include <kiln/quantization.hpp>

#include <dlfcn.h>

#include <bit>
#include <filesystem>
#include <iostream>

using namespace kiln;
using namespace kiln::gpu_test;

namespace {

void quantize(program& p, type t) {
    if (t == type::float16) quantize_fp16(p);
    else quantize_bf16(p);
}

// Host wrappers of the header's conversions, built by the same host compile as kernels.
const char* conversion_source = R"(#include "kiln_device.h"
#define KILN_EXPORT extern "C" __attribute__((visibility("default")))
KILN_EXPORT unsigned short kiln_test_f2h(float x) { return kiln_f2h(x).bits; }
KILN_EXPORT unsigned short kiln_test_f2b(float x) { return kiln_f2b(x).bits; }
KILN_EXPORT unsigned short kiln_test_d2h(double x) { return kiln_d2h(x).bits; }
KILN_EXPORT unsigned short kiln_test_d2b(double x) { return kiln_d2b(x).bits; }
KILN_EXPORT float kiln_test_h2f(unsigned short b) { kiln_half h; h.bits = b; return kiln_ld(h); }
KILN_EXPORT float kiln_test_b2f(unsigned short b) { kiln_bf16 h; h.bits = b; return kiln_ld(h); }
)";

}  // namespace

// The host build's software conversions are the reference's: every 16-bit pattern widens
// to the same float, and floats near every rounding boundary (and doubles between floats)
// round to the same bits. The device build uses PTX cvt.rn (the same IEEE rounding).
TEST(gpu_fp16, device_header_conversions_are_the_references) {
    gpu_test::host_library lib(conversion_source);
    ASSERT_TRUE(lib.ok());
    auto* h = lib.handle();
    auto f2h = reinterpret_cast<unsigned short (*)(float)>(::dlsym(h, "kiln_test_f2h"));
    auto f2b = reinterpret_cast<unsigned short (*)(float)>(::dlsym(h, "kiln_test_f2b"));
    auto d2h = reinterpret_cast<unsigned short (*)(double)>(::dlsym(h, "kiln_test_d2h"));
    auto d2b = reinterpret_cast<unsigned short (*)(double)>(::dlsym(h, "kiln_test_d2b"));
    auto h2f = reinterpret_cast<float (*)(unsigned short)>(::dlsym(h, "kiln_test_h2f"));
    auto b2f = reinterpret_cast<float (*)(unsigned short)>(::dlsym(h, "kiln_test_b2f"));
    ASSERT_TRUE(f2h && f2b && d2h && d2b && h2f && b2f);
    std::size_t bad = 0;
    for (std::uint32_t b = 0; b < 0x10000 && bad < 10; ++b) {
        const auto u = static_cast<std::uint16_t>(b);
        const float wh = half::from_bits(u), wb = bfloat16::from_bits(u);
        if (std::bit_cast<std::uint32_t>(h2f(u)) != std::bit_cast<std::uint32_t>(wh)) ++bad, ADD_FAILURE() << "h2f " << b;
        if (std::bit_cast<std::uint32_t>(b2f(u)) != std::bit_cast<std::uint32_t>(wb)) ++bad, ADD_FAILURE() << "b2f " << b;
    }
    // Every float whose low 16 bits are one of the patterns around the fp16 (13 bits) and
    // bf16 (16 bits) rounding points, over every exponent and sign.
    const std::uint32_t lows[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x3000,
                                  0x7fff, 0x8000, 0x8001, 0xffff, 0x5000, 0xb000, 0xe000};
    std::size_t checked = 0;
    for (std::uint32_t hi = 0; hi < 0x10000 && bad < 10; ++hi)
        for (auto lo : lows) {
            const float x = std::bit_cast<float>((hi << 16) | lo);
            ++checked;
            if (f2h(x) != half(x).bits) ++bad, ADD_FAILURE() << "f2h " << std::hexfloat << x;
            if (f2b(x) != bfloat16(x).bits) ++bad, ADD_FAILURE() << "f2b " << std::hexfloat << x;
            // A double just above and below the float: single rounding from double.
            const double d = static_cast<double>(x);
            for (double e : {std::nextafter(d, 0.0), std::nextafter(d, 1e300)})
                if (d2h(e) != half(e).bits || d2b(e) != bfloat16(e).bits)
                    ++bad, ADD_FAILURE() << "d2h/d2b " << std::hexfloat << e;
        }
    EXPECT_EQ(bad, 0u);
    std::cout << "[ gpu fp16 ] " << checked << " floats and 65536 patterns per format agree with kiln::half/bfloat16\n";
}

// Every op the generator handles, in fp16 and bf16: each op's inputs and result 16-bit.
TEST(gpu_fp16, every_op_in_16_bits_compiles_for_sm90_and_matches_the_reference) {
    for (type t : {type::float16, type::bfloat16}) {
        SCOPED_TRACE(type_name(t));
        program p;
        auto* m = p.get_main_module();
        std::vector<instruction_ref> results;
        std::size_t k = 0, cases = 0;
        for (const auto& c : op_cases()) {
            std::vector<instruction_ref> args;
            for (std::size_t i = 0; i < c.inputs.size(); ++i) {
                const bool full = i == 0 || std::string(c.name) == "swiglu";
                const type it = c.inputs[i] == type::float32 ? t : c.inputs[i];
                args.push_back(m->add_parameter("x" + std::to_string(k++),
                                                shape(it, full ? std::vector<std::size_t>{3, 37} : std::vector<std::size_t>{37})));
            }
            results.push_back(m->add_instruction(make_op(c.name), args));
            ++cases;
        }
        // Converts into and out of 16 bits.
        auto f = m->add_parameter("f", shape(type::float32, {3, 37}));
        auto narrowed = m->add_instruction(make_op("convert", {{"target_type", static_cast<std::int64_t>(t)}}), {f});
        results.push_back(m->add_instruction(make_op("convert", {{"target_type", static_cast<std::int64_t>(type::float32)}}),
                                             {m->add_instruction(make_op("relu"), {narrowed})}));
        m->add_return(results);
        compile_options o;
        o.memory_planning = false;
        compile_for_gpu(p, o);
        const auto rep = check_kernels(*p.get_main_module(), std::string("every op, ") + std::string(type_name(t)));
        EXPECT_GE(rep.kernels, cases) << "an op did not become a generated kernel";
        std::cout << "[ gpu fp16 ] every op " << type_name(t) << ": " << rep.kernels << " kernels, " << rep.elements16
                  << " 16-bit results, " << rep.off16 << " not bit-equal, max " << rep.max_ulp16 << " ulp\n";
    }
}

// Every fused kernel of the shared models after quantize_fp16 / quantize_bf16: NVRTC for
// sm_90 without spills, and the host build against the reference on the same 16-bit program.
TEST(gpu_fp16, every_fused_kernel_of_the_quantized_models) {
    std::size_t models = 0;
    for (type t : {type::float16, type::bfloat16})
        for (const char* name : {"bert_small", "vit_tiny", "resnet50", "mobilenet_v2"}) {
            if (!std::filesystem::exists(model_file(name))) continue;
            SCOPED_TRACE(std::string(name) + " " + std::string(type_name(t)));
            auto p = parse_model(name);
            quantize(p, t);
            compile_options o;
            o.memory_planning = false;
            compile_for_gpu(p, o);
            std::size_t sixteen = 0;
            for (auto ins : gpu_kernels(*p.get_main_module())) {
                for (auto in : ins->inputs())
                    if (in->get_shape().get_type() == t) {
                        ++sixteen;
                        break;
                    }
            }
            const auto rep = check_kernels(*p.get_main_module(), name);
            std::cout << "[ gpu fp16 ] " << name << " " << type_name(t) << ": " << rep.kernels << " kernels ("
                      << sixteen << " reading 16-bit tensors), " << rep.distinct << " distinct, " << rep.elements16
                      << " 16-bit results checked, " << rep.off16 << " not bit-equal, max " << rep.max_ulp16
                      << " ulp\n";
            EXPECT_GT(sixteen, 0u) << name;
            ++models;
        }
    if (models == 0) GTEST_SKIP() << "no shared models";
}

// The cpu target is unchanged: it widens 16-bit programs first, and its fusion never takes
// a 16-bit instruction (kernel_can_run without float16).
TEST(gpu_fp16, kernel_can_run_takes_16_bits_only_when_asked) {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(type::float16, {4, 8}));
    auto r = m->add_instruction(make_op("relu"), {x});
    m->add_return({r});
    EXPECT_FALSE(kiln::codegen::kernel_can_run(r));
    EXPECT_TRUE(kiln::codegen::kernel_can_run(r, true));
}

// cuBLASLt for 16-bit products: A/B/C/D in the operands' type, fp32 accumulation
// (CUBLAS_COMPUTE_32F) and float alpha/beta; TF32 only for float32 and only when asked.
TEST(gpu_fp16, cublaslt_types_accumulate_in_fp32) {
    EXPECT_EQ(gpu::lt_descriptor_types(type::float32, false).text, "A/B/C/D CUDA_R_32F, compute CUBLAS_COMPUTE_32F, scale CUDA_R_32F");
    EXPECT_EQ(gpu::lt_descriptor_types(type::float32, true).text,
              "A/B/C/D CUDA_R_32F, compute CUBLAS_COMPUTE_32F_FAST_TF32, scale CUDA_R_32F");
    for (bool tf32 : {false, true}) {
        EXPECT_EQ(gpu::lt_descriptor_types(type::float16, tf32).text, "A/B/C/D CUDA_R_16F, compute CUBLAS_COMPUTE_32F, scale CUDA_R_32F");
        EXPECT_EQ(gpu::lt_descriptor_types(type::bfloat16, tf32).text, "A/B/C/D CUDA_R_16BF, compute CUBLAS_COMPUTE_32F, scale CUDA_R_32F");
    }
    // The CUDA enum values (library_types.h, cublas_api.h).
    const auto h = gpu::lt_descriptor_types(type::float16, false);
    EXPECT_EQ(h.data, 2);      // CUDA_R_16F
    EXPECT_EQ(h.compute, 68);  // CUBLAS_COMPUTE_32F
    EXPECT_EQ(h.scale, 0);     // CUDA_R_32F
    EXPECT_EQ(gpu::lt_descriptor_types(type::bfloat16, false).data, 14);  // CUDA_R_16BF
    EXPECT_EQ(gpu::lt_descriptor_types(type::float32, true).compute, 77);  // CUBLAS_COMPUTE_32F_FAST_TF32
    EXPECT_THROW((void)gpu::lt_descriptor_types(type::int8, false), error);
}

// plan_lt counts elements, so 16-bit layouts are the float32 ones: attention's head views
// and K^T, a batch folded into rows, a transposed weight.
TEST(gpu_fp16, plan_lt_describes_16_bit_layouts) {
    for (type t : {type::float16, type::bfloat16}) {
        const shape head(t, {1, 4, 128, 64}, {32768, 64, 256, 1});
        const shape head_t(t, {1, 4, 64, 128}, {32768, 64, 1, 256});
        auto qk = gpu::plan_lt(head, head_t, shape(t, {1, 4, 128, 128}), false, false);
        EXPECT_EQ(qk.batch, 4);
        EXPECT_EQ(qk.second.ld, 256);
        EXPECT_EQ(qk.second.batch_stride, 64);
        EXPECT_TRUE(qk.first.transposed);
        EXPECT_EQ(qk.k, 64u);
        auto f = gpu::plan_lt(shape(t, {3, 128, 256}), shape(t, {256, 64}), shape(t, {3, 128, 64}), false, false);
        EXPECT_EQ(f.batch, 1);
        EXPECT_EQ(f.n, 384u);
        auto w = gpu::plan_lt(shape(t, {8, 2048}), shape(t, {1000, 2048}), shape(t, {8, 1000}), false, true);
        EXPECT_TRUE(w.first.transposed);
        EXPECT_EQ(w.first.ld, 2048);
        EXPECT_EQ(w.m, 1000u);
        EXPECT_EQ(w.n, 8u);
    }
}

// 16-bit matmul and gemm (with its bias epilogue) go to cuBLASLt in 16 bits; a float32
// product beside them stays float32.
TEST(gpu_fp16, sixteen_bit_products_become_cublaslt) {
    for (type t : {type::float16, type::bfloat16}) {
        program p;
        auto* m = p.get_main_module();
        auto x = m->add_parameter("x", shape(t, {4, 64}));
        auto w = m->add_parameter("w", shape(t, {64, 32}));
        auto c = m->add_parameter("c", shape(t, {32}));
        auto xf = m->add_parameter("xf", shape(type::float32, {4, 64}));
        auto mm = m->add_instruction(make_op("matmul"), {x, w});
        auto gm = m->add_instruction(make_op("gemm", {{"alpha", 0.5}, {"beta", 1.0}}), {x, w, c});
        auto mixed = m->add_instruction(make_op("matmul"), {xf, m->add_instruction(make_op("convert", {{"target_type", static_cast<std::int64_t>(type::float32)}}), {w})});
        m->add_return({mm, gm, mixed});
        compile_for_gpu(p);
        std::size_t sixteen = 0, bias = 0;
        for (auto& ins : *p.get_main_module()) {
            if (!ins.get_operator().any_cast<gpu::lt_matmul>()) continue;
            if (ins.get_shape().get_type() == t) ++sixteen;
            if (ins.get_operator().get<gpu::lt_matmul>().bias) ++bias;
            EXPECT_FALSE(ins.get_operator().get<gpu::lt_matmul>().tf32) << "strict by default";
        }
        EXPECT_EQ(sixteen, 2u) << *p.get_main_module();
        EXPECT_EQ(bias, 1u);
    }
}

// cuDNN for 16-bit convolutions: half/bf16 tensors, float compute, NCHW; engines may use
// tensor cores (fp32 sums) but never reduced-precision sums; float32 stays strict unless tf32.
TEST(gpu_fp16, cudnn_types_and_engine_notes) {
    EXPECT_EQ(gpu::cudnn_types_of(type::float16).text, "x/w/y CUDNN_DATA_HALF, compute CUDNN_DATA_FLOAT, NCHW");
    EXPECT_EQ(gpu::cudnn_types_of(type::bfloat16).text, "x/w/y CUDNN_DATA_BFLOAT16, compute CUDNN_DATA_FLOAT, NCHW");
    EXPECT_EQ(gpu::cudnn_types_of(type::float32).text, "x/w/y CUDNN_DATA_FLOAT, compute CUDNN_DATA_FLOAT, NCHW");
    EXPECT_EQ(gpu::cudnn_types_of(type::float16).data, 2);      // CUDNN_DATA_HALF
    EXPECT_EQ(gpu::cudnn_types_of(type::bfloat16).data, 9);     // CUDNN_DATA_BFLOAT16
    EXPECT_EQ(gpu::cudnn_types_of(type::float16).compute, 0);   // CUDNN_DATA_FLOAT
    EXPECT_THROW((void)gpu::cudnn_types_of(type::int8), error);
    using gpu::cudnn_note;
    for (type t : {type::float16, type::bfloat16})
        for (bool tf32 : {false, true}) {
            EXPECT_TRUE(gpu::cudnn_note_allowed(cudnn_note::tensor_core, t, tf32));
            EXPECT_FALSE(gpu::cudnn_note_allowed(cudnn_note::reduced_precision_reduction, t, tf32));
            EXPECT_FALSE(gpu::cudnn_note_allowed(cudnn_note::down_convert_inputs, t, tf32));
            EXPECT_FALSE(gpu::cudnn_note_allowed(cudnn_note::winograd, t, tf32));
            EXPECT_FALSE(gpu::cudnn_note_allowed(cudnn_note::fft, t, tf32));
            EXPECT_TRUE(gpu::cudnn_note_allowed(cudnn_note::other, t, tf32));
        }
    EXPECT_FALSE(gpu::cudnn_note_allowed(cudnn_note::tensor_core, type::float32, false));
    EXPECT_TRUE(gpu::cudnn_note_allowed(cudnn_note::tensor_core, type::float32, true));
    EXPECT_FALSE(gpu::cudnn_note_allowed(cudnn_note::reduced_precision_reduction, type::float32, true));
}

// A 16-bit convolution becomes gpu::cudnn_conv (its bias moved to a 16-bit generated epilogue).
TEST(gpu_fp16, sixteen_bit_convolutions_become_cudnn) {
    for (type t : {type::float16, type::bfloat16}) {
        program p;
        auto* m = p.get_main_module();
        auto x = m->add_parameter("x", shape(t, {1, 8, 16, 16}));
        auto w = m->add_parameter("w", shape(t, {16, 8, 3, 3}));
        auto b = m->add_parameter("b", shape(t, {16}));
        auto y = m->add_instruction(make_op("convolution", {{"padding", ints({1, 1, 1, 1})}}), {x, w, b});
        m->add_return({m->add_instruction(make_op("relu"), {y})});
        compile_for_gpu(p);
        std::size_t convs = 0, kernels = 0;
        for (auto& ins : *p.get_main_module()) {
            if (ins.get_operator().any_cast<gpu::cudnn_conv>()) {
                ++convs;
                EXPECT_EQ(ins.get_shape().get_type(), t);
                EXPECT_FALSE(ins.get_operator().get<gpu::cudnn_conv>().tf32);
            }
            if (ins.get_operator().any_cast<gpu::fused_kernel>()) ++kernels;
            EXPECT_FALSE(ins.get_operator().any_cast<gpu::host_kernel>()) << *p.get_main_module();
        }
        EXPECT_EQ(convs, 1u) << *p.get_main_module();
        EXPECT_EQ(kernels, 1u) << "bias + relu in one 16-bit kernel";
    }
}

// compile_options::tf32 reaches cuBLASLt and cuDNN (float32 products and convolutions may
// use TF32 tensor cores); without it both stay strict.
TEST(gpu_fp16, tf32_is_a_compile_option_and_strict_is_the_default) {
    for (bool tf32 : {false, true}) {
        program p;
        auto* m = p.get_main_module();
        auto x = m->add_parameter("x", shape(type::float32, {1, 8, 16, 16}));
        auto w = m->add_parameter("w", shape(type::float32, {16, 8, 3, 3}));
        auto a = m->add_parameter("a", shape(type::float32, {4, 64}));
        auto b = m->add_parameter("b", shape(type::float32, {64, 32}));
        m->add_return({m->add_instruction(make_op("convolution"), {x, w}), m->add_instruction(make_op("matmul"), {a, b})});
        compile_options o;
        o.tf32 = tf32;
        compile_for_gpu(p, o);
        std::size_t lt = 0, conv = 0;
        for (auto& ins : *p.get_main_module()) {
            if (const auto* k = ins.get_operator().any_cast<gpu::lt_matmul>()) {
                ++lt;
                EXPECT_EQ(k->tf32, tf32);
                EXPECT_EQ(ins.get_operator().to_value().at("tf32").get_bool(), tf32) << "saved with the op";
            }
            if (const auto* k = ins.get_operator().any_cast<gpu::cudnn_conv>()) {
                ++conv;
                EXPECT_EQ(k->tf32, tf32);
            }
        }
        EXPECT_EQ(lt, 1u);
        EXPECT_EQ(conv, 1u);
    }
}
