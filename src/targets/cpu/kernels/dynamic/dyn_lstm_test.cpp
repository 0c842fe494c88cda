// cpu::dyn_lstm: a generic program's LSTM (sequence length and batch at run time) on the cpu
// target against the reference kernel at several sizes, one step and one sequence included:
// every direction, time-major and batch-first, with and without initial states and
// peepholes, Y alone and Y, Y_h, Y_c together; saved and loaded, it runs again.
#include "cpu_test_util.hpp"
#include "ops_run.hpp"

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

struct lstm_case {
    std::int64_t direction = 0;
    bool batch_first = false;
    bool states = true;     // h0, c0 given, and Y_h, Y_c returned
    bool peephole = false;
};

std::size_t directions(const lstm_case& c) { return c.direction == 2 ? 2 : 1; }

dynamic_dimension fixed(std::size_t v) { return {v, v, {}, {}}; }

// x [time, batch, I] ([batch, time, I] batch first) through an LSTM with bias.
program lstm_program(const lstm_case& c) {
    const std::size_t D = directions(c);
    program p;
    auto* m = p.get_main_module();
    const std::vector<dynamic_dimension> x_dims = c.batch_first ? std::vector{batch, steps, fixed(I)}
                                                                 : std::vector{steps, batch, fixed(I)};
    const std::vector<dynamic_dimension> state_dims = c.batch_first ? std::vector{batch, fixed(D), fixed(H)}
                                                                     : std::vector{fixed(D), batch, fixed(H)};
    auto x = m->add_parameter("x", shape::make_dynamic(type::float32, x_dims));
    std::vector<instruction_ref> args{x, m->add_literal(random_literal({D, 4 * H, I}, 0.4f)),
                                      m->add_literal(random_literal({D, 4 * H, H}, 0.3f)),
                                      m->add_literal(random_literal({D, 8 * H}, 0.5f))};
    if (c.states) {
        args.push_back(m->add_parameter("h0", shape::make_dynamic(type::float32, state_dims)));
        args.push_back(m->add_parameter("c0", shape::make_dynamic(type::float32, state_dims)));
    }
    if (c.peephole) args.push_back(m->add_literal(random_literal({D, 3 * H}, 0.5f)));
    value::object attrs{{"hidden_size", value(static_cast<std::int64_t>(H))}, {"direction", value(c.direction)},
                        {"layout", value(static_cast<std::int64_t>(c.batch_first ? 1 : 0))},
                        {"has_bias", value(true)}, {"has_initial_h", value(c.states)},
                        {"has_initial_c", value(c.states)}, {"has_peephole", value(c.peephole)}};
    auto cell = m->add_instruction(make_op("lstm", value(attrs)), args);
    std::vector<instruction_ref> outs{m->add_instruction(builtin::get_tuple_elem{0}, {cell})};
    if (c.states)
        for (std::size_t k : {1, 2}) outs.push_back(m->add_instruction(builtin::get_tuple_elem{k}, {cell}));
    m->add_return(outs);
    return p;
}

param_map inputs(const lstm_case& c, std::size_t t, std::size_t n) {
    const std::size_t D = directions(c);
    param_map in{{"x", random_literal(c.batch_first ? std::vector<std::size_t>{n, t, I}
                                                   : std::vector<std::size_t>{t, n, I})
                           .get_argument()}};
    if (c.states)
        for (const char* s : {"h0", "c0"})
            in.emplace(s, random_literal(c.batch_first ? std::vector<std::size_t>{n, D, H}
                                                       : std::vector<std::size_t>{D, n, H})
                              .get_argument());
    return in;
}

}  // namespace

TEST(cpu_dyn_lstm, a_generic_lstm_matches_ref_at_every_size) {
    std::vector<lstm_case> cases;
    for (std::int64_t direction : {0, 1, 2})
        for (bool batch_first : {false, true}) cases.push_back({direction, batch_first, true, direction == 2});
    cases.push_back({0, false, false, false});  // Y alone: the whole result, no rows cut
    cases.push_back({2, true, false, true});
    for (const auto& c : cases) {
        SCOPED_TRACE("direction " + std::to_string(c.direction) + (c.batch_first ? ", batch first" : "") +
                     (c.states ? ", states" : "") + (c.peephole ? ", peepholes" : ""));
        program p = lstm_program(c), r = p;
        ASSERT_TRUE(compile_generic_pair(p, r));
        for (auto [t, n] : std::vector<std::pair<std::size_t, std::size_t>>{{1, 1}, {9, 3}, {300, 1}, {9, 3}}) {
            SCOPED_TRACE("time " + std::to_string(t) + ", batch " + std::to_string(n));
            const auto in = inputs(c, t, n);
            auto got = p.eval(in);
            auto want = r.eval(in);
            ASSERT_EQ(got.size(), want.size());
            for (std::size_t k = 0; k < got.size(); ++k) {
                EXPECT_EQ(got[k].get_shape().lens(), want[k].get_shape().lens()) << "output " << k;
                expect_close(got[k], want[k], 1e-4, 1e-5);
            }
        }
        auto ops = ops_run(p, inputs(c, 4, 2));
        EXPECT_EQ(ops["cpu::dyn_lstm"], 1u);
        EXPECT_EQ(ops["lstm"], 0u) << "the LSTM ran on the reference kernel";
    }
}

TEST(cpu_dyn_lstm, a_saved_generic_program_runs_again) {
    const lstm_case c{2, true, true, false};
    program p = lstm_program(c), r = p;
    ASSERT_TRUE(compile_generic_pair(p, r));
    p.eval(inputs(c, 7, 1));
    const auto bytes = save_buffer(p);
    auto loaded = load_buffer(bytes.data(), bytes.size());
    for (std::size_t t : {7, 11}) {
        const auto in = inputs(c, t, 2);
        auto got = loaded.eval(in);
        auto want = r.eval(in);
        ASSERT_EQ(got.size(), 3u);
        for (std::size_t k = 0; k < 3; ++k) expect_close(got[k], want[k], 1e-4, 1e-5);
    }
    EXPECT_EQ(ops_run(loaded, inputs(c, 5, 1))["cpu::dyn_lstm"], 1u);
}

// The sequence length at run time, the batch and the initial states static (a batch bucket's
// program fixes the batch; a constant initial state has static dims): the states' dims are
// read as ranges (the lowering read a static shape's dynamic dims and crashed: lstm_seq with
// a batch bucket).
TEST(cpu_dyn_lstm, static_initial_states_with_a_generic_sequence) {
    constexpr std::size_t n = 2;
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape::make_dynamic(type::float32, {steps, fixed(n), fixed(I)}));
    std::vector<instruction_ref> args{x, m->add_literal(random_literal({1, 4 * H, I}, 0.4f)),
                                      m->add_literal(random_literal({1, 4 * H, H}, 0.3f)),
                                      m->add_literal(random_literal({1, 8 * H}, 0.5f)),
                                      m->add_parameter("h0", shape(type::float32, {1, n, H})),
                                      m->add_parameter("c0", shape(type::float32, {1, n, H}))};
    value::object attrs{{"hidden_size", value(static_cast<std::int64_t>(H))}, {"has_bias", value(true)},
                        {"has_initial_h", value(true)}, {"has_initial_c", value(true)}};
    auto cell = m->add_instruction(make_op("lstm", value(attrs)), args);
    m->add_return({m->add_instruction(builtin::get_tuple_elem{0}, {cell}),
                   m->add_instruction(builtin::get_tuple_elem{1}, {cell})});
    program r = p;
    ASSERT_TRUE(compile_generic_pair(p, r));
    for (std::size_t t : {1, 9, 300}) {
        SCOPED_TRACE("time " + std::to_string(t));
        const param_map in{{"x", random_literal({t, n, I}).get_argument()},
                           {"h0", random_literal({1, n, H}).get_argument()},
                           {"c0", random_literal({1, n, H}).get_argument()}};
        auto got = p.eval(in);
        auto want = r.eval(in);
        ASSERT_EQ(got.size(), 2u);
        for (std::size_t k = 0; k < 2; ++k) expect_close(got[k], want[k], 1e-4, 1e-5);
        EXPECT_EQ(ops_run(p, in)["cpu::dyn_lstm"], 1u);
    }
}
