#include "targets/cpu/kernels/winograd/winograd.hpp"

#include "targets/cpu/cpu_features.hpp"

#include "ops/nn_conv.hpp"
#include "targets/cpu/context.hpp"
#include "targets/cpu/kernels/onednn/primitive_kernel.hpp"
#include "targets/cpu/kernels/team/team.hpp"
#include "targets/cpu/kernels/winograd/winograd_args.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>

namespace kiln::cpu {

namespace {

constexpr std::size_t scratch_align = 64;  // floats: the M buffer starts on a cache line
// Tiles per group: their transformed inputs and products (V and M) stay within this
// many bytes, so that each phase finds the previous one's results in cache; or within
// half the transformed weights' size, when larger, since every group streams all of U.
constexpr std::size_t group_bytes = std::size_t{1} << 20;
// Smallest channel counts worth a Winograd kernel: below them the transforms cost as much
// as the products they save (two 56x56 3x3 convolutions, one thread, against oneDNN's
// jit:avx2: 8 channels 0.20 vs 0.22 ms, 16: 0.38 vs 0.47, 32: 0.66 vs 1.26).
constexpr std::int64_t min_channels = 16;
// Fewest tiles (all images) worth it: the transformed weights are 4x the direct ones and
// are read once per run, so with fewer tiles (7x7 images at batch 1: 4) the memory
// traffic eats the saved multiplications. With AVX-512 (oneDNN's direct convolutions twice
// as fast) the line is higher: resnet50 at batch 1 on a Zen 5 EPYC, 2 threads, per layer,
// F(4x4) against oneDNN's brgemm: 64 channels at 56x56 (196 tiles) 0.33 vs 0.50 ms, 128 at
// 28x28 (49) 0.30 vs 0.47, but 256 at 14x14 (16) 0.61-0.66 vs 0.47. F(2x2) (U 1.8x the
// direct weights) pays from 16 tiles there too, since its products prefetch U: 512 at
// 7x7 (16 2x2 tiles): the model's three such layers with the rest at 7x7 2.40-2.42 vs
// 2.59-2.65 ms, the model 17.0-17.2 vs 17.5-17.7 ms (3 alternating runs).
std::size_t min_tiles(std::int64_t m) { return has_avx512() && m == 4 ? 49 : 16; }

std::size_t round_up(std::size_t v, std::size_t to) { return (v + to - 1) / to * to; }

struct geometry {
    std::size_t n, h, w, ho, wo, cin_p, cout_p, cout16, tiles_h, tiles_w, alpha2;
    std::int64_t in_block, out_block;  // pixel_channels of x's and of the result's layouts
};

geometry geometry_of(const winograd_conv& op, const shape& x) {
    const auto& l = x.lens();
    geometry g{};
    g.n = l[0];
    g.h = l[2];
    g.w = l[3];
    g.ho = static_cast<std::size_t>(static_cast<std::int64_t>(g.h) + op.pads[0] + op.pads[2] - 2);
    g.wo = static_cast<std::size_t>(static_cast<std::int64_t>(g.w) + op.pads[1] + op.pads[3] - 2);
    g.in_block = pixel_channels(op.layouts.at(0));
    g.out_block = pixel_channels(op.dst_layout);
    g.cin_p = static_cast<std::size_t>(op.layouts[0].padded_dims[1]);
    g.cout_p = static_cast<std::size_t>(op.dst_layout.padded_dims[1]);
    g.cout16 = round_up(g.cout_p, 16);
    const auto m = static_cast<std::size_t>(op.m);
    g.tiles_h = (g.ho + m - 1) / m;
    g.tiles_w = (g.wo + m - 1) / m;
    g.alpha2 = (m + 2) * (m + 2);
    return g;
}

// How the work is cut: tiles into `tile_parts` ranges and output columns (of 16) into
// `col_parts` ranges; each part has its own V and M (no barrier between the phases).
struct cut {
    std::size_t tile_parts, col_parts, group;
    bool odd_rows;
};

std::size_t part_tiles(std::size_t tiles, const cut& c) { return (tiles + c.tile_parts - 1) / c.tile_parts; }
std::size_t part_cols(const geometry& g, const cut& c) { return (g.cout16 / 16 + c.col_parts - 1) / c.col_parts; }
// Floats between consecutive alpha^2 rows holding `floats` each. With `odd`, a whole number of
// cache lines, an odd one, so that the 36 rows a tile's transform reads or writes fall into
// different cache sets: at a multiple of 4 KiB (32 channels in groups of 64 tiles: fashion_resnet's
// 14x14 layers at batch 16) they all share one set of the L1, and the input transform took as
// long as the products. Without (programs saved before), the rows touch.
std::size_t row_pitch(std::size_t floats, bool odd) {
    if (!odd) return floats;
    const std::size_t lines = (floats + 15) / 16;
    return (lines % 2 == 0 ? lines + 1 : lines) * 16;
}
std::size_t v_pitch(const geometry& g, const cut& c) { return row_pitch(c.group * g.cin_p, c.odd_rows); }
std::size_t m_pitch(const geometry& g, const cut& c) { return row_pitch(c.group * part_cols(g, c) * 16, c.odd_rows); }
std::size_t v_floats(const geometry& g, const cut& c) { return round_up(g.alpha2 * v_pitch(g, c), scratch_align); }
std::size_t part_floats(const geometry& g, const cut& c) {
    return v_floats(g, c) + round_up(g.alpha2 * m_pitch(g, c), scratch_align);
}
std::size_t scratch_bytes(const geometry& g, const cut& c) {
    return c.tile_parts * c.col_parts * part_floats(g, c) * sizeof(float);
}

// One part per thread: split the tiles when each thread gets two GEMM row blocks of 6 or
// more, else the output columns (small images with many channels, e.g. 14x14 at batch 1).
cut plan_cut(const geometry& g, std::size_t tiles, std::size_t threads) {
    cut c{std::max<std::size_t>(threads, 1), 1, 1, true};
    while (c.tile_parts > 1 && (tiles / c.tile_parts < 12 || threads % c.tile_parts != 0)) --c.tile_parts;
    c.col_parts = std::clamp<std::size_t>(threads / c.tile_parts, 1, g.cout16 / 16);
    const std::size_t n = part_tiles(tiles, c), cols = part_cols(g, c) * 16;
    const std::size_t per_tile = g.alpha2 * (g.cin_p + cols) * sizeof(float);
    const std::size_t u_bytes = g.alpha2 * g.cin_p * cols * sizeof(float);
    const std::size_t most = std::max<std::size_t>(std::max(group_bytes, u_bytes / 2) / per_tile, 6);
    const std::size_t groups = (n + most - 1) / most;
    c.group = (n + groups - 1) / groups;
    return c;
}

// G (alpha x 3) of F(m, 3), with the interpolation points 0, +-1, +-2 (m = 4) or 0, +-1.
double g_matrix(int m, int r, int c) {
    static const double g4[6][3] = {{1.0 / 4, 0, 0},           {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                    {-1.0 / 6, 1.0 / 6, -1.0 / 6}, {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                    {1.0 / 24, -1.0 / 12, 1.0 / 6}, {0, 0, 1}};
    static const double g2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
    return m == 4 ? g4[r][c] : g2[r][c];
}

}  // namespace

static cut winograd_conv_cut(const winograd_conv& op) {
    return {static_cast<std::size_t>(op.tile_parts), static_cast<std::size_t>(op.col_parts),
            static_cast<std::size_t>(op.group_tiles), op.odd_rows};
}

struct winograd_conv::plan {
    geometry geo;
    wino::phases ph;
    // The output transform's steps, mapped once: a run only points the binary ones at their inputs.
    std::vector<wino::post_step> post;
};


std::vector<float> winograd_weights(const std::vector<float>& w, std::size_t cout, std::size_t cin, int m,
                                    std::size_t cin_p, std::size_t cout16) {
    const int a = m + 2;
    const std::size_t alpha2 = static_cast<std::size_t>(a * a), ncol = cout16 / 16;
    std::vector<float> u(alpha2 * cout16 * cin_p, 0.0f);
    const auto n = static_cast<std::int64_t>(cout * cin);
#pragma omp parallel for schedule(static)
    for (std::int64_t pair = 0; pair < n; ++pair) {
        {
            const std::size_t co = static_cast<std::size_t>(pair) / cin, ci = static_cast<std::size_t>(pair) % cin;
            const float* g = w.data() + (co * cin + ci) * 9;
            double t[6][3];  // G g
            for (int i = 0; i < a; ++i)
                for (int j = 0; j < 3; ++j) {
                    double s = 0;
                    for (int k = 0; k < 3; ++k) s += g_matrix(m, i, k) * g[k * 3 + j];
                    t[i][j] = s;
                }
            for (int i = 0; i < a; ++i)
                for (int j = 0; j < a; ++j) {
                    double s = 0;  // (G g) G^T
                    for (int k = 0; k < 3; ++k) s += t[i][k] * g_matrix(m, j, k);
                    const std::size_t k = static_cast<std::size_t>(i * a + j);
                    u[((k * ncol + co / 16) * cin_p + ci) * 16 + co % 16] = static_cast<float>(s);
                }
        }
    }
    return u;
}

shape winograd_conv::compute_shape(const std::vector<shape>& inputs) const {
    auto bad = [&](const std::string& why) { throw_error(error_code::shape, name() + ": " + why); };
    const std::size_t extra = 1 + (scratchpad >= 0 ? 1 : 0);
    const std::size_t base = 2 + (has_bias ? 1 : 0);
    if (inputs.size() < base + extra) bad("expected x, U, [bias], scratchpad and output buffer inputs");
    if (m != 4 && m != 2) bad("tile size " + std::to_string(m) + ", expected 4 or 2");
    if (pads.size() != 4) bad("expected 4 pads");
    for (const auto& s : inputs)
        if (!s.is_tensor() || s.dynamic()) bad("inputs must be static tensors, got " + s.to_string());
    const shape& x = inputs[0];
    if (x.ndim() != 4 || x.get_type() != type::float32 || x.lens()[1] != static_cast<std::size_t>(in_channels))
        bad("x " + x.to_string() + " is not a float32 NCHW tensor with " + std::to_string(in_channels) + " channels");
    if (layouts.empty() || !channel_groups_fit(layouts[0], dst_layout))
        bad("x and the result must be in channel-blocked or channels-last layouts, channels in multiples of 8");
    for (auto p : pads)
        if (p < 0 || p > 2) bad("pads must be in [0, 2]");
    const auto g = geometry_of(*this, x);
    if (g.h + static_cast<std::size_t>(pads[0] + pads[2]) < 3 || g.w + static_cast<std::size_t>(pads[1] + pads[3]) < 3)
        bad("the 3x3 window does not fit the padded input");
    if (to_dims(x.lens()) != layouts[0].to_md().dims()) bad("x does not match its layout");
    shape out(type::float32, {g.n, static_cast<std::size_t>(out_channels), g.ho, g.wo});
    const auto dmd = dst_layout.to_md();
    if (to_dims(out.lens()) != dmd.dims()) bad("the result " + out.to_string() + " does not match its layout");
    if (inputs.back().bytes() < dmd.get_size()) bad("the output buffer is too small");
    if (inputs[1].bytes() < g.alpha2 * g.cout16 * g.cin_p * sizeof(float)) bad("the transformed weights are too small");
    if (has_bias && inputs[2].elements() != static_cast<std::size_t>(out_channels))
        bad("the bias must have one value per output channel");
    if (group_tiles <= 0 || tile_parts <= 0 || col_parts <= 0 ||
        col_parts > static_cast<std::int64_t>(g.cout16 / 16) || scratchpad != static_cast<std::int64_t>(inputs.size()) - 2 ||
        inputs[inputs.size() - 2].bytes() < scratch_bytes(g, winograd_conv_cut(*this)))
        bad("the scratchpad does not hold a group of tiles per part");
    if (post_ops.size() > static_cast<std::size_t>(wino::max_post_steps)) bad("too many post-ops");
    for (const auto& p : post_ops) {
        if (!fused_post_kind_of(p)) bad("post-op " + p.kind + " " + p.algorithm + " is not supported");
        if (p.kind != "binary") continue;
        const auto in = static_cast<std::size_t>(p.input);
        if (p.input < static_cast<std::int64_t>(base) || in >= inputs.size() - extra || in >= layouts.size() ||
            !same_layout(layouts[in], dst_layout))
            bad("binary post-op input " + std::to_string(p.input) + " is not a tensor in the result's layout");
    }
    return out;
}

void winograd_conv::finalize(context& ctx, const shape&, const std::vector<shape>& inputs) {
    auto p = std::make_shared<plan>();
    p->geo = geometry_of(*this, inputs.at(0));
    // cpuid at load time: a program saved on one machine runs on another.
    // KILN_CPU_WINOGRAD_ISA=avx2 or generic caps the choice (for testing those kernels).
    const isa_cap cap = as_cpu_context(ctx, name()).options().winograd_isa;
    if (cap == isa_cap::generic || !has_avx2_fma()) p->ph = wino::generic_phases();
    else if (cap == isa_cap::avx2 || !has_avx512()) p->ph = wino::avx2_phases();
    else p->ph = wino::avx512_phases();
    for (const auto& po : post_ops) {
        wino::post_step s;
        const auto kind = fused_post_kind_of(po);
        if (!kind) throw_error(error_code::parse, name() + ": post-op " + po.kind + " " + po.algorithm + " is not supported");
        s.kind = *kind;
        s.alpha = po.alpha;
        s.beta = po.beta;
        p->post.push_back(s);
    }
    ready = std::move(p);
}

argument winograd_conv::compute(context&, const shape&, const std::vector<argument>& args) const {
    if (!ready) throw_error(error_code::runtime, name() + ": run before it was finalized");
    const auto& g = ready->geo;
    wino::args a;
    a.m = static_cast<int>(m);
    a.in_block = static_cast<std::size_t>(g.in_block);
    a.out_block = static_cast<std::size_t>(g.out_block);
    a.n = g.n;
    a.h = g.h;
    a.w = g.w;
    a.ho = g.ho;
    a.wo = g.wo;
    a.pad_t = pads[0];
    a.pad_l = pads[1];
    a.cin = static_cast<std::size_t>(in_channels);
    a.cin_p = g.cin_p;
    a.cout = static_cast<std::size_t>(out_channels);
    a.cout_p = g.cout_p;
    a.cout16 = g.cout16;
    a.tiles_h = g.tiles_h;
    a.tiles_w = g.tiles_w;
    a.tiles = g.n * g.tiles_h * g.tiles_w;
    a.group = static_cast<std::size_t>(group_tiles);
    a.x = reinterpret_cast<const float*>(args[0].data());
    a.u = reinterpret_cast<const float*>(args[1].data());
    a.bias = has_bias ? reinterpret_cast<const float*>(args[2].data()) : nullptr;
    a.y = reinterpret_cast<float*>(args.back().data());
    auto* scratch = reinterpret_cast<float*>(args[static_cast<std::size_t>(scratchpad)].data());
    for (std::size_t i = 0; i < ready->post.size(); ++i) {
        auto& s = a.post[a.n_post++];
        s = ready->post[i];
        if (is_binary(s.kind))
            s.src = reinterpret_cast<const float*>(args[static_cast<std::size_t>(post_ops[i].input)].data());
    }
    const auto ph = ready->ph;
    const cut c = winograd_conv_cut(*this);
    a.v_pitch = v_pitch(g, c);
    a.m_pitch = m_pitch(g, c);
    const std::size_t tiles = a.tiles, parts = c.tile_parts * c.col_parts, ncol = g.cout16 / 16;
    const std::size_t n_tiles = part_tiles(tiles, c), n_cols = part_cols(g, c);
    const std::size_t part_size = part_floats(g, c), v_size = v_floats(g, c);
    // Parts beyond the team (a smaller thread count than at compile time) are taken in turn.
    team::parallel(parts, [&](std::size_t part) {
        const std::size_t tp = part / c.col_parts, cp = part % c.col_parts;
        const std::size_t tb = std::min(tp * n_tiles, tiles), te = std::min(tb + n_tiles, tiles);
        const std::size_t c0 = std::min(cp * n_cols, ncol), c1 = std::min(c0 + n_cols, ncol);
        if (c0 >= c1) return;
        float* v = scratch + part * part_size;
        float* m = v + v_size;
        for (std::size_t t0 = tb; t0 < te; t0 += c.group) {
            const std::size_t count = std::min(c.group, te - t0);
            ph.input(a, t0, count, v);
            ph.gemm(a, count, v, m, c0, c1);
            ph.output(a, t0, count, m, c0, c1);
        }
    });
    return args.back();
}

bool lower_winograd(lower_env& env, const convolution& c, const std::vector<instruction_ref>& operands,
                    const shape& dst, instruction_ref pos, bool rules, int tile) {
    if (env.ctx.options().winograd == winograd_choice::off) return false;
    // Without the rules, every convolution that fits (as =all), in the tile size asked.
    const auto mode = rules ? env.ctx.options().winograd : winograd_choice::all;
    if (tile != 0 && tile != 2 && tile != 4) return false;
    const auto* conv = c.op.any_cast<op::convolution>();
    if (!conv || c.transposed() || operands.size() < 2 || !operands[1]->is_literal()) return false;
    const shape& x = operands[0]->get_shape();
    const shape& w = c.weights_shape;
    if (x.ndim() != 4 || w.ndim() != 4 || w.lens()[2] != 3 || w.lens()[3] != 3) return false;
    const auto geo = conv->conv_geom(conv->name(), x, w);
    if (geo.group != 1) return false;
    for (std::size_t i = 0; i < 2; ++i)
        if (geo.stride[i] != 1 || geo.dilation[i] != 1 || geo.pad_begin[i] < 0 || geo.pad_begin[i] > 2) return false;
    if (geo.in_channels < min_channels || geo.out_channels < min_channels) return false;
    winograd_conv op;
    op.m = tile != 0 ? tile : mode == winograd_choice::f2 ? 2 : 4;
    op.pads = {geo.pad_begin[0], geo.pad_begin[1], geo.out[0] + 2 - geo.in[0] - geo.pad_begin[0],
               geo.out[1] + 2 - geo.in[1] - geo.pad_begin[1]};
    if (op.pads[2] < 0 || op.pads[2] > 2 || op.pads[3] < 0 || op.pads[3] > 2) return false;
    op.in_channels = geo.in_channels;
    op.out_channels = geo.out_channels;
    op.has_bias = c.has_bias;
    op.post_ops = c.post_ops;
    op.dst_layout = c.dst_layout;
    op.layouts = operand_layouts(env, operands);
    if (!channel_groups_fit(op.layouts[0], op.dst_layout)) return false;
    if (op.post_ops.size() > static_cast<std::size_t>(wino::max_post_steps)) return false;
    for (const auto& p : op.post_ops) {
        if (!fused_post_kind_of(p)) return false;
        if (p.kind == "binary") {
            const auto in = static_cast<std::size_t>(p.input);
            if (p.input < 0 || in >= op.layouts.size() || !same_layout(op.layouts[in], op.dst_layout)) return false;
        }
    }
    auto g = geometry_of(op, x);
    std::size_t tiles = g.n * g.tiles_h * g.tiles_w;
    if (tile == 0 && tiles < min_tiles(4) && mode != winograd_choice::all && mode != winograd_choice::f4 &&
        op.m == 4 && has_avx512()) {
        // Too few 4x4 tiles for F(4x4)'s weights (4x the direct ones): F(2x2, 3x3) (1.8x)
        // where its 2x2 tiles are enough (resnet50's 256 channels at 14x14, batch 1: 49).
        op.m = 2;
        g = geometry_of(op, x);
        tiles = g.n * g.tiles_h * g.tiles_w;
    }
    if (tiles < (mode == winograd_choice::all ? 1 : min_tiles(op.m))) return false;
    const cut cw = plan_cut(g, tiles, env.ctx.threads());
    op.tile_parts = static_cast<std::int64_t>(cw.tile_parts);
    op.col_parts = static_cast<std::int64_t>(cw.col_parts);
    op.group_tiles = static_cast<std::int64_t>(cw.group);
    op.odd_rows = cw.odd_rows;

    auto args = operands;
    const auto how = "winograd m" + std::to_string(op.m) + " " + std::to_string(g.cin_p) + "x" + std::to_string(g.cout16);
    args[1] = env.derive(pos, operands[1], how, [&] {
        const auto u = winograd_weights(operands[1]->get_literal().to_vector<float>(),
                                        static_cast<std::size_t>(op.out_channels),
                                        static_cast<std::size_t>(op.in_channels), static_cast<int>(op.m), g.cin_p,
                                        g.cout16);
        return literal(shape(type::float32, {u.size()}), u);
    });
    op.layouts[1] = md_record{};
    op.scratchpad = static_cast<std::int64_t>(args.size());
    const std::size_t scratch = scratch_bytes(g, cw);
    args.push_back(env.m.insert_instruction(pos, builtin::allocate{shape(type::uint8, {scratch})}, {}));
    const auto out_bytes = op.dst_layout.to_md().get_size();
    args.push_back(env.m.insert_instruction(pos, builtin::allocate{shape(type::uint8, {out_bytes})}, {}));
    (void)dst;
    env.m.replace_instruction(pos, op, args);
    env.layout[&*pos] = op.dst_layout;
    return true;
}

KILN_REGISTER_OP(winograd_conv)

}  // namespace kiln::cpu
