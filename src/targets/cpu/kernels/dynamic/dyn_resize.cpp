#include "targets/cpu/kernels/dynamic/dyn_resize.hpp"

#include "ops/tensor_resize.hpp"
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"
#include "targets/cpu/lowering_util.hpp"

#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>

namespace kiln::cpu {

namespace {

// One axis's taps in float32, flattened: output coordinate i reads `count[i]` taps from
// `first[i]` on.
struct flat_taps {
    std::vector<std::size_t> first, count, index;
    std::vector<float> weight;
};

flat_taps flatten(const op::axis_taps& t) {
    flat_taps f;
    for (const auto& taps : t.taps) {
        f.first.push_back(f.index.size());
        f.count.push_back(taps.size());
        for (const auto& k : taps) {
            f.index.push_back(k.index);
            f.weight.push_back(static_cast<float>(k.weight));
        }
    }
    return f;
}

// The geometry of this call: the IR op's scales or sizes, or those given at run time.
op::resize_geometry geometry(const operation& o, const std::vector<argument>& args, const op::resize_options*& opts) {
    const auto& lens = args[0].get_shape().lens();
    if (const auto* r = o.any_cast<op::resize>()) {
        opts = &r->options;
        return op::resize_shape(r->options, lens, r->scales, r->sizes, "cpu::dyn_resize");
    }
    const auto& d = o.get<op::resize_dynamic>();
    opts = &d.options;
    std::vector<double> scales;
    std::vector<std::int64_t> sizes;
    if (d.use_sizes) {
        sizes = op::read_ints(args.back(), "cpu::dyn_resize", "sizes");
    } else {
        const auto v = args.back().to_vector<float>();
        scales.assign(v.begin(), v.end());
    }
    return op::resize_shape(d.options, lens, scales, sizes, "cpu::dyn_resize");
}

// Whether every axis before the last two keeps its length with one tap of weight 1 at the
// same coordinate.
bool leading_axes_copied(const op::resize_options& o, const op::resize_geometry& g, const std::vector<std::size_t>& lens) {
    for (std::size_t d = 0; d + 2 < lens.size(); ++d) {
        if (g.out[d] != lens[d]) return false;
        const auto t = op::make_taps(o, lens[d], g.out[d], g.scales[d], 0.0, 1.0);
        for (std::size_t i = 0; i < lens[d]; ++i)
            if (t.taps[i].size() != 1 || t.taps[i][0].index != i || t.taps[i][0].weight != 1.0) return false;
    }
    return true;
}

}  // namespace

argument dyn_resize::compute(context& ctx, const shape& out, const std::vector<argument>& args) const {
    const auto& xs = args[0].get_shape();
    const auto& lens = xs.lens();
    const op::resize_options* o = nullptr;
    const auto g = geometry(op, args, o);
    const bool fits = xs.get_type() == type::float32 && lens.size() >= 2 &&
                      o->coordinate_transformation_mode != "tf_crop_and_resize" && leading_axes_copied(*o, g, lens);
    if (!fits) return op.compute(ctx, out, args);
    const std::size_t rank = lens.size(), ih = lens[rank - 2], iw = lens[rank - 1];
    const std::size_t oh = g.out[rank - 2], ow = g.out[rank - 1];
    const auto th = flatten(op::make_taps(*o, ih, oh, g.scales[rank - 2], 0.0, 1.0));
    const auto tw = flatten(op::make_taps(*o, iw, ow, g.scales[rank - 1], 0.0, 1.0));
    const bool channels_last = rank == 4 && xs.strides() == channels_last_strides(lens);
    const shape result(type::float32, g.out, channels_last ? channels_last_strides(g.out) : shape::standard_strides(g.out));
    auto y = argument::for_overwrite(result);
    if (result.elements() == 0) return y;
    float* dst = y.data_as<float>();
    const bool parallel = result.elements() > (std::size_t{1} << 15);
    if (channels_last) {
        // [N, H, W, C] in memory: each output pixel sums its input pixels' channel rows.
        const std::size_t n = lens[0], c = lens[1];
        const float* src = args[0].data_as<const float>();
        const auto rows = static_cast<std::int64_t>(n * oh);
#pragma omp parallel for schedule(static) if (parallel)
        for (std::int64_t r = 0; r < rows; ++r) {
            const std::size_t b = static_cast<std::size_t>(r) / oh, yo = static_cast<std::size_t>(r) % oh;
            for (std::size_t xo = 0; xo < ow; ++xo) {
                float* acc = dst + ((b * oh + yo) * ow + xo) * c;
                std::fill(acc, acc + c, 0.0f);
                for (std::size_t i = th.first[yo]; i < th.first[yo] + th.count[yo]; ++i)
                    for (std::size_t j = tw.first[xo]; j < tw.first[xo] + tw.count[xo]; ++j) {
                        const float w = th.weight[i] * tw.weight[j];
                        const float* p = src + ((b * ih + th.index[i]) * iw + tw.index[j]) * c;
                        for (std::size_t k = 0; k < c; ++k) acc[k] += w * p[k];
                    }
            }
        }
        return y;
    }
    // Row-major: plane by plane.
    const argument x = args[0].contiguous();
    const float* src = x.data_as<const float>();
    const auto rows = static_cast<std::int64_t>(result.elements() / ow);
#pragma omp parallel for schedule(static) if (parallel)
    for (std::int64_t r = 0; r < rows; ++r) {
        const std::size_t plane = static_cast<std::size_t>(r) / oh, yo = static_cast<std::size_t>(r) % oh;
        const float* in = src + plane * ih * iw;
        float* row = dst + static_cast<std::size_t>(r) * ow;
        for (std::size_t xo = 0; xo < ow; ++xo) {
            float acc = 0.0f;
            for (std::size_t i = th.first[yo]; i < th.first[yo] + th.count[yo]; ++i)
                for (std::size_t j = tw.first[xo]; j < tw.first[xo] + tw.count[xo]; ++j)
                    acc += th.weight[i] * tw.weight[j] * in[th.index[i] * iw + tw.index[j]];
            row[xo] = acc;
        }
    }
    return y;
}

bool lower_dyn_resize(lower_env& env, instruction_ref ins) {
    if (!ins->get_operator().any_cast<op::resize>() && !ins->get_operator().any_cast<op::resize_dynamic>()) return false;
    return wrap_dynamic<dyn_resize>(env, ins);
}

KILN_REGISTER_OP(dyn_resize)

}  // namespace kiln::cpu
