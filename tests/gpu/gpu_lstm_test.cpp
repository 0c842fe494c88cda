// The gpu target's LSTM (codegen/emit_lstm.hpp, lower_lstm.cpp) without a device: each
// case of lstm_cases.hpp becomes one cuBLASLt product and one generated recurrence kernel,
// NVRTC builds the kernels for sm_90 without spills, and their host build (blocks as
// fibers, host_shim.hpp), fed X W^T computed here, agrees with the ref target's LSTM (Y,
// Y_h and Y_c) on random non-zero data. The largest errors are printed.
#include "gpu_test_util.hpp"
#include "lstm_cases.hpp"

#include "ops/tensor_views.hpp"
#include "targets/gpu/codegen/emit_lstm.hpp"
#include "targets/gpu/host_fallback.hpp"
#include "targets/gpu/kernels/lstm_steps.hpp"
#include "unit/env_override.hpp"

#include <kiln/onnx.hpp>

#include <filesystem>
#include <iostream>
#include <map>
#include <regex>

using namespace kiln;
using namespace kiln::gpu_test;

namespace {

bool is_lstm_kernel(instruction_ref ins) {
    const auto* k = ins->get_operator().any_cast<gpu::fused_kernel>();
    return k && gpu::codegen::is_lstm(k->body);
}

std::size_t count(module& m, const std::string& op) {
    std::size_t n = 0;
    for (auto& ins : m) n += ins.name() == op;
    return n;
}

program compiled(std::vector<std::pair<std::string, argument>>& values) {
    auto p = lstm_program(lstm_cases(), values);
    compile_options o;
    o.memory_planning = false;
    compile_for_gpu(p, o);
    return p;
}

// xw [D, T*B, 4H] = X W^T per direction, summed in double.
argument projection(const argument& x, const argument& w) {
    const auto& xl = x.get_shape().lens();
    const auto& wl = w.get_shape().lens();
    const std::size_t rows = xl[0] * xl[1], I = xl[2], D = wl[0], G = wl[1];
    const auto xv = x.to_vector<double>(), wv = w.to_vector<double>();
    argument out(shape(type::float32, {D, rows, G}));
    auto* o = reinterpret_cast<float*>(out.data());
    for (std::size_t d = 0; d < D; ++d)
        for (std::size_t r = 0; r < rows; ++r)
            for (std::size_t g = 0; g < G; ++g) {
                double s = 0;
                for (std::size_t k = 0; k < I; ++k) s += xv[r * I + k] * wv[(d * G + g) * I + k];
                o[(d * rows + r) * G + g] = static_cast<float>(s);
            }
    return out;
}

// R^T [D, H, 4H] as the kernel's input `s` holds it: a row-major copy, or R seen through
// a transposed view.
argument transposed_r(const argument& r, const shape& s) {
    op::transpose t;
    t.perm = {0, 2, 1};
    const auto view = t.compute(t.compute_shape({r.get_shape()}), {r});
    if (s.standard()) return literal(view).get_argument();
    EXPECT_EQ(view.get_shape(), s);
    return view;
}

// Registers ptxas reports for `symbol` ("Compiling entry function 'S'" ... "Used N registers").
std::string registers(const std::string& log, const std::string& symbol) {
    const auto at = log.find("'" + symbol + "'");
    if (at == std::string::npos) return "?";
    std::smatch m;
    const std::string rest = log.substr(at, 2000);
    return std::regex_search(rest, m, std::regex(R"(Used (\d+) registers)")) ? m[1].str() : "?";
}

}  // namespace

TEST(gpu_lstm, kernels_match_the_reference_lstm_on_every_case) {
    std::vector<std::pair<std::string, argument>> values;
    auto p = compiled(values);
    auto& m = *p.get_main_module();
    const auto cases = lstm_cases();
    std::vector<instruction_ref> kernels;
    for (auto ins = m.begin(); ins != m.end(); ++ins)
        if (is_lstm_kernel(ins)) kernels.push_back(ins);
    ASSERT_EQ(kernels.size(), cases.size()) << m;
    EXPECT_EQ(count(m, "gpu::lt_matmul"), cases.size()) << "one input projection per LSTM";
    EXPECT_EQ(count(m, "gpu::host_kernel"), 0u) << m;
    EXPECT_EQ(gpu_kernels(m).size(), cases.size() + 1) << "and one row-major copy of the batch_first X";

    const std::string source = gpu::codegen::module_source(m);
    const auto built = gpu::codegen::compile_cuda(source, "sm_90", true, "");
    EXPECT_FALSE(built.cubin.empty());
    std::set<std::string> reported;
    for (const auto& u : built.usage) {
        reported.insert(u.function);
        EXPECT_FALSE(u.spills()) << u.function << " spills " << u.spill_stores << "/" << u.spill_loads << " bytes";
    }
    host_library lib(source);
    ASSERT_TRUE(lib.ok());
    host_context ctx;
    std::map<std::string, argument> v(values.begin(), values.end());
    for (std::size_t c = 0; c < cases.size(); ++c) {
        const auto& cs = cases[c];
        const auto ins = kernels[c];
        const auto& k = ins->get_operator().get<gpu::fused_kernel>();
        EXPECT_TRUE(reported.count(k.symbol)) << cs.name << ": no ptxas report";
        const std::string pre = "c" + std::to_string(c) + "_";
        // The reference LSTM's inputs in ONNX order, and the kernel's.
        argument x = v.at(pre + "x");
        if (cs.batch_first) {  // [B, T, I] -> [T, B, I], what the generated copy makes of it
            op::transpose t;
            t.perm = {1, 0, 2};
            x = literal(t.compute(t.compute_shape({x.get_shape()}), {x})).get_argument();
        }
        std::vector<argument> ref_args = {x, v.at(pre + "w"), v.at(pre + "r")};
        std::vector<argument> inputs = {projection(x, v.at(pre + "w")),
                                        transposed_r(v.at(pre + "r"), ins->inputs()[1]->get_shape())};
        for (const char* n : {"b", "h0", "c0"})
            if (v.count(pre + n)) {
                ref_args.push_back(v.at(pre + n));
                inputs.push_back(v.at(pre + n));
            }
        const auto l = lstm_op(cs);
        std::vector<shape> ref_shapes;
        for (const auto& a : ref_args) ref_shapes.push_back(a.get_shape());
        const argument want = l.compute(l.compute_shape(ref_shapes), ref_args);
        std::vector<float> expected;
        for (const auto& e : want.elements()) {
            const auto x = e.to_vector<float>();
            expected.insert(expected.end(), x.begin(), x.end());
        }
        const shape out = ins->get_shape().as_standard();
        ASSERT_EQ(out.elements(), expected.size()) << cs.name;
        argument got(out);
        lib.run(k.symbol, inputs, got, k.grid, gpu::codegen::block_size);
        // The kernel body's own reference compute (what check_kernels compares with) too.
        const argument body = k.body.compute(ctx, out, inputs);
        const auto* g = reinterpret_cast<const float*>(got.data());
        const auto* b = reinterpret_cast<const float*>(body.data());
        double max_abs = 0, body_abs = 0;
        std::size_t bad = 0;
        for (std::size_t i = 0; i < expected.size(); ++i) {
            const double d = std::fabs(static_cast<double>(g[i]) - expected[i]);
            max_abs = std::max(max_abs, d);
            body_abs = std::max(body_abs, std::fabs(static_cast<double>(b[i]) - expected[i]));
            bad += !(d <= 1e-4 + 1e-4 * std::fabs(expected[i]));
        }
        EXPECT_EQ(bad, 0u) << cs.name << ": " << bad << " of " << expected.size() << " outputs differ (max abs error "
                           << max_abs << ")";
        EXPECT_LE(body_abs, 1e-5) << cs.name << ": lstm_steps' reference compute";
        std::cout << "[ gpu      ] lstm " << cs.name << ": grid " << k.grid << ", " << registers(built.log, k.symbol)
                  << " registers, max abs error " << max_abs << " (lstm_steps' reference " << body_abs << ")\n";
    }
}

// The kernel's body survives the op's value round trip (.kiln files) and regenerates the
// same kernel.
TEST(gpu_lstm, the_body_round_trips_and_regenerates_the_same_kernel) {
    std::vector<std::pair<std::string, argument>> values;
    auto p = compiled(values);
    std::size_t n = 0;
    for (auto ins : gpu_kernels(*p.get_main_module())) {
        if (!is_lstm_kernel(ins)) continue;
        const auto& k = ins->get_operator().get<gpu::fused_kernel>();
        const operation back = ins->get_operator().with_value(ins->get_operator().to_value());
        const auto& k2 = back.get<gpu::fused_kernel>();
        EXPECT_TRUE(k2.body.nodes == k.body.nodes);
        auto shapes = to_shapes(ins->inputs());
        shapes.pop_back();
        EXPECT_EQ(gpu::codegen::lstm_symbol(k2.body, shapes), k.symbol);
        ++n;
    }
    EXPECT_EQ(n, lstm_cases().size());
}

// What the kernel does not cover stays on the host's reference LSTM, and so does every
// LSTM with KILN_GPU_LSTM=0.
TEST(gpu_lstm, uncovered_lstms_and_the_switch_keep_the_host_kernel) {
    auto host_lstms = [](program& p) {
        std::size_t n = 0;
        for (auto& ins : *p.get_main_module())
            if (ins.name() == "gpu::host_kernel" && ins.get_operator().get<gpu::host_kernel>().op.name() == "lstm") ++n;
        return n;
    };
    const lstm_case c{"small", 2, 3, 5, 8, 0};
    std::vector<std::pair<std::string, argument>> values;
    {
        kiln::test::env_override off("KILN_GPU_LSTM", "0");
        auto p = lstm_program({c}, values);
        compile_for_gpu(p);
        EXPECT_EQ(host_lstms(p), 1u);
    }
    for (int variant = 0; variant < 3; ++variant) {
        program p;
        auto* m = p.get_main_module();
        auto outs = add_lstm(*m, c, "", values, 5);
        auto lstm = outs[0]->inputs()[0];
        auto l = lstm_op(c);
        if (variant == 0) l.clip = 1.0f;
        if (variant == 1) l.activations = {"Sigmoid", "Tanh", "Relu"};
        if (variant == 2) l.input_forget = true;
        m->replace_instruction(lstm, l, lstm->inputs());
        m->add_return(outs);
        compile_for_gpu(p);
        EXPECT_EQ(host_lstms(p), 1u) << "variant " << variant;
    }
}
