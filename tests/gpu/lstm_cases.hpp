// LSTM cases for the gpu target's tests (tests/gpu and tests/gpu_device): lstm_seq's two
// layers (input 80 then 256, hidden 256, bias and initial h/c) at batch 1 and 3 and time
// 1, 7 and 100, hidden sizes that are no multiple of 32 (one of them over a block of
// threads), reverse and bidirectional, optional inputs left out, R as a literal (transposed
// at compile time) or a parameter (read through a transposed view).
#pragma once
#include "ops/control_rnn.hpp"
#include "ops/tensor_views.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/literal.hpp>
#include <kiln/program.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace kiln::gpu_test {

struct lstm_case {
    std::string name;
    std::size_t batch, time, input, hidden;
    std::int64_t direction;  // 0 forward, 1 reverse, 2 bidirectional
    bool bias = true, h0 = true, c0 = true, literal_r = true;
    bool batch_first = false;  // X a transposed [B, T, I] parameter, as PyTorch's export makes it
};

inline std::vector<lstm_case> lstm_cases() {
    return {
        {"lstm_seq layer 1, batch 1, time 1", 1, 1, 80, 256, 0},
        {"lstm_seq layer 1, batch 3, time 7 (R a parameter)", 3, 7, 80, 256, 0, true, true, true, false},
        {"lstm_seq layer 1, batch 1, time 100", 1, 100, 80, 256, 0},
        {"lstm_seq layer 2, batch 3, time 100", 3, 100, 256, 256, 0},
        {"lstm_seq layer 2, batch 3, time 7", 3, 7, 256, 256, 0},
        {"lstm_seq layer 1 batch_first (X copied row-major), batch 3, time 7", 3, 7, 80, 256, 0, true, true, true, true, true},
        {"hidden 40, reverse, no bias or initial state", 3, 7, 16, 40, 1, false, false, false},
        {"hidden 300, batch 2, initial h only", 2, 7, 24, 300, 0, true, true, false},
        {"hidden 72, bidirectional, batch 3", 3, 7, 20, 72, 2},
        {"hidden 256, bidirectional, batch 1, time 100 (R a parameter)", 1, 100, 80, 256, 2, true, true, true, false},
    };
}

// Uniform in +-scale, zero excluded (the weights 1/sqrt(H), so gates are not all saturated).
inline argument lstm_random(const shape& s, float scale, unsigned seed) {
    argument a(s);
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> mag(0.05f, 1.0f);
    auto* p = reinterpret_cast<float*>(a.data());
    for (std::size_t i = 0; i < s.elements(); ++i) p[i] = (gen() & 1 ? -scale : scale) * mag(gen);
    return a;
}

inline op::lstm lstm_op(const lstm_case& c) {
    op::lstm l;
    l.hidden_size = c.hidden;
    l.direction = c.direction;
    l.has_bias = c.bias;
    l.has_initial_h = c.h0;
    l.has_initial_c = c.c0;
    return l;
}

// One case's LSTM over parameters "<prefix>x", "w", "r" (or a literal R), "b", "h0", "c0",
// their random values in `values` in that order (R's too when it is a literal); returns
// its three outputs.
inline std::vector<instruction_ref> add_lstm(module& m, const lstm_case& c, const std::string& prefix,
                                             std::vector<std::pair<std::string, argument>>& values, unsigned seed) {
    const std::size_t D = c.direction == 2 ? 2 : 1, H = c.hidden;
    const float w = 1.0f / std::sqrt(static_cast<float>(H));
    const op::lstm l = lstm_op(c);
    std::vector<instruction_ref> args;
    auto param = [&](const std::string& n, const shape& s, float scale) {
        auto v = lstm_random(s, scale, seed++);
        values.emplace_back(prefix + n, v);
        args.push_back(m.add_parameter(prefix + n, s));
    };
    if (c.batch_first) {
        param("x", shape(type::float32, {c.batch, c.time, c.input}), 1.0f);
        op::transpose t;
        t.perm = {1, 0, 2};
        args.back() = m.add_instruction(t, {args.back()});
    } else {
        param("x", shape(type::float32, {c.time, c.batch, c.input}), 1.0f);
    }
    param("w", shape(type::float32, {D, 4 * H, c.input}), w);
    const shape rs(type::float32, {D, 4 * H, H});
    if (c.literal_r) {
        auto v = lstm_random(rs, w, seed++);
        values.emplace_back(prefix + "r", v);  // not a parameter: the literal's value
        args.push_back(m.add_literal(literal(v)));
    } else {
        param("r", rs, w);
    }
    if (c.bias) param("b", shape(type::float32, {D, 8 * H}), 0.5f);
    if (c.h0) param("h0", shape(type::float32, {D, c.batch, H}), 1.0f);
    if (c.c0) param("c0", shape(type::float32, {D, c.batch, H}), 1.0f);
    auto lstm = m.add_instruction(l, args);
    std::vector<instruction_ref> out;
    for (std::size_t i = 0; i < 3; ++i) out.push_back(m.add_instruction(builtin::get_tuple_elem{i}, {lstm}));
    return out;
}

// Every case in one program (its outputs Y, Y_h, Y_c in turn), with its inputs' values.
inline program lstm_program(const std::vector<lstm_case>& cases, std::vector<std::pair<std::string, argument>>& values) {
    program p;
    auto* m = p.get_main_module();
    std::vector<instruction_ref> results;
    unsigned seed = 11;
    for (std::size_t i = 0; i < cases.size(); ++i) {
        auto r = add_lstm(*m, cases[i], "c" + std::to_string(i) + "_", values, seed);
        seed += 10;
        results.insert(results.end(), r.begin(), r.end());
    }
    m->add_return(results);
    return p;
}

}  // namespace kiln::gpu_test
