// Attention programs for the gpu target's fused attention kernel (codegen/
// emit_attention.hpp), shared by kiln_gpu_tests (host runs) and kiln_gpu_device_tests:
// each case one result, q/k/v heads taken from [b, s, h * d] tensors by reshape and
// transpose views as the exporters write them (strided operands), K transposed by a view.
#pragma once
#include <kiln/literal.hpp>
#include <kiln/register_op.hpp>
#include <kiln/program.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace kiln::gpu_test {

struct attention_case {
    const char* name;
    std::size_t batch, heads, sq, sk, d, dv;
    enum { none, mul_scale, scale_mul, div_scale } scaling;
    std::vector<std::size_t> mask;  // lens of an additive mask, empty for none
    bool mask_first = false;        // add(mask, scores)
    std::size_t rank = 4;           // 3: [batch * heads, s, d] operands, standard
    bool select = false;            // a bool mask: where(mask, scores, lowest float) (fill_first: where(mask, fill, scores))
    bool fill_first = false;
    bool inf_fill = false;          // the fill is -inf (flex attention's causal mask), not the lowest float
};

inline std::vector<attention_case> attention_cases() {
    using c = attention_case;
    return {
        {"bert_small-like (mask [b, 1, 1, sk], / sqrt(d))", 2, 4, 128, 128, 32, 32, c::div_scale, {2, 1, 1, 128}, true},
        {"vit_tiny-like (no mask, 65 keys)", 2, 3, 65, 65, 64, 64, c::mul_scale, {}},
        {"one key", 1, 2, 5, 1, 64, 64, c::scale_mul, {1, 2, 5, 1}},
        {"one query, head dim 80", 3, 1, 1, 37, 80, 80, c::mul_scale, {37}},
        {"head dim 64, Dv 48, per-row mask", 2, 2, 33, 70, 64, 48, c::none, {33, 70}},
        {"GPT-2 causal select (4 new queries over 6 past + 4 keys)", 2, 4, 4, 10, 16, 16, c::mul_scale, {1, 1, 4, 10},
         false, 4, true},
        {"decode step (1 query over 37 keys), where(mask, fill, scores)", 1, 4, 1, 37, 16, 16, c::mul_scale, {1, 1, 1, 37},
         false, 4, true, true},
        {"causal select with a -inf fill (flex attention)", 2, 4, 4, 10, 16, 16, c::mul_scale, {1, 1, 4, 10},
         false, 4, true, false, true},
        {"rank 3, batch 5, head dim 80", 5, 1, 40, 96, 80, 80, c::div_scale, {5, 40, 96}, false, 3},
    };
}

inline value attention_ints(const std::vector<std::int64_t>& v) { return value(value::array(v.begin(), v.end())); }

// The case's attention in module `m` over fresh parameters; returns the context [.., sq, dv].
inline instruction_ref add_attention(module* m, const attention_case& c, const std::string& prefix) {
    const auto i = [](std::size_t x) { return static_cast<std::int64_t>(x); };
    auto heads = [&](const std::string& name, std::size_t s, std::size_t d, const std::vector<std::int64_t>& perm) {
        if (c.rank == 3) return m->add_parameter(prefix + name, shape(type::float32, {c.batch * c.heads, s, d}));
        auto x = m->add_parameter(prefix + name, shape(type::float32, {c.batch, s, c.heads * d}));
        auto r = m->add_instruction(make_op("reshape", {{"dims", attention_ints({i(c.batch), i(s), i(c.heads), i(d)})}}), {x});
        return m->add_instruction(make_op("transpose", {{"perm", attention_ints(perm)}}), {r});
    };
    auto q = heads("q", c.sq, c.d, {0, 2, 1, 3});
    auto kt = c.rank == 3 ? m->add_instruction(make_op("transpose", {{"perm", attention_ints({0, 2, 1})}}),
                                               {heads("k", c.sk, c.d, {})})
                          : heads("k", c.sk, c.d, {0, 2, 3, 1});
    auto v = heads("v", c.sk, c.dv, {0, 2, 1, 3});
    auto s = m->add_instruction(make_op("matmul"), {q, kt});
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
    auto lit = [&](float x) { return m->add_literal(literal(shape(type::float32, {1}), std::vector<float>{x})); };
    if (c.scaling == attention_case::mul_scale) s = m->add_instruction(make_op("mul"), {s, lit(scale)});
    if (c.scaling == attention_case::scale_mul) s = m->add_instruction(make_op("mul"), {lit(scale), s});
    if (c.scaling == attention_case::div_scale)
        s = m->add_instruction(make_op("div"), {s, lit(std::sqrt(static_cast<float>(c.d)))});
    if (c.select) {
        auto mask = m->add_parameter(prefix + "mask", shape(type::bool_, c.mask));
        auto fill = lit(c.inf_fill ? -std::numeric_limits<float>::infinity()
                               : std::numeric_limits<float>::lowest());  // GPT-2's torch.finfo(float32).min
        s = m->add_instruction(make_op("where"), c.fill_first ? std::vector<instruction_ref>{mask, fill, s}
                                                              : std::vector<instruction_ref>{mask, s, fill});
    } else if (!c.mask.empty()) {
        auto mask = m->add_parameter(prefix + "mask", shape(type::float32, c.mask));
        s = m->add_instruction(make_op("add"), c.mask_first ? std::vector<instruction_ref>{mask, s}
                                                            : std::vector<instruction_ref>{s, mask});
    }
    auto p = m->add_instruction(make_op("softmax", {{"axis", value(std::int64_t{-1})}}), {s});
    return m->add_instruction(make_op("matmul"), {p, v});
}

// Every case as its own result of one program (one NVRTC run, one host build).
inline program attention_program(const std::vector<attention_case>& cases) {
    program p;
    auto* m = p.get_main_module();
    std::vector<instruction_ref> r;
    for (std::size_t k = 0; k < cases.size(); ++k) r.push_back(add_attention(m, cases[k], "c" + std::to_string(k) + "_"));
    m->add_return(r);
    return p;
}

}  // namespace kiln::gpu_test
