#include "targets/cpu/kernels/int8_gemm/int8_gemm.hpp"

#include "targets/cpu/kernels/int8_gemm/int8_im2col.hpp"

#include "targets/cpu/context.hpp"
#include "targets/cpu/cpu_features.hpp"
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"
#include "targets/cpu/kernels/onednn/op_quant.hpp"
#include "targets/cpu/kernels/onednn/primitive_kernel.hpp"

#include "passes/rewrite_utils.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <mutex>

namespace kiln::cpu {

using i8g::padded;

int8_requant_pack pack_int8_requant(const op::requantize_params& p, std::size_t channels,
                                    const std::vector<std::int64_t>& abs_sum, const std::vector<std::int64_t>& col_sum,
                                    const std::vector<double>& bias, bool int_bias) {
    const std::size_t np = padded(channels);
    int8_requant_pack r;
    r.comp.assign(np, 0);
    r.scale.assign(2 * np, 0.0f);
    r.dparams.assign(3 * np, 0.0);
    // float(acc) exact for every accumulator, and no float bias: the float product path.
    r.f32_exact = bias.empty() || int_bias;
    for (std::size_t c = 0; c < channels && r.f32_exact; ++c) {
        const double bound = 255.0 * static_cast<double>(abs_sum[c]) + (bias.empty() ? 0.0 : std::fabs(bias[c]));
        r.f32_exact = bound <= 16777216.0;
    }
    for (std::size_t c = 0; c < channels; ++c) {
        std::int64_t comp = -p.x_zero_point * col_sum[c];
        if (r.f32_exact && !bias.empty()) comp += static_cast<std::int64_t>(bias[c]);
        r.comp[c] = static_cast<std::int32_t>(comp);
        r.scale[c] = p.channel_scale(c);
        if (p.quantized_output()) r.scale[np + c] = r.scale[c] * (1.0f / p.y_scale);
        r.dparams[c] = static_cast<double>(r.scale[c]);
        if (!bias.empty() && !r.f32_exact) (int_bias ? r.dparams[np + c] : r.dparams[2 * np + c]) = bias[c];
    }
    return r;
}

i8g::requant int8_requant_view(const std::int32_t* comp, const float* scale, const double* dparams,
                               std::size_t channels, bool f32_exact, type out_type, float y_scale,
                               std::int64_t y_zero_point, std::int64_t y_min, std::int64_t y_max) {
    const std::size_t np = padded(channels);
    i8g::requant q;
    q.comp = comp;
    q.scale = scale;
    q.qscale = scale + np;
    q.dscale = dparams;
    q.ibias = dparams + np;
    q.fbias = dparams + 2 * np;
    q.f32_exact = f32_exact;
    q.out = out_type == type::uint8  ? i8g::out_kind::u8
            : out_type == type::int8 ? i8g::out_kind::s8
                                     : i8g::out_kind::f32;
    q.y_scale = y_scale;
    q.y_inv = 1.0f / y_scale;
    q.y_zero = static_cast<float>(y_zero_point);
    q.y_min = static_cast<float>(y_min);
    q.y_max = static_cast<float>(y_max);
    return q;
}

namespace {

// w as panels of 16 columns, each column's k in groups of G consecutive values:
// [panels][ceil(k / G)][16][G], zero-padded.
template <class T, std::size_t G>
std::vector<T> pack_in_groups(const std::int8_t* w, std::size_t k, std::size_t n, std::size_t sk, std::size_t sn) {
    using namespace i8g;
    const std::size_t kg = (k + G - 1) / G;
    std::vector<T> out(panels(n) * kg * panel * G, 0);
    for (std::size_t c = 0; c < n; ++c)
        for (std::size_t kk = 0; kk < k; ++kk)
            out[((c / panel) * kg + kk / G) * panel * G + (c % panel) * G + kk % G] = w[kk * sk + c * sn];
    return out;
}

}  // namespace

std::vector<std::int16_t> pack_int8_panels(const std::int8_t* w, std::size_t k, std::size_t n, std::size_t sk,
                                           std::size_t sn) {
    return pack_in_groups<std::int16_t, 2>(w, k, n, sk, sn);
}

std::vector<std::int8_t> pack_int8_quads(const std::int8_t* w, std::size_t k, std::size_t n, std::size_t sk,
                                         std::size_t sn) {
    return pack_in_groups<std::int8_t, 4>(w, k, n, sk, sn);
}

std::vector<std::int16_t> widen_int8_quads(const std::int8_t* b8, std::size_t k, std::size_t n) {
    using namespace i8g;
    const std::size_t k2 = pairs(k), k4 = quads(k), np = panels(n);
    std::vector<std::int16_t> out(np * k2 * panel * 2, 0);
    for (std::size_t p = 0; p < np; ++p)
        for (std::size_t kk = 0; kk < k; ++kk)
            for (std::size_t j = 0; j < panel; ++j)
                out[(p * k2 + kk / 2) * panel * 2 + j * 2 + kk % 2] = b8[(p * k4 + kk / 4) * panel * 4 + j * 4 + kk % 4];
    return out;
}

i8g::gemm_fn int8_gemm_kernel(isa_cap cap) {
    if (cap == isa_cap::generic || !has_avx2_fma()) return i8g::generic_gemm();
    return i8g::avx2_gemm();
}

i8g::dw_fn int8_depthwise_kernel(isa_cap cap) {
    if (cap == isa_cap::generic || !has_avx2_fma()) return i8g::generic_depthwise();
    return i8g::avx2_depthwise();
}

void run_int8_gemm(const i8g::gemm_args& g, i8g::gemm_fn kernel) {
    const std::size_t np = i8g::panels(g.n);
    const std::size_t threads =
        g.m * g.n * g.k < single_thread_macs ? 1 : static_cast<std::size_t>(std::max(omp_get_max_threads(), 1));
    // Rows first (each thread widens only its own rows of A); panels where rows are few.
    std::size_t rows = threads;
    // Row shares in whole register tiles of the kernel (the VNNI one's are 8 rows: bert's 128
    // rows as 64 + 64, not 66 + 62 with a 2-row tile).
    const std::size_t tr = kernel == i8g::vnni_gemm() ? i8g::vnni_tile_rows : i8g::tile_rows;
    while (rows > 1 && (g.m < 4 * tr * rows || threads % rows != 0)) --rows;
    std::size_t cols = threads / rows;
    while (cols > 1 && np < cols) --cols;
    const std::size_t parts = rows * cols;
    const std::size_t tiles = (g.m + tr - 1) / tr;
    const std::size_t rows_per = (tiles + rows - 1) / rows * tr, cols_per = (np + cols - 1) / cols;
    auto run_part = [&](std::size_t id) {
        const std::size_t rp = id / cols, cp = id % cols;
        const std::size_t m0 = std::min(rp * rows_per, g.m), m1 = std::min(m0 + rows_per, g.m);
        const std::size_t p0 = std::min(cp * cols_per, np), p1 = std::min(p0 + cols_per, np);
        if (m0 < m1 && p0 < p1) kernel(g, m0, m1, p0, p1);
    };
    if (parts == 1) {
        run_part(0);
        return;
    }
#pragma omp parallel for schedule(static) num_threads(static_cast<int>(parts))
    for (std::int64_t id = 0; id < static_cast<std::int64_t>(parts); ++id) run_part(static_cast<std::size_t>(id));
}

shape int8_gemm::compute_shape(const std::vector<shape>& inputs) const {
    auto bad = [&](const std::string& why) { throw_error(error_code::shape, name() + ": " + why); };
    if (m <= 0 || n <= 0 || k <= 0) bad("m, n and k must be positive");
    if (inputs.size() != 6) bad("expected a, packed b, comp, scales, double params and an output buffer");
    const auto mu = static_cast<std::size_t>(m), nu = static_cast<std::size_t>(n), ku = static_cast<std::size_t>(k);
    const shape& a = inputs[0];
    if (!a.is_tensor() || a.dynamic() || a.get_type() != a_type || !a.packed() || a.elements() != mu * ku)
        bad("a " + a.to_string() + " is not a packed 8-bit tensor of " + std::to_string(m) + " rows of " +
            std::to_string(k));
    const std::size_t wsize = quads ? i8g::quads(ku) * 4 : i8g::pairs(ku) * 2;
    if (inputs[1].get_type() != (quads ? type::int8 : type::int16) || inputs[1].elements() < i8g::padded(nu) * wsize)
        bad("the packed weights are too small or of the wrong type");
    if (inputs[2].elements() < padded(nu) || inputs[3].elements() < 2 * padded(nu) || inputs[4].elements() < 3 * padded(nu))
        bad("the requantize constants are too small");
    const shape& out = inputs.back();
    std::vector<std::size_t> lens(out_lens.begin(), out_lens.end());
    if (out.lens() != lens || out.get_type() != out_type || !out.packed() || out.elements() != mu * nu)
        bad("the output buffer " + out.to_string() + " does not hold m x n results");
    return out;
}

// The int16 panels and unshifted comp of a program packed for VNNI, run without it: made on
// the first run from the weights literal (finalize has no arguments), kept for the next.
struct int8_widened {
    std::once_flag once;
    const void* source = nullptr;  // the b8 they were made from
    std::vector<std::int16_t> b;
    std::vector<std::int32_t> comp;
};

namespace {

void widen_into(int8_widened& w, const i8g::gemm_args& g, const std::int32_t* comp) {
    w.source = g.b8;
    w.b = widen_int8_quads(g.b8, g.k, g.n);
    w.comp.assign(comp, comp + i8g::padded(g.n));
    if (!g.a_signed) return;
    for (std::size_t c = 0; c < g.n; ++c) {  // column c's weights: at (c % 16) * 2 + kk % 2 of each pair
        const std::int16_t* col = w.b.data() + (c / i8g::panel) * i8g::pairs(g.k) * i8g::panel * 2 + (c % i8g::panel) * 2;
        std::int32_t sum = 0;
        for (std::size_t kk = 0; kk < g.k; ++kk) sum += col[(kk / 2) * i8g::panel * 2 + kk % 2];
        w.comp[c] -= i8g::quads_comp_shift * sum;
    }
}

}  // namespace

// At load time: VNNI's bytes need VNNI (and no cap), else the int16 kernels on widened copies.
void int8_gemm::finalize(context& ctx, const shape&, const std::vector<shape>&) {
    const isa_cap cap = as_cpu_context(ctx, name()).options().packed_gemm_isa;
    const bool vnni = quads && cap == isa_cap::none && has_avx512_vnni();
    kernel = vnni ? i8g::vnni_gemm() : int8_gemm_kernel(cap);
    widened = quads && !vnni ? std::make_shared<int8_widened>() : nullptr;
}

std::string int8_gemm::isa() const {
    if (!kernel) return {};
    return kernel == i8g::vnni_gemm() ? "avx512_vnni" : kernel == i8g::avx2_gemm() ? "avx2" : "generic";
}

argument int8_gemm::compute(context&, const shape&, const std::vector<argument>& args) const {
    if (!kernel) throw_error(error_code::runtime, name() + ": run before it was finalized");
    i8g::gemm_args g;
    g.m = static_cast<std::size_t>(m);
    g.n = static_cast<std::size_t>(n);
    g.k = static_cast<std::size_t>(k);
    g.a = args[0].data();
    g.lda = g.k;
    g.a_signed = a_type == type::int8;
    g.b = reinterpret_cast<const std::int16_t*>(args[1].data());
    g.b8 = reinterpret_cast<const std::int8_t*>(args[1].data());
    g.c = args.back().data();
    g.ldc = g.n;
    const auto* comp = reinterpret_cast<const std::int32_t*>(args[2].data());
    int8_widened fresh;  // where the weights moved since the first run (not expected: a literal)
    if (widened) {
        std::call_once(widened->once, [&] { widen_into(*widened, g, comp); });
        const int8_widened* w = widened.get();
        if (w->source != g.b8) {
            widen_into(fresh, g, comp);
            w = &fresh;
        }
        g.b = w->b.data();
        comp = w->comp.data();
    }
    g.q = int8_requant_view(comp, reinterpret_cast<const float*>(args[3].data()),
                            reinterpret_cast<const double*>(args[4].data()), g.n, f32_exact, out_type, y_scale,
                            y_zero_point, y_min, y_max);
    run_int8_gemm(g, kernel);
    return args.back();
}

namespace {

bool is_8bit(type t) { return t == type::int8 || t == type::uint8; }

bool static_tensor(instruction_ref i) {
    const auto& s = i->get_shape();
    return s.is_tensor() && !s.dynamic() && s.elements() > 0;
}

// The bias literal (when the op has one) is constant, int32 or float32.
bool bias_ok(instruction_ref ins, const op::requantize_params& p) {
    if (!p.has_bias) return true;
    auto b = ins->inputs().at(2);
    return b->is_literal() && (b->get_shape().get_type() == type::int32 || b->get_shape().get_type() == type::float32);
}

// What int8_gemm_takes checks of any quantized product: static 8-bit operands, int8
// literal weights without zero point.
bool product_ok(instruction_ref ins, const op::requantize_params& p) {
    if (ins->inputs().size() < 2 || !static_tensor(ins) || !static_tensor(ins->inputs()[0])) return false;
    auto w = ins->inputs()[1];
    return is_8bit(ins->inputs()[0]->get_shape().get_type()) && w->is_literal() &&
           w->get_shape().get_type() == type::int8 && p.w_zero_point == 0 && bias_ok(ins, p);
}

std::vector<double> bias_values(instruction_ref ins, const op::requantize_params& p, bool& int_bias) {
    int_bias = false;
    if (!p.has_bias) return {};
    auto b = ins->inputs()[2];
    int_bias = b->get_shape().get_type() == type::int32;
    return rewrite::values_of(b->get_literal());
}

// A 1x1 convolution that is a GEMM over channels-last pixels.
bool pointwise(const op::quant_convolution& q, instruction_ref ins) {
    const auto& x = ins->inputs()[0]->get_shape();
    const auto& w = ins->inputs()[1]->get_shape();
    if (x.ndim() != 4 || w.ndim() != 4 || q.group != 1) return false;
    auto g = q.conv_geom(q.name(), x, w);
    for (std::size_t d = 0; d < g.rank(); ++d)
        if (g.kernel[d] != 1 || g.stride[d] != 1 || g.pad_begin[d] != 0 || g.out[d] != g.in[d]) return false;
    return true;
}

// A group-1 convolution with few inputs per window (MobileNetV2's first 3x3 over 3
// channels, K = 27): its windows as rows (cpu::int8_im2col) and the GEMM. Wider windows stay
// with the float fallback: their rows would multiply the activation's size by K / Cin.
constexpr std::size_t max_window_k = 64;
bool small_windows(const op::quant_convolution& q, instruction_ref ins) {
    const auto& x = ins->inputs()[0]->get_shape();
    const auto& w = ins->inputs()[1]->get_shape();
    if (x.ndim() != 4 || w.ndim() != 4 || q.group != 1 || w.lens()[1] * w.lens()[2] * w.lens()[3] > max_window_k)
        return false;
    auto g = q.conv_geom(q.name(), x, w);
    for (std::size_t d = 0; d < g.rank(); ++d)
        if (g.dilation[d] != 1 || g.pad_begin[d] < 0 || g.stride[d] < 1) return false;
    return true;
}

}  // namespace

instruction_ref int8_relayout(lower_env& env, instruction_ref pos, instruction_ref x, const shape& want) {
    x = plain(env, x);
    const auto& s = x->get_shape();
    bool same = s.lens() == want.lens() && s.get_type() == want.get_type();
    for (std::size_t d = 0; same && d < s.ndim(); ++d)  // strides of dims of length 1 never matter
        same = s.lens()[d] == 1 || s.strides()[d] == want.strides()[d];
    if (same) return x;
    quant_reorder r;
    r.out_type = want.get_type();
    auto buf = env.m.insert_instruction(pos, builtin::allocate{want}, {});
    return env.m.insert_instruction(pos, r, {x, buf});
}

bool own_int8_kernels(const cpu_options& o) {
    return o.int8_kernels != int8_kernel_choice::onednn_everywhere &&
           o.int8_kernels != int8_kernel_choice::float_ops && !has_int8_dot_product();
}

namespace {

bool gemm_fits(instruction_ref ins) {
    if (const auto* q = ins->get_operator().any_cast<op::quant_convolution>())  // no residual form here
        return !q->has_residual && product_ok(ins, *q) && (pointwise(*q, ins) || small_windows(*q, ins));
    if (const auto* q = ins->get_operator().any_cast<op::quant_dot>()) {
        if (!product_ok(ins, *q)) return false;
        const auto& a = ins->inputs()[0]->get_shape();
        const auto& b = ins->inputs()[1]->get_shape();
        return b.ndim() == 2 && a.ndim() >= 1 && a.lens().back() == b.lens()[0];
    }
    return false;
}

// Where the VNNI GEMM measured faster than oneDNN's int8 kernels (Zen 5, 2 threads, bench/ab.py
// KILN_CPU_INT8_KERNELS=onednn against =own, docs/performance.md): products with constant
// weights (bert_small_qdq's 16 [128, 256] results 0.86 -> 0.66 ms, its 8 [128, 1024] 0.35 ->
// 0.31, MobileNetV2's classifier 0.044 -> 0.013). Not convolutions: MobileNetV2's 1x1 layers
// were slower on it (K 16-32 or N 16-64: the requantize and half-empty panels dominate; its
// first layer through int8_im2col 0.14 ms against 0.07), and oneDNN fuses a 1x1 with the
// depthwise one after it.
bool vnni_faster(instruction_ref ins) { return ins->get_operator().any_cast<op::quant_dot>() != nullptr; }

}  // namespace

bool int8_gemm_takes(module&, instruction_ref ins, const cpu_options& o) {
    return own_int8_kernels(o) && gemm_fits(ins);
}

bool int8_gemm_vnni_fits(instruction_ref ins, const cpu_options& o) {
    return o.packed_gemm_isa == isa_cap::none && has_avx512_vnni() && has_int8_dot_product() && gemm_fits(ins);
}

bool int8_gemm_vnni_takes(module&, instruction_ref ins, const cpu_options& o) {
    if (o.int8_kernels != int8_kernel_choice::automatic && o.int8_kernels != int8_kernel_choice::own_vnni) return false;
    if (!int8_gemm_vnni_fits(ins, o)) return false;
    return o.int8_kernels == int8_kernel_choice::own_vnni || vnni_faster(ins);
}

void emit_int8_kernel(lower_env& env, instruction_ref ins, const operation& op, instruction_ref x,
                      const std::vector<std::int16_t>& weights, const int8_requant_pack& rq, const shape& out) {
    emit_int8_kernel(env, ins, op, x, literal(shape(type::int16, {weights.size()}), weights), rq, out);
}

void emit_int8_kernel(lower_env& env, instruction_ref ins, const operation& op, instruction_ref x,
                      const literal& weights, const int8_requant_pack& rq, const shape& out) {
    auto wt = env.constant(ins, weights);
    auto comp = env.constant(ins, literal(shape(type::int32, {rq.comp.size()}), rq.comp));
    auto scale = env.constant(ins, literal(shape(type::float32, {rq.scale.size()}), rq.scale));
    auto dparams = env.constant(ins, literal(shape(type::float64, {rq.dparams.size()}), rq.dparams));
    auto buf = env.m.insert_instruction(ins, builtin::allocate{out}, {});
    const shape plain_out(out.get_type(), out.lens());
    if (out.strides() != plain_out.strides() && rewrite::is_output(env.m, ins)) {
        auto y = env.m.insert_instruction(ins, op, {x, wt, comp, scale, dparams, buf});
        auto plain_buf = env.m.insert_instruction(ins, builtin::allocate{plain_out}, {});
        quant_reorder r;
        r.out_type = out.get_type();
        env.m.replace_instruction(ins, r, {y, plain_buf});
    } else
        env.m.replace_instruction(ins, op, {x, wt, comp, scale, dparams, buf});
}

namespace {

// The lowering of both rules: int16 panels, or VNNI's bytes (`quads`).
void lower_gemm(lower_env& env, instruction_ref ins, bool quads) {
    const bool conv = ins->get_operator().any_cast<op::quant_convolution>() != nullptr;
    const op::requantize_params p = conv ? static_cast<const op::requantize_params&>(
                                               *ins->get_operator().any_cast<op::quant_convolution>())
                                         : static_cast<const op::requantize_params&>(
                                               *ins->get_operator().any_cast<op::quant_dot>());
    auto xin = ins->inputs()[0];
    const auto& xs = xin->get_shape();
    const auto& lens = ins->get_shape().lens();
    instruction_ref a;
    shape out;
    std::size_t k = 0, n = 0;
    const auto wl = ins->inputs()[1]->get_literal();
    const auto* w = wl.get_argument().data_as<std::int8_t>();
    std::size_t m = 0, sk = 0, sn = 0;
    const auto* qc = ins->get_operator().any_cast<op::quant_convolution>();
    if (conv && !pointwise(*qc, ins)) {
        // Windows as rows of x row-major (int8_im2col.hpp), the result channels-last.
        const auto& ws = ins->inputs()[1]->get_shape();
        auto g = qc->conv_geom(qc->name(), xs, ws);
        int8_im2col cols;
        cols.kernel = {g.kernel[0], g.kernel[1]};
        cols.stride = {g.stride[0], g.stride[1]};
        cols.pad = {g.pad_begin[0], g.pad_begin[1]};
        cols.out = {static_cast<std::int64_t>(lens[2]), static_cast<std::int64_t>(lens[3])};
        cols.x_zero_point = p.x_zero_point;
        k = ws.lens()[1] * ws.lens()[2] * ws.lens()[3];
        n = lens[1];
        m = lens[0] * lens[2] * lens[3];
        auto x = int8_relayout(env, ins, xin, shape(xs.get_type(), xs.lens()));
        auto rows = env.m.insert_instruction(ins, builtin::allocate{shape(xs.get_type(), {m, k})}, {});
        a = env.m.insert_instruction(ins, cols, {x, rows});
        out = shape(p.out_type, lens, channels_last_strides(lens));
        sk = 1, sn = k;  // w [n][cin][kh][kw]: [n][k]
    } else if (conv) {
        // x and the result channels-last: [pixels][channels] (the VNNI path's layout, op_quant.cpp).
        a = int8_relayout(env, ins, xin, shape(xs.get_type(), xs.lens(), channels_last_strides(xs.lens())));
        out = shape(p.out_type, lens, channels_last_strides(lens));
        k = xs.lens()[1];
        n = lens[1];
        m = xs.elements() / k;
        sk = 1, sn = k;  // w [n][k][1][1]
    } else {
        a = int8_relayout(env, ins, xin, shape(xs.get_type(), xs.lens()));
        out = shape(p.out_type, lens);
        k = xs.lens().back();
        n = lens.back();
        m = xs.elements() / k;
        sk = n, sn = 1;  // b [k][n]
    }
    std::vector<std::int64_t> abs_sum(n, 0), col_sum(n, 0);
    for (std::size_t c = 0; c < n; ++c)
        for (std::size_t kk = 0; kk < k; ++kk) {
            const std::int64_t v = conv ? w[c * k + kk] : w[kk * n + c];
            abs_sum[c] += v < 0 ? -v : v;
            col_sum[c] += v;
        }
    bool int_bias = false;
    const auto bias = bias_values(ins, p, int_bias);
    auto rq = pack_int8_requant(p, n, abs_sum, col_sum, bias, int_bias);
    if (quads && xs.get_type() == type::int8)
        for (std::size_t c = 0; c < n; ++c) rq.comp[c] += i8g::quads_comp_shift * static_cast<std::int32_t>(col_sum[c]);
    int8_gemm op;
    op.m = static_cast<std::int64_t>(m);
    op.n = static_cast<std::int64_t>(n);
    op.k = static_cast<std::int64_t>(k);
    op.a_type = xs.get_type();
    op.out_type = p.out_type;
    op.y_scale = p.y_scale;
    op.y_zero_point = p.y_zero_point;
    op.y_min = p.y_min;
    op.y_max = p.y_max;
    op.f32_exact = rq.f32_exact;
    op.quads = quads;
    for (auto d : lens) op.out_lens.push_back(static_cast<std::int64_t>(d));
    if (quads) {
        const auto b8 = pack_int8_quads(w, k, n, sk, sn);
        emit_int8_kernel(env, ins, op, a, literal(shape(type::int8, {b8.size()}), b8), rq, out);
    } else
        emit_int8_kernel(env, ins, op, a, pack_int8_panels(w, k, n, sk, sn), rq, out);
}

}  // namespace

bool lower_int8_gemm(lower_env& env, instruction_ref ins) {
    if (!int8_gemm_takes(env.m, ins, env.ctx.options())) return false;
    lower_gemm(env, ins, false);
    return true;
}

bool lower_int8_gemm_vnni(lower_env& env, instruction_ref ins) {
    if (!int8_gemm_vnni_takes(env.m, ins, env.ctx.options())) return false;
    lower_gemm(env, ins, true);
    return true;
}

bool lower_int8_gemm_vnni_anywhere(lower_env& env, instruction_ref ins) {
    if (!int8_gemm_vnni_fits(ins, env.ctx.options())) return false;
    lower_gemm(env, ins, true);
    return true;
}

KILN_REGISTER_OP(int8_gemm)

}  // namespace kiln::cpu
