// Where a team program's parts run (targets/cpu/team_parts_trial.hpp): after the warm-up,
// blocks of each way in turn, a block's first eval not counted (so each way runs rounds x block evals); the fastest
// median wins for a period that doubles while trials agree and starts again when one disagrees; the run note says what
// was measured. A program on a team computes the same bits every way, and while the trial switches between them.
#include "cpu_test_util.hpp"

#include "targets/cpu/team_parts_trial.hpp"

#include <kiln/context.hpp>

#include <map>

using namespace kiln;
using namespace kiln::cpu_test;
using cpu::team_parts_trial;
using cpu::team::parts_on;

namespace {

// Runs evals through `trial` until its next trial has ended, each taking times[way]. Returns
// how often each way ran in the trial.
std::map<parts_on, std::size_t> run_trial(team_parts_trial& trial, const std::map<parts_on, double>& times) {
    std::map<parts_on, std::size_t> handed;
    for (std::size_t n = 0; !trial.in_trial(); ++n) {
        const parts_on where = trial.next();
        trial.record(where, times.at(where));
        if (n > 2 * team_parts_trial::max_period) return handed;
    }
    while (trial.in_trial()) {
        const parts_on where = trial.next();
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
        ASSERT_EQ(trial.next(), parts_on::team);
        trial.record(parts_on::team, 1e-3);
    }
    std::map<parts_on, double> times = {{parts_on::team, 2e-4}, {parts_on::caller, 1.5e-4}, {parts_on::worker, 1.8e-4}};
    // Every way gets its blocks, each block's first eval uncounted, before the choice.
    EXPECT_TRUE(trial.in_trial());
    auto handed = run_trial(trial, times);
    // Each way `rounds` blocks; the first block spreads as the warm-up did, so its first eval
    // counts too and that way needs one eval less.
    const std::size_t blocks = team_parts_trial::rounds * team_parts_trial::block;
    EXPECT_EQ(handed[parts_on::team], blocks - 1);
    EXPECT_EQ(handed[parts_on::caller], blocks);
    EXPECT_EQ(handed[parts_on::worker], blocks);
    EXPECT_EQ(trial.next(), parts_on::caller);
    EXPECT_NE(trial.note().find("parts on the calling thread (measured: 0.200 ms spread over the team, 0.150 ms on "
                                "the calling thread, 0.180 ms on a worker)"),
              std::string::npos)
        << trial.note();
    // A trial that agrees doubles the period; one that disagrees starts it again.
    EXPECT_EQ(period_of(trial, 1.5e-4), team_parts_trial::min_period);
    run_trial(trial, times);
    EXPECT_EQ(trial.next(), parts_on::caller);
    EXPECT_EQ(period_of(trial, 1.5e-4), 2 * team_parts_trial::min_period);
    times[parts_on::worker] = 1e-4;
    run_trial(trial, times);
    EXPECT_EQ(trial.next(), parts_on::worker) << trial.note();
    EXPECT_EQ(period_of(trial, 1e-4), team_parts_trial::min_period);
    // The period stops doubling at max_period.
    for (int i = 0; i < 8; ++i) run_trial(trial, times);
    EXPECT_EQ(period_of(trial, 1e-4), team_parts_trial::max_period);
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
            team_parts_trial::warm_evals + 3 * team_parts_trial::ways * team_parts_trial::block + 10;
        for (std::size_t i = 0; i < evals; ++i)
            ASSERT_EQ(r.cpu.eval(b.inputs)[0].to_vector<float>(), spread) << "eval " << i;
        EXPECT_NE(r.cpu.run_note().find("(measured: "), std::string::npos) << r.cpu.run_note();
    }
}
