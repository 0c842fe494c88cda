// Where a team program's parts run (targets/cpu/team_parts_trial.hpp): after the warm-up,
// blocks of each way in turn, a block's first eval not counted (so each way runs rounds x block evals); the fastest
// median wins for a period that doubles while trials agree and starts again when one disagrees; the run note says what
// was measured. A program on a team computes the same bits every way, and while the trial switches between them.
#include "core/buffer_recycler.hpp"
#include "cpu_test_util.hpp"
#include "specialization_gate.hpp"
#include "targets/cpu/team_parts_trial.hpp"

#include <kiln/context.hpp>
#include <kiln/errors.hpp>

#include <map>

using namespace kiln;
using namespace kiln::cpu_test;
using cpu::eval_way;
using cpu::team_parts_trial;

namespace {

// Runs evals through `trial` until its next trial has ended, each taking times[way]. Returns
// how often each way ran in the trial.
std::map<eval_way, std::size_t> run_trial(team_parts_trial& trial, const std::map<eval_way, double>& times) {
    std::map<eval_way, std::size_t> handed;
    for (std::size_t n = 0; !trial.in_trial(); ++n) {
        const eval_way where = trial.next();
        trial.record(where, times.at(where));
        if (n > 2 * team_parts_trial::max_period) return handed;
    }
    while (trial.in_trial()) {
        const eval_way where = trial.next();
        trial.record(where, times.at(where));
        ++handed[where];
        if (handed[where] > 100 * team_parts_trial::trial_evals) break;
    }
    return handed;
}

// Evals until the settled choice gives way to the next trial.
std::size_t period_of(team_parts_trial& trial, double seconds) {
    std::size_t n = 0;
    while (!trial.in_trial()) {
        trial.record(trial.next(), seconds);
        if (++n > 2 * team_parts_trial::max_period) break;
    }
    return n;
}

}  // namespace

TEST(cpu_team_parts_trial, the_fastest_way_wins_and_trials_thin_out) {
    team_parts_trial trial;
    EXPECT_EQ(trial.note(), "");
    // The warm-up spreads the parts, as the team always did.
    for (std::size_t i = 0; i < team_parts_trial::warm_evals; ++i) {
        ASSERT_EQ(trial.next(), eval_way::spread);
        trial.record(eval_way::spread, 1e-3);
    }
    std::map<eval_way, double> times = {
        {eval_way::spread, 2e-4}, {eval_way::caller, 1.5e-4}, {eval_way::worker, 1.8e-4}};
    // Every way gets its blocks, each block's first eval uncounted, before the choice.
    EXPECT_TRUE(trial.in_trial());
    auto handed = run_trial(trial, times);
    // Each way `rounds` blocks; the first block spreads as the warm-up did, so its first eval
    // counts too and that way needs one eval less.
    const std::size_t blocks = team_parts_trial::rounds * team_parts_trial::block;
    EXPECT_EQ(handed[eval_way::spread], blocks - 1);
    EXPECT_EQ(handed[eval_way::caller], blocks);
    EXPECT_EQ(handed[eval_way::worker], blocks);
    EXPECT_EQ(trial.next(), eval_way::caller);
    EXPECT_NE(trial.note().find("parts on the calling thread (measured: 0.200 ms spread over the team, 0.150 ms on "
                                "the calling thread, 0.180 ms on a worker)"),
              std::string::npos)
        << trial.note();
    // A trial that agrees doubles the period; one that disagrees starts it again.
    EXPECT_EQ(period_of(trial, 1.5e-4), team_parts_trial::min_period);
    run_trial(trial, times);
    EXPECT_EQ(trial.next(), eval_way::caller);
    EXPECT_EQ(period_of(trial, 1.5e-4), 2 * team_parts_trial::min_period);
    times[eval_way::worker] = 1e-4;
    run_trial(trial, times);
    EXPECT_EQ(trial.next(), eval_way::worker) << trial.note();
    EXPECT_EQ(period_of(trial, 1e-4), team_parts_trial::min_period);
    // The period stops doubling at max_period.
    for (int i = 0; i < 8; ++i) run_trial(trial, times);
    EXPECT_EQ(period_of(trial, 1e-4), team_parts_trial::max_period);
}

TEST(cpu_team_parts_trial, a_way_clearly_slower_is_dropped_after_one_block) {
    // A program off the team: it starts without one, and a team that runs it at twice the
    // time costs one block of each team way.
    team_parts_trial trial(true);
    EXPECT_EQ(trial.next(), eval_way::no_team);
    std::map<eval_way, double> times = {
        {eval_way::no_team, 1e-3}, {eval_way::spread, 2e-3}, {eval_way::caller, 2e-3}, {eval_way::worker, 1.9e-3}};
    auto handed = run_trial(trial, times);
    const std::size_t blocks = team_parts_trial::rounds * team_parts_trial::block;
    // One block each; with every other way dropped, the trial ends there.
    for (const auto way : {eval_way::no_team, eval_way::spread, eval_way::caller, eval_way::worker})
        EXPECT_EQ(handed[way], team_parts_trial::block) << static_cast<int>(way);
    EXPECT_EQ(trial.next(), eval_way::no_team);
    EXPECT_NE(
        trial.note().find(
            "an OpenMP region per kernel (measured: 1.000 ms without a team, 2.000 ms spread over the team (dropped)"),
        std::string::npos)
        << trial.note();
    // Every other way dropped: no doubt, the longest period at once.
    EXPECT_EQ(period_of(trial, 1e-3), team_parts_trial::max_period);
    // Where a team way is as fast, the trial runs in full and may choose it.
    team_parts_trial close(true);
    auto all = run_trial(close, {{eval_way::no_team, 1e-3},
                                 {eval_way::spread, 1.2e-3},
                                 {eval_way::caller, 0.9e-3},
                                 {eval_way::worker, 1.1e-3}});
    for (const auto way : {eval_way::spread, eval_way::caller, eval_way::worker}) EXPECT_EQ(all[way], blocks);
    EXPECT_EQ(close.next(), eval_way::caller) << close.note();
}

TEST(cpu_team_parts_trial, where_evals_take_milliseconds_one_eval_drops_a_way_that_cannot_win) {
    // About resnet50's figures on the 2-vCPU Zen 5 (docs/performance.md): each team way costs
    // one eval, and the trial ends once no other way is left.
    team_parts_trial trial(true);
    auto handed = run_trial(trial, {{eval_way::no_team, 21e-3},
                                    {eval_way::spread, 33e-3},
                                    {eval_way::caller, 36.7e-3},
                                    {eval_way::worker, 39.6e-3}});
    EXPECT_EQ(handed[eval_way::no_team], team_parts_trial::block);
    for (const auto way : {eval_way::spread, eval_way::caller, eval_way::worker})
        EXPECT_EQ(handed[way], 1u) << static_cast<int>(way);
    EXPECT_TRUE(trial.measured());
    EXPECT_EQ(trial.next(), eval_way::no_team);
    EXPECT_NE(trial.note().find("33.000 ms spread over the team (dropped), 36.700 ms on the calling thread (dropped)"),
              std::string::npos)
        << trial.note();
    EXPECT_EQ(period_of(trial, 21e-3), team_parts_trial::max_period);
}

TEST(cpu_team_parts_trial, one_slow_eval_of_a_short_program_does_not_drop_its_way) {
    // A preemption can hold up one eval by about a scheduler slice: five times a 0.1 ms eval
    // once is no reason to drop the fastest way, nor are the others close to it.
    team_parts_trial trial;
    EXPECT_FALSE(trial.measured());
    while (!trial.in_trial()) trial.record(trial.next(), 2e-4);
    const std::map<eval_way, double> times = {
        {eval_way::spread, 1.3e-4}, {eval_way::caller, 1e-4}, {eval_way::worker, 1.2e-4}};
    bool spiked = false;
    std::size_t evals = 0;
    while (trial.in_trial() && ++evals < 1000) {
        const eval_way where = trial.next();
        double seconds = times.at(where);
        if (where == eval_way::caller && !spiked) spiked = true, seconds = 5e-4;
        trial.record(where, seconds);
    }
    EXPECT_TRUE(trial.measured());
    EXPECT_EQ(trial.next(), eval_way::caller) << trial.note();
    EXPECT_EQ(trial.note().find("dropped"), std::string::npos) << trial.note();
}

TEST(cpu_team_parts_trial, a_program_on_a_team_gives_the_same_bits_every_way) {
    test::env_override winograd("KILN_CPU_WINOGRAD", "all");
    test::env_override team("KILN_CPU_TEAM", "1");
    compile_options two;
    two.threads = 2;
    // A chain of small 3x3 convolutions (Winograd, the team's own kernels) with a tail.
    builder b;
    auto y = b.param("x", {1, 16, 28, 28});
    for (int i = 0; i < 4; ++i) {
        auto w = b.constant({16, 16, 3, 3}, 0.2f);
        const std::vector<std::int64_t> pads = {1, 1, 1, 1};
        y = b.op("convolution", value::object{{"padding", value(value::array(pads.begin(), pads.end()))}},
                 {y, w, b.constant({16})});
        y = b.op("relu", {y});
    }
    b.ret({y});
    std::vector<float> spread;
    for (const char* way : std::initializer_list<const char*>{"team", "caller", "worker", nullptr}) {
        test::env_override parts("KILN_CPU_TEAM_PARTS", way);
        auto r = run_both(b, 2e-4, 2e-4, two);
        const auto got = r.cpu_out[0].to_vector<float>();
        if (spread.empty()) spread = got;
        ASSERT_EQ(got, spread) << (way ? way : "measured");
        if (way) {
            EXPECT_NE(r.cpu.run_note().find(std::string("KILN_CPU_TEAM_PARTS")), std::string::npos) << r.cpu.run_note();
            continue;
        }
        // Measured: through the warm-up, a trial and beyond, every eval the same bits.
        const std::size_t evals =
            team_parts_trial::warm_evals + 3 * team_parts_trial::all_ways * team_parts_trial::block + 10;
        for (std::size_t i = 0; i < evals; ++i)
            ASSERT_EQ(r.cpu.eval(b.inputs)[0].to_vector<float>(), spread) << "eval " << i;
        EXPECT_NE(r.cpu.run_note().find("(measured: "), std::string::npos) << r.cpu.run_note();
    }
}

TEST(cpu_team_parts_trial, a_program_off_the_team_measures_whether_to_join_it) {
    test::env_override team("KILN_CPU_TEAM", nullptr);
    test::env_override parts("KILN_CPU_TEAM_PARTS", nullptr);
    compile_options two;
    two.threads = 2;
    // A batch of 4 small convolutions and softmaxes: too big for the rule.
    builder b;
    auto y = b.param("x", {4, 16, 28, 28});
    const std::vector<std::int64_t> pads = {1, 1, 1, 1};
    for (int i = 0; i < 2; ++i) {
        auto w = b.constant({16, 16, 3, 3}, 0.2f);
        y = b.op("convolution", value::object{{"padding", value(value::array(pads.begin(), pads.end()))}},
                 {y, w, b.constant({16})});
        y = b.op("softmax", value::object{{"axis", value(1)}}, {y});
    }
    b.ret({y});
    auto r = run_both(b, 2e-4, 2e-4, two);
    EXPECT_EQ(r.cpu.run_note().find("one team for the whole eval"), std::string::npos) << r.cpu.run_note();
    const auto first = r.cpu_out[0].to_vector<float>();
    const std::size_t evals =
        team_parts_trial::warm_evals + 3 * team_parts_trial::all_ways * team_parts_trial::block + 10;
    for (std::size_t i = 0; i < evals; ++i)
        ASSERT_EQ(r.cpu.eval(b.inputs)[0].to_vector<float>(), first) << "eval " << i;
    EXPECT_NE(r.cpu.run_note().find("(measured: "), std::string::npos) << r.cpu.run_note();
    EXPECT_NE(r.cpu.run_note().find("without a team"), std::string::npos) << r.cpu.run_note();
    // Held off the team: no trial.
    test::env_override off("KILN_CPU_TEAM", "0");
    auto held = run_both(b, 2e-4, 2e-4, two);
    for (std::size_t i = 0; i < evals; ++i) held.cpu.eval(b.inputs);
    EXPECT_EQ(held.cpu.run_note(), "2 threads, an OpenMP region per kernel");
}

// A generic program's eval on the team's worker allocates as the calling thread would: from
// the buffers of its last eval, and counted on the caller.
TEST(cpu_team_parts_trial, an_eval_on_a_worker_allocates_as_the_caller_would) {
    test::env_override team("KILN_CPU_TEAM", "1");
    test::env_override parts("KILN_CPU_TEAM_PARTS", "worker");
    compile_options o;
    o.threads = 2;
    o.specialize_after = 0;
    auto p = test::spec::make_model(8);
    p.compile(*get_target("cpu"), o);
    const auto cold = detail::fresh_allocations();
    test::spec::expect_tripled(p.eval({{"x", test::spec::rows_of(20, 8)}})[0], 20, 8);
    EXPECT_GT(detail::fresh_allocations() - cold, 1u) << "the worker's allocations were not counted here";
    EXPECT_NE(p.run_note().find("parts on a worker"), std::string::npos) << p.run_note();
    for (std::size_t rows : {20, 7}) {
        const auto before = detail::fresh_allocations();
        test::spec::expect_tripled(p.eval({{"x", test::spec::rows_of(rows, 8)}})[0], rows, 8);
        EXPECT_LE(detail::fresh_allocations() - before, 1u) << rows << " rows: the worker had no recycler";
    }
    // A larger shape grows the kept buffers: counted here, though the worker allocated them.
    const auto before = detail::fresh_allocations();
    test::spec::expect_tripled(p.eval({{"x", test::spec::rows_of(60, 8)}})[0], 60, 8);
    EXPECT_GT(detail::fresh_allocations() - before, 1u);
}
