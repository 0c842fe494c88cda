// simplify_algebra: folding per-output-channel affine maps (BatchNormalization, constant
// multiplies and adds) into the weights and bias of the op that produces the channels.
//
// Every rule here reduces to one rewrite: `ins` computes y*s[c] + t[c] of the result y of
// a convolution, deconvolution, gemm or 2-D matmul `producer`, c being the output channel
// (axis 1: NCHW channels, or the columns of a matrix). Then
//   conv(x, w, b)*s + t   = conv(x, w*s, b*s + t)         (w scaled per output channel)
//   gemm(A, B, C)*s + t   = gemm{alpha, beta=1}(A, B*s, beta*C*s + t)   (B's columns scaled)
//   matmul(A, B)*s + t    = gemm{1, 1}(A, B*s, t)
// computed in double from the constants and rounded once to the weights' type.
#include "passes/rewrite_utils.hpp"
#include "passes/simplify_algebra_rules.hpp"

#include "ops/nn_conv.hpp"
#include "ops/nn_matmul.hpp"
#include "ops/normalization.hpp"
#include "ops/pointwise_binary.hpp"


namespace kiln::algebra {

namespace {

using rewrite::constant_of;
using rewrite::is;

// s (empty: all 1) and t (empty: all 0), one value per output channel.
struct channel_affine {
    std::vector<double> s, t;
    double scale(std::size_t c) const { return s.empty() ? 1.0 : s[c]; }
    double shift(std::size_t c) const { return t.empty() ? 0.0 : t[c]; }
};

// New bias b*s + t (b: the old bias, empty when there was none); empty when neither
// the old bias nor t exists.
std::vector<double> folded_bias(const std::vector<double>& b, const channel_affine& a, std::size_t channels) {
    if (b.empty() && a.t.empty()) return {};
    std::vector<double> r(channels);
    for (std::size_t c = 0; c < channels; ++c) r[c] = (b.empty() ? 0.0 : b[c]) * a.scale(c) + a.shift(c);
    return r;
}

// Output channel of each element of convolution weights (M, C/group, k...) or
// deconvolution weights (C, M/group, k...).
std::size_t weight_channel(const std::vector<std::size_t>& lens, std::size_t i, bool deconv, std::int64_t group) {
    std::size_t inner = 1;
    for (std::size_t d = 2; d < lens.size(); ++d) inner *= lens[d];
    if (!deconv) return i / (inner * lens[1]);
    const std::size_t ci = i / (inner * lens[1]);
    const std::size_t ol = (i / inner) % lens[1];
    const std::size_t per_group_in = lens[0] / static_cast<std::size_t>(group);
    return (ci / per_group_in) * lens[1] + ol;
}

bool fold_into_conv(module& m, instruction_ref producer, instruction_ref ins, const channel_affine& a) {
    const bool deconv = is<op::deconvolution>(producer);
    const std::int64_t group = deconv ? producer->get_operator().get<op::deconvolution>().group
                                      : producer->get_operator().get<op::convolution>().group;
    const auto& in = producer->inputs();
    auto w = constant_of(in[1]);
    if (!w || !rewrite::is_float(w->get_shape().get_type())) return false;
    std::optional<literal> b;
    if (in.size() == 3 && !(b = constant_of(in[2]))) return false;
    const std::size_t channels = producer->get_shape().lens()[1];
    auto wv = rewrite::values_of(*w);
    const auto& wl = w->get_shape().lens();
    if (!a.s.empty())
        for (std::size_t i = 0; i < wv.size(); ++i) wv[i] *= a.s[weight_channel(wl, i, deconv, group)];
    auto bias = folded_bias(b ? rewrite::values_of(*b) : std::vector<double>{}, a, channels);
    std::vector<instruction_ref> args{in[0], m.insert_literal(ins, rewrite::make_literal(w->get_shape(), wv))};
    if (!bias.empty())
        args.push_back(m.insert_literal(ins, rewrite::make_literal(shape(w->get_shape().get_type(), {channels}), bias)));
    m.replace_instruction(ins, producer->get_operator(), args);
    return true;
}

// B scaled per column (per row when transposed): alpha*A*(B*s) = (alpha*A*B)*s.
std::vector<double> scale_columns(const literal& b, bool trans_b, const channel_affine& a) {
    auto v = rewrite::values_of(b);
    if (a.s.empty()) return v;
    const auto& l = b.get_shape().lens();
    for (std::size_t r = 0; r < l[0]; ++r)
        for (std::size_t c = 0; c < l[1]; ++c) v[r * l[1] + c] *= a.s[trans_b ? r : c];
    return v;
}

bool fold_into_gemm(module& m, instruction_ref producer, instruction_ref ins, const channel_affine& a) {
    const auto& in = producer->inputs();
    const bool is_matmul = is<op::matmul>(producer);
    op::gemm g;
    if (!is_matmul) g = producer->get_operator().get<op::gemm>();
    auto b = constant_of(in[1]);
    if (!b || !rewrite::is_float(b->get_shape().get_type()) || b->get_shape().ndim() != 2) return false;
    if (in[0]->get_shape().ndim() != 2) return false;  // matmul: only the 2-D product is a gemm
    std::optional<literal> c;
    if (in.size() == 3 && !(c = constant_of(in[2]))) return false;
    const auto out = producer->get_shape().lens();  // {M, N}
    const type t = b->get_shape().get_type();
    std::vector<instruction_ref> args{in[0],
                                      m.insert_literal(ins, rewrite::make_literal(b->get_shape(), scale_columns(*b, g.trans_b, a)))};
    if (c || !a.t.empty()) {
        // C' = beta*C*s + t: one value per column when C is (or is absent), else M x N.
        std::optional<std::vector<double>> per_column = std::vector<double>(out[1], 0.0);
        if (c) per_column = rewrite::values_along_axis(*c, out, 1);
        std::vector<double> cv = per_column ? *per_column : rewrite::broadcast_values(*c, out);
        const std::size_t cols = out[1];
        for (std::size_t i = 0; i < cv.size(); ++i) {
            const std::size_t col = per_column ? i : i % cols;
            cv[i] = (c ? g.beta * cv[i] : 0.0) * a.scale(col) + a.shift(col);
        }
        shape cs = per_column ? shape(t, {cols}) : shape(t, out);
        args.push_back(m.insert_literal(ins, rewrite::make_literal(cs, cv)));
        g.beta = 1.0f;
    }
    if (is_matmul && args.size() == 2) {
        m.replace_instruction(ins, producer->get_operator(), args);  // still a plain matmul
    } else {
        m.replace_instruction(ins, g, args);
    }
    return true;
}

bool is_weighted(instruction_ref p) {
    return rewrite::is_any<op::convolution, op::deconvolution, op::gemm, op::matmul>(p);
}

// Rewrites `ins` = producer*s + t (per output channel) into producer's op with folded
// constants; false (nothing changed) when producer's constants do not allow it.
bool fold_channel_affine(module& m, instruction_ref producer, instruction_ref ins, const channel_affine& a) {
    if (!is_weighted(producer) || !rewrite::only_used_by(m, producer, ins)) return false;
    const auto& ps = producer->get_shape();
    if (ps.dynamic() || ps.ndim() < 2 || !ins->get_shape().same_lens_and_type(ps)) return false;
    if (rewrite::is_any<op::convolution, op::deconvolution>(producer))
        return fold_into_conv(m, producer, ins, a);
    if (ps.ndim() != 2) return false;
    return fold_into_gemm(m, producer, ins, a);
}

}  // namespace

bool fold_batch_norm(module& m, instruction_ref ins) {
    auto* bn = ins->get_operator().any_cast<op::batch_norm_inference>();
    if (bn == nullptr) return false;
    const auto& in = ins->inputs();
    auto scale = constant_of(in[1]), bias = constant_of(in[2]), mean = constant_of(in[3]), var = constant_of(in[4]);
    if (!scale || !bias || !mean || !var) return false;
    auto sc = rewrite::values_of(*scale), b = rewrite::values_of(*bias), mu = rewrite::values_of(*mean),
         v = rewrite::values_of(*var);
    auto st = bn->scale_shift(sc, b, mu, v);
    channel_affine a;
    a.s = std::move(st.s);
    a.t = std::move(st.t);
    return fold_channel_affine(m, in[0], ins, a);
}

bool fold_affine_into_weights(module& m, instruction_ref ins) {
    const bool mul = is<op::mul_op>(ins), add = is<op::add_op>(ins), sub = is<op::sub_op>(ins);
    if (!(mul || add || sub) || ins->inputs().size() != 2) return false;
    if (!rewrite::is_float(ins->get_shape().get_type()) || ins->get_shape().ndim() < 2) return false;
    for (std::size_t k = 0; k < 2; ++k) {
        if (sub && k == 1) break;  // c - y would negate the weights: not worth a rule
        auto producer = ins->inputs()[k];
        auto c = constant_of(ins->inputs()[1 - k]);
        if (!c || !is_weighted(producer)) continue;
        auto vals = rewrite::values_along_axis(*c, ins->get_shape().lens(), 1);
        if (!vals) continue;
        channel_affine a;
        if (mul) a.s = *vals;
        else a.t = *vals;
        if (sub)
            for (auto& x : a.t) x = -x;
        if (fold_channel_affine(m, producer, ins, a)) return true;
    }
    return false;
}

}  // namespace kiln::algebra
