// Fused kernels over run-time sizes in a generic program (codegen/generic_layout.hpp,
// codegen/spell_out_softmax.hpp) against the reference target, at sizes the one program
// meets in turn; and the arguments the layout did not foresee (a dim broadcast at run
// time, a strided view), which must fall back to the reference computation.
#include "cpu_codegen_util.hpp"

#include "targets/cpu/codegen/compiler.hpp"
#include "targets/cpu/codegen/generic_layout.hpp"

#include <kiln/builtin_ops.hpp>

#include <map>

using namespace kiln;
using namespace kiln::test;

namespace {

const dynamic_dimension batch{1, 8, {}, "batch"};
const dynamic_dimension seq{1, 64, {}, "seq"};

bool have_compiler() { return cpu::codegen::find_compiler(cpu::read_cpu_options({})).has_value(); }

// A transformer layer's memory-bound work with dynamic batch and sequence: layer norm
// spelled out, GELU after a bias, the scores' scale and mask with softmax and log_softmax.
program block(const dynamic_dimension& batch = ::batch, const dynamic_dimension& seq = ::seq) {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape::make_dynamic(type::float32, {batch, seq, {16, 16, {}, {}}}));
    auto mask = m->add_parameter("mask", shape::make_dynamic(type::float32, {batch, {1, 1, {}, {}}, seq}));
    auto g = m->add_literal(literal(shape(type::float32, {16}), random_arg(shape(type::float32, {16}), 7).to_vector<float>()));
    auto ln = layer_norm(*m, x, g, scalar(*m, 0.25f));
    auto act = gelu(*m, add_op(*m, "add", {ln, g}));
    auto xt = m->add_instruction(make_op("transpose", {{"perm", {0, 2, 1}}}), {x});
    auto scores = add_op(*m, "add", {add_op(*m, "div", {add_op(*m, "matmul", {x, xt}), scalar(*m, 4.0f)}), mask});
    auto sm = add_op(*m, "softmax", {scores}, {{"axis", 2}});
    auto lsm = add_op(*m, "log_softmax", {scores}, {{"axis", 2}});
    m->add_return({act, sm, lsm});
    return p;
}

param_map block_inputs(std::size_t b, std::size_t s, unsigned seed) {
    auto mask = random_arg(shape(type::float32, {b, 1, s}), seed + 1, -3.0f, 0.0f).to_vector<float>();
    for (std::size_t i = 0; i < mask.size(); i += 5) mask[i] = -1e9f;  // masked positions
    return {{"x", random_arg(shape(type::float32, {b, s, 16}), seed)},
            {"mask", literal(shape(type::float32, {b, 1, s}), mask).get_argument()}};
}

// p for cpu and r for ref, every call of p on its generic program.
void compile_generic(program& p, program& r, compile_options o = {}) {
    o.specialize_after = 0;
    p.compile(*get_target("cpu"), o);
    r.compile(*get_target("ref"), o);
    EXPECT_TRUE(p.get_specialization_stats().generic) << p.get_specialization_stats().generic_unavailable;
}

}  // namespace

TEST(cpu_codegen_generic, layout_groups_dims_each_tensor_reads_alike) {
    using cpu::codegen::make_generic_layout;
    const auto x = shape::make_dynamic(type::float32, {batch, seq, {16, 16, {}, {}}});
    const auto bias = shape(type::float32, {16});
    // batch and seq: x and the result read along them, the bias does not; 16: all do.
    auto l = make_generic_layout({x, bias}, x, 0);
    EXPECT_EQ(l.groups, 2);
    EXPECT_EQ(l.group_of, (std::vector<std::int64_t>{0, 0, 1}));
    EXPECT_EQ(l.along, (std::vector<std::int64_t>{1, 1, 0, 1, 1, 1}));
    // A row statistic [batch, seq, 1] beside x, reducing the last dim: its own last group.
    const auto row = shape::make_dynamic(type::float32, {batch, seq, {1, 1, {}, {}}});
    auto r = make_generic_layout({x, row}, row, 1);
    EXPECT_EQ(r.groups, 2);
    EXPECT_EQ(r.group_of, (std::vector<std::int64_t>{0, 0, 1}));
    EXPECT_EQ(r.along, (std::vector<std::int64_t>{1, 1, 1, 0, 1, 0}));
    EXPECT_EQ(r.geometry_size(), 1u + 1u * (2u + 2u));
}

TEST(cpu_codegen_generic, geometry_rejects_what_the_layout_did_not_foresee) {
    using cpu::codegen::generic_geometry;
    const auto x = shape::make_dynamic(type::float32, {seq, {16, 16, {}, {}}});
    auto l = cpu::codegen::make_generic_layout({x, x}, x, 0);
    ASSERT_EQ(l.groups, 1);  // both dims merge: one inner loop of seq * 16
    std::vector<long> g;
    const shape out(type::float32, {5, 16});
    ASSERT_TRUE(generic_geometry(l, {out, out}, out, g));
    EXPECT_EQ(g, (std::vector<long>{80}));
    // A row broadcast at run time, and a transposed view: not this layout.
    EXPECT_FALSE(generic_geometry(l, {out, shape(type::float32, {1, 16})}, out, g));
    EXPECT_FALSE(generic_geometry(l, {out, shape(type::float32, {5, 16}, {1, 5})}, out, g));
    // Rows with a gap (a slice of wider rows) do not merge into one loop either.
    EXPECT_FALSE(generic_geometry(l, {out, shape(type::float32, {5, 16}, {32, 1})}, out, g));
    // Every other element: the dims merge, but the inner loop needs a unit stride.
    EXPECT_FALSE(generic_geometry(l, {out, shape(type::float32, {5, 16}, {32, 2})}, out, g));
}

TEST(cpu_codegen_generic, transformer_block_matches_ref_at_every_size) {
    scratch_cache cache;
    for (bool fast : {false, true}) {
        program p = block(), r = block();
        compile_options o;
        o.specialize_after = 0;  // every call on the generic program
        o.fast_math = fast;
        o.threads = 2;
        const auto interpreted = cpu::codegen::stats().interpreted.load();
        p.compile(*get_target("cpu"), o);
        // With a compiler, every kernel is machine code (none left to the interpreter).
        if (have_compiler() && std::getenv("KILN_CXX") == nullptr) {
            EXPECT_EQ(cpu::codegen::stats().interpreted.load(), interpreted);
        }
        r.compile(*get_target("ref"), o);
        ASSERT_TRUE(p.get_specialization_stats().generic) << p.get_specialization_stats().generic_unavailable;
        for (auto [b, s] : std::vector<std::pair<std::size_t, std::size_t>>{{1, 1}, {2, 7}, {3, 33}, {1, 64}, {8, 64}}) {
            const auto in = block_inputs(b, s, static_cast<unsigned>(b * 100 + s));
            auto got = p.eval(in);
            auto want = r.eval(in);
            ASSERT_EQ(got.size(), 3u);
            for (std::size_t i = 0; i < 3; ++i) {
                SCOPED_TRACE("output " + std::to_string(i) + " at batch " + std::to_string(b) + ", seq " +
                             std::to_string(s) + (fast ? ", fast math" : ""));
                EXPECT_EQ(got[i].get_shape().lens(), want[i].get_shape().lens());
                expect_close(got[i], want[i], fast ? 2e-4 : 2e-5, 1e-3);
            }
        }
        // Every elementwise op and reduction ran in a fused kernel.
        auto ops = ops_run(p, block_inputs(2, 9, 3));
        EXPECT_GE(ops["cpu::fused_kernel"], 4u);
        for (const char* name : {"softmax", "log_softmax", "reduce_mean", "reduce_max", "erf", "add", "div", "sub"})
            EXPECT_EQ(ops[name], 0u) << name << " ran on the reference kernel";
    }
}

// Dims left dynamic range from 0 (the ONNX default), and a batch of 0 is a call a server
// makes: the generated kernels' result has no rows, not one (a broadcast that took the larger
// of 0 and 1 once made it [1, ...] and the call failed). Then a call with rows still runs.
TEST(cpu_codegen_generic, empty_batch_or_sequence_gives_empty_results) {
    scratch_cache cache;
    const dynamic_dimension batch0{0, 8, {}, "batch"}, seq0{0, 64, {}, "seq"};
    program p = block(batch0, seq0), r = block(batch0, seq0);
    compile_generic(p, r);
    for (auto [b, s] : std::vector<std::pair<std::size_t, std::size_t>>{{0, 5}, {2, 0}, {0, 0}, {2, 7}}) {
        SCOPED_TRACE("batch " + std::to_string(b) + ", seq " + std::to_string(s));
        const auto in = block_inputs(b, s, 11);
        auto got = p.eval(in);
        auto want = r.eval(in);
        ASSERT_EQ(got.size(), 3u);
        for (std::size_t i = 0; i < 3; ++i) {
            EXPECT_EQ(got[i].get_shape().lens(), want[i].get_shape().lens());
            if (b * s != 0) expect_close(got[i], want[i], 2e-4, 1e-3);  // fast math (the default)
            else EXPECT_EQ(got[i].get_shape().elements(), 0u);
        }
    }
}

TEST(cpu_codegen_generic, unforeseen_arguments_fall_back_to_the_reference) {
    // Two anonymous dims of the same range look equal at compile time; at run time one is
    // 1 and broadcasts; a transposed input reaches the kernel as a strided view.
    auto make = [] {
        program p;
        auto* m = p.get_main_module();
        const dynamic_dimension any{1, 32, {}, {}};
        auto a = m->add_parameter("a", shape::make_dynamic(type::float32, {any, {4, 4, {}, {}}}));
        auto b = m->add_parameter("b", shape::make_dynamic(type::float32, {any, {4, 4, {}, {}}}));
        auto c = m->add_parameter("c", shape::make_dynamic(type::float32, {{4, 4, {}, {}}, any}));
        auto ct = m->add_instruction(make_op("transpose", {{"perm", {1, 0}}}), {c});
        m->add_return({add_op(*m, "mul", {add_op(*m, "add", {a, b}), scalar(*m, 3.0f)}),
                       add_op(*m, "tanh", {add_op(*m, "sub", {ct, a})})});
        return p;
    };
    program p = make(), r = make();
    compile_generic(p, r);
    EXPECT_EQ(ops_run(p, {{"a", random_arg(shape(type::float32, {3, 4}), 1)},
                          {"b", random_arg(shape(type::float32, {3, 4}), 2)},
                          {"c", random_arg(shape(type::float32, {4, 3}), 3)}})["cpu::fused_kernel"],
              2u);
    for (auto [rows_a, rows_b] : std::vector<std::pair<std::size_t, std::size_t>>{{6, 6}, {6, 1}, {1, 6}}) {
        const std::size_t rows = std::max(rows_a, rows_b);
        param_map in = {{"a", random_arg(shape(type::float32, {rows_a, 4}), 1)},
                        {"b", random_arg(shape(type::float32, {rows_b, 4}), 2)},
                        {"c", random_arg(shape(type::float32, {4, rows_a}), 3)}};
        auto got = p.eval(in);
        auto want = r.eval(in);
        ASSERT_EQ(got[0].get_shape().lens(), (std::vector<std::size_t>{rows, 4}));
        expect_close(got[0], want[0], 1e-6);
        expect_close(got[1], want[1], 1e-5);
    }
}

TEST(cpu_codegen_generic, interpreter_runs_the_generic_program_without_a_compiler) {
    scratch_cache cache;
    env_override no_cxx("KILN_CXX", "/nonexistent/kiln-test-cxx");
    program p = block(), r = block();
    const auto interpreted = cpu::codegen::stats().interpreted.load();
    compile_generic(p, r);
    // The generic program's kernels (at least the layer norm, GELU, softmax and
    // log_softmax groups) are left to the interpreter.
    EXPECT_GE(cpu::codegen::stats().interpreted.load(), interpreted + 4);
    EXPECT_GE(ops_run(p, block_inputs(2, 9, 3))["cpu::fused_kernel"], 4u);
    const auto in = block_inputs(3, 20, 9);
    auto got = p.eval(in);
    auto want = r.eval(in);
    for (std::size_t i = 0; i < 3; ++i) expect_close(got[i], want[i], 2e-5, 1e-3);
    EXPECT_TRUE(cache.files(".so").empty());
}

TEST(cpu_codegen_generic, channels_last_walk_reads_and_writes_nhwc) {
    using cpu::codegen::generic_geometry;
    const dynamic_dimension n{1, 8, {}, "n"}, h{1, 64, {}, "h"}, w{1, 64, {}, "w"};
    const auto x = shape::make_dynamic(type::float32, {n, {3, 3, {}, {}}, h, w});
    const auto s = shape::make_dynamic(type::float32, {n, {3, 3, {}, {}}, {1, 1, {}, {}}, {1, 1, {}, {}}});
    auto l = cpu::codegen::make_generic_layout({x, s}, x, 0, {0, 2, 3, 1});
    // Walked as (n, h, w, c): n; h and w (s broadcast); c (both read along).
    EXPECT_EQ(l.groups, 3);
    EXPECT_EQ(l.group_of, (std::vector<std::int64_t>{0, 1, 1, 2}));
    const shape nhwc(type::float32, {2, 3, 4, 5}, {60, 1, 15, 3});
    const shape scale(type::float32, {2, 3, 1, 1});
    auto out = cpu::codegen::generic_result_shape(l, {nhwc, scale}, type::float32);
    EXPECT_EQ(out.lens(), (std::vector<std::size_t>{2, 3, 4, 5}));
    EXPECT_EQ(out.strides(), (std::vector<std::size_t>{60, 1, 15, 3}));
    std::vector<long> g;
    ASSERT_TRUE(generic_geometry(l, {nhwc, scale}, out, g));
    // inner c = 3; outer lens n = 2, h*w = 20; strides x (60, 3), s (3, 0), out (60, 3).
    EXPECT_EQ(g, (std::vector<long>{3, 2, 20, 60, 3, 3, 0, 60, 3}));
    // A row-major x does not fit this walk.
    EXPECT_FALSE(generic_geometry(l, {shape(type::float32, {2, 3, 4, 5}), scale}, out, g));
}

TEST(cpu_codegen_generic, convolution_results_stay_channels_last_in_generated_kernels) {
    // A CNN with a dynamic batch and image: the convolution's SiLU stays its post-op, a
    // squeeze-excitation style scale and what follows run as generated kernels on the
    // channels-last results (no call falls back to the interpreter).
    auto make = [] {
        program p;
        auto* m = p.get_main_module();
        const dynamic_dimension n{1, 4, {}, "n"}, hw{4, 32, {}, "hw"};
        auto x = m->add_parameter("x", shape::make_dynamic(type::float32, {n, {8, 8, {}, {}}, hw, hw}));
        auto wt = m->add_literal(literal(shape(type::float32, {16, 8, 3, 3}),
                                         random_arg(shape(type::float32, {16, 8, 3, 3}), 11, -0.2f, 0.2f).to_vector<float>()));
        auto c = m->add_instruction(make_op("convolution", {{"padding", {1, 1, 1, 1}}}), {x, wt});
        auto a = silu(*m, c);
        auto sc = m->add_parameter("s", shape::make_dynamic(type::float32, {n, {16, 16, {}, {}}, {1, 1, {}, {}}, {1, 1, {}, {}}}));
        auto gate = add_op(*m, "sigmoid", {sc});
        auto scaled = add_op(*m, "mul", {a, gate});
        m->add_return({add_op(*m, "tanh", {add_op(*m, "add", {scaled, scalar(*m, 0.5f)})})});
        return p;
    };
    program p = make(), r = make();
    compile_generic(p, r);
    const auto misfits = cpu::codegen::stats().generic_misfits.load();
    for (auto [b, side] : std::vector<std::pair<std::size_t, std::size_t>>{{1, 7}, {3, 16}}) {
        param_map in = {{"x", random_arg(shape(type::float32, {b, 8, side, side}), static_cast<unsigned>(side))},
                        {"s", random_arg(shape(type::float32, {b, 16, 1, 1}), 3)}};
        auto got = p.eval(in);
        auto want = r.eval(in);
        EXPECT_EQ(got[0].get_shape().lens(), want[0].get_shape().lens());
        expect_close(got[0], want[0], 1e-4, 1e-3);
    }
    auto ops = ops_run(p, {{"x", random_arg(shape(type::float32, {2, 8, 9, 9}), 5)},
                           {"s", random_arg(shape(type::float32, {2, 16, 1, 1}), 6)}});
    EXPECT_EQ(ops["sigmoid"] + ops["mul"] + ops["add"] + ops["tanh"], 0u);
    EXPECT_GE(ops["cpu::fused_kernel"], 1u);
    if (have_compiler() && std::getenv("KILN_CXX") == nullptr) {
        EXPECT_EQ(cpu::codegen::stats().generic_misfits.load(), misfits);
    }
}

TEST(cpu_codegen_generic, one_dimensional_convolution_results_stay_channels_last) {
    // wav2vec2's feature extractor: a strided 1-D convolution over a dynamic length, then a
    // GELU and a residual-style add. The [N, C, W] results are channels-last too; the groups
    // after them walk (0, 2, 1), so no call misfits and falls back to the interpreter.
    auto make = [] {
        program p;
        auto* m = p.get_main_module();
        const dynamic_dimension n{1, 3, {}, "n"}, len{8, 4000, {}, "len"};
        auto x = m->add_parameter("x", shape::make_dynamic(type::float32, {n, {6, 6, {}, {}}, len}));
        auto wt = m->add_literal(literal(shape(type::float32, {16, 6, 3}),
                                         random_arg(shape(type::float32, {16, 6, 3}), 12, -0.3f, 0.3f).to_vector<float>()));
        auto c = m->add_instruction(make_op("convolution", {{"padding", {0, 0}}, {"stride", {2}}, {"dilation", {1}}}),
                                    {x, wt});
        auto g = gelu(*m, c);
        m->add_return({add_op(*m, "mul", {add_op(*m, "add", {g, scalar(*m, 0.25f)}), c})});
        return p;
    };
    program p = make(), r = make();
    compile_generic(p, r);
    const auto misfits = cpu::codegen::stats().generic_misfits.load();
    for (auto [b, w] : std::vector<std::pair<std::size_t, std::size_t>>{{1, 9}, {3, 1001}, {2, 3999}}) {
        param_map in = {{"x", random_arg(shape(type::float32, {b, 6, w}), static_cast<unsigned>(w))}};
        auto got = p.eval(in);
        auto want = r.eval(in);
        EXPECT_EQ(got[0].get_shape().lens(), want[0].get_shape().lens());
        expect_close(got[0], want[0], 2e-4, 1e-3);
    }
    auto ops = ops_run(p, {{"x", random_arg(shape(type::float32, {2, 6, 77}), 5)}});
    EXPECT_EQ(ops["erf"] + ops["mul"] + ops["add"], 0u);
    EXPECT_GE(ops["cpu::fused_kernel"], 1u);
    if (have_compiler() && std::getenv("KILN_CXX") == nullptr) {
        EXPECT_EQ(cpu::codegen::stats().generic_misfits.load(), misfits);
    }
}

TEST(cpu_codegen_generic, strided_views_are_copied_into_the_walk_and_the_kernel_runs) {
    // Swin's attention: qkv [B, T, 3 * H * D] viewed as [B, T, 3, H, D] and transposed to
    // [3, B, H, T, D]; its parts are views whose strides do not merge with the kernel's
    // walk. They are copied into it (one pass), and the generated kernel runs, where the
    // interpreter ran before.
    auto make = [] {
        program p;
        auto* m = p.get_main_module();
        const dynamic_dimension b{1, 4, {}, "b"}, t{1, 64, {}, "t"};
        auto x = m->add_parameter("x", shape::make_dynamic(type::float32, {b, t, {24, 24, {}, {}}}));
        auto r = m->add_instruction(make_op("reshape", {{"dims", {0, 0, 3, 2, 4}}}), {x});
        auto qkv = m->add_instruction(make_op("transpose", {{"perm", {2, 0, 3, 1, 4}}}), {r});
        m->add_return({add_op(*m, "tanh", {add_op(*m, "mul", {qkv, scalar(*m, 0.125f)})})});
        return p;
    };
    program p = make(), r = make();
    compile_generic(p, r);
    const auto misfits = cpu::codegen::stats().generic_misfits.load();
    const auto packed = cpu::codegen::stats().generic_packed.load();
    for (auto [b, t] : std::vector<std::pair<std::size_t, std::size_t>>{{1, 1}, {2, 49}, {4, 64}}) {
        param_map in = {{"x", random_arg(shape(type::float32, {b, t, 24}), static_cast<unsigned>(t))}};
        auto got = p.eval(in);
        auto want = r.eval(in);
        EXPECT_EQ(got[0].get_shape().lens(), want[0].get_shape().lens());
        expect_close(got[0], want[0], 1e-5);
    }
    EXPECT_EQ(ops_run(p, {{"x", random_arg(shape(type::float32, {2, 5, 24}), 5)}})["cpu::fused_kernel"], 1u);
    if (have_compiler() && std::getenv("KILN_CXX") == nullptr) {
        EXPECT_EQ(cpu::codegen::stats().generic_misfits.load(), misfits);
        EXPECT_GE(cpu::codegen::stats().generic_packed.load(), packed + 3);
    }
}
