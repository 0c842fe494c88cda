// Which programs' evals run on a thread team (targets/cpu/team_rule.hpp), and that they
// compute what ref does there: a chain of small 3x3 convolutions (Winograd kernels, the
// others small) does; the same at a batch of 16 (the input's reorder is too big to run
// alone), with too few team kernels, with more small others than team kernels, or on one
// thread does not. KILN_CPU_TEAM decides
// instead, and the program's run note says which.
#include "cpu_test_util.hpp"

#include "targets/cpu/kernels/winograd/winograd.hpp"
#include "targets/cpu/team_rule.hpp"

#include <kiln/context.hpp>

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

value arr(const std::vector<std::int64_t>& v) { return value(value::array(v.begin(), v.end())); }

// `layers` 3x3 convolutions (16 channels, bias, relu) of a 28x28 image, then `tail` softmaxes
// of its 16 channels' averages (small instructions that are not team kernels).
builder chain(std::size_t batch, std::size_t layers, std::size_t tail = 0) {
    builder b;
    auto y = b.param("x", {batch, 16, 28, 28});
    for (std::size_t i = 0; i < layers; ++i) {
        auto w = b.constant({16, 16, 3, 3}, 0.2f);
        y = b.op("convolution", value::object{{"padding", arr({1, 1, 1, 1})}}, {y, w, b.constant({16})});
        y = b.op("relu", {y});
    }
    if (tail > 0) y = b.op("pooling", value::object{{"mode", value(0)}, {"global", value(true)}}, {y});
    for (std::size_t i = 0; i < tail; ++i) y = b.op("softmax", value::object{{"axis", value(1)}}, {y});
    b.ret({y});
    return b;
}

bool on_a_team(const program& p) { return p.run_note().find("one team for the whole eval") != std::string::npos; }

}  // namespace

TEST(cpu_team_rule, a_chain_of_small_convolutions_runs_on_a_team) {
    test::env_override winograd("KILN_CPU_WINOGRAD", "all");
    test::env_override automatic("KILN_CPU_TEAM", nullptr);
    compile_options two;
    two.threads = 2;
    const auto b = chain(1, 8);
    auto r = run_both(b, 2e-4, 2e-4, two);
    ASSERT_NE(first_of<cpu::winograd_conv>(r.cpu), nullptr) << text(r.cpu);
    EXPECT_TRUE(cpu::runs_on_a_team(*r.cpu.get_main_module(), 2)) << text(r.cpu);
    EXPECT_FALSE(cpu::runs_on_a_team(*r.cpu.get_main_module(), 1));
    EXPECT_TRUE(on_a_team(r.cpu)) << r.cpu.run_note();
    // Every eval on the team computes the same values.
    const auto first = r.cpu_out[0].to_vector<float>();
    for (int i = 0; i < 50; ++i) {
        const auto again = r.cpu.eval(b.inputs);
        ASSERT_EQ(again[0].to_vector<float>(), first) << "eval " << i;
    }
}

TEST(cpu_team_rule, big_or_few_or_one_thread_runs_without) {
    test::env_override winograd("KILN_CPU_WINOGRAD", "all");
    test::env_override automatic("KILN_CPU_TEAM", nullptr);
    compile_options two;
    two.threads = 2;
    auto batch = run_both(chain(16, 8), 2e-4, 2e-4, two);
    EXPECT_FALSE(cpu::runs_on_a_team(*batch.cpu.get_main_module(), 2)) << text(batch.cpu);
    EXPECT_FALSE(on_a_team(batch.cpu)) << batch.cpu.run_note();
    auto few = run_both(chain(1, cpu::min_team_kernels - 1), 2e-4, 2e-4, two);
    EXPECT_FALSE(on_a_team(few.cpu)) << few.cpu.run_note();
    compile_options one;
    one.threads = 1;
    auto alone = run_both(chain(1, 8), 2e-4, 2e-4, one);
    EXPECT_FALSE(on_a_team(alone.cpu)) << alone.cpu.run_note();
}

TEST(cpu_team_rule, more_others_than_team_kernels_run_without) {
    // Small others, none of which would use both threads: only their count decides.
    test::env_override winograd("KILN_CPU_WINOGRAD", "all");
    test::env_override automatic("KILN_CPU_TEAM", nullptr);
    compile_options two;
    two.threads = 2;
    auto some = run_both(chain(1, 8, 2), 2e-4, 2e-4, two);
    const auto fewer = cpu::census_of(*some.cpu.get_main_module());
    ASSERT_TRUE(fewer.small) << text(some.cpu);
    ASSERT_EQ(fewer.team_kernels, 8u) << text(some.cpu);
    ASSERT_LE(fewer.others, fewer.team_kernels) << text(some.cpu);
    EXPECT_TRUE(on_a_team(some.cpu)) << some.cpu.run_note();

    auto many = run_both(chain(1, 8, 12), 2e-4, 2e-4, two);
    const auto more = cpu::census_of(*many.cpu.get_main_module());
    ASSERT_TRUE(more.small) << text(many.cpu);
    ASSERT_EQ(more.team_kernels, 8u) << text(many.cpu);
    ASSERT_GT(more.others, more.team_kernels) << text(many.cpu);
    ASSERT_LE(more.parallel_others * cpu::others_per_team_kernel, more.team_kernels) << text(many.cpu);
    EXPECT_FALSE(cpu::runs_on_a_team(*many.cpu.get_main_module(), 2));
    EXPECT_FALSE(on_a_team(many.cpu)) << many.cpu.run_note();
}

TEST(cpu_team_rule, the_switch_decides_instead) {
    test::env_override winograd("KILN_CPU_WINOGRAD", "all");
    compile_options two;
    two.threads = 2;
    {
        // Every program on a team, the batch of 16 too: the same results.
        test::env_override on("KILN_CPU_TEAM", "1");
        auto r = run_both(chain(16, 8), 2e-4, 2e-4, two);
        EXPECT_TRUE(on_a_team(r.cpu)) << r.cpu.run_note();
    }
    test::env_override off("KILN_CPU_TEAM", "0");
    auto r = run_both(chain(1, 8), 2e-4, 2e-4, two);
    EXPECT_FALSE(on_a_team(r.cpu)) << r.cpu.run_note();
}
