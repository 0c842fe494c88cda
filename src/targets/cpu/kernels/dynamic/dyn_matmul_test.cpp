// cpu::dyn_matmul (a generic program's float32 matmul, sizes at run time through oneDNN's
// sgemm) against the reference matmul: row-major, transposed and strided views, broadcast
// batch dims, empty results and K = 0; and a dynamic program's matmuls on the cpu target
// become cpu::dyn_matmul and match ref at several sizes.
#include "cpu_test_util.hpp"

#include "ops/nn_matmul.hpp"
#include "ops/tensor_views.hpp"
#include "targets/cpu/cpu_features.hpp"
#include "targets/cpu/kernels/dynamic/dyn_matmul.hpp"

#include <kiln/program.hpp>
#include <kiln/serialize.hpp>

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

argument run_both(const argument& a, const argument& b) {
    host_context ctx;
    auto out = op::matmul{}.compute_shape({a.get_shape(), b.get_shape()});
    auto want = op::matmul{}.compute(out, {a, b});
    auto got = cpu::dyn_matmul{}.compute(ctx, out, {a, b});
    EXPECT_EQ(got.get_shape().lens(), want.get_shape().lens());
    expect_close(got, want);
    return got;
}

argument random_arg(const std::vector<std::size_t>& lens) { return random_literal(lens).get_argument(); }

// p for cpu and r for ref, every call of p on its generic program.
::testing::AssertionResult compile_generic(program& p, program& r) {
    compile_options o;
    o.specialize_after = 0;
    p.compile(*get_target("cpu"), o);
    r.compile(*get_target("ref"), o);
    if (p.get_specialization_stats().generic) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << p.get_specialization_stats().generic_unavailable;
}

// A view of `a` with its last two dims swapped (strides swapped, no copy).
argument swapped(const argument& a) {
    auto l = a.get_shape().lens();
    auto st = a.get_shape().strides();
    std::swap(l[l.size() - 1], l[l.size() - 2]);
    std::swap(st[st.size() - 1], st[st.size() - 2]);
    return a.view(shape(type::float32, l, st));
}

}  // namespace

TEST(cpu_dyn_matmul, row_major_and_batched) {
    run_both(random_arg({5, 7}), random_arg({7, 3}));
    run_both(random_arg({1, 16}), random_arg({16, 41}));
    run_both(random_arg({2, 4, 3, 16}), random_arg({2, 4, 16, 9}));
}

TEST(cpu_dyn_matmul, transposed_views_are_read_in_place) {
    auto kt = random_arg({1, 4, 41, 16});  // K of attention, its last two dims swapped: Q K^T
    run_both(random_arg({1, 4, 1, 16}), swapped(kt));
    run_both(swapped(random_arg({6, 5})), random_arg({6, 2}));
    run_both(swapped(random_arg({3, 6, 5})), swapped(random_arg({3, 4, 6})));
}

TEST(cpu_dyn_matmul, broadcast_batch_dims) {
    run_both(random_arg({3, 1, 4, 5}), random_arg({2, 5, 6}));
    run_both(random_arg({4, 5}), random_arg({3, 2, 5, 6}));
}

TEST(cpu_dyn_matmul, strided_views_are_copied) {
    // Every other column: neither rows nor columns are contiguous.
    auto a = random_arg({4, 10});
    auto cols = a.view(shape(type::float32, {4, 5}, {10, 2}));
    run_both(cols, random_arg({5, 3}));
}

TEST(cpu_dyn_matmul, empty_and_zero_depth) {
    auto e = run_both(random_arg({0, 4}), random_arg({4, 3}));
    EXPECT_EQ(e.get_shape().elements(), 0u);
    auto z = run_both(argument(shape(type::float32, {3, 0})), argument(shape(type::float32, {0, 2})));
    for (float v : z.to_vector<float>()) EXPECT_EQ(v, 0.0f);
}

// A program with a dynamic row count: its matmul (x W, then (x W) x^T) is a
// cpu::dyn_matmul in the generic program and matches ref at every size.
TEST(cpu_dyn_matmul, generic_program_matmuls_match_ref) {
    const auto weights = random_literal({8, 5});
    auto make = [&] {
        program p;
        auto* m = p.get_main_module();
        auto x = m->add_parameter("x", shape::make_dynamic(type::float32, {{1, 64, {}}, {8, 8, {}}}));
        auto w = m->add_literal(weights);
        auto xw = m->add_instruction(op::matmul{}, {x, w});
        auto xt = m->add_instruction(op::transpose{{1, 0}}, {x});
        m->add_return({xw, m->add_instruction(op::matmul{}, {x, xt})});
        return p;
    };
    auto p = make(), r = make();
    ASSERT_TRUE(compile_generic(p, r));
    for (std::size_t rows : {1, 3, 17, 64}) {
        auto x = random_arg({rows, 8});
        auto got = p.eval({{"x", x}});
        auto want = r.eval({{"x", x}});
        ASSERT_EQ(got.size(), 2u);
        for (std::size_t i = 0; i < 2; ++i) expect_close(got[i], want[i]);
    }
    EXPECT_EQ(p.get_specialization_stats().compiles, 0u);
    std::vector<instruction_profile> profile;
    p.eval({{"x", random_arg({5, 8})}}, profile);
    std::size_t dyn = 0;
    for (auto& e : profile) dyn += e.op_name == "cpu::dyn_matmul";
    EXPECT_EQ(dyn, 2u);
}

// A classifier's last layer with a dynamic batch (Gemm, transB, bias): a cpu::dyn_matmul
// plus the bias in the generic program, matching ref at every batch.
TEST(cpu_dyn_matmul, generic_program_gemm_matches_ref) {
    const auto weights = random_literal({6, 8});  // [N, K], read transposed
    const auto bias = random_literal({6});
    auto make = [&] {
        program p;
        auto* m = p.get_main_module();
        auto x = m->add_parameter("x", shape::make_dynamic(type::float32, {{1, 64, {}}, {8, 8, {}}}));
        m->add_return({m->add_instruction(make_op("gemm", {{"trans_b", true}}),
                                          {x, m->add_literal(weights), m->add_literal(bias)})});
        return p;
    };
    auto p = make(), r = make();
    ASSERT_TRUE(compile_generic(p, r));
    for (std::size_t rows : {1, 3, 40}) {
        auto x = random_arg({rows, 8});
        expect_close(p.eval({{"x", x}})[0], r.eval({{"x", x}})[0]);
    }
    std::vector<instruction_profile> profile;
    p.eval({{"x", random_arg({5, 8})}}, profile);
    std::size_t dyn = 0, gemm = 0;
    for (auto& e : profile) {
        dyn += e.op_name == "cpu::dyn_matmul";
        gemm += e.op_name == "gemm";
    }
    EXPECT_EQ(dyn, 1u);
    EXPECT_EQ(gemm, 0u);
}

// Constant weights: the packed form (packed_gemm's panels, rows counted at run time), at
// depth 1024 too, where A's rows are copied to padded ones (4 KiB apart otherwise), and
// with A a transposed view (copied row-major first); ref at every size.
TEST(cpu_dyn_matmul, constant_weights_run_packed_at_every_size) {
    for (std::size_t depth : {24, 1024}) {
        const auto weights = random_literal({depth, 20});
        auto make = [&] {
            program p;
            auto* m = p.get_main_module();
            const dynamic_dimension rows{1, 64, {}, "rows"};
            auto x = m->add_parameter("x", shape::make_dynamic(type::float32, {{2, 2, {}, {}}, rows, {depth, depth, {}, {}}}));
            auto xt = m->add_parameter("xt", shape::make_dynamic(type::float32, {{depth, depth, {}, {}}, rows}));
            auto w = m->add_literal(weights);
            m->add_return({m->add_instruction(op::matmul{}, {x, w}),
                           m->add_instruction(op::matmul{}, {m->add_instruction(op::transpose{{1, 0}}, {xt}), w})});
            return p;
        };
        auto p = make(), r = make();
        ASSERT_TRUE(compile_generic(p, r));
        for (std::size_t rows : {1, 5, 30, 64}) {
            const param_map in = {{"x", random_arg({2, rows, depth})}, {"xt", random_arg({depth, rows})}};
            auto got = p.eval(in);
            auto want = r.eval(in);
            for (std::size_t i = 0; i < 2; ++i) {
                EXPECT_EQ(got[i].get_shape().lens(), want[i].get_shape().lens());
                expect_close(got[i], want[i]);
            }
        }
        std::vector<instruction_profile> profile;
        p.eval({{"x", random_arg({2, 3, depth})}, {"xt", random_arg({depth, 3})}}, profile);
        std::size_t packed = 0;
        for (auto& e : profile) packed += e.op_name == "cpu::dyn_matmul" && e.op_text.find("packed_n=20") != std::string::npos;
        if (cpu::has_avx2_fma()) {
            EXPECT_EQ(packed, 2u) << "depth " << depth;
        }
    }
}

namespace {

// A transformer MLP with a generic program's sizes: x W1 + b1, the exported erf GELU,
// then x + (h W2 + b2), the residual read in place by the second product's epilogue.
// With `late_residual`, the residual is computed after the product (so the epilogue
// stops before it); with `unnamed_rows`, its rows have no name (no epilogue may rely on
// them being the product's).
program mlp(const literal& w1, const literal& b1, const literal& w2, const literal& b2, bool late_residual,
            bool unnamed_rows) {
    program p;
    auto* m = p.get_main_module();
    const dynamic_dimension rows = unnamed_rows ? dynamic_dimension{1, 64, {}, {}} : dynamic_dimension{1, 64, {}, "rows"};
    const dynamic_dimension width{16, 16, {}, {}};
    auto x = m->add_parameter("x", shape::make_dynamic(type::float32, {{1, 1, {}, {}}, rows, width}));
    auto scalar = [&](float v) { return m->add_literal(literal(shape(type::float32), std::vector<float>{v})); };
    auto add = [&](instruction_ref a, instruction_ref b) { return m->add_instruction(make_op("add"), {a, b}); };
    auto mul = [&](instruction_ref a, instruction_ref b) { return m->add_instruction(make_op("mul"), {a, b}); };
    auto h = add(m->add_instruction(op::matmul{}, {x, m->add_literal(w1)}), m->add_literal(b1));
    auto erf = m->add_instruction(make_op("erf"), {m->add_instruction(make_op("div"), {h, scalar(1.41421356f)})});
    auto gelu = mul(mul(h, add(erf, scalar(1.0f))), scalar(0.5f));
    auto y = add(m->add_instruction(op::matmul{}, {gelu, m->add_literal(w2)}), m->add_literal(b2));
    auto residual = late_residual ? mul(x, scalar(2.0f)) : x;
    m->add_return({add(residual, y)});
    return p;
}

}  // namespace

// The bias, GELU and residual after a generic program's packed products run in their
// epilogue (no generated kernel left), at every size, against ref; a residual computed
// after the product, or rows without a name, end the epilogue there and still match.
TEST(cpu_dyn_matmul, epilogue_takes_bias_gelu_and_residual) {
    const auto w1 = random_literal({16, 40}), b1 = random_literal({40}), w2 = random_literal({40, 16}),
               b2 = random_literal({16});
    for (const bool late_residual : {false, true})
        for (const bool unnamed_rows : {false, true}) {
            SCOPED_TRACE(std::string(late_residual ? "residual after the product" : "residual before") +
                         (unnamed_rows ? ", unnamed rows" : ", named rows"));
            auto p = mlp(w1, b1, w2, b2, late_residual, unnamed_rows), r = p;
            ASSERT_TRUE(compile_generic(p, r));
            for (std::size_t rows : {1, 7, 33, 64}) {
                const param_map in = {{"x", random_arg({1, rows, 16})}};
                std::vector<instruction_profile> profile;
                auto got = p.eval(in, profile);
                auto want = r.eval(in);
                ASSERT_EQ(got[0].get_shape().lens(), want[0].get_shape().lens());
                expect_close(got[0], want[0], 1e-4, 1e-5);
                if (!cpu::has_avx2_fma()) continue;
                std::size_t generated = 0, packed = 0;
                for (auto& e : profile) {
                    generated += e.op_name == "cpu::fused_kernel" || e.op_name == "ref::kernel";
                    packed += e.op_name == "cpu::dyn_matmul" && e.op_text.find("packed_n") != std::string::npos;
                }
                EXPECT_EQ(packed, 2u);
                if (!late_residual && !unnamed_rows) EXPECT_EQ(generated, 0u) << "rows " << rows;
                else EXPECT_GE(generated, 1u) << "rows " << rows;
            }
            // Saved and loaded, the epilogue's attributes come back.
            const auto bytes = save_buffer(p);
            auto loaded = load_buffer(bytes.data(), bytes.size());
            const param_map in = {{"x", random_arg({1, 9, 16})}};
            expect_close(loaded.eval(in)[0], r.eval(in)[0], 1e-4, 1e-5);
        }
}
