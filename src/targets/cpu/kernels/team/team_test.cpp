// cpu::team: every part of a parallel() runs once, on the team's members in turn (the
// caller is member 0), across many calls in one team; exceptions from the caller's part,
// a worker's part, or the body reach the caller and release the workers; a team inside a
// team, parallel() inside a part, or parallel() outside a team, still runs every part.
#include "targets/cpu/kernels/team/team.hpp"

#include <gtest/gtest.h>

#include <omp.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace kiln::cpu;

TEST(cpu_team, every_part_once_on_the_members_in_turn) {
    std::vector<std::thread::id> who;
    std::size_t calls = 0;
    team::run(2, [&] {
        ASSERT_TRUE(team::active());
        ASSERT_EQ(team::size(), 2u) << "OpenMP gave fewer threads";
        EXPECT_EQ(team::threads(), 2u);
        for (std::size_t parts : {1, 2, 3, 7}) {
            for (int round = 0; round < 200; ++round) {
                std::vector<std::atomic<int>> ran(parts);
                std::vector<std::thread::id> ids(parts);
                team::parallel(parts, [&](std::size_t p) {
                    ran[p].fetch_add(1);
                    ids[p] = std::this_thread::get_id();
                });
                ++calls;
                for (std::size_t p = 0; p < parts; ++p) ASSERT_EQ(ran[p].load(), 1) << parts << " parts, part " << p;
                // Part 0 on the caller; with more parts than members, member p % 2 takes part p.
                EXPECT_EQ(ids[0], std::this_thread::get_id());
                for (std::size_t p = 2; p < parts; ++p) EXPECT_EQ(ids[p], ids[p % 2]);
                if (parts >= 2) who.push_back(ids[1]);
            }
        }
    });
    EXPECT_FALSE(team::active());
    EXPECT_EQ(calls, 800u);
    ASSERT_FALSE(who.empty());
    EXPECT_NE(who.front(), std::this_thread::get_id()) << "part 1 ran on the caller: no worker";
    for (const auto& id : who) EXPECT_EQ(id, who.front()) << "the worker changed within one team";
}

TEST(cpu_team, exceptions_reach_the_caller_and_release_the_workers) {
    for (std::size_t thrower : {0, 1}) {
        std::size_t after = 0;
        EXPECT_THROW(team::run(2,
                               [&] {
                                   team::parallel(2, [&](std::size_t p) {
                                       if (p == thrower) throw std::runtime_error("part failed");
                                   });
                                   ++after;
                               }),
                     std::runtime_error)
            << "part " << thrower;
        EXPECT_EQ(after, 0u);
        EXPECT_FALSE(team::active());
    }
    // A part that throws, caught inside the body: the team goes on.
    std::size_t ok = 0;
    team::run(2, [&] {
        try {
            team::parallel(2, [](std::size_t p) {
                if (p == 1) throw std::runtime_error("worker failed");
            });
        } catch (const std::runtime_error&) {
            ++ok;
        }
        std::atomic<int> ran{0};
        team::parallel(2, [&](std::size_t) { ran.fetch_add(1); });
        ok += static_cast<std::size_t>(ran.load());
    });
    EXPECT_EQ(ok, 3u);
    EXPECT_THROW(team::run(2, [] { throw std::logic_error("body failed"); }), std::logic_error);
    EXPECT_FALSE(team::active());
}

TEST(cpu_team, without_a_team_or_inside_one) {
    // Outside a team: OpenMP's threads, every part once.
    EXPECT_FALSE(team::active());
    EXPECT_EQ(team::size(), 1u);
    std::vector<std::atomic<int>> ran(5);
    team::parallel(5, [&](std::size_t p) { ran[p].fetch_add(1); });
    for (auto& r : ran) EXPECT_EQ(r.load(), 1);
    EXPECT_THROW(team::parallel(3, [](std::size_t p) {
                     if (p == 2) throw std::runtime_error("x");
                 }),
                 std::runtime_error);
    // One thread, or a team inside a team: the body runs on the caller as it is.
    bool inner_active = true;
    team::run(1, [&] { inner_active = team::active(); });
    EXPECT_FALSE(inner_active);
    std::size_t inner_size = 0;
    team::run(2, [&] { team::run(2, [&] { inner_size = team::size(); }); });
    EXPECT_EQ(inner_size, 2u);
}

TEST(cpu_team, a_parallel_inside_a_part_runs_its_parts_there) {
    std::vector<std::atomic<int>> ran(2 * 3);
    team::run(2, [&] {
        for (int round = 0; round < 100; ++round) {
            for (auto& r : ran) r.store(0);
            team::parallel(2, [&](std::size_t outer) {
                const auto here = std::this_thread::get_id();
                team::parallel(3, [&](std::size_t inner) {
                    EXPECT_EQ(std::this_thread::get_id(), here);
                    ran[outer * 3 + inner].fetch_add(1);
                });
            });
            for (auto& r : ran) ASSERT_EQ(r.load(), 1) << "round " << round;
        }
    });
}

TEST(cpu_team, parts_on_one_thread_the_caller_or_a_worker) {
    const auto caller = std::this_thread::get_id();
    for (const auto where : {team::parts_on::caller, team::parts_on::worker}) {
        std::thread::id body_on;
        std::vector<std::thread::id> ids(5);
        team::run(
            2,
            [&] {
                body_on = std::this_thread::get_id();
                // The team's size stays (the kernels cut the same parts every way).
                EXPECT_EQ(team::size(), 2u);
                EXPECT_EQ(team::threads(), 2u);
                for (int round = 0; round < 50; ++round)
                    team::parallel(ids.size(), [&](std::size_t p) { ids[p] = std::this_thread::get_id(); });
            },
            where);
        for (const auto& id : ids) EXPECT_EQ(id, body_on) << "a part left the body's thread";
        if (where == team::parts_on::caller)
            EXPECT_EQ(body_on, caller);
        else
            EXPECT_NE(body_on, caller) << "the body ran on the caller, not a worker";
        EXPECT_FALSE(team::active());
        // The body's and a part's exceptions reach the caller, from a worker too.
        EXPECT_THROW(team::run(
                         2, [] { throw std::logic_error("body failed"); }, where),
                     std::logic_error);
        EXPECT_THROW(team::run(
                         2,
                         [] {
                             team::parallel(3, [](std::size_t p) {
                                 if (p == 2) throw std::runtime_error("part failed");
                             });
                         },
                         where),
                     std::runtime_error);
        EXPECT_FALSE(team::active());
    }
}
