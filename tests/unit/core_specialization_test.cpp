// Unit tests of a dynamic program's specializations (src/core/program.cpp) where the
// target builds no generic program, so each new set of shapes compiles on its first call
// (core_test_gated; core_generic_program_test.cpp has the generic program): the LRU
// bound and exact counts over many shapes, compiles that hold no lock other callers wait
// on, one shared compile for concurrent callers of the same new shapes, failed compiles,
// memory returned on eviction, and max_specializations through .kiln save and load.
#include "serialize/payload.hpp"
#include "specialization_gate.hpp"

#include <kiln/errors.hpp>
#include <kiln/program.hpp>
#include <kiln/serialize.hpp>
#include <kiln/target.hpp>

#include <gtest/gtest.h>

#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <list>
#include <map>
#include <mutex>
#include <thread>

using namespace kiln;
using namespace kiln::test::spec;
using namespace std::chrono_literals;

TEST(specialization, default_bound_is_small) {
    EXPECT_EQ(compile_options{}.max_specializations, 8u);
    auto p = make_model(4);
    p.compile(*get_target("ref"));
    EXPECT_EQ(p.get_specialization_stats().max_specializations, 8u);
    auto s = make_model(4);
    s.get_main_module()->set_parameter_shape("x", shape(type::float32, {2, 4}));
    s.compile(*get_target("ref"));
    s.eval({{"x", rows_of(2, 4)}});
    EXPECT_EQ(s.get_specialization_stats().compiles, 0u);  // a static program has none
}

// 200 sequence lengths through one program, each followed by a length seen a few calls
// before: the cache never holds more than its bound, every compile and eviction is
// counted exactly (against an LRU model), and resident memory stays bounded.
TEST(specialization, two_hundred_shapes_stay_bounded) {
    constexpr std::size_t cols = 1024, bound = 4;
    gate().reset(0, 0);
    auto p = make_model(cols);
    p.compile(*get_target("core_test_gated"), bounded(bound));
    p.eval({{"x", rows_of(1, cols)}});
    const auto rss_before = trimmed_resident_bytes();

    std::list<std::size_t> lru{1};  // the model of the cache: most recently used first
    std::size_t compiles = 1, evictions = 0, hits = 0, max_cached = 0;
    auto call = [&](std::size_t rows) {
        auto r = p.eval({{"x", rows_of(rows, cols)}});
        expect_tripled(r[0], rows, cols);
        if (auto it = std::find(lru.begin(), lru.end(), rows); it != lru.end()) {
            lru.erase(it);
            ++hits;
        } else {
            ++compiles;
        }
        lru.push_front(rows);
        if (lru.size() > bound) {
            lru.pop_back();
            ++evictions;
        }
        max_cached = std::max(max_cached, p.get_specialization_stats().cached);
    };
    for (std::size_t i = 0; i < 200; ++i) {
        call(56 + (i * 37) % 200);      // every length in [56, 256) once, in a scrambled order
        call(56 + ((i - i % 3) * 37) % 200);  // a recent length again: cached, or recompiled when evicted
    }
    auto s = p.get_specialization_stats();
    EXPECT_EQ(s.compiles, compiles);
    EXPECT_EQ(s.evictions, evictions);
    EXPECT_EQ(s.hits, hits);
    EXPECT_EQ(s.failed_compiles, 0u);
    EXPECT_EQ(s.cached, bound);
    EXPECT_LE(max_cached, bound);
    EXPECT_GE(s.compiles, 200u);
    // Each specialization's arena is 2 * rows * 4 KiB (0.4-2 MiB): the 200 of them
    // kept would be ~250 MiB; four are at most ~8 MiB.
    const auto rss_after = trimmed_resident_bytes();
    const double grown_mib = (static_cast<double>(rss_after) - static_cast<double>(rss_before)) / (1 << 20);
    EXPECT_LT(grown_mib, 48.0) << "resident memory grew from " << rss_before / (1 << 20) << " MiB to "
                               << rss_after / (1 << 20) << " MiB";
    // The most recent specialization's memory, not the parsed program's.
    EXPECT_GT(p.get_memory_usage().arena_bytes, 0u);
}

// Thread A's new shape compiles (held at the gate) while the main thread runs an
// already compiled shape, and compiles and runs another new one: both finish before A's
// compile ends, with correct results.
TEST(specialization, compile_does_not_block_other_shapes) {
    constexpr std::size_t cols = 16;
    auto& g = gate();
    g.reset(/*hold*/ 3, /*fail*/ 0);
    auto p = make_model(cols);
    p.compile(*get_target("core_test_gated"));
    expect_tripled(p.eval({{"x", rows_of(2, cols)}})[0], 2, cols);

    std::vector<argument> a_result;
    std::thread a([&] { a_result = p.eval({{"x", rows_of(3, cols, 5.0f)}}); });
    ASSERT_TRUE(g.wait_for_waiting(1)) << "thread A's compile never reached the gate";
    for (int i = 0; i < 20; ++i) expect_tripled(p.eval({{"x", rows_of(2, cols)}})[0], 2, cols);
    expect_tripled(p.eval({{"x", rows_of(5, cols)}})[0], 5, cols);  // a new shape of its own
    bool a_compile_ended = false;
    {
        std::lock_guard<std::mutex> lock(g.m);
        a_compile_ended = g.held_compile_ended;
    }
    g.release();
    a.join();
    EXPECT_FALSE(a_compile_ended) << "the other shapes' calls waited for thread A's compile";
    ASSERT_EQ(a_result.size(), 1u);
    expect_tripled(a_result[0], 3, cols, 5.0f);
    auto s = p.get_specialization_stats();
    EXPECT_EQ(s.compiles, 3u);
    EXPECT_EQ(s.cached, 3u);
}

// Concurrent callers of one new shape share its compile.
TEST(specialization, same_shape_callers_share_one_compile) {
    constexpr std::size_t cols = 16, callers = 6;
    auto& g = gate();
    g.reset(/*hold*/ 7, /*fail*/ 0);
    auto p = make_model(cols);
    p.compile(*get_target("core_test_gated"));
    std::vector<std::vector<argument>> results(callers);
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < callers; ++t)
        threads.emplace_back([&, t] { results[t] = p.eval({{"x", rows_of(7, cols, static_cast<float>(t))}}); });
    ASSERT_TRUE(g.wait_for_waiting(1));
    // The other callers find the compile under way (each counts as a hit); a caller
    // that compiled on its own would wait at the gate instead.
    for (int i = 0; i < 500 && p.get_specialization_stats().hits < callers - 1; ++i) std::this_thread::sleep_for(10ms);
    g.release();
    for (auto& t : threads) t.join();
    for (std::size_t t = 0; t < callers; ++t) {
        ASSERT_EQ(results[t].size(), 1u);
        expect_tripled(results[t][0], 7, cols, static_cast<float>(t));
    }
    EXPECT_EQ(g.compiles_of(7), 1u);
    auto s = p.get_specialization_stats();
    EXPECT_EQ(s.compiles, 1u);
    EXPECT_EQ(s.hits, callers - 1);
}

// A compile that throws: every caller waiting on it gets the error, nothing is cached,
// and the next call compiles again.
TEST(specialization, failed_compile_is_not_cached) {
    constexpr std::size_t cols = 16;
    auto& g = gate();
    g.reset(/*hold*/ 9, /*fail*/ 9);
    auto p = make_model(cols);
    p.compile(*get_target("core_test_gated"));
    std::atomic<int> errors{0};
    auto call = [&] {
        try {
            p.eval({{"x", rows_of(9, cols)}});
        } catch (const error& e) {
            if (std::string(e.what()).find("no compile for 9 rows") != std::string::npos) ++errors;
        }
    };
    std::thread first(call);
    ASSERT_TRUE(g.wait_for_waiting(1));
    std::thread second(call);
    for (int i = 0; i < 500 && p.get_specialization_stats().hits < 1; ++i) std::this_thread::sleep_for(10ms);
    g.release();
    first.join();
    second.join();
    EXPECT_EQ(errors.load(), 2);
    EXPECT_EQ(g.compiles_of(9), 1u);
    auto s = p.get_specialization_stats();
    EXPECT_EQ(s.failed_compiles, 1u);
    EXPECT_EQ(s.compiles, 0u);
    EXPECT_EQ(s.cached, 0u);
    // Retried, and fails again; then the cause goes away and it compiles.
    call();
    EXPECT_EQ(errors.load(), 3);
    EXPECT_EQ(g.compiles_of(9), 2u);
    g.reset(0, 0);
    expect_tripled(p.eval({{"x", rows_of(9, cols)}})[0], 9, cols);
    s = p.get_specialization_stats();
    EXPECT_EQ(s.failed_compiles, 2u);
    EXPECT_EQ(s.compiles, 1u);
    EXPECT_EQ(s.cached, 1u);
}

// An evicted specialization's memory (its arena here, 32 MiB) goes back.
TEST(specialization, eviction_frees_memory_and_the_arena_is_reused) {
    constexpr std::size_t cols = std::size_t{1} << 20, big = 8;
    gate().reset(0, 0);
    auto p = make_model(cols);
    p.compile(*get_target("core_test_gated"), bounded(1));
    p.eval({{"x", rows_of(1, cols)}});
    // Measured with the heap trimmed, so the freed inputs and results of the calls do
    // not count: only what the cached specialization holds.
    const auto base = trimmed_resident_bytes();
    p.eval({{"x", rows_of(big, cols)}});
    const auto with_big = trimmed_resident_bytes();
    EXPECT_GE(p.get_memory_usage().arena_bytes, big * cols * 4);
    p.eval({{"x", rows_of(1, cols)}});  // evicts the big one
    const auto after = trimmed_resident_bytes();
    auto mib = [](std::size_t b) { return static_cast<double>(b) / (1 << 20); };
    EXPECT_GT(mib(with_big) - mib(base), 24.0);
    // The specializations share one pool of arenas, which keeps the largest arena for any
    // shape that fits (planned for the largest seen, reused, never allocated per call):
    // evicting frees the specialization, not that buffer. Nothing else stays behind, and
    // compiling the big shape again reuses the arena instead of growing.
    EXPECT_LT(mib(after), mib(with_big) + 2.0) << "base " << mib(base) << " MiB, with the big specialization "
                                               << mib(with_big) << " MiB, after evicting it " << mib(after) << " MiB";
    auto s = p.get_specialization_stats();
    EXPECT_EQ(s.evictions, 2u);
    EXPECT_EQ(s.cached, 1u);
    EXPECT_LT(p.get_memory_usage().arena_bytes, big * cols * 4);  // the latest one's
    for (int i = 0; i < 3; ++i) {
        p.eval({{"x", rows_of(big, cols)}});
        p.eval({{"x", rows_of(1, cols)}});
    }
    EXPECT_LT(mib(trimmed_resident_bytes()), mib(with_big) + 2.0) << "memory grew over repeated big and small shapes";
    EXPECT_EQ(p.get_specialization_stats().compiles, 9u);  // a bound of 1: each call compiles
}

TEST(specialization, bound_survives_save_and_load) {
    gate().reset(0, 0);
    auto p = make_model(8);
    p.compile(*get_target("core_test_gated"), bounded(2));
    auto bytes = save_buffer(p);
    auto q = load_buffer(bytes.data(), bytes.size());
    EXPECT_EQ(q.get_compile_options().max_specializations, 2u);
    for (std::size_t rows : {1, 2, 3, 4}) expect_tripled(q.eval({{"x", rows_of(rows, 8)}})[0], rows, 8);
    auto s = q.get_specialization_stats();
    EXPECT_EQ(s.cached, 2u);
    EXPECT_EQ(s.evictions, 2u);

    // A file from before the option: loads with the default bound.
    auto v = kiln_file::file_to_value(bytes.data(), bytes.size());
    auto& opts = v["compiled"]["options"].get_object();
    std::erase_if(opts, [](auto& kv) { return kv.first == "max_specializations"; });
    auto old = kiln_file::value_to_file(v);
    auto r = load_buffer(old.data(), old.size());
    EXPECT_EQ(r.get_compile_options().max_specializations, compile_options{}.max_specializations);
}

// Without a generic program (a CNN's convolutions), the default shapes (the inputs'
// optimals) are still compiled at compile(), so the first call at them compiles nothing;
// the .kiln keeps that program, so loading does not compile it again.
TEST(specialization, the_optimals_are_compiled_ahead_and_saved_without_a_generic_program) {
    auto& g = gate();
    g.reset(0, 0);
    auto p = scaled_model(shape::make_dynamic(type::float32, {{1, 64, {4}}, {8, 8, {}}}));
    p.compile(*get_target("core_test_gated"), bounded(2));
    EXPECT_FALSE(p.get_specialization_stats().generic);
    EXPECT_EQ(g.compiles_of(4), 1u);
    EXPECT_GT(p.get_memory_usage().arena_bytes, 0u);  // the default program's, before any call
    expect_tripled(p.eval({{"x", rows_of(4, 8)}})[0], 4, 8);
    EXPECT_EQ(g.compiles_of(4), 1u);
    expect_tripled(p.eval({{"x", rows_of(5, 8)}})[0], 5, 8);  // any other size: compiled on its first call
    EXPECT_EQ(g.compiles_of(5), 1u);
    auto s = p.get_specialization_stats();
    EXPECT_EQ(s.compiles, 2u);
    EXPECT_EQ(s.hits, 1u);

    auto bytes = save_buffer(p);
    auto q = load_buffer(bytes.data(), bytes.size());
    ASSERT_EQ(q.compiled_ahead().size(), 1u);
    EXPECT_EQ(g.compiles_of(4), 1u);  // restored, not compiled
    expect_tripled(q.eval({{"x", rows_of(4, 8)}})[0], 4, 8);
    EXPECT_EQ(g.compiles_of(4), 1u);
    EXPECT_EQ(q.get_specialization_stats().compiles, 0u);
}

value payload_of(const program& p) {
    auto bytes = save_buffer(p);
    return kiln_file::file_to_value(bytes.data(), bytes.size());
}

// A saved program compiled ahead that takes its input outside the ranges of the program
// it serves is refused at load with an error that says so (a crafted or mixed-up file).
TEST(specialization, a_program_compiled_ahead_outside_the_range_is_refused_at_load) {
    gate().reset(0, 0);
    auto p = scaled_model(shape::make_dynamic(type::float32, {{1, 64, {4}}, {8, 8, {}}}));
    p.compile(*get_target("core_test_gated"), bounded(2));
    auto other = scaled_model(shape(type::float32, {100, 8}));
    other.compile(*get_target("core_test_gated"));
    auto v = payload_of(p);
    auto o = payload_of(other);
    ASSERT_EQ(v["compiled"]["ahead"].get_array().size(), 1u);
    v["compiled"]["ahead"].get_array()[0] = o;
    auto bad = kiln_file::value_to_file(v);
    try {
        load_buffer(bad.data(), bad.size());
        FAIL() << "loaded";
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::parse);
        EXPECT_NE(e.message().find("outside its range"), std::string::npos) << e.message();
    }
}
