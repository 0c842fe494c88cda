// cpu::dyn_recurrent: a generic program's GRU and RNN (sequence length and batch at run time)
// on the cpu target against the reference kernels at several sizes, one step and one
// sequence included, with bias and initial state, Y and Y_h both read; saved and loaded,
// it makes its cells again.
#include "cpu_test_util.hpp"
#include "ops_run.hpp"

#include "targets/cpu/kernels/dynamic/dyn_recurrent.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/program.hpp>
#include <kiln/serialize.hpp>


using namespace kiln;
using namespace kiln::cpu_test;
using kiln::test::compile_generic_pair;
using kiln::test::ops_run;

namespace {

const dynamic_dimension steps{1, 400, {}, "time"}, batch{1, 4, {}, "batch"};
constexpr std::size_t I = 5, H = 12;

// x [time, batch, I] through `kind` (rnn or gru) in `direction`, with bias and h0 [D, batch, H].
program recurrent(const std::string& kind, std::int64_t direction) {
    const std::size_t D = direction == 2 ? 2 : 1, G = kind == "gru" ? 3 : 1;
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape::make_dynamic(type::float32, {steps, batch, {I, I, {}, {}}}));
    auto h0 = m->add_parameter("h0", shape::make_dynamic(type::float32, {{D, D, {}, {}}, batch, {H, H, {}, {}}}));
    auto w = m->add_literal(random_literal({D, G * H, I}, 0.4f));
    auto r = m->add_literal(random_literal({D, G * H, H}, 0.3f));
    auto b = m->add_literal(random_literal({D, 2 * G * H}, 0.5f));
    value::object attrs{{"hidden_size", value(static_cast<std::int64_t>(H))}, {"direction", value(direction)},
                        {"has_bias", value(true)}, {"has_initial_h", value(true)}};
    if (kind == "rnn") attrs.emplace_back("activations", value(value::array(D, value(std::string("Relu")))));
    if (kind == "gru") attrs.emplace_back("linear_before_reset", value(true));
    auto cell = m->add_instruction(make_op(kind, value(attrs)), {x, w, r, b, h0});
    m->add_return({m->add_instruction(builtin::get_tuple_elem{0}, {cell}),
                   m->add_instruction(builtin::get_tuple_elem{1}, {cell})});
    return p;
}

}  // namespace

TEST(cpu_dyn_recurrent, generic_gru_and_rnn_match_ref_at_every_size) {
    for (const std::string kind : {"rnn", "gru"})
        for (std::int64_t direction : {0, 1, 2}) {
            SCOPED_TRACE(kind + " direction " + std::to_string(direction));
            const std::size_t D = direction == 2 ? 2 : 1;
            program p = recurrent(kind, direction), r = p;
            ASSERT_TRUE(compile_generic_pair(p, r));
            for (auto [t, n] : std::vector<std::pair<std::size_t, std::size_t>>{{1, 1}, {9, 3}, {300, 1}, {9, 3}}) {
                SCOPED_TRACE("time " + std::to_string(t) + ", batch " + std::to_string(n));
                const param_map in{{"x", random_literal({t, n, I}).get_argument()},
                                   {"h0", random_literal({D, n, H}).get_argument()}};
                auto got = p.eval(in);
                auto want = r.eval(in);
                ASSERT_EQ(got.size(), 2u);
                for (std::size_t k = 0; k < 2; ++k) {
                    EXPECT_EQ(got[k].get_shape().lens(), want[k].get_shape().lens());
                    expect_close(got[k], want[k], 1e-4, 1e-5);
                }
            }
            auto ops = ops_run(p, {{"x", random_literal({4, 2, I}).get_argument()},
                                   {"h0", random_literal({D, 2, H}).get_argument()}});
            EXPECT_EQ(ops["cpu::dyn_recurrent"], 1u);
            EXPECT_EQ(ops[kind], 0u) << kind << " ran on the reference kernel";
        }
}

TEST(cpu_dyn_recurrent, a_saved_generic_program_makes_its_cells_again) {
    program p = recurrent("gru", 2), r = p;
    ASSERT_TRUE(compile_generic_pair(p, r));
    auto input = [](std::size_t t) {
        return param_map{{"x", random_literal({t, 1, I}).get_argument()}, {"h0", random_literal({2, 1, H}).get_argument()}};
    };
    p.eval(input(7));
    const auto bytes = save_buffer(p);
    auto loaded = load_buffer(bytes.data(), bytes.size());
    for (std::size_t t : {7, 11}) {
        const auto in = input(t);
        auto got = loaded.eval(in);
        auto want = r.eval(in);
        ASSERT_EQ(got.size(), 2u);
        expect_close(got[0], want[0], 1e-4, 1e-5);
        expect_close(got[1], want[1], 1e-4, 1e-5);
    }
    EXPECT_EQ(ops_run(loaded, input(5))["cpu::dyn_recurrent"], 1u);
}
