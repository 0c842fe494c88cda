// Fused kernels on the cpu target against the reference target: bit for bit where
// fast_math is off and the op order is the same (elementwise groups), within tolerance for
// reductions (which add in another order) and fast_math; compiled and interpreted.
#include "cpu_codegen_util.hpp"

#include "targets/cpu/codegen/compiler.hpp"

#include <cstring>
#include <set>
#include <limits>

using namespace kiln;
using namespace kiln::test;

namespace {

bool have_compiler() { return cpu::codegen::find_compiler(cpu::read_cpu_options({})).has_value(); }

// Equal bit for bit, except that any NaN matches any NaN (which NaN an operation
// returns when both operands are NaN is not fixed across instruction sets).
void expect_bitwise(const argument& got, const argument& want, const std::string& what) {
    ASSERT_EQ(got.get_shape().lens(), want.get_shape().lens()) << what;
    ASSERT_EQ(got.get_shape().get_type(), want.get_shape().get_type()) << what;
    if (want.get_shape().get_type() != type::float32) {
        EXPECT_EQ(got, want) << what;
        return;
    }
    auto a = got.to_vector<float>();
    auto b = want.to_vector<float>();
    std::size_t bad = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (std::isnan(a[i]) && std::isnan(b[i])) continue;
        if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0 && bad++ < 3)
            ADD_FAILURE() << what << " element " << i << ": " << a[i] << " vs " << b[i];
    }
    EXPECT_EQ(bad, 0u) << what;
}

// Inputs mixing random values with the special ones every op must get right.
argument special_arg(const shape& s, unsigned seed) {
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<float> special = {0.0f, -0.0f, inf, -inf, std::nanf(""), 1e-30f, -1e-30f, 88.0f, -88.0f,
                                        100.0f, -100.0f, 1.0f, -1.0f, 0.5f, -0.5f, 3.0f, 1e-6f, 20.0f, -20.0f};
    auto v = random_arg(s, seed, -4.0f, 4.0f).to_vector<float>();
    for (std::size_t i = 0; i < v.size(); i += 3) v[i] = special[(i / 3 + seed) % special.size()];
    return literal(s, v).get_argument();
}

void check_against_ref(const program& p, const param_map& in, bool fast_math, bool bitwise, double rtol = 0,
                       double floor = 1e-6) {
    auto ref = compiled(p, "ref", false).eval(in);
    auto cpu = compiled(p, "cpu", fast_math);
    if (have_compiler() && std::getenv("KILN_CXX") == nullptr) {
        for (auto& mode : kernel_modes(cpu)) EXPECT_EQ(mode, "compiled");
    }
    EXPECT_FALSE(kernel_modes(cpu).empty()) << *cpu.get_main_module();
    auto got = cpu.eval(in);
    ASSERT_EQ(got.size(), ref.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        if (bitwise) expect_bitwise(got[i], ref[i], "output " + std::to_string(i));
        else expect_close(got[i], ref[i], rtol, floor);
    }
}

program unary_program(const std::string& name, const shape& s, const value& attrs = value::make_object()) {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", s);
    m->add_return({add_op(*m, name, {x}, attrs)});
    return p;
}

}  // namespace

TEST(cpu_codegen, every_unary_op_matches_ref_bitwise) {
    const shape s(type::float32, {3, 67});
    const std::vector<std::pair<std::string, value>> ops = {
        {"exp", {}}, {"log", {}}, {"sqrt", {}}, {"reciprocal", {}}, {"sin", {}}, {"cos", {}}, {"tan", {}},
        {"asin", {}}, {"acos", {}}, {"atan", {}}, {"sinh", {}}, {"cosh", {}}, {"asinh", {}}, {"acosh", {}},
        {"atanh", {}}, {"tanh", {}}, {"floor", {}}, {"ceil", {}}, {"round", {}}, {"sigmoid", {}}, {"softplus", {}},
        {"softsign", {}}, {"hard_swish", {}}, {"mish", {}}, {"abs", {}}, {"neg", {}}, {"sign", {}}, {"erf", {}},
        {"relu", {}}, {"leaky_relu", {{"alpha", 0.3}}}, {"elu", {{"alpha", 0.7}}}, {"selu", {}}, {"celu", {{"alpha", 1.3}}},
        {"hard_sigmoid", {}}, {"thresholded_relu", {{"alpha", 0.25}}}, {"gelu", {}}, {"gelu", {{"approximate", "tanh"}}},
        {"swish", {{"alpha", 1.5}}}, {"shrink", {{"bias", 0.25}, {"lambd", 0.75}}}};
    for (const auto& [name, attrs] : ops) {
        SCOPED_TRACE(name);
        auto p = unary_program(name, s, attrs.is_null() ? value::make_object() : attrs);
        check_against_ref(p, {{"x", special_arg(s, 17)}}, false, true);
    }
}

TEST(cpu_codegen, binary_ternary_and_predicates_match_ref_bitwise) {
    const shape s(type::float32, {5, 33});
    const shape col(type::float32, {5, 1});
    for (const char* name : {"add", "sub", "mul", "div", "pow", "max", "min", "prelu"}) {
        SCOPED_TRACE(name);
        program p;
        auto* m = p.get_main_module();
        auto x = m->add_parameter("x", s);
        auto y = m->add_parameter("y", col);  // broadcast along the rows
        m->add_return({add_op(*m, name, {x, y})});
        check_against_ref(p, {{"x", special_arg(s, 3)}, {"y", special_arg(col, 4)}}, false, true);
    }
    // Predicates, where, clip, mod, constant exponents, a cast from int64.
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", s);
    auto y = m->add_parameter("y", s);
    auto k = m->add_parameter("k", shape(type::int64, {33}));
    auto c = add_op(*m, "less", {x, y});
    auto w = add_op(*m, "where", {c, add_op(*m, "pow", {x, scalar(*m, 2.0f)}), add_op(*m, "pow", {y, scalar(*m, 3.0f)})});
    auto cl = add_op(*m, "clip", {w, scalar(*m, -5.0f), scalar(*m, 7.0f)});
    auto md = add_op(*m, "mod", {cl, scalar(*m, 1.75f)}, {{"fmod", true}});
    auto kf = add_op(*m, "convert", {k}, {{"target_type", static_cast<std::int64_t>(type::float32)}});
    auto r = add_op(*m, "add", {md, kf});
    auto n = add_op(*m, "logical_or", {add_op(*m, "isnan", {x}), add_op(*m, "isinf", {y})});
    m->add_return({r, n, add_op(*m, "equal", {x, y})});
    std::vector<std::int64_t> kv(33);
    for (std::size_t i = 0; i < kv.size(); ++i) kv[i] = static_cast<std::int64_t>(i * 7919) - 100000;
    check_against_ref(p,
                      {{"x", special_arg(s, 5)},
                       {"y", special_arg(s, 6)},
                       {"k", literal(shape(type::int64, {33}), kv).get_argument()}},
                      false, true);
}

TEST(cpu_codegen, strided_and_broadcast_inputs) {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(type::float32, {9, 6}));
    auto b = m->add_parameter("b", shape(type::float32, {1, 9}));
    auto xt = m->add_instruction(make_op("transpose", {{"perm", {1, 0}}}), {x});  // a strided view
    auto y = add_op(*m, "mul", {add_op(*m, "add", {xt, b}), add_op(*m, "sigmoid", {xt})});
    m->add_return({add_op(*m, "sub", {y, scalar(*m, 0.25f)})});
    check_against_ref(p, {{"x", special_arg(shape(type::float32, {9, 6}), 8)}, {"b", special_arg(shape(type::float32, {1, 9}), 9)}},
                      false, true);
}

TEST(cpu_codegen, layer_norm_softmax_gelu_silu_match_ref) {
    program p;
    auto* m = p.get_main_module();
    const shape xs(type::float32, {2, 9, 48});
    auto x = m->add_parameter("x", xs);
    auto g = m->add_parameter("g", shape(type::float32, {48}));
    auto b = m->add_parameter("b", shape(type::float32, {48}));
    m->add_return({layer_norm(*m, x, g, b), softmax(*m, x), gelu(*m, x), silu(*m, x)});
    const param_map in = {{"x", random_arg(xs, 20, -4, 4)},
                          {"g", random_arg(shape(type::float32, {48}), 21)},
                          {"b", random_arg(shape(type::float32, {48}), 22)}};
    check_against_ref(p, in, false, false, 1e-5, 1e-3);
    // fast_math: approximations within 1e-5 of the functions; outputs near zero (gelu's
    // left tail, where 1 + erf cancels) are compared by absolute error.
    check_against_ref(p, in, true, false, 2e-5, 1e-2);
    // The elementwise ones are exact without fast_math.
    program q;
    auto* mq = q.get_main_module();
    auto xq = mq->add_parameter("x", xs);
    mq->add_return({gelu(*mq, xq), silu(*mq, xq)});
    check_against_ref(q, {{"x", special_arg(xs, 23)}}, false, true);
}

TEST(cpu_codegen, every_reduction_kind_and_other_axes) {
    const shape xs(type::float32, {4, 5, 6});
    for (const char* name : {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "reduce_l1",
                             "reduce_l2", "reduce_sum_square", "reduce_log_sum"}) {
        for (std::vector<std::int64_t> axes : {std::vector<std::int64_t>{2}, {1}, {0, 2}}) {
            SCOPED_TRACE(std::string(name) + " over " + std::to_string(axes.size()) + " axes from " +
                         std::to_string(axes[0]));
            program p;
            auto* m = p.get_main_module();
            auto x = m->add_parameter("x", xs);
            auto a = add_op(*m, "add", {add_op(*m, "abs", {x}), scalar(*m, 0.5f)});
            auto r = add_op(*m, name, {a}, reduce_attrs(axes));
            m->add_return({add_op(*m, "mul", {r, x})});
            auto in = random_arg(xs, 30);
            check_against_ref(p, {{"x", in}}, false, false, 1e-5, 1e-6);
        }
    }
    // A NaN in a row makes its max NaN.
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", xs);
    m->add_return({add_op(*m, "neg", {add_op(*m, "reduce_max", {add_op(*m, "exp", {x})}, reduce_attrs({2}, false))})});
    auto v = random_arg(xs, 31).to_vector<float>();
    v[7] = std::nanf("");
    check_against_ref(p, {{"x", literal(xs, v).get_argument()}}, false, false, 1e-6);
}

TEST(cpu_codegen, large_tensors_run_in_parallel_chunks) {
    const shape xs(type::float32, {3, 257, 301});
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", xs);
    auto y = m->add_parameter("y", shape(type::float32, {301}));
    m->add_return({add_op(*m, "relu", {add_op(*m, "add", {add_op(*m, "mul", {x, y}), scalar(*m, -0.5f)})}), softmax(*m, x)});
    const param_map in = {{"x", random_arg(xs, 40)}, {"y", random_arg(shape(type::float32, {301}), 41)}};
    auto ref = compiled(p, "ref", false).eval(in);
    program c = p;
    compile_options o;
    o.fast_math = false;
    o.threads = 2;
    c.compile(*get_target("cpu"), o);
    auto got = c.eval(in);
    expect_bitwise(got[0], ref[0], "elementwise");
    expect_close(got[1], ref[1], 1e-5, 1e-6);
}

TEST(cpu_codegen, interpreter_runs_without_a_compiler) {
    scratch_cache cache;
    env_override no_cxx("KILN_CXX", "/nonexistent/kiln-test-cxx");
    program p;
    auto* m = p.get_main_module();
    const shape xs(type::float32, {3, 5, 40});
    auto x = m->add_parameter("x", xs);
    auto g = m->add_parameter("g", shape(type::float32, {40}));
    auto xt = m->add_instruction(make_op("transpose", {{"perm", {0, 2, 1}}}), {x});
    auto k = m->add_parameter("k", shape(type::int64, {5}));
    auto kf = add_op(*m, "convert", {k}, {{"target_type", static_cast<std::int64_t>(type::float32)}});
    m->add_return({gelu(*m, x), layer_norm(*m, x, g, g), add_op(*m, "mul", {add_op(*m, "tanh", {xt}), kf}), softmax(*m, x)});
    const param_map in = {{"x", special_arg(xs, 50)},
                          {"g", random_arg(shape(type::float32, {40}), 51)},
                          {"k", literal(shape(type::int64, {5}), std::vector<std::int64_t>{1, -2, 3, 40, 5}).get_argument()}};
    const auto before = cpu::codegen::stats().interpreted.load();
    for (bool fast : {false, true}) {
        auto cpu = compiled(p, "cpu", fast);
        for (auto& mode : kernel_modes(cpu)) EXPECT_EQ(mode, "interpreted");
        auto ref = compiled(p, "ref", false).eval(in);
        auto got = cpu.eval(in);
        // The interpreter calls the ops' own scalar functions: exact. Under fast_math the
        // pipeline itself may rewrite x / c into x * (1 / c) (simplify_algebra): last ulp.
        if (fast) {
            expect_close(got[0], ref[0], 2e-5, 1e-2);  // 1 + erf cancels in the left tail
            expect_close(got[2], ref[2], 2e-5, 1e-2);
        } else {
            expect_bitwise(got[0], ref[0], "gelu");
            expect_bitwise(got[2], ref[2], "tanh * k");
        }
        // LayerNorm and softmax of rows holding inf/NaN: compare where ref is finite.
        expect_close(got[1], ref[1], 1e-5, 1e-3);
        expect_close(got[3], ref[3], 1e-5, 1e-6);
    }
    EXPECT_GT(cpu::codegen::stats().interpreted.load(), before);
    EXPECT_TRUE(cache.files(".so").empty());
}

TEST(cpu_codegen, kernels_are_deduplicated_and_lone_ops_get_kernels) {
    scratch_cache cache;
    program p;
    auto* m = p.get_main_module();
    const shape xs(type::float32, {4, 32});
    auto x = m->add_parameter("x", xs);
    auto z = m->add_parameter("z", xs);
    auto a = layer_norm(*m, x, scalar(*m, 1.0f), scalar(*m, 0.0f));
    auto b = layer_norm(*m, z, scalar(*m, 1.0f), scalar(*m, 0.0f));
    auto w = add_op(*m, "where", {add_op(*m, "greater", {x, z}), x, z});
    m->add_return({a, b, w, add_op(*m, "pow", {x, z})});
    auto c = compiled(p, "cpu", true);
    std::set<std::string> symbols;
    std::size_t carriers = 0;
    for (auto& ins : *c.get_main_module()) {
        if (ins.name() != "cpu::fused_kernel") continue;
        const auto& k = ins.get_operator().get<cpu::fused_kernel>();
        symbols.insert(k.symbol);
        carriers += k.source.is_binary() ? 1 : 0;
    }
    // Two equal layer norms share one function; where(greater) is a group; the lone pow
    // gets a kernel of its own. One kernel carries the library.
    EXPECT_EQ(count_ops(*c.get_main_module(), "cpu::fused_kernel"), 4u) << *c.get_main_module();
    EXPECT_EQ(symbols.size(), 3u);
    EXPECT_EQ(carriers, 1u);
    const param_map in = {{"x", random_arg(xs, 60)}, {"z", random_arg(xs, 61)}};
    auto got = c.eval(in);
    auto want = compiled(p, "ref", false).eval(in);
    for (std::size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i], 2e-5, 1e-3);
}
