#include "targets/cpu/kernels/conv_gemm/conv_gemm.hpp"

#include "targets/cpu/cpu_features.hpp"
#include "targets/cpu/kernels/packed_gemm/packed_gemm.hpp"
#include "targets/cpu/kernels/packed_gemm/packed_gemm_args.hpp"
#include "targets/cpu/sum_post_op.hpp"

#include "ops/nn_conv.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

namespace kiln::cpu {

namespace {

// Where the product pays: few output pixels in all (ResNet-50, per layer, oneDNN direct
// against this: 49 rows 2.2-2.5 vs 1.6-1.9 ms; 196 rows 2.1 vs 2.0; at batch 8, 392 rows
// 18.8-20.0 vs 14.1-17.1 ms, but 1568 rows 14.7-17.3 vs 16.9-21.6), enough channels to
// fill the panels.
constexpr std::int64_t max_rows = 512;
// With AVX-512, where the product is taken even without the switches (lower_conv_gemm):
// any window over at most this many output pixels, and 1x1 layers at least this deep.
constexpr std::int64_t max_rows_any_window = 64;
constexpr std::int64_t min_deep_depth = 2048;
constexpr std::int64_t min_out_channels = 64;
// With AVX-512, 1x1 layers over many pixels (the tall order): deeper than this and without
// a residual to add in place, oneDNN's brgemm kernels are as fast or faster (module comment).
constexpr std::int64_t max_plain_depth = 256;
// ... and smaller than this (x, the result and a residual, in bytes), the layer's data stays
// in the caches, where oneDNN's kernels are faster (ResNet-50 and MobileNetV2 at batch 1).
constexpr std::size_t min_streamed_bytes = 8u << 20;

struct geometry {
    // block, out_block: pixel_channels of x's and of the result's layouts (8 or 16 for
    // oneDNN's blocked layouts, all channels for channels-last).
    std::size_t n, c, h, w, oc, ho, wo, kh, kw, block, out_block;
    std::size_t rows() const { return n * ho * wo; }
    std::size_t depth() const { return kh * kw * c; }
};

geometry geometry_of(const conv_gemm& op) {
    geometry g{};
    const auto& in = op.layouts.at(0).dims;
    const auto& out = op.dst_layout.dims;
    g.n = static_cast<std::size_t>(in.at(0));
    g.c = static_cast<std::size_t>(in.at(1));
    g.h = static_cast<std::size_t>(in.at(2));
    g.w = static_cast<std::size_t>(in.at(3));
    g.oc = static_cast<std::size_t>(out.at(1));
    g.ho = static_cast<std::size_t>(out.at(2));
    g.wo = static_cast<std::size_t>(out.at(3));
    g.kh = static_cast<std::size_t>(op.kernel.at(0));
    g.kw = static_cast<std::size_t>(op.kernel.at(1));
    g.block = static_cast<std::size_t>(pixel_channels(op.layouts.at(0)));
    g.out_block = static_cast<std::size_t>(pixel_channels(op.dst_layout));
    return g;
}

// A 1x1 stride-1 convolution of a channels-last x is already the product's A (rows =
// pixels, K = channels): no im2col copy.
bool reads_x_in_place(const conv_gemm& op, const geometry& g) {
    return op.a_stride == 0 && g.kh == 1 && g.kw == 1 && op.stride == std::vector<std::int64_t>{1, 1} &&
           op.pad_begin == std::vector<std::int64_t>{0, 0} && g.block == g.c && g.ho == g.h && g.wo == g.w;
}

// A's row stride in the im2col buffer.
std::size_t a_row_stride(const conv_gemm& op, const geometry& g) {
    return op.a_stride > 0 ? static_cast<std::size_t>(op.a_stride) : g.depth();
}

// At least one copy of A; where the product's columns are split over `threads`, one per
// column part (pgemm::a_fill: each thread gathers the rows it multiplies itself).
std::size_t im2col_bytes(const conv_gemm& op, const geometry& g, std::size_t threads = 1) {
    if (reads_x_in_place(op, g)) return sizeof(float);
    const std::size_t copies = pgemm::column_parts(g.rows(), g.oc, g.depth(), threads);
    return copies * g.rows() * a_row_stride(op, g) * sizeof(float);
}

std::size_t packed_floats(const geometry& g) { return (g.oc + pgemm::panel - 1) / pgemm::panel * g.depth() * pgemm::panel; }

// A leading "sum" post-op: the output buffer holds a residual to add to (accumulate).
bool accumulates(const conv_gemm& op) { return !op.post_ops.empty() && op.post_ops.front().kind == "sum"; }

// The post-ops the kernels' epilogue applies (all but a leading sum).
std::vector<post_op> epilogue_ops(const conv_gemm& op) {
    return {op.post_ops.begin() + (accumulates(op) ? 1 : 0), op.post_ops.end()};
}

// A binary post-op operand: laid out as the result, or one value per channel.
bool full_operand(const conv_gemm& op, std::size_t in) {
    return in < op.layouts.size() && same_layout(op.layouts[in], op.dst_layout);
}

// Rows [r0, r1) of A: for output pixel (image, oh, ow) the window's values, tap by tap
// (kh, kw), each tap the C channels in order; taps outside the image are zeros. B (the
// channel block) is a constant where it is 8 or 16, so each block's copy is one or two
// vector moves; 0: g.block (channels-last, one block of all channels).
template <std::size_t Bc>
void gather_rows(const conv_gemm& op, const geometry& g, const float* x, float* a, std::size_t r0, std::size_t r1) {
    const std::size_t B = Bc ? Bc : g.block;
    const std::size_t pixels = g.ho * g.wo, plane = g.h * g.w * B, image = g.c * g.h * g.w;
    const std::size_t lda = a_row_stride(op, g), blocks = g.c / B;
    for (std::size_t r = r0; r < r1; ++r) {
        const std::size_t img = r / pixels, q = r % pixels, oh = q / g.wo, ow = q % g.wo;
        float* row = a + r * lda;
        for (std::size_t i = 0; i < g.kh; ++i) {
            const std::int64_t ih = static_cast<std::int64_t>(oh) * op.stride[0] - op.pad_begin[0] +
                                    static_cast<std::int64_t>(i) * op.dilation[0];
            for (std::size_t j = 0; j < g.kw; ++j) {
                const std::int64_t iw = static_cast<std::int64_t>(ow) * op.stride[1] - op.pad_begin[1] +
                                        static_cast<std::int64_t>(j) * op.dilation[1];
                float* d = row + (i * g.kw + j) * g.c;
                if (ih < 0 || iw < 0 || ih >= static_cast<std::int64_t>(g.h) || iw >= static_cast<std::int64_t>(g.w)) {
                    std::fill(d, d + g.c, 0.0f);
                    continue;
                }
                const float* s = x + img * image + (static_cast<std::size_t>(ih) * g.w + static_cast<std::size_t>(iw)) * B;
                for (std::size_t cb = 0; cb < blocks; ++cb) std::memcpy(d + cb * B, s + cb * plane, B * sizeof(float));
            }
        }
    }
}

void gather(const conv_gemm& op, const geometry& g, const float* x, float* a, std::size_t r0, std::size_t r1) {
    if (g.block == 16) gather_rows<16>(op, g, x, a, r0, r1);
    else if (g.block == 8) gather_rows<8>(op, g, x, a, r0, r1);
    else gather_rows<0>(op, g, x, a, r0, r1);
}

}  // namespace

struct conv_gemm::plan {
    pgemm::part_fn part = nullptr;
    std::vector<post_op> epilogue;  // post_ops less a leading sum
    std::vector<pgemm::post_step> post;
    bool accumulate = false;
};

shape conv_gemm::compute_shape(const std::vector<shape>& inputs) const {
    auto bad = [&](const std::string& why) { throw_error(error_code::shape, name() + ": " + why); };
    const std::size_t base = 2 + (has_bias ? 1 : 0);
    if (inputs.size() < base + 2) bad("expected x, packed weights, [bias], an im2col buffer and an output buffer");
    for (const auto& s : inputs)
        if (!s.is_tensor() || s.dynamic()) bad("inputs must be static tensors, got " + s.to_string());
    for (const auto* v : {&kernel, &stride, &dilation, &pad_begin})
        if (v->size() != 2) bad("kernel, stride, dilation and pad_begin must have 2 values each");
    for (std::size_t i = 0; i < 2; ++i)
        if (kernel[i] < 1 || stride[i] < 1 || dilation[i] < 1 || pad_begin[i] < 0)
            bad("invalid window (kernel, stride and dilation must be >= 1, pads >= 0)");
    if (layouts.empty() || layouts[0].dims.size() != 4 || dst_layout.dims.size() != 4)
        bad("x and the result must have 4-D layouts");
    if (!channel_groups_fit(layouts[0], dst_layout))
        bad("x and the result must be in channel-blocked or channels-last layouts, channels in multiples of 8");
    const shape& x = inputs[0];
    if (x.get_type() != type::float32 || to_dims(x.lens()) != layouts[0].to_md().dims())
        bad("x " + x.to_string() + " does not match its layout");
    const auto g = geometry_of(*this);
    if (static_cast<std::int64_t>(g.c) != in_channels || static_cast<std::int64_t>(g.oc) != out_channels ||
        dst_layout.dims[0] != layouts[0].dims[0] || g.c % g.block != 0 || g.oc % g.out_block != 0)
        bad("channels must match the layouts and be multiples of the block");
    if (inputs[1].get_type() != type::float32 || inputs[1].elements() < packed_floats(g))
        bad("the packed weights " + inputs[1].to_string() + " are too small");
    if (has_bias && (inputs[2].get_type() != type::float32 || inputs[2].elements() != g.oc))
        bad("the bias must have one float32 value per output channel");
    if (a_stride < 0 || (a_stride > 0 && static_cast<std::size_t>(a_stride) < g.depth()))
        bad("a_stride " + std::to_string(a_stride) + " is shorter than a row of " + std::to_string(g.depth()));
    if (inputs[inputs.size() - 2].bytes() < im2col_bytes(*this, g)) bad("the im2col buffer is too small");
    if (inputs.back().bytes() < dst_layout.to_md().get_size()) bad("the output buffer is too small");
    if (post_ops.size() > static_cast<std::size_t>(pgemm::max_post_steps)) bad("too many post-ops");
    for (std::size_t i = 0; i < post_ops.size(); ++i) {
        const auto& p = post_ops[i];
        if (p.kind == "sum" && i == 0) continue;  // the output buffer's own values
        if (!fused_post_kind_of(p)) bad("post-op " + p.kind + " " + p.algorithm + " is not supported");
        if (p.kind != "binary") continue;
        const auto in = static_cast<std::size_t>(p.input);
        if (p.input < static_cast<std::int64_t>(base) || in >= inputs.size() - 2 ||
            !(full_operand(*this, in) || (inputs[in].elements() == g.oc && inputs[in].packed())))
            bad("binary post-op input " + std::to_string(p.input) +
                " is neither in the result's layout nor one value per channel");
    }
    return shape(type::float32, {g.n, g.oc, g.ho, g.wo});
}

void conv_gemm::finalize(context& ctx, const shape&, const std::vector<shape>&) {
    const auto cap = as_cpu_context(ctx, name()).options().packed_gemm_isa;
    auto p = std::make_shared<plan>();
    p->part = pgemm::chosen_part(cap);  // at load time: a program saved on one machine runs on another
    p->accumulate = accumulates(*this);
    p->epilogue = epilogue_ops(*this);
    p->post = packed_post_steps(p->epilogue, name(), [&](std::size_t in) { return full_operand(*this, in); });
    ready = std::move(p);
}

argument conv_gemm::compute(context&, const shape&, const std::vector<argument>& args) const {
    if (!ready) throw_error(error_code::runtime, name() + ": run before it was finalized");
    const auto g = geometry_of(*this);
    const auto* x = reinterpret_cast<const float*>(args[0].data());
    auto* a = reinterpret_cast<float*>(args[args.size() - 2].data());
    const bool in_place = reads_x_in_place(*this, g);
    if (in_place) a = const_cast<float*>(x);  // read only: the product's A
    pgemm::args p;
    p.m = g.rows();
    p.n = g.oc;
    p.k = g.depth();
    p.kc = pgemm::depth_block(p.k);
    p.a = a;
    p.lda = in_place ? 0 : a_row_stride(*this, g);
    p.b = reinterpret_cast<const float*>(args[1].data());
    p.bias = has_bias ? reinterpret_cast<const float*>(args[2].data()) : nullptr;
    p.c = reinterpret_cast<float*>(args.back().data());
    // Channels-last (one block of all channels) is plain row-major C: the kernels' fast path.
    p.block = g.out_block == g.oc ? 0 : g.out_block;
    p.image_rows = g.ho * g.wo;
    p.accumulate = ready->accumulate;
    bind_post_steps(p, ready->post, ready->epilogue, args);
    if (in_place) {
        pgemm::run_all(p, ready->part);
        return args.back();
    }
    // The im2col rows gathered by the parts themselves, each thread the rows it multiplies
    // (into its own copy where the columns are split: packed_gemm_args.hpp, a_fill).
    pgemm::a_fill fill;
    fill.fill = [&](float* rows_of_a, std::size_t r0, std::size_t r1) { gather(*this, g, x, rows_of_a, r0, r1); };
    fill.a = a;
    fill.copy_floats = g.rows() * a_row_stride(*this, g);
    fill.copies = args[args.size() - 2].get_shape().bytes() / (fill.copy_floats * sizeof(float));
    pgemm::run_all(p, ready->part, fill);
    return args.back();
}

bool lower_conv_gemm(lower_env& env, const convolution& c, const std::vector<instruction_ref>& operands,
                     instruction_ref pos, const std::vector<instruction_ref>& replaced, bool rules) {
    const auto& o = env.ctx.options();
    if (o.conv_gemm == conv_gemm_choice::off || !has_avx2_fma()) return false;
    // Without the rules, every convolution that fits (as =all, with =tall's sizes).
    const auto mode = rules ? o.conv_gemm : conv_gemm_choice::all;
    const auto* conv = c.op.any_cast<op::convolution>();
    if (!conv || c.transposed() || c.dw.active() || operands.size() < 2 || !operands[1]->is_literal()) return false;
    const shape& x = operands[0]->get_shape();
    const shape& w = c.weights_shape;
    if (x.ndim() != 4 || w.ndim() != 4 || x.get_type() != type::float32 || w.get_type() != type::float32) return false;
    const auto geo = conv->conv_geom(conv->name(), x, w);
    if (geo.group != 1 || geo.out_channels < min_out_channels) return false;
    const auto rows = geo.batch * geo.out[0] * geo.out[1];
    const bool pointwise = geo.kernel == std::vector<std::int64_t>{1, 1} && geo.stride == std::vector<std::int64_t>{1, 1} &&
                           geo.pad_begin == std::vector<std::int64_t>{0, 0};
    // Which convolutions (the module comment has the measurements): with AVX-512, 1x1
    // layers over many pixels (the kernels' tall order, x read in place); without, few
    // output pixels and a window of 2 taps or more. =1x1 adds 1x1 layers with few pixels,
    // =all everything that fits.
    // With AVX-512, strided 1x1 layers with few pixels too (module comment).
    const bool strided_1x1 = has_avx512() && o.conv_gemm_strided &&
                             geo.kernel == std::vector<std::int64_t>{1, 1} &&
                             geo.stride != std::vector<std::int64_t>{1, 1};
    // ... and, with AVX-512, windows over very few pixels (a 7x7 layer at batch 1: oneDNN's
    // direct kernels have too few rows for their register blocking) and very deep 1x1
    // layers over few pixels (K = 2048: its brgemm kernels' rows share L1 sets).
    const bool taps = geo.kernel[0] * geo.kernel[1] >= 2;
    const bool tiny = has_avx512() && o.conv_gemm_tiny && rows <= max_rows_any_window &&
                      (taps || (pointwise && geo.in_channels >= min_deep_depth));
    const bool few_rows = rows <= max_rows && (taps || mode == conv_gemm_choice::pointwise || strided_1x1 || tiny);
    // ... and strided 1x1 layers with many pixels whose strided rows of x share L1 cache
    // sets (4 KiB apart: oneDNN's kernels read them in place), gathered into padded rows.
    const bool strided_tall = strided_1x1 && (geo.stride[1] * geo.in_channels * 4) % 4096 == 0;
    const bool tall = has_avx512() && (pointwise || strided_tall) && rows >= static_cast<std::int64_t>(pgemm::tall_rows) && !few_rows;
    const bool wider = mode == conv_gemm_choice::all || mode == conv_gemm_choice::pointwise;
    if (has_avx512() ? !(tall || (few_rows && (wider || strided_1x1 || tiny))) : !few_rows)
        return false;
    conv_gemm op;
    op.kernel = geo.kernel;
    op.stride = geo.stride;
    op.dilation = geo.dilation;
    op.pad_begin = geo.pad_begin;
    for (auto p : op.pad_begin)
        if (p < 0) return false;
    op.in_channels = geo.in_channels;
    op.out_channels = geo.out_channels;
    op.has_bias = c.has_bias;
    op.post_ops = c.post_ops;
    op.dst_layout = c.dst_layout;
    op.layouts = operand_layouts(env, operands);
    if (!channel_groups_fit(op.layouts[0], op.dst_layout)) return false;
    if (geo.in_channels % pixel_channels(op.layouts[0]) != 0 || geo.out_channels % pixel_channels(op.dst_layout) != 0)
        return false;
    if (tall && !strided_tall && !reads_x_in_place(op, geometry_of(op))) return false;
    // Gathered rows padded where they would share L1 cache sets.
    if (const auto g0 = geometry_of(op); !reads_x_in_place(op, g0))
        if (const auto lda = pgemm::padded_a_stride(g0.depth(), g0.rows()); lda != g0.depth())
            op.a_stride = static_cast<std::int64_t>(lda);
    const auto oc = static_cast<std::size_t>(geo.out_channels);
    if (c.has_bias && (operands.size() < 3 || operands[2]->get_shape().elements() != oc)) return false;
    if (op.post_ops.size() > static_cast<std::size_t>(pgemm::max_post_steps)) return false;
    for (const auto& p : op.post_ops) {
        if (!fused_post_kind_of(p)) return false;
        if (p.kind != "binary") continue;
        const auto in = static_cast<std::size_t>(p.input);
        if (p.input < 2 || in >= operands.size()) return false;
        const bool vector = op.layouts[in].dims.empty() && operands[in]->get_shape().elements() == oc &&
                            operands[in]->get_shape().packed();
        if (!full_operand(op, in) && !vector) return false;
    }
    auto args = operands;
    // A residual added first is added in place: the product starts from it, in its buffer.
    const auto residual =
        residual_for_sum(env, op.post_ops, args, op.dst_layout, pos, replaced, [](std::size_t i) { return i == 0; });
    if (residual) op.layouts = operand_layouts(env, args);
    if (tall) {
        // Only where the layer streams through memory (the prefetching pays); and without a
        // residual, oneDNN's kernels are as fast or faster on deep 1x1 layers (K > 256).
        const auto bytes = static_cast<std::size_t>(rows) * sizeof(float) *
                           static_cast<std::size_t>(geo.in_channels + geo.out_channels * (residual ? 2 : 1));
        if (rules && mode != conv_gemm_choice::tall && !strided_tall && (bytes < min_streamed_bytes || (!residual && geo.in_channels > max_plain_depth))) return false;
    }
    // B[k][n]: k = (kh, kw, input channel) as A's columns, n = output channel.
    const auto g = geometry_of(op);
    args[1] = env.derive(pos, operands[1], "conv_gemm", [&] {
        const auto wv = operands[1]->get_literal().to_vector<float>();
        std::vector<float> bmat(g.depth() * g.oc);
        for (std::size_t o = 0; o < g.oc; ++o)
            for (std::size_t ic = 0; ic < g.c; ++ic)
                for (std::size_t i = 0; i < g.kh; ++i)
                    for (std::size_t j = 0; j < g.kw; ++j)
                        bmat[((i * g.kw + j) * g.c + ic) * g.oc + o] = wv[((o * g.c + ic) * g.kh + i) * g.kw + j];
        const auto packed = pack_gemm_weights(bmat, g.depth(), g.oc, false);
        return literal(shape(type::float32, {packed.size()}), packed);
    });
    op.layouts[1] = md_record{};
    args.push_back(env.m.insert_instruction(pos, builtin::allocate{shape(type::uint8, {im2col_bytes(op, g, env.ctx.threads())})}, {}));
    args.push_back(residual ? *residual
                            : env.m.insert_instruction(
                                  pos, builtin::allocate{shape(type::uint8, {op.dst_layout.to_md().get_size()})}, {}));
    env.m.replace_instruction(pos, op, args);
    env.layout[&*pos] = op.dst_layout;
    return true;
}

KILN_REGISTER_OP(conv_gemm)

}  // namespace kiln::cpu
