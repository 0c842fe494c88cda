// The cpu target's own LSTM kernel (cpu::lstm_packed) against the ref target, on random
// non-zero data: batch 1 and 3, hidden sizes that are and are not multiples of the
// 8-unit block, forward, reverse and bidirectional, with and without initial states,
// bias and peepholes, on 1 to 3 threads, vector and portable kernels; Y, Y_h and Y_c;
// time-major and batch-first layouts.
#include "cpu_test_util.hpp"

#include "targets/cpu/kernels/lstm/lstm_kernel.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/serialize.hpp>

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

struct lstm_case {
    std::size_t T, N, I, H;
    std::int64_t direction;
    bool bias, h0, c0, peephole;
    float x_scale = 1.0f;
    // Which outputs the program returns (0: Y, 1: Y_h, 2: Y_c).
    std::vector<std::size_t> outputs = {0};
    std::int64_t layout = 0;  // 1: batch first (X [N, T, I], states [N, D, H])
};

both run_case(const lstm_case& c, std::size_t threads = 0, param_map* inputs = nullptr) {
    const std::size_t D = c.direction == 2 ? 2 : 1;
    builder b;
    const bool bf = c.layout == 1;
    auto x = b.param("x", bf ? std::vector<std::size_t>{c.N, c.T, c.I} : std::vector<std::size_t>{c.T, c.N, c.I}, c.x_scale);
    std::vector<instruction_ref> args{x, b.constant({D, 4 * c.H, c.I}, 0.5f), b.constant({D, 4 * c.H, c.H}, 0.3f)};
    const std::vector<std::size_t> state = bf ? std::vector<std::size_t>{c.N, D, c.H} : std::vector<std::size_t>{D, c.N, c.H};
    if (c.bias) args.push_back(b.constant({D, 8 * c.H}, 0.5f));
    if (c.h0) args.push_back(b.param("h0", state));
    if (c.c0) args.push_back(b.param("c0", state, 2.0f));
    if (c.peephole) args.push_back(b.constant({D, 3 * c.H}, 0.7f));
    value attrs = value::object{{"hidden_size", value(static_cast<std::int64_t>(c.H))},
                                {"direction", value(c.direction)},
                                {"has_bias", value(c.bias)},
                                {"has_initial_h", value(c.h0)},
                                {"has_initial_c", value(c.c0)},
                                {"has_peephole", value(c.peephole)},
                                {"layout", value(c.layout)}};
    auto l = b.op("lstm", attrs, args);
    std::vector<instruction_ref> outs;
    for (auto i : c.outputs) outs.push_back(b.m->add_instruction(builtin::get_tuple_elem{i}, {l}));
    b.ret(outs);
    compile_options opts;
    opts.threads = threads;
    if (inputs) *inputs = b.inputs;
    return run_both(b, 1e-4, 1e-5, opts);
}

void check_packed(const lstm_case& c, std::size_t threads = 0) {
    auto r = run_case(c, threads);
    EXPECT_EQ(count_ops(r.cpu, "cpu::lstm_packed"), 1u) << text(r.cpu);
    EXPECT_EQ(count_ops(r.cpu, "cpu::lstm"), 0u) << text(r.cpu);
    EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
}

const std::vector<lstm_case>& cases() {
    static const std::vector<lstm_case> all{
        {7, 3, 5, 11, 0, true, true, true, false},    // batch 3, H not a multiple of 8
        {9, 1, 24, 16, 1, false, false, false, false}, // reverse, no bias or states
        {6, 3, 7, 13, 2, true, true, true, true},     // bidirectional with peepholes
        {8, 1, 20, 40, 2, false, true, false, true},  // bidirectional, batch 1, h0 only
        {5, 2, 3, 9, 0, true, false, true, true, 4.0f}, // c0 only, saturating inputs
        {1, 1, 1, 1, 1, true, true, true, true},      // one step, one unit
        {4, 4, 5, 24, 1, true, true, true, true},     // batch 4: rows in fours, reverse
        {5, 7, 6, 19, 0, true, true, true, false},    // batch 7: four rows, a pair, one row
        {3, 9, 4, 33, 2, true, true, true, true},     // batch 9: two fours and one, bidirectional
    };
    return all;
}

}  // namespace

TEST(cpu_lstm_kernel, matches_ref_on_every_case) {
    for (const auto& c : cases()) {
        SCOPED_TRACE("T " + std::to_string(c.T) + " N " + std::to_string(c.N) + " H " + std::to_string(c.H) +
                     " direction " + std::to_string(c.direction));
        check_packed(c);
    }
}

TEST(cpu_lstm_kernel, portable_kernel_matches_ref) {
    test::env_override portable("KILN_CPU_LSTM", "portable");
    for (const auto& c : cases()) {
        SCOPED_TRACE("H " + std::to_string(c.H) + " direction " + std::to_string(c.direction));
        check_packed(c);
    }
}

TEST(cpu_lstm_kernel, thread_counts_split_the_blocks) {
    // H 40: five blocks of 8 over 1, 2 and 3 threads (uneven shares); H 20 has a partial block.
    for (std::size_t threads : {1u, 2u, 3u}) {
        SCOPED_TRACE("threads " + std::to_string(threads));
        check_packed({12, 1, 16, 40, 0, true, true, true, false}, threads);
        check_packed({10, 3, 6, 20, 2, true, true, true, true}, threads);
    }
}

TEST(cpu_lstm_kernel, larger_layer_like_the_benchmark) {
    check_packed({20, 1, 80, 256, 0, true, true, true, false}, 2);
    check_packed({10, 8, 80, 256, 0, true, true, true, false}, 2);  // batch 8: the served model's batches
}

TEST(cpu_lstm_kernel, dnnl_switch_keeps_the_onednn_kernel) {
    test::env_override dnnl("KILN_CPU_LSTM", "dnnl");
    auto r = run_case({7, 3, 5, 11, 0, true, true, true, false});
    EXPECT_EQ(count_ops(r.cpu, "cpu::lstm"), 1u) << text(r.cpu);
    EXPECT_EQ(count_ops(r.cpu, "cpu::lstm_packed"), 0u) << text(r.cpu);
}

TEST(cpu_lstm_kernel, final_states_come_from_the_kernel) {
    // Y_h and Y_c (rows T and T + 1 of the kernel's result), with and without Y, every
    // direction, partial blocks, several threads.
    for (const auto& outputs : std::vector<std::vector<std::size_t>>{{0, 1, 2}, {1}, {2, 1}, {1, 0}}) {
        for (auto c : cases()) {
            c.outputs = outputs;
            SCOPED_TRACE("outputs " + std::to_string(outputs.size()) + " H " + std::to_string(c.H) + " direction " +
                         std::to_string(c.direction));
            check_packed(c);
        }
    }
    for (std::size_t threads : {1u, 3u}) check_packed({10, 3, 6, 20, 2, true, true, true, true, 1.0f, {0, 1, 2}}, threads);
    test::env_override portable("KILN_CPU_LSTM", "portable");
    check_packed({6, 3, 7, 13, 2, true, true, true, true, 1.0f, {1, 2}});
}

TEST(cpu_lstm_kernel, batch_first_layout) {
    // layout 1: transposed copies in, results transposed back; with final states too.
    for (const auto& outputs : std::vector<std::vector<std::size_t>>{{0}, {0, 1, 2}, {2}}) {
        for (auto c : cases()) {
            c.outputs = outputs;
            c.layout = 1;
            SCOPED_TRACE("outputs " + std::to_string(outputs.size()) + " H " + std::to_string(c.H) + " direction " +
                         std::to_string(c.direction));
            check_packed(c);
        }
    }
}

TEST(cpu_lstm_kernel, packing_places_gates_by_block) {
    // W row (gate g, unit u) lands in column b*32 + g*8 + lane; biases are summed.
    cpu::lstm_dims d{1, 1, 2, 9, 1, false};
    std::vector<float> w(4 * 9 * 2), r(4 * 9 * 9), bias(8 * 9);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i + 1);
    for (std::size_t i = 0; i < r.size(); ++i) r[i] = static_cast<float>(i + 1);
    for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<float>(i + 1);
    auto p = cpu::lstm_pack(d, w.data(), r.data(), bias.data(), nullptr);
    ASSERT_EQ(d.columns(), 64u);
    ASSERT_EQ(p.w.size(), 2u * 64u);
    // Gate f (2), unit 8: block 1, lane 0 -> column 32 + 16; W row 2*9+8 = 26.
    EXPECT_EQ(p.w[1 * 64 + 48], w[26 * 2 + 1]);
    EXPECT_EQ(p.bias[48], bias[26] + bias[36 + 26]);
    // R of block 1, row k = 4, gate c (3), lane 0: R row 3*9+8 = 35.
    EXPECT_EQ(p.r[(1 * 9 + 4) * 32 + 24], r[35 * 9 + 4]);
    // Padding lanes are zero.
    EXPECT_EQ(p.w[0 * 64 + 32 + 1], 0.0f);
    EXPECT_EQ(p.bias[32 + 8 + 7], 0.0f);
}

TEST(cpu_lstm_kernel, saved_program_loads_and_gives_the_same_results) {
    param_map inputs;
    auto r = run_case({6, 3, 7, 13, 2, true, true, true, true}, 0, &inputs);
    const auto bytes = save_buffer(r.cpu);
    auto loaded = load_buffer(bytes.data(), bytes.size());
    EXPECT_EQ(count_ops(loaded, "cpu::lstm_packed"), 1u) << text(loaded);
    auto out = loaded.eval(inputs);
    ASSERT_EQ(out.size(), 1u);
    expect_close(out[0], r.ref_out[0], 1e-4, 1e-5, "loaded");
}
