// Unit tests of a dynamic program's generic program (src/core/program.cpp): compiled
// once, it runs every shape in range without compiling; the inputs' optimals are compiled
// ahead; shapes that recur get specializations compiled in the background while the
// generic program serves their calls, so no call waits for a compile; a failed background
// compile leaves the shapes on the generic program; the option survives .kiln save and
// load.
#include "core/buffer_recycler.hpp"
#include "specialization_gate.hpp"

#include <kiln/errors.hpp>
#include <kiln/program.hpp>
#include <kiln/serialize.hpp>
#include <kiln/target.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

using namespace kiln;
using namespace kiln::test::spec;

namespace {

compile_options after(std::size_t n) {
    compile_options o;
    o.specialize_after = n;
    return o;
}

}  // namespace

TEST(generic_program, runs_every_shape_without_compiling) {
    constexpr std::size_t cols = 16;
    auto p = make_model(cols);
    p.compile(*get_target("ref"), after(0));
    auto s = p.get_specialization_stats();
    ASSERT_TRUE(s.generic) << s.generic_unavailable;
    EXPECT_EQ(s.generic_unavailable, "");
    for (std::size_t rows = 1; rows <= 200; ++rows) expect_tripled(p.eval({{"x", rows_of(rows, cols)}})[0], rows, cols);
    for (std::size_t rows : {7, 7, 7}) expect_tripled(p.eval({{"x", rows_of(rows, cols)}})[0], rows, cols);
    s = p.get_specialization_stats();
    EXPECT_EQ(s.compiles, 0u);
    EXPECT_EQ(s.cached, 0u);
    EXPECT_EQ(s.generic_runs, 203u);
    EXPECT_EQ(s.hits, 0u);
}

TEST(generic_program, default_specializes_on_the_second_call) {
    EXPECT_EQ(compile_options{}.specialize_after, 2u);
    auto p = make_model(8);
    p.compile(*get_target("ref"));
    for (std::size_t rows : {3, 4, 5}) expect_tripled(p.eval({{"x", rows_of(rows, 8)}})[0], rows, 8);
    p.finish_specializations();
    EXPECT_EQ(p.get_specialization_stats().compiles, 0u);  // each shape came once
    expect_tripled(p.eval({{"x", rows_of(4, 8)}})[0], 4, 8);
    p.finish_specializations();
    EXPECT_EQ(p.get_specialization_stats().compiles, 1u);
    expect_tripled(p.eval({{"x", rows_of(4, 8)}})[0], 4, 8);
    auto s = p.get_specialization_stats();
    EXPECT_EQ(s.hits, 1u);
    EXPECT_EQ(s.background_compiles, 1u);
    EXPECT_EQ(s.generic_runs, 4u);
}

// The compile of rows 5 is held at the gate: the calls of rows 5 (and of a new shape)
// go on on the generic program meanwhile, and use the specialization once it is ready.
TEST(generic_program, calls_never_wait_for_a_background_compile) {
    constexpr std::size_t cols = 16;
    auto& g = gate();
    g.reset(/*hold*/ 5, /*fail*/ 0);
    auto p = make_model(cols);
    p.compile(*get_target("core_test_gated_generic"), after(2));
    ASSERT_TRUE(p.get_specialization_stats().generic) << p.get_specialization_stats().generic_unavailable;
    expect_tripled(p.eval({{"x", rows_of(5, cols)}})[0], 5, cols);
    expect_tripled(p.eval({{"x", rows_of(5, cols)}})[0], 5, cols);  // queues its compile
    ASSERT_TRUE(g.wait_for_waiting(1)) << "the background compile of rows 5 never reached the gate";
    for (int i = 0; i < 10; ++i) {
        expect_tripled(p.eval({{"x", rows_of(5, cols, 2.0f)}})[0], 5, cols, 2.0f);
        expect_tripled(p.eval({{"x", rows_of(6, cols)}})[0], 6, cols);  // queued behind rows 5's
    }
    bool ended = false;
    {
        std::lock_guard<std::mutex> lock(g.m);
        ended = g.held_compile_ended;
    }
    EXPECT_FALSE(ended) << "a call waited for the background compile";
    auto s = p.get_specialization_stats();
    EXPECT_EQ(s.generic_runs, 22u);
    EXPECT_EQ(s.compiles, 0u);
    EXPECT_EQ(s.cached, 2u);  // both compiling
    g.release();
    p.finish_specializations();
    expect_tripled(p.eval({{"x", rows_of(5, cols)}})[0], 5, cols);
    expect_tripled(p.eval({{"x", rows_of(6, cols)}})[0], 6, cols);
    s = p.get_specialization_stats();
    EXPECT_EQ(s.compiles, 2u);
    EXPECT_EQ(s.background_compiles, 2u);
    EXPECT_EQ(s.hits, 2u);
    EXPECT_EQ(s.generic_runs, 22u);
    EXPECT_EQ(g.compiles_of(5), 1u);
}

// Two threads run different shapes on one program while a compile is held: both finish.
TEST(generic_program, two_threads_with_different_shapes) {
    constexpr std::size_t cols = 32;
    auto& g = gate();
    g.reset(/*hold*/ 3, /*fail*/ 0);
    auto p = make_model(cols);
    p.compile(*get_target("core_test_gated_generic"), after(1));
    std::atomic<int> bad{0};
    auto worker = [&](std::size_t rows, float first) {
        for (int i = 0; i < 50; ++i) {
            auto r = p.eval({{"x", rows_of(rows, cols, first)}})[0];
            const float* v = r.data_as<float>();
            if (r.get_shape().lens() != std::vector<std::size_t>{rows, cols} || v[0] != 3.0f * first) ++bad;
        }
    };
    std::thread a(worker, 3, 1.0f);
    std::thread b(worker, 11, 4.0f);
    a.join();
    b.join();
    EXPECT_EQ(bad.load(), 0);
    bool ended = false;
    {
        std::lock_guard<std::mutex> lock(g.m);
        ended = g.held_compile_ended;
    }
    EXPECT_FALSE(ended) << "thread A's calls waited for the held compile of its shape";
    g.release();
    p.finish_specializations();
    EXPECT_EQ(p.get_specialization_stats().compiles, 2u);
}

// The optimals are compiled ahead, at compile(): here every dynamic dim has optimals, so
// each combination is a static program.
TEST(generic_program, optimals_are_compiled_ahead) {
    auto p = scaled_model(shape::make_dynamic(type::float32, {{1, 64, {4, 8}}, {8, 8, {}}}));
    p.compile(*get_target("ref"), after(5));
    EXPECT_EQ(p.get_specialization_stats().compiles, 2u);
    expect_tripled(p.eval({{"x", rows_of(3, 8)}})[0], 3, 8);  // not an optimal: generic
    expect_tripled(p.eval({{"x", rows_of(8, 8)}})[0], 8, 8);
    expect_tripled(p.eval({{"x", rows_of(4, 8)}})[0], 4, 8);
    p.finish_specializations();
    auto s = p.get_specialization_stats();
    EXPECT_EQ(s.compiles, 2u);
    EXPECT_EQ(s.generic_runs, 1u);
    EXPECT_EQ(s.hits, 2u);
}

// A dim with optimals next to one without (a decoder's sequence at 1, its past free): the
// program compiled ahead fixes the first and keeps the second a range, so it serves every
// call at the optimal without compiling.
TEST(generic_program, optimals_next_to_free_dims_compile_one_program_for_the_range) {
    auto p = scaled_model(shape::make_dynamic(type::float32, {{1, 16, {1}}, {1, 64, {}}}));
    p.compile(*get_target("ref"), after(100));
    EXPECT_EQ(p.get_specialization_stats().compiles, 1u);
    for (std::size_t cols = 1; cols <= 40; ++cols) expect_tripled(p.eval({{"x", rows_of(1, cols)}})[0], 1, cols);
    expect_tripled(p.eval({{"x", rows_of(2, 5)}})[0], 2, 5);
    auto s = p.get_specialization_stats();
    EXPECT_EQ(s.compiles, 1u);
    EXPECT_EQ(s.hits, 40u);
    EXPECT_EQ(s.generic_runs, 1u);
}

// specialize_after 0 compiles nothing but the generic program, optimals or not.
TEST(generic_program, specialize_after_zero_compiles_no_optimals) {
    auto p = scaled_model(shape::make_dynamic(type::float32, {{1, 64, {4, 8}}, {8, 8, {}}}));
    p.compile(*get_target("ref"), after(0));
    expect_tripled(p.eval({{"x", rows_of(8, 8)}})[0], 8, 8);
    auto s = p.get_specialization_stats();
    EXPECT_EQ(s.compiles, 0u);
    EXPECT_EQ(s.generic_runs, 1u);
}

// A background compile that fails is counted and not tried again; the generic program
// goes on serving those shapes.
TEST(generic_program, failed_background_compile_keeps_the_generic_program) {
    constexpr std::size_t cols = 16;
    auto& g = gate();
    g.reset(/*hold*/ 0, /*fail*/ 9);
    auto p = make_model(cols);
    p.compile(*get_target("core_test_gated_generic"), after(1));
    for (int i = 0; i < 5; ++i) {
        expect_tripled(p.eval({{"x", rows_of(9, cols)}})[0], 9, cols);
        p.finish_specializations();
    }
    auto s = p.get_specialization_stats();
    EXPECT_EQ(s.failed_compiles, 1u);
    EXPECT_EQ(s.compiles, 0u);
    EXPECT_EQ(s.cached, 0u);
    EXPECT_EQ(s.generic_runs, 5u);
    EXPECT_EQ(g.compiles_of(9), 1u);
}

TEST(generic_program, survives_save_and_load) {
    auto p = make_model(8);
    p.compile(*get_target("ref"), after(3));
    auto bytes = save_buffer(p);
    auto q = load_buffer(bytes.data(), bytes.size());
    EXPECT_EQ(q.get_compile_options().specialize_after, 3u);
    EXPECT_TRUE(q.get_specialization_stats().generic);
    for (std::size_t rows : {1, 2, 3, 4}) expect_tripled(q.eval({{"x", rows_of(rows, 8)}})[0], rows, 8);
    auto s = q.get_specialization_stats();
    EXPECT_EQ(s.generic_runs, 4u);
    EXPECT_EQ(s.compiles, 0u);
}

// The programs compiled ahead for the optimals are saved in the .kiln: loading restores
// them instead of compiling them again, and they serve their shapes as before.
TEST(generic_program, programs_compiled_ahead_are_saved_and_not_compiled_at_load) {
    auto& g = gate();
    g.reset(0, 0);
    auto p = scaled_model(shape::make_dynamic(type::float32, {{1, 64, {4, 8}}, {8, 8, {}}}));
    p.compile(*get_target("core_test_gated_generic"), after(5));
    EXPECT_EQ(p.compiled_ahead().size(), 2u);
    EXPECT_EQ(g.compiles_of(4), 1u);
    EXPECT_EQ(g.compiles_of(8), 1u);
    auto bytes = save_buffer(p);
    auto q = load_buffer(bytes.data(), bytes.size());
    EXPECT_EQ(q.compiled_ahead().size(), 2u);
    EXPECT_EQ(g.compiles_of(4), 1u);
    EXPECT_EQ(g.compiles_of(8), 1u);
    expect_tripled(q.eval({{"x", rows_of(4, 8)}})[0], 4, 8);
    expect_tripled(q.eval({{"x", rows_of(8, 8)}})[0], 8, 8);
    expect_tripled(q.eval({{"x", rows_of(3, 8)}})[0], 3, 8);
    auto s = q.get_specialization_stats();
    EXPECT_EQ(s.compiles, 0u);
    EXPECT_EQ(s.hits, 2u);
    EXPECT_EQ(s.generic_runs, 1u);
}

// Two inputs with their own names: x's rows (n) stay at 2 while y's rows (m) change on
// every call, as a decoder's past length does. After m has changed twice, a program with
// m free and n fixed is compiled in the background; the later calls run on it.
TEST(generic_program, a_name_that_keeps_changing_gets_a_program_with_it_free) {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape::make_dynamic(type::float32, {{1, 16, {}, "n"}, {8, 8, {}}}));
    auto y = m->add_parameter("y", shape::make_dynamic(type::float32, {{1, 64, {}, "m"}, {8, 8, {}}}));
    auto x2 = m->add_instruction(test::test_scale{2.0f}, {x});
    auto y2 = m->add_instruction(test::test_scale{2.0f}, {y});
    m->add_return({m->add_instruction(test::test_scale{1.5f}, {x2}), m->add_instruction(test::test_scale{1.5f}, {y2})});
    p.compile(*get_target("ref"), after(2));
    for (std::size_t rows = 1; rows <= 30; ++rows) {
        auto r = p.eval({{"x", rows_of(2, 8)}, {"y", rows_of(rows, 8, 3.0f)}});
        expect_tripled(r.at(0), 2, 8);
        expect_tripled(r.at(1), rows, 8, 3.0f);
        if (rows == 4) p.finish_specializations();  // queued by the 4th call
    }
    auto s = p.get_specialization_stats();
    EXPECT_EQ(s.compiles, 1u);  // the program for m free, n = 2: no shape recurred
    EXPECT_EQ(s.background_compiles, 1u);
    EXPECT_EQ(s.hits, 26u);  // calls 5..30
    EXPECT_EQ(s.generic_runs, 4u);
}

// A working set larger than the cache: each recurring shape is specialized once; one
// that was evicted runs on the generic program instead of compiling again.
TEST(generic_program, evicted_shapes_are_not_compiled_again) {
    auto p = make_model(8);
    compile_options o = after(1);
    o.max_specializations = 2;
    p.compile(*get_target("ref"), o);
    for (int round = 0; round < 4; ++round)
        for (std::size_t rows : {1, 2, 3}) {
            expect_tripled(p.eval({{"x", rows_of(rows, 8)}})[0], rows, 8);
            p.finish_specializations();
        }
    auto s = p.get_specialization_stats();
    EXPECT_EQ(s.compiles, 3u);
    EXPECT_EQ(s.evictions, 1u);
    EXPECT_EQ(s.cached, 2u);
}

// A program for a range whose free dim everything depends on (an encoder's sequence with
// the batch at its optimal) is little faster than the generic program: shapes that recur
// on it still get their own specialization.
TEST(generic_program, recurring_shapes_on_a_mostly_dynamic_range_program_are_specialized) {
    auto p = scaled_model(shape::make_dynamic(type::float32, {{1, 16, {1}, "n"}, {1, 64, {}, "m"}}));
    p.compile(*get_target("ref"), after(2));
    EXPECT_EQ(p.get_specialization_stats().compiles, 1u);  // n = 1, m free
    for (int i = 0; i < 2; ++i) expect_tripled(p.eval({{"x", rows_of(1, 5)}})[0], 1, 5);
    p.finish_specializations();
    expect_tripled(p.eval({{"x", rows_of(1, 5)}})[0], 1, 5);
    auto s = p.get_specialization_stats();
    EXPECT_EQ(s.compiles, 2u);
    EXPECT_EQ(s.background_compiles, 1u);
    EXPECT_EQ(s.hits, 3u);  // twice on the range program, then on the specialization
}

// A warm generic program allocates nothing from the system for its intermediate results:
// the buffers of its last evals serve the next ones (buffer_recycler), for the same shapes
// and for smaller ones; only a larger shape grows them.
TEST(generic_program, a_warm_generic_eval_allocates_no_intermediate_buffers) {
    auto p = make_model(8);
    p.compile(*get_target("ref"), after(0));
    (void)p.eval({{"x", rows_of(20, 8)}});
    for (std::size_t rows : {20, 7, 20, 1}) {
        auto x = rows_of(rows, 8);
        const auto before = detail::fresh_allocations();
        auto r = p.eval({{"x", x}});
        // At most the result handed to the caller (it may not alias a kept buffer).
        EXPECT_LE(detail::fresh_allocations() - before, 1u) << rows << " rows";
        expect_tripled(r[0], rows, 8);
    }
    EXPECT_EQ(p.get_specialization_stats().generic_runs, 5u);
}

// Once specializations have served 16 calls in a row, the generic program's kept buffers are
// freed (they would sit beside the specializations' arenas); its next run allocates them
// again. 15 in a row keep them.
TEST(generic_program, kept_buffers_are_freed_after_many_calls_without_it) {
    auto p = make_model(8);
    p.compile(*get_target("ref"), after(2));
    for (int i = 0; i < 2; ++i) (void)p.eval({{"x", rows_of(20, 8)}});
    p.finish_specializations();
    auto generic_allocations = [&](std::size_t rows) {
        const auto before = detail::fresh_allocations();
        auto r = p.eval({{"x", rows_of(rows, 8)}});
        expect_tripled(r[0], rows, 8);
        return detail::fresh_allocations() - before;
    };
    for (int i = 0; i < 15; ++i) expect_tripled(p.eval({{"x", rows_of(20, 8)}})[0], 20, 8);
    EXPECT_LE(generic_allocations(7), 1u);  // warm: the kept buffers serve it
    for (int i = 0; i < 16; ++i) expect_tripled(p.eval({{"x", rows_of(20, 8)}})[0], 20, 8);
    EXPECT_GT(generic_allocations(5), 1u);  // freed: allocated again
    EXPECT_LE(generic_allocations(6), 1u);  // and kept again
    auto s = p.get_specialization_stats();
    EXPECT_EQ(s.generic_runs, 5u);
    EXPECT_EQ(s.hits, 31u);
}
