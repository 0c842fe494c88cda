// RotaryEmbedding (opset 23) and LinearAttention (opset 27) reference kernels.
#include "ops/attention.hpp"

#include "ops/common.hpp"
#include "ops/norm_common.hpp"

#include <kiln/register_op.hpp>

#include <cmath>

namespace kiln::op {

shape rotary_embedding::compute_shape(const std::vector<shape>& inputs) const {
    const std::string op = name();
    check_num_inputs(op, inputs, 3, 4);
    const auto& x = inputs[0];
    check_rank(op, x, 3, 4, "input");
    check_float(op, x, "input");
    if (x.ndim() == 3 && (num_heads <= 0 || x.lens()[2] % static_cast<std::size_t>(num_heads) != 0))
        throw_error(error_code::shape, op + ": a 3-D input " + x.to_string() + " needs num_heads dividing its last dimension");
    const std::size_t head = x.ndim() == 4 ? x.lens()[3] : x.lens()[2] / static_cast<std::size_t>(num_heads);
    const std::size_t rd = rotary_embedding_dim > 0 ? static_cast<std::size_t>(rotary_embedding_dim) : head;
    if (rd > head || rd % 2 != 0)
        throw_error(error_code::shape, op + ": rotary_embedding_dim " + std::to_string(rd) +
                                           " must be even and at most the head size " + std::to_string(head));
    for (std::size_t i = 1; i < 3; ++i) {
        const auto& c = inputs[i];
        check_float(op, c, i == 1 ? "cos_cache" : "sin_cache");
        if (c.lens().empty() || c.lens().back() != rd / 2)
            throw_error(error_code::shape, op + ": cos/sin cache " + c.to_string() + " must end in rotary_dim/2 = " +
                                               std::to_string(rd / 2));
        if (c.ndim() != (inputs.size() == 4 ? 2u : 3u))
            throw_error(error_code::shape, op + ": cos/sin cache " + c.to_string() +
                                               (inputs.size() == 4 ? " must be 2-D with position_ids" : " must be 3-D without position_ids"));
    }
    if (inputs.size() == 4 && !is_integer(inputs[3].get_type()))
        throw_error(error_code::type, op + ": position_ids must be integers, got " + inputs[3].to_string());
    // compute reads one cache row per (batch, position): the caches and position ids
    // must cover them.
    const std::size_t B = x.lens()[0], S = x.ndim() == 4 ? x.lens()[2] : x.lens()[1];
    if (inputs[1].lens() != inputs[2].lens())
        throw_error(error_code::shape, op + ": cos_cache " + inputs[1].to_string() + " and sin_cache " +
                                           inputs[2].to_string() + " differ");
    if (inputs.size() == 4 && inputs[3].lens() != std::vector<std::size_t>{B, S})
        throw_error(error_code::shape, op + ": position_ids " + inputs[3].to_string() + " must be (batch, sequence) = (" +
                                           std::to_string(B) + ", " + std::to_string(S) + ")");
    if (inputs.size() == 3 && (inputs[1].lens()[0] != B || inputs[1].lens()[1] != S))
        throw_error(error_code::shape, op + ": cos/sin cache " + inputs[1].to_string() +
                                           " must be (batch, sequence, rotary_dim/2) without position_ids");
    return x.as_standard();
}

argument rotary_embedding::compute(const shape& out, const std::vector<argument>& args) const {
    const auto& l = out.lens();
    const bool four = l.size() == 4;
    const std::size_t B = l[0];
    const std::size_t H = four ? l[1] : static_cast<std::size_t>(num_heads);
    const std::size_t S = four ? l[2] : l[1];
    const std::size_t D = four ? l[3] : l[2] / H;
    const std::size_t rd = rotary_embedding_dim > 0 ? static_cast<std::size_t>(rotary_embedding_dim) : D;
    const std::size_t half = rd / 2;
    auto x = read_doubles(args[0]);
    const auto cs = read_doubles(args[1]);
    const auto sn = read_doubles(args[2]);
    std::vector<std::int64_t> pos;
    if (args.size() == 4) pos = args[3].to_vector<std::int64_t>();
    const std::size_t cache_rows = args[1].get_shape().lens()[0];
    std::vector<double> row(rd);
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t s = 0; s < S; ++s) {
            std::size_t crow = b * S + s;
            if (!pos.empty()) {
                const auto p = pos[b * S + s];
                if (p < 0 || static_cast<std::size_t>(p) >= cache_rows)
                    throw_error(error_code::invalid_argument, name() + ": position id " + std::to_string(p) +
                                                                  " is outside the cache of " + std::to_string(cache_rows));
                crow = static_cast<std::size_t>(p);
            }
            const double* c = cs.data() + crow * half;
            const double* sg = sn.data() + crow * half;
            for (std::size_t h = 0; h < H; ++h) {
                double* p = x.data() + (four ? ((b * H + h) * S + s) * D : ((b * S + s) * H + h) * D);
                for (std::size_t k = 0; k < half; ++k) {
                    const std::size_t i1 = interleaved ? 2 * k : k;
                    const std::size_t i2 = interleaved ? 2 * k + 1 : k + half;
                    row[i1] = c[k] * p[i1] - sg[k] * p[i2];
                    row[i2] = sg[k] * p[i1] + c[k] * p[i2];
                }
                for (std::size_t k = 0; k < rd; ++k) p[k] = row[k];
            }
        }
    return write_doubles(out, x);
}

namespace {
struct linear_dims {
    std::size_t B, T, Hq, Hkv, dk, dv;
};

linear_dims check_linear(const linear_attention& a, const std::vector<shape>& in) {
    const std::string op = a.name();
    const std::size_t want = 3 + (a.has_past ? 1 : 0) + (a.gated() ? 1 : 0) + (a.delta() ? 1 : 0);
    check_num_inputs(op, in, want);
    if (a.update_rule != "linear" && a.update_rule != "gated" && a.update_rule != "delta" && a.update_rule != "gated_delta")
        throw_error(error_code::unsupported, op + ": unknown update_rule '" + a.update_rule + "'");
    if (a.q_num_heads <= 0 || a.kv_num_heads <= 0 || a.q_num_heads % a.kv_num_heads != 0)
        throw_error(error_code::shape, op + ": q_num_heads " + std::to_string(a.q_num_heads) +
                                           " must be a positive multiple of kv_num_heads " + std::to_string(a.kv_num_heads));
    for (std::size_t i = 0; i < 3; ++i) {
        check_rank(op, in[i], 3, 3, i == 0 ? "query" : i == 1 ? "key" : "value");
        check_float(op, in[i]);
    }
    linear_dims d{};
    d.B = in[0].lens()[0];
    d.T = in[0].lens()[1];
    d.Hq = static_cast<std::size_t>(a.q_num_heads);
    d.Hkv = static_cast<std::size_t>(a.kv_num_heads);
    d.dk = in[0].lens()[2] / d.Hq;
    d.dv = in[2].lens()[2] / d.Hkv;
    if (in[0].lens()[2] % d.Hq != 0 || in[1].lens()[2] != d.Hkv * d.dk || in[2].lens()[2] % d.Hkv != 0 ||
        in[1].lens()[0] != d.B || in[2].lens()[0] != d.B || in[1].lens()[1] != d.T || in[2].lens()[1] != d.T)
        throw_error(error_code::shape, op + ": query " + in[0].to_string() + ", key " + in[1].to_string() + ", value " +
                                           in[2].to_string() + " do not match the head counts");
    std::size_t next = 3;
    if (a.has_past) {
        if (in[next].lens() != std::vector<std::size_t>{d.B, d.Hkv, d.dk, d.dv})
            throw_error(error_code::shape, op + ": past_state " + in[next].to_string() + " must be (B, kv_heads, d_k, d_v)");
        ++next;
    }
    if (a.gated()) {
        const auto& g = in[next++];
        // (B, T, ...): compute indexes decay by batch and step.
        if (g.ndim() != 3 || g.lens()[0] != d.B || g.lens()[1] != d.T ||
            (g.lens()[2] != d.Hkv && g.lens()[2] != d.Hkv * d.dk))
            throw_error(error_code::shape, op + ": decay " + g.to_string() +
                                               " must be (B, T, kv_heads) or (B, T, kv_heads * d_k)");
    }
    if (a.delta()) {
        const auto& b = in[next++];
        if (b.ndim() != 3 || b.lens()[0] != d.B || b.lens()[1] != d.T || (b.lens()[2] != d.Hkv && b.lens()[2] != 1))
            throw_error(error_code::shape, op + ": beta " + b.to_string() + " must be (B, T, kv_heads) or (B, T, 1)");
    }
    return d;
}
}  // namespace

shape linear_attention::compute_shape(const std::vector<shape>& inputs) const {
    auto d = check_linear(*this, inputs);
    const type st = has_past ? inputs[3].get_type() : inputs[0].get_type();
    return shape::tuple({shape(inputs[0].get_type(), {d.B, d.T, d.Hq * d.dv}), shape(st, {d.B, d.Hkv, d.dk, d.dv})});
}

argument linear_attention::compute(const shape& out, const std::vector<argument>& args) const {
    std::vector<shape> in;
    for (auto& a : args) in.push_back(a.get_shape());
    const auto d = check_linear(*this, in);
    const auto q = read_doubles(args[0]);
    const auto k = read_doubles(args[1]);
    const auto v = read_doubles(args[2]);
    std::size_t next = 3;
    std::vector<double> state(d.B * d.Hkv * d.dk * d.dv, 0.0);
    if (has_past) state = read_doubles(args[next++]);
    std::vector<double> decay, beta;
    std::size_t decay_w = 0, beta_w = 0;
    if (gated()) {
        decay_w = in[next].lens()[2];
        decay = read_doubles(args[next++]);
    }
    if (delta()) {
        beta_w = in[next].lens()[2];
        beta = read_doubles(args[next++]);
    }
    const double sc = scale != 0.0f ? static_cast<double>(scale) : 1.0 / std::sqrt(static_cast<double>(d.dk));
    const std::size_t group = d.Hq / d.Hkv;
    std::vector<double> y(d.B * d.T * d.Hq * d.dv), vt(d.dv);
    for (std::size_t b = 0; b < d.B; ++b)
        for (std::size_t t = 0; t < d.T; ++t) {
            for (std::size_t h = 0; h < d.Hkv; ++h) {
                double* S = state.data() + (b * d.Hkv + h) * d.dk * d.dv;
                const double* kt = k.data() + ((b * d.T + t) * d.Hkv + h) * d.dk;
                const double* vv = v.data() + ((b * d.T + t) * d.Hkv + h) * d.dv;
                if (gated()) {
                    for (std::size_t i = 0; i < d.dk; ++i) {
                        const double g = decay_w == d.Hkv ? decay[(b * d.T + t) * d.Hkv + h]
                                                          : decay[((b * d.T + t) * d.Hkv + h) * d.dk + i];
                        const double e = std::exp(g);
                        for (std::size_t m = 0; m < d.dv; ++m) S[i * d.dv + m] *= e;
                    }
                }
                for (std::size_t m = 0; m < d.dv; ++m) vt[m] = vv[m];
                if (delta()) {
                    // v_t <- beta_t * (v_t - S^T k_t), with S already decayed.
                    const double bt = beta[(b * d.T + t) * beta_w + (beta_w == 1 ? 0 : h)];
                    for (std::size_t m = 0; m < d.dv; ++m) {
                        double r = 0;
                        for (std::size_t i = 0; i < d.dk; ++i) r += S[i * d.dv + m] * kt[i];
                        vt[m] = bt * (vt[m] - r);
                    }
                }
                for (std::size_t i = 0; i < d.dk; ++i)
                    for (std::size_t m = 0; m < d.dv; ++m) S[i * d.dv + m] += kt[i] * vt[m];
            }
            for (std::size_t h = 0; h < d.Hq; ++h) {
                const double* S = state.data() + (b * d.Hkv + h / group) * d.dk * d.dv;
                const double* qt = q.data() + ((b * d.T + t) * d.Hq + h) * d.dk;
                for (std::size_t m = 0; m < d.dv; ++m) {
                    double acc = 0;
                    for (std::size_t i = 0; i < d.dk; ++i) acc += qt[i] * S[i * d.dv + m];
                    y[((b * d.T + t) * d.Hq + h) * d.dv + m] = sc * acc;
                }
            }
        }
    return argument::make_tuple({write_doubles(out.sub_shapes()[0], y), write_doubles(out.sub_shapes()[1], state)});
}

KILN_REGISTER_OP(rotary_embedding)
KILN_REGISTER_OP(linear_attention)

}  // namespace kiln::op
