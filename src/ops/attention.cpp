// ONNX Attention (opset 23/24) reference kernel.
#include "ops/attention.hpp"

#include "ops/common.hpp"
#include "ops/norm_common.hpp"

#include <kiln/register_op.hpp>

#include <cmath>
#include <limits>

namespace kiln::op {

namespace {

constexpr double neg_inf = -std::numeric_limits<double>::infinity();

// Q, K or V seen as (batch, heads, len, dim) whether stored 4-D or packed 3-D
// (batch, len, heads * dim).
struct heads_view {
    std::size_t batch = 0, heads = 0, len = 0, dim = 0;
    bool packed = false;
    std::size_t at(std::size_t b, std::size_t h, std::size_t i, std::size_t d) const {
        return packed ? ((b * len + i) * heads + h) * dim + d : ((b * heads + h) * len + i) * dim + d;
    }
};

heads_view view_of(const shape& s, std::int64_t num_heads, const std::string& label) {
    const auto& l = s.lens();
    if (s.ndim() == 4) return {l[0], l[1], l[2], l[3], false};
    if (num_heads <= 0 || l[2] % static_cast<std::size_t>(num_heads) != 0)
        throw_error(error_code::shape, "attention: 3-D " + label + " " + s.to_string() +
                                           " needs a head count that divides its last dimension (got " +
                                           std::to_string(num_heads) + ")");
    const auto h = static_cast<std::size_t>(num_heads);
    return {l[0], h, l[1], l[2] / h, true};
}

struct attention_dims {
    heads_view q, k, v;
    std::size_t past = 0, total = 0;
};

std::size_t input_count(const attention& a) {
    return 3 + (a.has_mask ? 1 : 0) + (a.has_past ? 2 : 0) + (a.has_nonpad ? 1 : 0);
}

attention_dims check_dims(const attention& a, const std::vector<shape>& in) {
    const std::string op = "attention";
    check_num_inputs(op, in, input_count(a));
    const auto& qs = in[0];
    check_rank(op, qs, 3, 4, "Q");
    check_float(op, qs, "Q");
    for (std::size_t i = 1; i < 3; ++i) {
        if (in[i].ndim() != qs.ndim())
            throw_error(error_code::shape, op + ": Q, K and V must have the same rank, got " + qs.to_string() + " and " +
                                               in[i].to_string());
        if (in[i].get_type() != qs.get_type())
            throw_error(error_code::type, op + ": K and V must have Q's type, got " + in[i].to_string());
    }
    attention_dims d;
    d.q = view_of(qs, a.q_num_heads, "Q");
    d.k = view_of(in[1], a.kv_num_heads, "K");
    d.v = view_of(in[2], a.kv_num_heads, "V");
    if (d.k.batch != d.q.batch || d.v.batch != d.q.batch || d.k.dim != d.q.dim || d.v.len != d.k.len ||
        d.v.heads != d.k.heads || d.k.heads == 0 || d.q.heads % d.k.heads != 0)
        throw_error(error_code::shape, op + ": incompatible Q " + qs.to_string() + ", K " + in[1].to_string() +
                                           ", V " + in[2].to_string() +
                                           " (batch, head size and K/V length must match; q heads must be a "
                                           "multiple of kv heads)");
    std::size_t next = 3 + (a.has_mask ? 1 : 0);
    if (a.has_past) {
        const auto& pk = in[next];
        const auto& pv = in[next + 1];
        if (pk.ndim() != 4 || pv.ndim() != 4 || pk.lens()[0] != d.q.batch || pk.lens()[1] != d.k.heads ||
            pk.lens()[3] != d.k.dim || pv.lens()[0] != d.q.batch || pv.lens()[1] != d.k.heads ||
            pv.lens()[2] != pk.lens()[2] || pv.lens()[3] != d.v.dim)
            throw_error(error_code::shape, op + ": past_key " + pk.to_string() + " / past_value " + pv.to_string() +
                                               " do not match K and V");
        d.past = pk.lens()[2];
        next += 2;
    }
    d.total = d.past + d.k.len;
    if (a.has_nonpad) {
        const auto& n = in[next];
        if (!is_integer(n.get_type()) || n.ndim() != 1 || n.lens()[0] != d.q.batch)
            throw_error(error_code::shape, op + ": nonpad_kv_seqlen must be an integer tensor of shape [" +
                                               std::to_string(d.q.batch) + "], got " + n.to_string());
    }
    if (a.has_mask) {
        const auto& m = in[3];
        check_rank(op, m, 2, 4, "attn_mask");
        if (m.get_type() != type::bool_ && m.get_type() != qs.get_type())
            throw_error(error_code::type, op + ": attn_mask must be bool or Q's type, got " + m.to_string());
        const std::vector<std::size_t> target{d.q.batch, d.q.heads, d.q.len, m.lens().back()};
        // Every dim but the last (the key length, which may differ): i counts from the end.
        for (std::size_t i = 1; i < m.ndim(); ++i) {
            const std::size_t ml = m.lens()[m.ndim() - 1 - i];
            const std::size_t tl = target[3 - i];
            if (ml != tl && ml != 1)
                throw_error(error_code::shape, op + ": attn_mask " + m.to_string() +
                                                   " does not broadcast to (batch, q_heads, q_len, kv_len)");
        }
        if (m.lens().back() > d.total)
            throw_error(error_code::shape, op + ": attn_mask " + m.to_string() + " is longer than the " +
                                               std::to_string(d.total) + " keys");
    }
    return d;
}

}  // namespace

shape attention::compute_shape(const std::vector<shape>& inputs) const {
    auto d = check_dims(*this, inputs);
    const type t = inputs[0].get_type();
    shape y = d.q.packed ? shape(t, {d.q.batch, d.q.len, d.q.heads * d.v.dim})
                         : shape(t, {d.q.batch, d.q.heads, d.q.len, d.v.dim});
    return shape::tuple({y, shape(t, {d.q.batch, d.k.heads, d.total, d.k.dim}),
                         shape(t, {d.q.batch, d.k.heads, d.total, d.v.dim}),
                         shape(t, {d.q.batch, d.q.heads, d.q.len, d.total})});
}

argument attention::compute(const shape& out, const std::vector<argument>& args) const {
    std::vector<shape> in_shapes;
    for (auto& a : args) in_shapes.push_back(a.get_shape());
    const auto d = check_dims(*this, in_shapes);
    const auto q = read_doubles(args[0]);
    const auto k = read_doubles(args[1]);
    const auto v = read_doubles(args[2]);
    std::size_t next = 3;
    std::vector<double> mask;
    std::vector<std::size_t> mask_strides(4, 0);
    std::size_t mask_len = 0;
    if (has_mask) {
        const auto& ms = args[3].get_shape();
        mask = read_doubles(args[3]);
        if (ms.get_type() == type::bool_)
            for (auto& m : mask) m = m != 0.0 ? 0.0 : neg_inf;
        auto st = shape::standard_strides(ms.lens());
        for (std::size_t i = 0; i < ms.ndim(); ++i)
            mask_strides[4 - ms.ndim() + i] = ms.lens()[i] == 1 ? 0 : st[i];
        mask_len = ms.lens().back();
        mask_strides[3] = 1;
        ++next;
    }
    // present_key / present_value = concat(past, new) along the sequence axis.
    const std::size_t B = d.q.batch, Hkv = d.k.heads, T = d.total, D = d.k.dim, Dv = d.v.dim;
    std::vector<double> pk(B * Hkv * T * D), pv(B * Hkv * T * Dv);
    std::vector<double> past_k, past_v;
    if (has_past) {
        past_k = read_doubles(args[next]);
        past_v = read_doubles(args[next + 1]);
        next += 2;
    }
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t h = 0; h < Hkv; ++h)
            for (std::size_t j = 0; j < T; ++j) {
                const bool old = j < d.past;
                for (std::size_t x = 0; x < D; ++x)
                    pk[((b * Hkv + h) * T + j) * D + x] =
                        old ? past_k[((b * Hkv + h) * d.past + j) * D + x] : k[d.k.at(b, h, j - d.past, x)];
                for (std::size_t x = 0; x < Dv; ++x)
                    pv[((b * Hkv + h) * T + j) * Dv + x] =
                        old ? past_v[((b * Hkv + h) * d.past + j) * Dv + x] : v[d.v.at(b, h, j - d.past, x)];
            }
    std::vector<std::int64_t> nonpad;
    if (has_nonpad) nonpad = args[next].to_vector<std::int64_t>();

    const std::size_t Hq = d.q.heads, Lq = d.q.len, group = Hq / Hkv;
    const double sc = scale ? static_cast<double>(*scale) : 1.0 / std::sqrt(static_cast<double>(D));
    std::vector<double> y(B * Hq * Lq * Dv), qk(B * Hq * Lq * T), s(T);
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t h = 0; h < Hq; ++h) {
            const std::size_t kh = h / group;  // each KV head serves a contiguous group of query heads
            for (std::size_t i = 0; i < Lq; ++i) {
                double* qk_row = qk.data() + ((b * Hq + h) * Lq + i) * T;
                for (std::size_t j = 0; j < T; ++j) {
                    double dot = 0;
                    for (std::size_t x = 0; x < D; ++x) dot += q[d.q.at(b, h, i, x)] * pk[((b * Hkv + kh) * T + j) * D + x];
                    double raw = dot * sc;
                    // Softcap comes before the mask so that masked scores stay -inf.
                    if (softcap > 0.0f) raw = softcap * std::tanh(raw / softcap);
                    double bias = 0;
                    if (has_mask) {
                        bias += j < mask_len ? mask[b * mask_strides[0] + h * mask_strides[1] + i * mask_strides[2] + j]
                                             : neg_inf;
                    }
                    if (is_causal) {
                        // Bottom-right aligned: query i sees keys up to i + offset, where offset
                        // counts the valid keys before this query block.
                        const auto offset = has_nonpad && !has_past ? nonpad[b] - static_cast<std::int64_t>(Lq)
                                                                    : static_cast<std::int64_t>(d.past);
                        if (static_cast<std::int64_t>(j) > static_cast<std::int64_t>(i) + offset) bias += neg_inf;
                    }
                    if (has_nonpad && static_cast<std::int64_t>(j) >= nonpad[b]) bias += neg_inf;
                    s[j] = raw + bias;
                    qk_row[j] = qk_matmul_output_mode == 2 ? s[j] : raw;
                }
                double m = neg_inf;
                for (std::size_t j = 0; j < T; ++j) m = std::max(m, s[j]);
                double sum = 0;
                for (std::size_t j = 0; j < T; ++j) {
                    // A fully masked row attends to nothing: its probabilities are all zero.
                    s[j] = m == neg_inf ? 0.0 : std::exp(s[j] - m);
                    sum += s[j];
                }
                for (std::size_t j = 0; j < T; ++j) {
                    s[j] = sum > 0 ? s[j] / sum : 0.0;
                    if (qk_matmul_output_mode == 3) qk_row[j] = s[j];
                }
                for (std::size_t x = 0; x < Dv; ++x) {
                    double acc = 0;
                    for (std::size_t j = 0; j < T; ++j) acc += s[j] * pv[((b * Hkv + kh) * T + j) * Dv + x];
                    const std::size_t at = d.q.packed ? ((b * Lq + i) * Hq + h) * Dv + x : ((b * Hq + h) * Lq + i) * Dv + x;
                    y[at] = acc;
                }
            }
        }
    const auto& o = out.sub_shapes();
    return argument::make_tuple(
        {write_doubles(o[0], y), write_doubles(o[1], pk), write_doubles(o[2], pv), write_doubles(o[3], qk)});
}

KILN_REGISTER_OP(attention)

}  // namespace kiln::op
