// softmax(scale * Q K^T + mask) V on Kiln's fused kernel (cpu::attention) against the ref
// target: ViT's shape (heads from one QKV tensor through strided views, the context
// written in the transposed order), BERT's (a mask broadcast over the query rows, the
// scale as a division), a full per-row mask, cross attention with sizes that fill no
// panel, rank 3, fast_math off, the AVX2 kernels on AVX-512 machines and the baseline
// kernels, a saved program; and where it must not apply.
#include "cpu_test_util.hpp"

#include "targets/cpu/cpu_features.hpp"
#include "targets/cpu/kernels/packed_gemm/packed_gemm_args.hpp"

#include <kiln/quantization.hpp>
#include <kiln/serialize.hpp>

#include <algorithm>
#include <cmath>

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

value arr(const std::vector<std::int64_t>& v) { return value(value::array(v.begin(), v.end())); }

struct sizes {
    std::size_t batch = 1, heads = 3, sq = 197, sk = 197, d = 64, dv = 64;
};

// Q, K, V as independent [b, h, s, d] inputs; K transposed by a view; the context
// transposed and reshaped to [b, sq, h * dv] (the write-through order).
struct parts {
    builder b;
    instruction_ref q, kt, v;
};

parts inputs(const sizes& z) {
    parts p;
    p.q = p.b.param("q", {z.batch, z.heads, z.sq, z.d});
    auto k = p.b.param("k", {z.batch, z.heads, z.sk, z.d});
    p.kt = p.b.op("transpose", {{"perm", arr({0, 1, 3, 2})}}, {k});
    p.v = p.b.param("v", {z.batch, z.heads, z.sk, z.dv});
    return p;
}

void finish(parts& p, const sizes& z, instruction_ref probs) {
    auto ctx = p.b.op("matmul", {probs, p.v});
    auto t = p.b.op("transpose", {{"perm", arr({0, 2, 1, 3})}}, {ctx});
    auto r = p.b.op("reshape", {{"dims", arr({static_cast<std::int64_t>(z.batch), static_cast<std::int64_t>(z.sq),
                                              static_cast<std::int64_t>(z.heads * z.dv)})}},
                    {t});
    p.b.ret({r});
}

builder plain_attention(const sizes& z, float scale) {
    auto p = inputs(z);
    auto s = p.b.op("mul", {p.b.op("matmul", {p.q, p.kt}), p.b.scalar(scale)});
    finish(p, z, p.b.op("softmax", {{"axis", value(std::int64_t{3})}}, {s}));
    return p.b;
}

builder masked_attention(const sizes& z, const std::vector<std::size_t>& mask_lens, float divisor) {
    auto p = inputs(z);
    auto s = p.b.op("div", {p.b.op("matmul", {p.q, p.kt}), p.b.scalar(divisor)});
    auto m = p.b.param("mask", mask_lens, 4.0f);
    auto sm = p.b.op("add", {m, s});  // the mask first: either operand order
    finish(p, z, p.b.op("softmax", {{"axis", value(std::int64_t{-1})}}, {sm}));
    return p.b;
}

void expect_fused(const program& p) {
    EXPECT_EQ(count_ops(p, "cpu::attention"), 1u) << text(p);
    EXPECT_EQ(count_ops(p, "cpu::softmax"), 0u) << text(p);
    EXPECT_EQ(count_ops(p, "cpu::matmul"), 0u) << text(p);
    EXPECT_TRUE(ref_kernels(p).empty()) << text(p);
}

}  // namespace

TEST(cpu_attention, vit_shape_with_write_through_context) {
    sizes z;
    auto r = run_both(plain_attention(z, 0.125f), 1e-4, 1e-5);
    expect_fused(r.cpu);
    // The transpose after it reads row-major memory: no copy is left for the reshape.
    EXPECT_EQ(count_ops(r.cpu, "cpu::reorder"), 0u) << text(r.cpu);
}

TEST(cpu_attention, every_split_of_the_rows_between_threads_gives_the_same_values) {
    // Each thread takes an equal range of all heads' query rows (197 each: ranges that end
    // inside a head and inside a task) with K and V packed into its own scratch; a mask per
    // query row is read at the rows' own offsets. Every split computes each value the same
    // way: bit for bit what one thread gives.
    sizes z{1, 3, 197, 197, 64, 64};
    for (const bool masked : {false, true}) {
        const auto b = masked ? masked_attention(z, {1, 1, 197, 197}, 8.0f) : plain_attention(z, 0.125f);
        std::vector<float> alone;
        for (const std::size_t threads : {1, 2, 3}) {
            compile_options o;
            o.threads = threads;
            auto r = run_both(b, 1e-4, 1e-5, o);
            expect_fused(r.cpu);
            const auto got = r.cpu_out[0].to_vector<float>();
            if (threads == 1) alone = got;
            else EXPECT_EQ(got, alone) << threads << " threads, masked " << masked;
        }
    }
}

TEST(cpu_attention, bert_mask_over_keys_and_divided_scale) {
    sizes z{2, 4, 128, 128, 64, 64};
    auto r = run_both(masked_attention(z, {2, 1, 1, 128}, 8.0f), 1e-4, 1e-5);
    expect_fused(r.cpu);
}

TEST(cpu_attention, full_mask_per_query_row) {
    sizes z{1, 2, 40, 40, 32, 32};
    auto r = run_both(masked_attention(z, {1, 1, 40, 40}, 4.0f), 1e-4, 1e-5);
    expect_fused(r.cpu);
    auto r2 = run_both(masked_attention(z, {40, 40}, 4.0f), 1e-4, 1e-5);  // rank 2, broadcast over both batch dims
    expect_fused(r2.cpu);
}

TEST(cpu_attention, cross_attention_sizes_that_fill_no_panel) {
    // Sq 50 (three tasks, the last partial), Sk 37 (a partial panel and row tail), D 20, Dv 24.
    sizes z{1, 3, 50, 37, 20, 24};
    auto r = run_both(plain_attention(z, 0.3f), 1e-4, 1e-5);
    expect_fused(r.cpu);
    sizes one{1, 2, 1, 1, 8, 8};  // a single token (BERT at sequence length 1)
    auto r1 = run_both(plain_attention(one, 0.5f), 1e-4, 1e-5);
    expect_fused(r1.cpu);
}

TEST(cpu_attention, rank_3_heads_folded_into_the_batch) {
    builder b;
    auto q = b.param("q", {6, 30, 16});
    auto k = b.param("k", {6, 45, 16});
    auto v = b.param("v", {6, 45, 16});
    auto s = b.op("mul", {b.op("matmul", {q, b.op("transpose", {{"perm", arr({0, 2, 1})}}, {k})}), b.scalar(0.25f)});
    b.ret({b.op("matmul", {b.op("softmax", {{"axis", value(std::int64_t{2})}}, {s}), v})});
    auto r = run_both(b, 1e-4, 1e-5);
    expect_fused(r.cpu);
}

TEST(cpu_attention, exact_exp_and_baseline_kernels) {
    sizes z{1, 2, 30, 45, 16, 16};
    compile_options exact;
    exact.fast_math = false;
    auto r = run_both(masked_attention(z, {1, 1, 1, 45}, 4.0f), 1e-5, 1e-6, exact);
    expect_fused(r.cpu);
    EXPECT_NE(text(r.cpu).find("exact_exp=true"), std::string::npos) << text(r.cpu);
    {
        // On AVX-512 machines the AVX2 softmax rows and key packing, else the same kernels.
        test::env_override avx2("KILN_CPU_PACKED_GEMM_ISA", "avx2");
        auto a = run_both(masked_attention(z, {1, 1, 30, 45}, 4.0f), 1e-4, 1e-5);
        expect_fused(a.cpu);
        sizes wide{1, 2, 33, 70, 40, 24};  // keys and D past one 16 x 16 block, with tails
        auto w = run_both(plain_attention(wide, 0.2f), 1e-4, 1e-5);
        expect_fused(w.cpu);
    }
    sizes wide{1, 2, 33, 70, 40, 24};
    auto w = run_both(plain_attention(wide, 0.2f), 1e-4, 1e-5);
    expect_fused(w.cpu);
    test::env_override generic("KILN_CPU_PACKED_GEMM_ISA", "generic");
    auto g = run_both(masked_attention(z, {1, 1, 30, 45}, 4.0f), 1e-4, 1e-5);
    expect_fused(g.cpu);
}

TEST(cpu_attention, not_fused_where_it_does_not_apply) {
    sizes z{1, 2, 20, 20, 16, 16};
    {
        // The probabilities are a second output too.
        auto p = inputs(z);
        auto sm = p.b.op("softmax", {{"axis", value(std::int64_t{3})}}, {p.b.op("matmul", {p.q, p.kt})});
        auto ctx = p.b.op("matmul", {sm, p.v});
        p.b.ret({ctx, sm});
        auto r = run_both(p.b, 1e-4, 1e-5);
        EXPECT_EQ(count_ops(r.cpu, "cpu::attention"), 0u) << text(r.cpu);
    }
    {
        // Softmax over the query axis.
        auto p = inputs(z);
        auto sm = p.b.op("softmax", {{"axis", value(std::int64_t{2})}}, {p.b.op("matmul", {p.q, p.kt})});
        p.b.ret({p.b.op("matmul", {sm, p.v})});
        auto r = run_both(p.b, 1e-4, 1e-5);
        EXPECT_EQ(count_ops(r.cpu, "cpu::attention"), 0u) << text(r.cpu);
    }
    {
        // A scale that is not a constant.
        auto p = inputs(z);
        auto s = p.b.op("mul", {p.b.op("matmul", {p.q, p.kt}), p.b.param("scale", {1})});
        p.b.ret({p.b.op("matmul", {p.b.op("softmax", {{"axis", value(std::int64_t{3})}}, {s}), p.v})});
        auto r = run_both(p.b, 1e-4, 1e-5);
        EXPECT_EQ(count_ops(r.cpu, "cpu::attention"), 0u) << text(r.cpu);
    }
    test::env_override off("KILN_CPU_ATTENTION", "0");
    auto r = run_both(plain_attention(z, 0.25f), 1e-4, 1e-5);
    EXPECT_EQ(count_ops(r.cpu, "cpu::attention"), 0u) << text(r.cpu);
}

TEST(cpu_attention, saved_program_loads_and_runs) {
    auto b = masked_attention({1, 2, 30, 30, 16, 16}, {1, 1, 1, 30}, 4.0f);
    program ref = b.p;
    ref.compile(*get_target("ref"));
    program cpu = b.p;
    cpu.compile(*get_target("cpu"));
    ASSERT_EQ(count_ops(cpu, "cpu::attention"), 1u);
    const auto bytes = save_buffer(cpu);
    auto loaded = load_buffer(bytes.data(), bytes.size());
    EXPECT_EQ(count_ops(loaded, "cpu::attention"), 1u);
    auto got = loaded.eval(b.inputs);
    auto want = ref.eval(b.inputs);
    ASSERT_EQ(got.size(), 1u);
    expect_close(got[0], want[0], 1e-4, 1e-5);
}

namespace {

double rel_l2(const argument& got, const argument& want) {
    const auto g = got.to_vector<double>(), w = want.to_vector<double>();
    double num = 0, den = 0;
    for (std::size_t i = 0; i < w.size(); ++i) num += (g[i] - w[i]) * (g[i] - w[i]), den += w[i] * w[i];
    return std::sqrt(num / den);
}

}  // namespace

// A --bf16 program's attention (BERT's shape): where the packed GEMM's bf16 kernels run,
// both products take bf16 operands (Q, K, V and the probabilities rounded, as the bf16
// program says), which costs no more accuracy than the program itself (its ref target,
// rounding every op's result to bf16); KILN_CPU_BF16_ACTIVATIONS=0 keeps them float32;
// the saved program loads and runs where the bf16 kernels are capped off, in float32.
TEST(cpu_attention, bf16_program_products_in_bf16) {
    sizes z{2, 4, 128, 128, 64, 64};
    auto b = masked_attention(z, {2, 1, 1, 128}, 8.0f);
    program f32 = b.p;
    f32.compile(*get_target("ref"));
    const auto want = f32.eval(b.inputs)[0];
    quantize_bf16(b.p);
    program ref16 = b.p;
    ref16.compile(*get_target("ref"));
    const double program_error = rel_l2(ref16.eval(b.inputs)[0], want);
    program cpu = b.p;
    cpu.compile(*get_target("cpu"));
    ASSERT_EQ(count_ops(cpu, "cpu::attention"), 1u) << text(cpu);
    const bool native = cpu::pgemm::has_bf16_kernels(cpu::isa_cap::none);
    EXPECT_EQ(text(cpu).find("bf16=true") != std::string::npos, native) << text(cpu);
    const double error = rel_l2(cpu.eval(b.inputs)[0], want);
    std::cout << "bf16 attention: rel. L2 " << error << " against float32 (the program on ref: " << program_error
              << ")\n";
    EXPECT_LE(error, program_error) << "bf16 program on ref: " << program_error;
    if (native) {
        EXPECT_GT(error, 1e-4);  // the operands were rounded
    }
    {
        test::env_override off("KILN_CPU_BF16_ACTIVATIONS", "0");
        program wide = b.p;
        wide.compile(*get_target("cpu"));
        EXPECT_EQ(text(wide).find("bf16=true"), std::string::npos) << text(wide);
        EXPECT_LT(rel_l2(wide.eval(b.inputs)[0], want), 1e-5);
    }
    const auto bytes = save_buffer(cpu);
    test::env_override capped("KILN_CPU_PACKED_GEMM_ISA", "avx2");
    auto loaded = load_buffer(bytes.data(), bytes.size());
    EXPECT_LT(rel_l2(loaded.eval(b.inputs)[0], want), 1e-5);
}

namespace {

// A generic program's attention (batch and sequence known only when it runs): K as a
// transposed view (BERT's export) or, with `kt_plain`, a row-major [.., D, Sk] the kernel
// must copy; the mask over the keys or, with `mask_per_row`, one value per query row
// (broadcast along Sk: spelled out per call).
program generic_attention(bool kt_plain, bool mask_per_row) {
    const dynamic_dimension batch{1, 4, {}, "batch"}, seq{0, 96, {}, "seq"}, heads{2, 2, {}, {}}, d{16, 16, {}, {}},
        one{1, 1, {}, {}};
    program p;
    auto* m = p.get_main_module();
    auto param = [&](const std::string& name, std::vector<dynamic_dimension> dims) {
        return m->add_parameter(name, shape::make_dynamic(type::float32, std::move(dims)));
    };
    auto q = param("q", {batch, heads, seq, d});
    auto kt = kt_plain ? param("kt", {batch, heads, d, seq})
                       : m->add_instruction(make_op("transpose", {{"perm", arr({0, 1, 3, 2})}}),
                                            {param("k", {batch, heads, seq, d})});
    auto v = param("v", {batch, heads, seq, d});
    auto mask = mask_per_row ? param("mask", {batch, one, seq, one}) : param("mask", {batch, one, one, seq});
    auto four = m->add_literal(literal(shape(type::float32), std::vector<float>{4.0f}));
    auto s = m->add_instruction(make_op("div"), {m->add_instruction(make_op("matmul"), {q, kt}), four});
    auto sm = m->add_instruction(make_op("softmax", {{"axis", value(std::int64_t{-1})}}),
                                 {m->add_instruction(make_op("add"), {s, mask})});
    m->add_return({m->add_instruction(make_op("matmul"), {sm, v})});
    return p;
}

std::size_t runs_of(const std::vector<instruction_profile>& profile, const std::string& op) {
    return static_cast<std::size_t>(
        std::count_if(profile.begin(), profile.end(), [&](const auto& e) { return e.op_name == op; }));
}

param_map generic_inputs(bool kt_plain, bool mask_per_row, std::size_t b, std::size_t s) {
    auto arg = [](std::vector<std::size_t> lens) { return random_literal(lens).get_argument(); };
    param_map in{{"q", arg({b, 2, s, 16})}, {"v", arg({b, 2, s, 16})}};
    in[kt_plain ? "kt" : "k"] = kt_plain ? arg({b, 2, 16, s}) : arg({b, 2, s, 16});
    in["mask"] = mask_per_row ? arg({b, 1, s, 1}) : arg({b, 1, 1, s});
    return in;
}

}  // namespace

// Every call of the generic program on cpu::attention (no sgemm products, no softmax kernel),
// against the ref target at sizes the one program meets in turn, a single key and an empty
// sequence included.
TEST(cpu_attention, generic_program_runs_the_kernel_at_every_size) {
    for (const bool kt_plain : {false, true})
        for (const bool mask_per_row : {false, true}) {
            SCOPED_TRACE(std::string(kt_plain ? "kt row-major" : "kt a view") +
                         (mask_per_row ? ", mask per query row" : ", mask over keys"));
            compile_options o;
            o.specialize_after = 0;
            program cpu = generic_attention(kt_plain, mask_per_row), ref = cpu;
            cpu.compile(*get_target("cpu"), o);
            ref.compile(*get_target("ref"), o);
            ASSERT_TRUE(cpu.get_specialization_stats().generic) << cpu.get_specialization_stats().generic_unavailable;
            if (!cpu::has_avx2_fma()) continue;  // the kernel needs AVX2; the generated kernels run instead
            for (auto [b, s] : {std::pair<std::size_t, std::size_t>{1, 7}, {2, 33}, {1, 1}, {3, 96}, {2, 0}, {1, 50}}) {
                const auto in = generic_inputs(kt_plain, mask_per_row, b, s);
                std::vector<instruction_profile> profile;
                auto got = cpu.eval(in, profile);
                auto want = ref.eval(in);
                ASSERT_EQ(got.size(), 1u);
                expect_close(got[0], want[0], 1e-4, 1e-5, "batch " + std::to_string(b) + ", seq " + std::to_string(s));
                EXPECT_EQ(runs_of(profile, "cpu::attention"), 1u);
                EXPECT_EQ(runs_of(profile, "cpu::dyn_matmul"), 0u);
                EXPECT_EQ(runs_of(profile, "cpu::fused_kernel"), 0u);
            }
        }
}

// A decode step's attention: one query row (static) over keys and values of any length, on the
// generic kernel. Its result is static, so the ref lowering wraps it in a ref::kernel, which
// must let it build its kernels (it ran unfinalized: bench/decode.py's gpt_kv failed at its
// first step).
TEST(cpu_attention, generic_program_with_one_static_query_row) {
    const dynamic_dimension past{1, 64, {}, "past"}, one{1, 1, {}, {}}, heads{2, 2, {}, {}}, d{16, 16, {}, {}};
    program p;
    auto* m = p.get_main_module();
    auto q = m->add_parameter("q", shape(type::float32, {1, 2, 1, 16}));
    auto k = m->add_parameter("k", shape::make_dynamic(type::float32, {one, heads, past, d}));
    auto v = m->add_parameter("v", shape::make_dynamic(type::float32, {one, heads, past, d}));
    auto kt = m->add_instruction(make_op("transpose", {{"perm", arr({0, 1, 3, 2})}}), {k});
    auto four = m->add_literal(literal(shape(type::float32), std::vector<float>{4.0f}));
    auto s = m->add_instruction(make_op("div"), {m->add_instruction(make_op("matmul"), {q, kt}), four});
    auto sm = m->add_instruction(make_op("softmax", {{"axis", value(std::int64_t{-1})}}), {s});
    m->add_return({m->add_instruction(make_op("matmul"), {sm, v})});
    compile_options o;
    o.specialize_after = 0;
    program cpu = p, ref = p;
    cpu.compile(*get_target("cpu"), o);
    ref.compile(*get_target("ref"), o);
    for (const std::size_t keys : {1, 7, 40, 64}) {
        auto arg = [](std::vector<std::size_t> lens) { return random_literal(lens).get_argument(); };
        const param_map in{{"q", arg({1, 2, 1, 16})}, {"k", arg({1, 2, keys, 16})}, {"v", arg({1, 2, keys, 16})}};
        std::vector<instruction_profile> profile;
        auto got = cpu.eval(in, profile);
        auto want = ref.eval(in);
        ASSERT_EQ(got.size(), 1u);
        expect_close(got[0], want[0], 1e-4, 1e-5, std::to_string(keys) + " keys");
        if (cpu::has_avx2_fma()) {
            // Wrapped (its profile row "ref::kernel(cpu::attention)"), and nothing else left on
            // the reference kernels (the products, the softmax's reductions).
            EXPECT_EQ(runs_of(profile, "ref::kernel(cpu::attention)"), 1u) << keys << " keys";
            for (const auto& e : profile)
                EXPECT_TRUE(e.op_name.rfind("ref::kernel", 0) != 0 || e.op_name == "ref::kernel(cpu::attention)")
                    << e.op_name;
        }
    }
}

// A generic attention saved and loaded keeps its form and runs.
TEST(cpu_attention, generic_program_saved_and_loaded) {
    if (!cpu::has_avx2_fma()) GTEST_SKIP() << "the kernel needs AVX2 and FMA";
    compile_options o;
    o.specialize_after = 0;
    program cpu = generic_attention(false, false), ref = cpu;
    cpu.compile(*get_target("cpu"), o);
    ref.compile(*get_target("ref"), o);
    const auto bytes = save_buffer(cpu);
    auto loaded = load_buffer(bytes.data(), bytes.size());
    const auto in = generic_inputs(false, false, 2, 21);
    std::vector<instruction_profile> profile;
    expect_close(loaded.eval(in, profile)[0], ref.eval(in)[0], 1e-4, 1e-5);
    EXPECT_EQ(runs_of(profile, "cpu::attention"), 1u);
}

namespace {

// A causal mask as GPT-2 writes it: bool, true where a query may see the key (key <=
// query + the keys before the queries), broadcast over batch and heads.
literal causal(std::size_t sq, std::size_t sk) {
    std::vector<bool> keep(sq * sk);
    for (std::size_t i = 0; i < sq; ++i)
        for (std::size_t j = 0; j < sk; ++j) keep[i * sk + j] = j <= i + (sk - sq);
    std::vector<std::uint8_t> bytes(keep.begin(), keep.end());
    return literal(shape(type::bool_, {1, 1, sq, sk}), bytes.data());
}

}  // namespace

// softmax(where(mask, Q K^T * c, fill)) V, and where(mask, fill, .) with the mask inverted,
// on the kernel (no softmax kernel left), against ref; a row whose every key is masked
// (the fill everywhere: uniform probabilities) included.
TEST(cpu_attention, a_bool_mask_selecting_the_scores) {
    sizes z{1, 2, 9, 12, 16, 16};
    for (const bool fill_first : {false, true}) {
        SCOPED_TRACE(fill_first ? "where(mask, fill, scores)" : "where(mask, scores, fill)");
        auto p = inputs(z);
        auto mask = causal(z.sq, z.sk);
        auto values = mask.to_vector<std::uint8_t>();
        for (std::size_t j = 0; j < z.sk; ++j) values[j] = 0;  // query row 0 sees nothing
        if (fill_first)
            for (auto& v : values) v = v ? 0 : 1;
        auto m = p.b.m->add_literal(literal(mask.get_shape(), values.data()));
        auto s = p.b.op("mul", {p.b.op("matmul", {p.q, p.kt}), p.b.scalar(0.25f)});
        auto fill = p.b.scalar(-1e4f);
        auto sel = fill_first ? p.b.op("where", {m, fill, s}) : p.b.op("where", {m, s, fill});
        finish(p, z, p.b.op("softmax", {{"axis", value(std::int64_t{3})}}, {sel}));
        auto r = run_both(p.b, 1e-4, 1e-5);
        expect_fused(r.cpu);
    }
}

// A generic program's decoder attention (GPT-2's: the causal mask sliced from a constant
// [1, 1, 64, 64] by the past length) on the kernel at every step's size.
TEST(cpu_attention, generic_program_with_a_causal_select) {
    const dynamic_dimension batch{1, 2, {}, "batch"}, past{0, 48, {}, "past"}, seq{1, 16, {}, "seq"},
        heads{2, 2, {}, {}}, d{16, 16, {}, {}};
    auto make = [&] {
        program p;
        auto* m = p.get_main_module();
        auto param = [&](const std::string& name, std::vector<dynamic_dimension> dims) {
            return m->add_parameter(name, shape::make_dynamic(type::float32, std::move(dims)));
        };
        auto q = param("q", {batch, heads, seq, d});
        auto k = param("k", {batch, heads, past, d});
        auto knew = param("knew", {batch, heads, seq, d});
        auto kall = m->add_instruction(make_op("concat", {{"axis", value(std::int64_t{2})}}), {k, knew});
        auto kt = m->add_instruction(make_op("transpose", {{"perm", arr({0, 1, 3, 2})}}), {kall});
        auto v = param("v", {batch, heads, past, d});
        auto vall = m->add_instruction(make_op("concat", {{"axis", value(std::int64_t{2})}}), {v, param("vnew", {batch, heads, seq, d})});
        // The mask's rows past..past+seq and columns 0..past+seq of a constant causal table.
        auto table = m->add_literal(causal(64, 64));
        auto pk = m->add_instruction(make_op("shape_of"), {kall});
        auto pq = m->add_instruction(make_op("shape_of"), {q});
        auto one = [&](instruction_ref s, std::int64_t at) {
            return m->add_instruction(make_op("slice", {{"axes", arr({0})}, {"starts", arr({at})}, {"ends", arr({at + 1})}}), {s});
        };
        auto total = one(pk, 2), rows = one(pq, 2);
        auto start = m->add_instruction(make_op("sub"), {total, rows});
        auto zero = m->add_literal(literal(shape(type::int64, {1}), std::vector<std::int64_t>{0}));
        auto two = m->add_literal(literal(shape(type::int64, {1}), std::vector<std::int64_t>{2}));
        auto three = m->add_literal(literal(shape(type::int64, {1}), std::vector<std::int64_t>{3}));
        auto mrows = m->add_instruction(make_op("slice_dynamic"), {table, start, total, two});
        auto mask = m->add_instruction(make_op("slice_dynamic"), {mrows, zero, total, three});
        auto s = m->add_instruction(make_op("div"), {m->add_instruction(make_op("matmul"), {q, kt}),
                                                     m->add_literal(literal(shape(type::float32), std::vector<float>{4.0f}))});
        auto fill = m->add_literal(literal(shape(type::float32), std::vector<float>{-3.4e38f}));
        auto sm = m->add_instruction(make_op("softmax", {{"axis", value(std::int64_t{3})}}),
                                     {m->add_instruction(make_op("where"), {mask, s, fill})});
        m->add_return({m->add_instruction(make_op("matmul"), {sm, vall})});
        return p;
    };
    compile_options o;
    o.specialize_after = 0;
    program cpu = make(), ref = make();
    cpu.compile(*get_target("cpu"), o);
    ref.compile(*get_target("ref"), o);
    ASSERT_TRUE(cpu.get_specialization_stats().generic) << cpu.get_specialization_stats().generic_unavailable;
    auto arg = [](std::vector<std::size_t> lens) { return random_literal(lens).get_argument(); };
    for (auto [b, past_len, s] : {std::tuple<std::size_t, std::size_t, std::size_t>{1, 0, 7}, {1, 7, 1}, {2, 20, 3},
                                   {1, 47, 1}}) {
        const param_map in{{"q", arg({b, 2, s, 16})},        {"k", arg({b, 2, past_len, 16})},
                           {"knew", arg({b, 2, s, 16})},     {"v", arg({b, 2, past_len, 16})},
                           {"vnew", arg({b, 2, s, 16})}};
        std::vector<instruction_profile> profile;
        auto got = cpu.eval(in, profile);
        auto want = ref.eval(in);
        expect_close(got[0], want[0], 1e-4, 1e-5, "past " + std::to_string(past_len) + ", seq " + std::to_string(s));
        if (cpu::has_avx2_fma()) {
            EXPECT_EQ(runs_of(profile, "cpu::attention"), 1u);
        }
    }
}
