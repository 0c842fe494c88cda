// Compiling for the gpu target without a device (the passes run directly: program::
// compile refuses a target that cannot run here), and checking its generated kernels:
// NVRTC builds them for sm_90 without spills, and their host build agrees with the
// reference compute of their fused groups on random non-zero data.
#pragma once
#include "host_shim.hpp"
#include "ops/fused.hpp"
#include "targets/gpu/codegen/compile_pass.hpp"
#include "targets/gpu/codegen/emit.hpp"
#include "targets/gpu/codegen/nvrtc.hpp"
#include "targets/gpu/kernels/fused_kernel.hpp"

#include <kiln/context.hpp>
#include <kiln/float_types.hpp>
#include <kiln/onnx.hpp>
#include <kiln/pipeline.hpp>
#include <kiln/program.hpp>
#include <kiln/register_op.hpp>
#include <kiln/target.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace kiln::gpu_test {

// A shared model's file, and the model parsed at batch 1 (bert_small at 1 x 128 tokens).
inline std::filesystem::path model_file(const char* name) {
    return std::filesystem::path(KILN_SHARED_DIR) / "models" / name / "model.onnx";
}

inline program parse_model(const char* name) {
    onnx_options oo;
    oo.default_dim_value = 1;
    if (std::string(name) == "bert_small") oo.map_input_dims = {{"input_ids", {1, 128}}, {"attention_mask", {1, 128}}};
    return parse_onnx(model_file(name).string(), oo);
}

struct op_case {
    const char* name;
    std::vector<type> inputs;
};

// The generator's table (src/codegen/plan.cpp), one case per op.
inline std::vector<op_case> op_cases() {
    const type f = type::float32, b = type::bool_;
    std::vector<op_case> c;
    for (const char* n : {"exp",   "log",   "sqrt",  "reciprocal", "sin",          "cos",        "tan",        "asin",
                          "acos",  "atan",  "sinh",  "cosh",       "asinh",        "acosh",      "atanh",      "tanh",
                          "floor", "ceil",  "round", "sigmoid",    "softplus",     "softsign",   "hard_swish", "mish",
                          "abs",   "neg",   "sign",  "erf",        "relu",         "leaky_relu", "elu",        "selu",
                          "celu",  "gelu",  "swish", "shrink",     "hard_sigmoid", "thresholded_relu", "isnan", "isinf"})
        c.push_back({n, {f}});
    for (const char* n : {"add", "sub", "mul", "div", "mod", "max", "min", "prelu", "swiglu", "pow", "equal", "less",
                          "greater", "less_or_equal", "greater_or_equal"})
        c.push_back({n, {f, f}});
    for (const char* n : {"logical_and", "logical_or", "logical_xor"}) c.push_back({n, {b, b}});
    c.push_back({"logical_not", {b}});
    c.push_back({"clip", {f, f, f}});
    c.push_back({"where", {b, f, f}});
    return c;
}

// Every case as its own result over [3, 37] (the other inputs broadcast from [37]), so one
// NVRTC run and one host build cover them all.
inline program every_op() {
    program p;
    auto* m = p.get_main_module();
    std::vector<instruction_ref> results;
    std::size_t k = 0;
    for (const auto& c : op_cases()) {
        std::vector<instruction_ref> args;
        for (std::size_t i = 0; i < c.inputs.size(); ++i) {
            const bool full = i == 0 || std::string(c.name) == "swiglu";  // swiglu does not broadcast
            args.push_back(m->add_parameter("x" + std::to_string(k++), shape(c.inputs[i], full ? std::vector<std::size_t>{3, 37}
                                                                                                 : std::vector<std::size_t>{37})));
        }
        results.push_back(m->add_instruction(make_op(c.name), args));
    }
    m->add_return(results);
    return p;
}

inline value ints(const std::vector<std::int64_t>& v) { return value(value::array(v.begin(), v.end())); }

inline instruction_ref transposed(module* m, instruction_ref x, const std::vector<std::int64_t>& perm) {
    return m->add_instruction(make_op("transpose", {{"perm", ints(perm)}}), {x});
}

// Every kind of move over several element types, strides and axes (gather indices are
// random in 1..5: data axes have at least 6 elements).
inline program every_move() {
    program p;
    auto* m = p.get_main_module();
    std::vector<instruction_ref> r;
    auto x = m->add_parameter("x", shape(type::float32, {2, 3, 4, 5}));
    auto xi = m->add_parameter("xi", shape(type::int64, {6, 7}));
    auto xb = m->add_parameter("xb", shape(type::bool_, {3, 8}));
    auto xh = m->add_parameter("xh", shape(type::float16, {4, 6}));
    // reshape / flatten of transposed, sliced and broadcast views
    r.push_back(m->add_instruction(make_op("reshape", {{"dims", ints({2, 4, 15})}}), {transposed(m, x, {0, 2, 1, 3})}));
    r.push_back(m->add_instruction(make_op("reshape", {{"dims", ints({42})}}), {transposed(m, xi, {1, 0})}));
    r.push_back(m->add_instruction(make_op("flatten", {{"axis", 1}}), {transposed(m, xb, {1, 0})}));
    r.push_back(m->add_instruction(make_op("reshape", {{"dims", ints({24})}}), {transposed(m, xh, {1, 0})}));
    auto sl = m->add_instruction(make_op("slice", {{"axes", ints({3})}, {"starts", ints({1})}, {"ends", ints({4})}}), {x});
    r.push_back(m->add_instruction(make_op("reshape", {{"dims", ints({6, 12})}}), {sl}));
    auto v = m->add_parameter("v", shape(type::float32, {5}));
    auto bc = m->add_instruction(make_op("broadcast", {{"dims", ints({3, 5})}}), {v});
    r.push_back(m->add_instruction(make_op("reshape", {{"dims", ints({15})}}), {bc}));
    // gather: axes 0, 1 and -1, int32 and int64 indices of rank 0, 1, 2, strided data
    auto row = m->add_parameter("row", shape(type::float32, {1}));  // gathered from a broadcast: stride 0
    r.push_back(m->add_instruction(make_op("gather", {{"axis", 0}}),
                                   {m->add_instruction(make_op("broadcast", {{"dims", ints({9})}}), {row}),
                                    m->add_parameter("ids9", shape(type::int32, {3}))}));
    auto emb = m->add_parameter("emb", shape(type::float32, {10, 8}));
    auto ids = m->add_parameter("ids", shape(type::int64, {2, 3}));
    r.push_back(m->add_instruction(make_op("gather", {{"axis", 0}}), {emb, ids}));
    auto ids32 = m->add_parameter("ids32", shape(type::int32, {4}));
    r.push_back(m->add_instruction(make_op("gather", {{"axis", 1}}), {emb, ids32}));
    r.push_back(m->add_instruction(make_op("gather", {{"axis", -1}}), {transposed(m, emb, {1, 0}), ids32}));
    auto one = m->add_parameter("one", shape(type::int64, {}));
    r.push_back(m->add_instruction(make_op("gather", {{"axis", 1}}), {xi, one}));
    r.push_back(m->add_instruction(make_op("gather", {{"axis", 0}}), {xi, ids}));
    // concat: three inputs on axis 1 (one transposed), axis 0 and -1, int64
    auto a = m->add_parameter("a", shape(type::float32, {2, 1, 5}));
    auto b = m->add_parameter("b", shape(type::float32, {2, 4, 5}));
    auto c = transposed(m, m->add_parameter("c", shape(type::float32, {2, 5, 3})), {0, 2, 1});
    r.push_back(m->add_instruction(make_op("concat", {{"axis", 1}}), {a, b, c}));
    r.push_back(m->add_instruction(make_op("concat", {{"axis", 0}}), {b, b}));
    auto d = m->add_parameter("d", shape(type::float32, {2, 4, 2}));
    r.push_back(m->add_instruction(make_op("concat", {{"axis", -1}}), {b, d}));
    r.push_back(m->add_instruction(make_op("concat", {{"axis", 0}}), {xi, transposed(m, m->add_parameter("e", shape(type::int64, {7, 2})), {1, 0})}));
    auto empty = m->add_parameter("empty", shape(type::float32, {2, 0, 5}));  // gpt_kv's first step: no past
    r.push_back(m->add_instruction(make_op("concat", {{"axis", 1}}), {empty, b}));
    // tile; pad in every mode, with and without a value, cropping too
    r.push_back(m->add_instruction(make_op("tile", {{"repeats", ints({2, 3})}}), {transposed(m, xi, {1, 0})}));
    auto fill = m->add_parameter("fill", shape(type::float32, {}));
    auto pad = [&](const char* mode, const std::vector<std::int64_t>& pads, std::vector<instruction_ref> args) {
        r.push_back(m->add_instruction(make_op("pad", {{"mode", std::string(mode)}, {"pads", ints(pads)}}), args));
    };
    pad("constant", {0, 1, 0, 2, 0, 0, 1, -1}, {x, fill});
    pad("constant", {0, -1, 0, 0, 0, 0, -2, 1}, {x});
    pad("constant", {1, 0, 0, 2}, {transposed(m, xi, {1, 0})});
    pad("edge", {0, 2, 1, 0, 1, 3}, {b});
    pad("reflect", {0, 2, 2, 0, 5, 4}, {b});
    pad("wrap", {1, 2, 2, 9}, {xb});
    m->add_return(r);
    return p;
}

// `cases` random moves (reshape, gather, concat, tile, pad in turn) over transposed
// inputs of random lens, int64 and float32; gather indices (1..5) fit their axes.
inline program random_moves(unsigned seed, int cases) {
    std::mt19937 gen(seed);
    auto pick = [&](int lo, int hi) { return lo + static_cast<int>(gen() % static_cast<unsigned>(hi - lo + 1)); };
    program p;
    auto* m = p.get_main_module();
    std::vector<instruction_ref> r;
    std::size_t k = 0;
    // A parameter of these lens, seen through a random permutation (same lens).
    auto input = [&](const std::vector<std::size_t>& lens, type t) {
        std::vector<std::int64_t> perm(lens.size());
        for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<std::int64_t>(i);
        std::shuffle(perm.begin(), perm.end(), gen);
        std::vector<std::size_t> stored(lens.size());
        for (std::size_t i = 0; i < lens.size(); ++i) stored[static_cast<std::size_t>(perm[i])] = lens[i];
        auto x = m->add_parameter("p" + std::to_string(k++), shape(t, stored));
        return transposed(m, x, perm);
    };
    for (int c = 0; c < cases; ++c) {
        const auto rank = static_cast<std::size_t>(pick(1, 4));
        std::vector<std::size_t> lens(rank);
        for (auto& l : lens) l = static_cast<std::size_t>(pick(1, 5));
        const type t = c % 3 == 0 ? type::int64 : type::float32;
        const auto axis = static_cast<std::int64_t>(gen() % rank);
        switch (c % 5) {
            case 0: {
                std::int64_t n = 1;
                for (auto l : lens) n *= static_cast<std::int64_t>(l);
                r.push_back(m->add_instruction(make_op("reshape", {{"dims", ints({n})}}), {input(lens, t)}));
                break;
            }
            case 1: {
                lens[static_cast<std::size_t>(axis)] = 6;  // indices are 1..5
                std::vector<std::size_t> il(static_cast<std::size_t>(pick(0, 2)));
                for (auto& l : il) l = static_cast<std::size_t>(pick(1, 4));
                auto idx = m->add_parameter("p" + std::to_string(k++), shape(c % 2 ? type::int32 : type::int64, il));
                r.push_back(m->add_instruction(make_op("gather", {{"axis", axis}}), {input(lens, t), idx}));
                break;
            }
            case 2: {
                std::vector<instruction_ref> parts;
                for (int i = pick(1, 3); i >= 0; --i) {
                    auto l = lens;
                    l[static_cast<std::size_t>(axis)] = static_cast<std::size_t>(pick(1, 4));
                    parts.push_back(input(l, t));
                }
                r.push_back(m->add_instruction(make_op("concat", {{"axis", axis - static_cast<std::int64_t>(rank) * (c % 2)}}), parts));
                break;
            }
            case 3: {
                std::vector<std::int64_t> reps(rank);
                for (auto& x : reps) x = pick(1, 3);
                r.push_back(m->add_instruction(make_op("tile", {{"repeats", ints(reps)}}), {input(lens, t)}));
                break;
            }
            default: {
                const char* modes[] = {"constant", "edge", "wrap", "reflect"};
                std::vector<std::int64_t> pads(2 * rank);
                for (std::size_t d = 0; d < 2 * rank; ++d) pads[d] = lens[d % rank] >= 3 ? pick(-1, 3) : pick(0, 3);
                r.push_back(m->add_instruction(
                    make_op("pad", {{"mode", std::string(modes[c / 5 % 4])}, {"pads", ints(pads)}}), {input(lens, t)}));
            }
        }
    }
    m->add_return(r);
    return p;
}

inline void compile_for_gpu(program& p, compile_options opts = {}) {
    run_passes(p, target_independent_passes(opts));
    auto t = get_target("gpu");
    auto ctx = t->make_context(opts);
    run_passes(p, t->get_passes(*ctx, opts));
}

inline std::vector<instruction_ref> gpu_kernels(module& m) {
    std::vector<instruction_ref> out;
    for (auto ins = m.begin(); ins != m.end(); ++ins)
        if (ins->get_operator().any_cast<gpu::fused_kernel>()) out.push_back(ins);
    return out;
}

// Random non-zero data over the whole span of `s` (any strides).
inline argument random_tensor(const shape& s, unsigned seed) {
    argument a(s);
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> mag(0.1f, 2.0f);
    const std::size_t n = s.bytes() / type_size(s.get_type());
    for (std::size_t i = 0; i < n; ++i) {
        const float x = (gen() & 1 ? -1.0f : 1.0f) * mag(gen);
        switch (s.get_type()) {
            case type::float32: reinterpret_cast<float*>(a.data())[i] = x; break;
            case type::bool_: reinterpret_cast<bool*>(a.data())[i] = (gen() & 1) != 0; break;
            case type::int64: reinterpret_cast<std::int64_t*>(a.data())[i] = 1 + static_cast<std::int64_t>(gen() % 5); break;
            case type::int32: reinterpret_cast<std::int32_t*>(a.data())[i] = 1 + static_cast<std::int32_t>(gen() % 5); break;
            case type::float16: reinterpret_cast<half*>(a.data())[i] = half(x); break;
            case type::bfloat16: reinterpret_cast<bfloat16*>(a.data())[i] = bfloat16(x); break;
            default: std::memset(a.data(), 1, s.bytes()); return a;
        }
    }
    return a;
}

inline bool nearly_equal(float got, float want) {
    if (std::isnan(want)) return std::isnan(got);
    if (std::isinf(want)) return got == want;
    return std::fabs(got - want) <= 1e-4f * std::fabs(want) + 1e-5f;
}

// Distance in units in the last place between two 16-bit floats of one format (their bit
// patterns on one ordered line; NaN against NaN is 0, NaN against a number very far).
inline unsigned ulps16(std::uint16_t a, std::uint16_t b, bool bf16) {
    auto nan = [&](std::uint16_t x) { return bf16 ? (x & 0x7fff) > 0x7f80 : (x & 0x7fff) > 0x7c00; };
    if (nan(a) || nan(b)) return nan(a) && nan(b) ? 0u : 1u << 16;
    auto line = [](std::uint16_t x) { return x & 0x8000 ? -static_cast<int>(x & 0x7fff) : static_cast<int>(x); };
    return static_cast<unsigned>(std::abs(line(a) - line(b)));
}

struct kernel_report {
    std::size_t kernels = 0, distinct = 0, elements = 0;
    std::size_t elements16 = 0, off16 = 0;  // 16-bit results checked, and those not bit-equal
    unsigned max_ulp16 = 0;                 // the largest 16-bit distance seen
};

// NVRTC for sm_90 (CUBIN and PTX, no spills), then each kernel's host run against the
// reference compute of its group.
// 16-bit results may differ from the reference by `ulp16` units in the last place (fast
// math's exp/tanh/erf are not libm's; a value near a rounding boundary of the 16-bit
// format can round the other way).
inline kernel_report check_kernels(module& m, const std::string& what, unsigned ulp16 = 1) {
    kernel_report rep;
    const auto kernels = gpu_kernels(m);
    rep.kernels = kernels.size();
    if (kernels.empty()) return rep;
    const std::string source = gpu::codegen::module_source(m);
    const auto built = gpu::codegen::compile_cuda(source, "sm_90", true, "");
    EXPECT_FALSE(built.cubin.empty()) << what;
    EXPECT_FALSE(built.ptx.empty()) << what;
    std::set<std::string> symbols;
    for (auto ins : kernels) symbols.insert(ins->get_operator().get<gpu::fused_kernel>().symbol);
    rep.distinct = symbols.size();
    std::set<std::string> reported;
    for (const auto& u : built.usage) {
        reported.insert(u.function);
        EXPECT_FALSE(u.spills()) << what << ": " << u.function << " spills " << u.spill_stores << "/" << u.spill_loads
                                 << " bytes:\n" << built.log;
    }
    // A missing report is told once, with what NVRTC returned (a toolkit whose log lacks
    // ptxas's "Function properties for" lines would otherwise fail once per kernel, silently).
    std::vector<std::string> unreported;
    for (const auto& s : symbols)
        if (!reported.count(s)) unreported.push_back(s);
    EXPECT_TRUE(unreported.empty()) << what << ": no ptxas report for " << unreported.size() << " of "
                                    << symbols.size() << " kernels (first " << (unreported.empty() ? "" : unreported[0])
                                    << "); NVRTC " << gpu::codegen::nvrtc_version() << ", " << built.usage.size()
                                    << " functions parsed, log (" << built.log.size() << " chars) begins:\n"
                                    << built.log.substr(0, 1500);
    host_library lib(source);
    if (!lib.ok()) return rep;
    host_context ctx;
    unsigned seed = 1;
    for (auto ins : kernels) {
        const auto& k = ins->get_operator().get<gpu::fused_kernel>();
        std::vector<argument> inputs;
        for (std::size_t i = 0; i + 1 < ins->inputs().size(); ++i)
            inputs.push_back(random_tensor(ins->inputs()[i]->get_shape(), seed++));
        const shape out_shape = ins->get_shape().as_standard();
        argument got(out_shape);
        lib.run(k.symbol, inputs, got, std::min(k.grid, 4u), gpu::codegen::block_size);
        const argument want = k.body.compute(ctx, out_shape, inputs);
        const std::size_t n = out_shape.elements();
        rep.elements += n;
        std::size_t bad = 0;
        for (std::size_t i = 0; i < n && bad < 5; ++i) {
            bool ok = true;
            const auto t = out_shape.get_type();
            if (t == type::float32) {
                ok = nearly_equal(reinterpret_cast<const float*>(got.data())[i], reinterpret_cast<const float*>(want.data())[i]);
            } else if (t == type::float16 || t == type::bfloat16) {
                const unsigned d = ulps16(reinterpret_cast<const std::uint16_t*>(got.data())[i],
                                          reinterpret_cast<const std::uint16_t*>(want.data())[i], t == type::bfloat16);
                ++rep.elements16;
                rep.off16 += d != 0;
                rep.max_ulp16 = std::max(rep.max_ulp16, d);
                ok = d <= ulp16;
            } else
                ok = std::memcmp(got.data() + i * type_size(out_shape.get_type()),
                                 want.data() + i * type_size(out_shape.get_type()), type_size(out_shape.get_type())) == 0;
            if (!ok) {
                ++bad;
                ADD_FAILURE() << what << ": " << k.symbol << " (" << k.body.nodes.back().op.name() << ", "
                              << k.body.nodes.size() << " nodes) element " << i << " differs from the reference";
            }
        }
    }
    return rep;
}

}  // namespace kiln::gpu_test
