// ai.onnx.preview FlexAttention reference kernel: the score_mod / prob_mod bodies run
// as sub-modules on the whole (batch, q_heads, q_len, kv_len) tensor.
#include "ops/attention.hpp"

#include "ops/common.hpp"
#include "ops/norm_common.hpp"
#include "ops/softmax.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/module.hpp>
#include <kiln/register_op.hpp>

#include <cmath>

namespace kiln::op {

namespace {
std::size_t captured_count(const std::vector<std::string>& params) { return params.empty() ? 0 : params.size() - 1; }
}  // namespace

shape flex_attention::compute_shape(const std::vector<shape>& inputs, const std::vector<module_ref>& mods) const {
    const std::string op = name();
    check_num_inputs(op, inputs, 3 + captured_count(score_params) + captured_count(prob_params));
    const std::size_t want_mods = (score_params.empty() ? 0 : 1) + (prob_params.empty() ? 0 : 1);
    if (mods.size() != want_mods)
        throw_error(error_code::shape, op + ": expected " + std::to_string(want_mods) + " sub-modules, got " +
                                           std::to_string(mods.size()));
    const auto& q = inputs[0];
    const auto& k = inputs[1];
    const auto& v = inputs[2];
    for (std::size_t i = 0; i < 3; ++i) {
        check_rank(op, inputs[i], 4, 4, i == 0 ? "Q" : i == 1 ? "K" : "V");
        if (inputs[i].get_type() != q.get_type())
            throw_error(error_code::type, op + ": Q, K and V must share one type, got " + inputs[i].to_string());
    }
    check_float(op, q, "Q");
    const auto &ql = q.lens(), &kl = k.lens(), &vl = v.lens();
    if (kl[0] != ql[0] || vl[0] != ql[0] || kl[3] != ql[3] || vl[1] != kl[1] || vl[2] != kl[2] || kl[1] == 0 ||
        ql[1] % kl[1] != 0)
        throw_error(error_code::shape, op + ": incompatible Q " + q.to_string() + ", K " + k.to_string() + ", V " +
                                           v.to_string());
    return shape(q.get_type(), {ql[0], ql[1], ql[2], vl[3]});
}

argument flex_attention::compute(const shape& out, const std::vector<argument>& args, const std::vector<module_ref>& mods,
                                 const run_module_fn& run) const {
    const auto& ql = args[0].get_shape().lens();
    const auto& kl = args[1].get_shape().lens();
    const std::size_t B = ql[0], Hq = ql[1], L = ql[2], D = ql[3], Hkv = kl[1], S = kl[2], Dv = out.lens()[3];
    const std::size_t group = Hq / Hkv;
    const auto q = read_doubles(args[0]);
    const auto k = read_doubles(args[1]);
    const auto v = read_doubles(args[2]);
    const double sc = scale ? static_cast<double>(*scale) : 1.0 / std::sqrt(static_cast<double>(D));
    std::vector<double> s(B * Hq * L * S);
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t h = 0; h < Hq; ++h)
            for (std::size_t i = 0; i < L; ++i)
                for (std::size_t j = 0; j < S; ++j) {
                    double dot = 0;
                    for (std::size_t x = 0; x < D; ++x)
                        dot += q[((b * Hq + h) * L + i) * D + x] * k[((b * Hkv + h / group) * S + j) * D + x];
                    s[((b * Hq + h) * L + i) * S + j] = dot * sc;
                }
    const shape scores_shape(out.get_type(), {B, Hq, L, S});
    std::size_t next_arg = 3;
    std::size_t next_mod = 0;
    // Runs one modifier body on the whole tensor, in the tensor's own element type.
    auto apply = [&](const std::vector<std::string>& params) {
        param_map p;
        p[params[0]] = write_doubles(scores_shape, s);
        for (std::size_t c = 1; c < params.size(); ++c) p[params[c]] = args[next_arg++];
        module_ref body = mods.at(next_mod++);
        // A compiled body with intermediates reads its planned arena from a parameter.
        auto scratch = body->get_parameter(builtin::scratch_parameter);
        if (scratch != body->end()) p[builtin::scratch_parameter] = argument(scratch->get_shape());
        auto r = run(body, p);
        if (r.size() != 1 || r[0].get_shape().lens() != scores_shape.lens())
            throw_error(error_code::shape, name() + ": a modifier body must return one tensor shaped " +
                                               scores_shape.to_string());
        s = read_doubles(r[0]);
    };
    if (!score_params.empty()) apply(score_params);
    for (std::size_t r = 0; r < B * Hq * L; ++r) softmax_inplace(s.data() + r * S, S, 1, false);
    if (!prob_params.empty()) apply(prob_params);
    std::vector<double> y(B * Hq * L * Dv);
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t h = 0; h < Hq; ++h)
            for (std::size_t i = 0; i < L; ++i)
                for (std::size_t x = 0; x < Dv; ++x) {
                    double acc = 0;
                    for (std::size_t j = 0; j < S; ++j)
                        acc += s[((b * Hq + h) * L + i) * S + j] * v[((b * Hkv + h / group) * S + j) * Dv + x];
                    y[((b * Hq + h) * L + i) * Dv + x] = acc;
                }
    return write_doubles(out, y);
}

KILN_REGISTER_OP(flex_attention)

}  // namespace kiln::op
