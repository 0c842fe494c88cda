// Helpers of the tests of a dynamic program's compiled forms (core_specialization_test,
// core_generic_program_test): a gate that holds or fails the compile of chosen shapes,
// targets with it in front of ref's pipeline (registered in specialization_gate.cpp),
// and a small model whose memory grows with its rows.
#pragma once
#include "test_ops.hpp"

#include <kiln/errors.hpp>
#include <kiln/program.hpp>
#include <kiln/target.hpp>

#include <gtest/gtest.h>

#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <map>
#include <mutex>

namespace kiln::test::spec {

using namespace std::chrono_literals;

// Lets a test hold the compile of chosen shapes (or make it throw), so it decides when
// a compile ends instead of guessing from timings. The gate opens by itself after
// `timeout`, so a broken implementation fails the test instead of hanging it.
struct gate_state {
    std::mutex m;
    std::condition_variable cv;
    std::size_t hold_rows = 0;  // compiles for x with this many rows wait until `open`
    std::size_t fail_rows = 0;  // compiles for x with this many rows throw
    bool open = false;
    bool held_compile_ended = false;
    std::size_t waiting = 0;                   // compiles waiting at the gate now
    std::map<std::size_t, std::size_t> compiles;  // per row count: compiles that reached the pass
    std::chrono::milliseconds timeout = 3000ms;

    void reset(std::size_t hold, std::size_t fail) {
        std::lock_guard<std::mutex> lock(m);
        hold_rows = hold;
        fail_rows = fail;
        open = false;
        held_compile_ended = false;
        waiting = 0;
        compiles.clear();
    }
    void release() {
        std::lock_guard<std::mutex> lock(m);
        open = true;
        cv.notify_all();
    }
    // Waits (bounded) until `n` compiles wait at the gate.
    bool wait_for_waiting(std::size_t n) {
        std::unique_lock<std::mutex> lock(m);
        return cv.wait_for(lock, 5s, [&] { return waiting >= n; });
    }
    std::size_t compiles_of(std::size_t rows) {
        std::lock_guard<std::mutex> lock(m);
        return compiles[rows];
    }
};

inline gate_state& gate() {
    static gate_state g;
    return g;
}

struct gate_pass {
    bool generic = false;  // let a dynamic x through (the generic program), not gated
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.generic, "generic"); }
    std::string name() const { return "test_gate"; }
    void apply(module& m) const {
        auto x = m.get_parameter("x");
        if (x == m.end()) return;
        // Without `generic`, lens() of a dynamic x throws: the target cannot build a
        // generic program, and each new shape compiles on its first call.
        if (generic && x->get_shape().dynamic()) return;
        auto rows = x->get_shape().lens().at(0);
        auto& g = gate();
        std::unique_lock<std::mutex> lock(g.m);
        ++g.compiles[rows];
        if (rows == g.hold_rows) {
            ++g.waiting;
            g.cv.notify_all();
            g.cv.wait_for(lock, g.timeout, [&] { return g.open; });
            --g.waiting;
            g.held_compile_ended = true;
        }
        if (rows == g.fail_rows) throw_error(error_code::unsupported, "test_gate: no compile for " + std::to_string(rows) + " rows");
    }
};

// Compiles like ref, with the gate in front; "core_test_gated" builds no generic program,
// "core_test_gated_generic" does (and gates the specializations' compiles).
struct gated_target final : target {
    bool generic = false;
    explicit gated_target(bool g) : generic(g) {}
    std::string name() const override { return generic ? "core_test_gated_generic" : "core_test_gated"; }
    std::shared_ptr<context> make_context(const compile_options&) const override {
        return std::make_shared<host_context>();
    }
    std::vector<pass> get_passes(context& ctx, const compile_options& opts) const override {
        std::vector<pass> passes{gate_pass{generic}};
        for (auto& p : get_target("ref")->get_passes(ctx, opts)) passes.push_back(p);
        return passes;
    }
};

// x of `x_shape`, returned as 3x through an intermediate 2x (unary ops only: the generic
// dynamic shape inference samples each input on its own).
inline program scaled_model(shape x_shape) {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", std::move(x_shape));
    auto twice = m->add_instruction(test::test_scale{2.0f}, {x});
    m->add_return({m->add_instruction(test::test_scale{1.5f}, {twice})});
    return p;
}

// x: float32 [rows, cols] with rows dynamic in [1, 256]; the intermediate is in the
// arena, so a specialization's memory grows with its rows.
inline program make_model(std::size_t cols) {
    return scaled_model(shape::make_dynamic(type::float32, {{1, 256, {}}, {cols, cols, {}}}));
}

inline argument rows_of(std::size_t rows, std::size_t cols, float first = 1.0f) {
    argument a(shape(type::float32, {rows, cols}));
    for (std::size_t i = 0; i < rows * cols; ++i) a.data_as<float>()[i] = first + static_cast<float>(i % 7);
    return a;
}

// Checks r == 3 * rows_of(rows, cols, first).
inline void expect_tripled(const argument& r, std::size_t rows, std::size_t cols, float first = 1.0f) {
    ASSERT_EQ(r.get_shape().lens(), (std::vector<std::size_t>{rows, cols}));
    const float* v = r.data_as<float>();
    for (std::size_t i : {std::size_t{0}, rows * cols / 2, rows * cols - 1})
        ASSERT_EQ(v[i], 3.0f * (first + static_cast<float>(i % 7))) << "element " << i;
}

inline std::size_t resident_bytes() {
    std::ifstream statm("/proc/self/statm");
    std::size_t size = 0, resident = 0;
    statm >> size >> resident;
    return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

inline std::size_t trimmed_resident_bytes() {
#if defined(__GLIBC__)
    ::malloc_trim(0);
#endif
    return resident_bytes();
}

inline compile_options bounded(std::size_t max) {
    compile_options o;
    o.max_specializations = max;
    return o;
}

}  // namespace kiln::test::spec
