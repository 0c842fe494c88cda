#include "targets/cpu/kernels/channel_gather/channel_gather.hpp"

#include "targets/cpu/cpu_features.hpp"
#include "targets/cpu/kernels/pixel_placement.hpp"

#include "ops/tensor_gather.hpp"
#include "passes/rewrite_utils.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <omp.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <optional>
#include <string>

namespace kiln::cpu {

// What a run needs beyond the data, made once in finalize from the shapes and the CPU.
struct channel_gather_plan {
    // Up to 16 result channels stored side by side, picked from one pixel's channels of the
    // parts (numbered as in their concatenation): from two 16-channel windows by one
    // two-source permute where their sources fit in two (a channel shuffle's half takes 8 from
    // each part), else by a vector gather from a row holding the pixel's channels side by side.
    struct pick16 {
        std::size_t dst = 0;  // the first channel's place in the pixel's result
        std::uint32_t len = 0;
        bool two_windows = false;
        std::int32_t base0 = 0, base1 = 0;   // the windows' first channels in the concatenation
        std::int32_t seg0 = 0, seg1 = 0;     // the segment (part) each window lies in
        std::uint32_t valid0 = 16, valid1 = 16;  // channels of each window inside its segment
        std::int32_t lane[16] = {};  // windows: 0-15 from base0, 16-31 from base1; else the row index
    };

    // Each part's placement and first channel in the concatenation, and whether any result
    // channel comes from it.
    struct part_at {
        pixel_placement at;
        std::size_t channels, first;
        bool used;
    };
    std::vector<part_at> parts;
    std::size_t total = 0;   // the parts' channels
    std::vector<pick16> picks;   // from the row
    std::vector<pick16> direct;  // from channels-last parts in place (AVX-512), or empty
    bool avx512 = false;
};

namespace {

using pick16 = channel_gather_plan::pick16;

// `firsts`: the first channel of each segment in which a window must lie (ascending, from
// 0): the parts when windows are read from the parts themselves, {0} for the row.
std::vector<pick16> plan_picks(const std::vector<std::int32_t>& idx, const pixel_placement& yo,
                               const std::vector<std::int32_t>& firsts, std::int32_t total) {
    auto segment = [&](std::int32_t ch) {
        return static_cast<std::int32_t>(std::upper_bound(firsts.begin(), firsts.end(), ch) - firsts.begin()) - 1;
    };
    auto seg_end = [&](std::int32_t seg) {
        return static_cast<std::size_t>(seg) + 1 < firsts.size() ? firsts[static_cast<std::size_t>(seg) + 1] : total;
    };
    std::vector<pick16> picks;
    const std::size_t c = idx.size();
    for (std::size_t oc = 0; oc < c;) {
        const std::size_t len = std::min({yo.g - oc % yo.g, c - oc, std::size_t{16}});
        pick16 p;
        p.dst = oc / yo.g * yo.block + oc % yo.g;
        p.len = static_cast<std::uint32_t>(len);
        const auto* s = idx.data() + oc;
        p.base0 = *std::min_element(s, s + len);
        p.seg0 = segment(p.base0);
        const std::int32_t end0 = std::min(p.base0 + 16, seg_end(p.seg0));
        auto in0 = [&](std::int32_t v) { return v >= p.base0 && v < end0; };
        p.base1 = -1;
        for (std::size_t i = 0; i < len; ++i)
            if (!in0(s[i]) && (p.base1 < 0 || s[i] < p.base1)) p.base1 = s[i];
        if (p.base1 < 0) p.base1 = p.base0;
        p.seg1 = segment(p.base1);
        const std::int32_t end1 = std::min(p.base1 + 16, seg_end(p.seg1));
        p.valid0 = static_cast<std::uint32_t>(end0 - p.base0);
        p.valid1 = static_cast<std::uint32_t>(end1 - p.base1);
        p.two_windows = true;
        for (std::size_t i = 0; i < len; ++i) {
            if (in0(s[i])) p.lane[i] = s[i] - p.base0;
            else if (s[i] >= p.base1 && s[i] < end1) p.lane[i] = 16 + s[i] - p.base1;
            else p.two_windows = false;
        }
        if (!p.two_windows) std::copy(s, s + len, p.lane);
        picks.push_back(p);
        oc += len;
    }
    return picks;
}

#if defined(__x86_64__)
#define GATHER_TARGET512 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")))
// From the row (readable 16 channels past its end, so whole windows never fault).
GATHER_TARGET512 void pick_pixel_avx512(const float* row, float* y, const pick16* picks, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        const pick16& p = picks[i];
        const __mmask16 m = static_cast<__mmask16>((1u << p.len) - 1u);
        const __m512i lanes = _mm512_loadu_si512(p.lane);
        __m512 v;
        if (p.two_windows)
            v = _mm512_permutex2var_ps(_mm512_loadu_ps(row + p.base0), lanes, _mm512_loadu_ps(row + p.base1));
        else
            v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, lanes, row, 4);
        _mm512_mask_storeu_ps(y + p.dst, m, v);
    }
}

// Straight from channels-last parts: seg_at[k] points at part k's channels of this pixel
// minus the part's first channel in the concatenation; every pick has two windows, each
// loaded masked to its part's channels (nothing past a part is read).
GATHER_TARGET512 void pick_pixel_direct_avx512(const float* const* seg_at, float* y, const pick16* picks,
                                               std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        const pick16& p = picks[i];
        const __mmask16 m = static_cast<__mmask16>((1u << p.len) - 1u);
        const __mmask16 m0 = static_cast<__mmask16>((1u << p.valid0) - 1u);
        const __mmask16 m1 = static_cast<__mmask16>((1u << p.valid1) - 1u);
        const __m512 a = _mm512_maskz_loadu_ps(m0, seg_at[p.seg0] + p.base0);
        const __m512 b = _mm512_maskz_loadu_ps(m1, seg_at[p.seg1] + p.base1);
        _mm512_mask_storeu_ps(y + p.dst, m, _mm512_permutex2var_ps(a, _mm512_loadu_si512(p.lane), b));
    }
}
#endif

void pick_pixel_portable(const float* row, float* y, const pick16* picks, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        const pick16& p = picks[i];
        for (std::uint32_t j = 0; j < p.len; ++j) {
            const std::int32_t l = p.lane[j];
            y[p.dst + j] = p.two_windows ? row[l < 16 ? p.base0 + l : p.base1 + l - 16] : row[l];
        }
    }
}

}  // namespace

shape channel_gather::compute_shape(const std::vector<shape>& inputs) const {
    auto bad = [&](const std::string& why) { throw_error(error_code::shape, name() + ": " + why); };
    if (parts.empty() || inputs.size() != parts.size() + 1)
        bad("expected " + std::to_string(parts.size()) + " parts and an output buffer, got " +
            std::to_string(inputs.size()) + " inputs");
    const std::size_t c = check_pixel_parts(name(), parts, inputs);
    const auto lens0 = inputs[0].lens();
    if (source.empty()) bad("no channel to gather");
    for (auto s : source)
        if (s < 0 || static_cast<std::size_t>(s) >= c)
            bad("source channel " + std::to_string(s) + " is outside the parts' " + std::to_string(c) + " channels");
    shape out(type::float32, {lens0[0], source.size(), lens0[2], lens0[3]});
    check_pixel_result(name(), layout, out, inputs.back());
    return out;
}

void channel_gather::finalize(context&, const shape& out, const std::vector<shape>& inputs) {
    const auto& ol = out.lens();
    const std::size_t c = ol[1], hw = ol[2] * ol[3];
    const pixel_placement yo = place_pixels(layout, c, hw);
    auto made = std::make_shared<channel_gather_plan>();
    auto& in = made->parts;
    for (std::size_t k = 0; k < parts.size(); ++k) {
        const std::size_t ck = channels_of(parts[k], inputs[k]);
        in.push_back({place_pixels(parts[k], ck, hw), ck, made->total, false});
        made->total += ck;
    }
    const auto total = static_cast<std::int32_t>(made->total);
    const std::vector<std::int32_t> idx(source.begin(), source.end());
    made->picks = plan_picks(idx, yo, {0}, total);
#if defined(__x86_64__)
    made->avx512 = has_avx512();
#endif
    // Every part channels-last (a pixel's channels of each are contiguous) and every pick
    // two windows inside parts: read the parts themselves, no row.
    using part_at = channel_gather_plan::part_at;
    if (made->avx512 && in.size() <= 64 &&
        std::all_of(in.begin(), in.end(), [](const part_at& q) { return q.at.g == q.channels; })) {
        std::vector<std::int32_t> firsts;
        for (const auto& q : in) firsts.push_back(static_cast<std::int32_t>(q.first));
        made->direct = plan_picks(idx, yo, firsts, total);
        if (!std::all_of(made->direct.begin(), made->direct.end(), [](const pick16& p) { return p.two_windows; }))
            made->direct.clear();
    }
    for (auto s : idx)
        for (auto& q : in)
            if (static_cast<std::size_t>(s) >= q.first && static_cast<std::size_t>(s) < q.first + q.channels) q.used = true;
    plan = std::move(made);
}

argument channel_gather::compute(context&, const shape& out, const std::vector<argument>& args) const {
    if (!plan) throw_error(error_code::runtime, name() + ": run before it was finalized");
    const auto& ol = out.lens();
    const std::size_t n = ol[0], c = ol[1], hw = ol[2] * ol[3];
    const pixel_placement yo = place_pixels(layout, c, hw);
    const std::size_t padded = layout.empty() ? c : static_cast<std::size_t>(layout.padded_dims.at(1));
    const auto& in = plan->parts;
    const auto& picks = plan->picks;
    [[maybe_unused]] const auto& direct = plan->direct;
    [[maybe_unused]] const bool avx512 = plan->avx512;
    const std::size_t total = plan->total;
    std::vector<const float*> x(in.size());
    for (std::size_t k = 0; k < in.size(); ++k) x[k] = reinterpret_cast<const float*>(args[k].data());
    auto* y = reinterpret_cast<float*>(args.back().data());
    // Pixel ranges of about 16K values each, a multiple of the threads per image.
    const std::size_t threads = static_cast<std::size_t>(std::max(1, omp_get_max_threads()));
    std::size_t ranges = std::max<std::size_t>(1, (hw * (padded + total) + 16383) / 16384);
    ranges = std::min(hw, (ranges + threads - 1) / threads * threads);
    const std::size_t chunk = (hw + ranges - 1) / ranges;
    const auto tasks = static_cast<std::int64_t>(n * ranges);
#pragma omp parallel if (n * hw * (padded + total) > single_thread_elements && tasks > 1)
    {
        std::vector<float> row(total + 16, 0.0f);
#pragma omp for schedule(static)
        for (std::int64_t t = 0; t < tasks; ++t) {
            const std::size_t img = static_cast<std::size_t>(t) / ranges;
            const std::size_t p0 = static_cast<std::size_t>(t) % ranges * chunk, p1 = std::min(hw, p0 + chunk);
            for (std::size_t p = p0; p < p1; ++p) {
#if defined(__x86_64__)
                if (!direct.empty()) {
                    const float* seg_at[64];
                    for (std::size_t k = 0; k < in.size(); ++k)
                        seg_at[k] = x[k] + img * in[k].at.image + p * in[k].channels - in[k].first;
                    float* yd = y + img * yo.image + p * yo.g;
                    pick_pixel_direct_avx512(seg_at, yd, direct.data(), direct.size());
                    if (padded > c) std::fill_n(yd + c / yo.g * yo.block + c % yo.g, padded - c, 0.0f);
                    continue;
                }
#endif
                // The parts' channels of this pixel side by side, in runs stored together.
                for (std::size_t k = 0; k < in.size(); ++k) {
                    const auto& part = in[k];
                    if (!part.used) continue;
                    const pixel_placement& xo = part.at;
                    const float* xi = x[k] + img * xo.image + p * xo.g;
                    for (std::size_t ch = 0; ch < part.channels;) {
                        const std::size_t len = std::min(xo.g - ch % xo.g, part.channels - ch);
                        std::copy_n(xi + ch / xo.g * xo.block + ch % xo.g, len, row.data() + part.first + ch);
                        ch += len;
                    }
                }
                float* yi = y + img * yo.image + p * yo.g;
#if defined(__x86_64__)
                if (avx512) pick_pixel_avx512(row.data(), yi, picks.data(), picks.size());
                else
#endif
                    pick_pixel_portable(row.data(), yi, picks.data(), picks.size());
                // The last block's padding channels (a blocked result) hold zeros.
                if (padded > c) std::fill_n(yi + c / yo.g * yo.block + c % yo.g, padded - c, 0.0f);
            }
        }
    }
    return args.back().reshape(out);
}

namespace {

// The gather's constant channel indices (negative ones counted from the end) when it
// gathers along the channels of a static 4-D float32 tensor with a 1-D constant; nullopt
// otherwise or when an index is out of range (the ref kernel then reports it).
std::optional<std::vector<std::int64_t>> channel_indices(instruction_ref g) {
    const auto* op = g->get_operator().any_cast<op::gather>();
    if (op == nullptr || g->inputs().size() != 2) return std::nullopt;
    auto data = g->inputs()[0], idx = g->inputs()[1];
    if (!f32_static(data) || !f32_static(g) || data->get_shape().ndim() != 4 || idx->get_shape().elements() == 0)
        return std::nullopt;
    if (op->axis != 1 && op->axis != -3) return std::nullopt;
    return rewrite::constant_indices(idx, data->get_shape().lens()[1]);
}

struct gather_plan {
    std::vector<instruction_ref> parts;
    std::optional<instruction_ref> concat;  // read by such gathers only
    std::vector<std::int64_t> source;
};

// A part the kernel reads: a static 4-D float32 tensor like the gather's data outside the
// channels, in a pixel-channels layout or plain.
bool readable_part(const lower_env& env, instruction_ref x, const shape& like) {
    const auto& l = x->get_shape().lens();
    const auto& w = like.lens();
    if (!f32_static(x) || l.size() != 4 || l[0] != w[0] || l[2] != w[2] || l[3] != w[3]) return false;
    auto it = env.layout.find(&*x);
    return it == env.layout.end() ? x->get_shape().standard() : pixel_group_of(it->second) > 0;
}

// Whether every reader of `concat` is a channel gather of it (so that none needs it made).
bool only_channel_gathers_read(instruction_ref concat) {
    const auto& readers = concat->outputs();
    return !readers.empty() && std::all_of(readers.begin(), readers.end(), [&](instruction_ref r) {
        return r->inputs().size() == 2 && r->inputs()[0] == concat && channel_indices(r).has_value();
    });
}

std::optional<gather_plan> plan_at(const lower_env& env, instruction_ref g) {
    if (!env.ctx.options().channel_gather) return std::nullopt;
    auto source = channel_indices(g);
    if (!source) return std::nullopt;
    auto data = g->inputs()[0];
    gather_plan plan{{data}, std::nullopt, std::move(*source)};
    if (concat_on_channels(data) && only_channel_gathers_read(data)) {
        plan.concat = data;
        plan.parts = data->inputs();
    }
    bool pixel_channels = false;
    for (auto x : plan.parts) {
        if (!readable_part(env, x, data->get_shape())) return std::nullopt;
        auto it = env.layout.find(&*x);
        pixel_channels = pixel_channels || (it != env.layout.end() && pixel_group_of(it->second) > 1);
    }
    if (!pixel_channels) return std::nullopt;  // plain data: gather_blocks copies rows
    return plan;
}

}  // namespace

bool concat_waits_for_channel_gather(lower_env& env, instruction_ref concat) {
    if (!concat_on_channels(concat) || !only_channel_gathers_read(concat)) return false;
    const auto& readers = concat->outputs();
    return std::all_of(readers.begin(), readers.end(), [&](instruction_ref r) {
        auto plan = plan_at(env, r);
        return plan && plan->concat == concat;
    });
}

bool lower_channel_gather(lower_env& env, instruction_ref g) {
    auto plan = plan_at(env, g);
    if (!plan) return false;
    channel_gather op;
    op.source = plan->source;
    for (auto x : plan->parts) {
        auto it = env.layout.find(&*x);
        op.parts.push_back(it == env.layout.end() ? md_record{} : it->second);
    }
    const auto& lens = g->get_shape().lens();
    for (const auto& r : op.parts)
        if (pixel_group_of(r) > 1) {
            op.layout = pixel_channels_layout(channel_block(r), lens);
            break;
        }
    auto args = plan->parts;
    args.push_back(env.m.insert_instruction(g, builtin::allocate{shape(type::uint8, {op.layout.to_md().get_size()})}, {}));
    const md_record layout = op.layout;
    env.m.replace_instruction(g, op, args);
    env.layout[&*g] = layout;
    if (plan->concat && (*plan->concat)->outputs().empty()) env.m.remove_instruction(*plan->concat);
    return true;
}

KILN_REGISTER_OP(channel_gather)

}  // namespace kiln::cpu
