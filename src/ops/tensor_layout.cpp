#include "ops/tensor_layout.hpp"

#include "ops/tensor_slice.hpp"

#include <kiln/register_op.hpp>

namespace kiln::op {

// ---- depth_to_space / space_to_depth

shape depth_to_space::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 1);
    check_rank(name(), in[0], 4, 4);
    if (mode != "DCR" && mode != "CRD") throw_error(error_code::unsupported, name() + ": unknown mode '" + mode + "'");
    if (blocksize < 1) throw_error(error_code::shape, name() + ": blocksize must be positive");
    const auto b = static_cast<std::size_t>(blocksize);
    if (in[0].dynamic()) {
        // A run-time batch or size (Mask R-CNN's mask head over a run-time RoI count, after
        // a transposed convolution became a 1x1 one and this): channels must be fixed.
        auto d = in[0].to_dynamic_dims();
        if (!d[1].is_fixed() || d[1].min % (b * b) != 0)
            throw_error(error_code::shape, name() + ": channels of " + in[0].to_string() +
                                               " must be fixed and divisible by blocksize^2");
        d[1] = {d[1].min / (b * b), d[1].min / (b * b), {}};
        const auto scale = [&](std::size_t v) {
            return v > dynamic_dimension::unbounded / b ? dynamic_dimension::unbounded : v * b;
        };
        for (std::size_t i : {std::size_t{2}, std::size_t{3}}) d[i] = {scale(d[i].min), scale(d[i].max), {}};
        return shape::make_dynamic(in[0].get_type(), d);
    }
    const auto& l = in[0].lens();
    if (l[1] % (b * b) != 0)
        throw_error(error_code::shape, name() + ": channels of " + in[0].to_string() + " are not divisible by blocksize^2 (" +
                                           std::to_string(blocksize) + "^2)");
    return shape(in[0].get_type(), {l[0], l[1] / (b * b), l[2] * b, l[3] * b});
}

argument depth_to_space::compute(const shape&, const std::vector<argument>& args) const {
    const shape& xs = args[0].get_shape();
    const auto& il = xs.lens();
    const auto& is = xs.strides();
    const auto b = static_cast<std::size_t>(blocksize);
    const std::size_t n_ = il[0], c_out = il[1] / (b * b), h_in = il[2], w_in = il[3];
    // The result's dims from x's (in a dynamic program the given shape holds ranges).
    argument dst(shape(xs.get_type(), {n_, c_out, h_in * b, w_in * b}));
    const bool dcr = mode == "DCR";
    // Row by row of the output: output row (n, c, h * b + i) interleaves b input rows, one per
    // j. Any input strides (a channels-last convolution result comes in place); input row h
    // of every channel is placed before the next, so a channels-last slab stays in cache.
    visit_bytes(xs.get_type(), [&](auto tag) {
        using U = typename decltype(tag)::type;
        const U* src = args[0].template data_as<U>();
        U* d = dst.template data_as<U>();
        const std::size_t w_out = w_in * b;
        for (std::size_t n = 0; n < n_; ++n)
            for (std::size_t h = 0; h < h_in; ++h)
                for (std::size_t c = 0; c < c_out; ++c)
                    for (std::size_t i = 0; i < b; ++i) {
                        U* row = d + ((n * c_out + c) * h_in * b + h * b + i) * w_out;
                        for (std::size_t j = 0; j < b; ++j) {
                            const std::size_t ic = dcr ? (i * b + j) * c_out + c : (c * b + i) * b + j;
                            const U* in = src + n * is[0] + ic * is[1] + h * is[2];
                            for (std::size_t w = 0; w < w_in; ++w) row[w * b + j] = in[w * is[3]];
                        }
                    }
    });
    return dst;
}

shape space_to_depth::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 1);
    check_rank(name(), in[0], 4, 4);
    auto b = static_cast<std::size_t>(blocksize);
    const auto& l = in[0].lens();
    if (blocksize < 1 || l[2] % b != 0 || l[3] % b != 0)
        throw_error(error_code::shape, name() + ": height and width of " + in[0].to_string() +
                                           " are not divisible by blocksize " + std::to_string(blocksize));
    return shape(in[0].get_type(), {l[0], l[1] * b * b, l[2] / b, l[3] / b});
}

argument space_to_depth::compute(const shape& out, const std::vector<argument>& args) const {
    const auto& il = args[0].get_shape().lens();
    const auto& ol = out.lens();
    auto b = static_cast<std::size_t>(blocksize);
    return copy_by_index(out, args[0], [&](std::size_t i) {
        std::size_t w = i % ol[3], h = (i / ol[3]) % ol[2], oc = (i / (ol[3] * ol[2])) % ol[1];
        std::size_t n = i / (ol[3] * ol[2] * ol[1]);
        std::size_t c = oc % il[1], blk = oc / il[1];
        std::size_t bi = blk / b, bj = blk % b;
        return static_cast<std::int64_t>(((n * il[1] + c) * il[2] + h * b + bi) * il[3] + w * b + bj);
    });
}

// ---- col2im

namespace {
struct col2im_geometry {
    std::vector<std::size_t> image, block, dil, stride, blocks;
    std::vector<std::int64_t> pad_begin;
    std::size_t block_size = 1, num_blocks = 1;
};

col2im_geometry geometry(const std::vector<std::int64_t>& image_shape, const std::vector<std::int64_t>& block_shape,
                         const std::vector<std::int64_t>& dilations, const std::vector<std::int64_t>& pads,
                         const std::vector<std::int64_t>& strides, const std::string& op_name) {
    const std::size_t n = image_shape.size();
    if (n == 0 || block_shape.size() != n || (!dilations.empty() && dilations.size() != n) ||
        (!strides.empty() && strides.size() != n) || (!pads.empty() && pads.size() != 2 * n))
        throw_error(error_code::shape, op_name + ": image_shape, block_shape, dilations, strides and pads disagree in length");
    col2im_geometry g;
    for (std::size_t d = 0; d < n; ++d) {
        auto img = image_shape[d], blk = block_shape[d];
        auto dl = dilations.empty() ? 1 : dilations[d];
        auto st = strides.empty() ? 1 : strides[d];
        auto pb = pads.empty() ? 0 : pads[d];
        auto pe = pads.empty() ? 0 : pads[n + d];
        for (auto v : {img, blk, dl, st, pb, pe}) check_dim_value(v, op_name, "image, block, dilation, stride or pad value", true);
        if (img < 1 || blk < 1 || dl < 1 || st < 1)
            throw_error(error_code::shape, op_name + ": image, block, dilation and stride must be positive");
        auto span = img + pb + pe - dl * (blk - 1) - 1;
        if (span < 0) throw_error(error_code::shape, op_name + ": the block does not fit the padded image");
        g.image.push_back(static_cast<std::size_t>(img));
        g.block.push_back(static_cast<std::size_t>(blk));
        g.dil.push_back(static_cast<std::size_t>(dl));
        g.stride.push_back(static_cast<std::size_t>(st));
        g.pad_begin.push_back(pb);
        g.blocks.push_back(static_cast<std::size_t>(span / st + 1));
        g.block_size *= static_cast<std::size_t>(blk);
        g.num_blocks *= g.blocks.back();
    }
    return g;
}
}  // namespace

shape col2im::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 1);
    check_rank(name(), in[0], 3, 3);
    auto g = geometry(image_shape, block_shape, dilations, pads, strides, name());
    const auto& l = in[0].lens();
    if (l[1] % g.block_size != 0 || l[2] != g.num_blocks)
        throw_error(error_code::shape, name() + ": input " + in[0].to_string() + " does not match " +
                                           std::to_string(g.block_size) + " elements per block and " +
                                           std::to_string(g.num_blocks) + " blocks");
    std::vector<std::size_t> lens{l[0], l[1] / g.block_size};
    lens.insert(lens.end(), g.image.begin(), g.image.end());
    return shape(in[0].get_type(), lens);
}

argument col2im::compute(const shape& out, const std::vector<argument>& args) const {
    auto g = geometry(image_shape, block_shape, dilations, pads, strides, name());
    argument src = args[0].contiguous();
    argument r(out);
    const auto& ol = out.lens();
    const std::size_t nd = g.image.size();
    std::size_t image_size = 1;
    for (auto d : g.image) image_size *= d;
    auto img_strides = shape::standard_strides(g.image);
    visit_numeric(out.get_type(), [&](auto tag) {
        using C = typename decltype(tag)::type;
        std::vector<double> acc(out.elements(), 0.0);
        const C* s = src.template data_as<C>();
        std::vector<std::size_t> k(nd, 0), blk(nd, 0);
        for (std::size_t nc = 0; nc < ol[0] * ol[1]; ++nc) {
            for (std::size_t kb = 0; kb < g.block_size; ++kb) {
                // Multi-index of the kernel offset kb within the block.
                for (std::size_t d = nd, rem = kb; d-- > 0;) {
                    k[d] = rem % g.block[d];
                    rem /= g.block[d];
                }
                for (std::size_t lb = 0; lb < g.num_blocks; ++lb) {
                    std::int64_t pos = 0;
                    bool inside = true;
                    for (std::size_t d = nd, rem = lb; d-- > 0;) {
                        blk[d] = rem % g.blocks[d];
                        rem /= g.blocks[d];
                        auto p = static_cast<std::int64_t>(blk[d] * g.stride[d] + k[d] * g.dil[d]) - g.pad_begin[d];
                        if (p < 0 || p >= static_cast<std::int64_t>(g.image[d])) inside = false;
                        pos += p * static_cast<std::int64_t>(img_strides[d]);
                    }
                    if (!inside) continue;
                    acc[nc * image_size + static_cast<std::size_t>(pos)] +=
                        convert<double>(s[(nc * g.block_size + kb) * g.num_blocks + lb]);
                }
            }
        }
        C* o = r.template data_as<C>();
        for (std::size_t i = 0; i < acc.size(); ++i) o[i] = convert<C>(acc[i]);
    }, name());
    return r;
}

shape col2im_dynamic::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 3);
    check_rank(name(), in[0], 3, 3, "input");
    auto n = static_length(in[1], name(), "image_shape");
    return unknown_dims(in[0].get_type(), 2 + n);
}

argument col2im_dynamic::compute(const shape&, const std::vector<argument>& args) const {
    col2im c{read_ints(args[1], name(), "image_shape"), read_ints(args[2], name(), "block_shape"), dilations, pads,
             strides};
    return c.compute(c.compute_shape({args[0].get_shape()}), {args[0]});
}

std::optional<static_form> col2im_dynamic::to_static(const known_inputs& k) const {
    if (!k.at(1) || !k.at(2)) return std::nullopt;
    return static_form{col2im{read_ints(*k[1], name(), "image_shape"), read_ints(*k[2], name(), "block_shape"),
                              dilations, pads, strides},
                       {0}};
}

// ---- center_crop_pad

crop_pad_plan plan_center_crop_pad(const std::vector<std::size_t>& lens, const std::vector<std::int64_t>& target,
                                   const std::vector<std::int64_t>& axes, const std::string& op_name) {
    const std::size_t rank = lens.size();
    std::vector<std::int64_t> ax = axes;
    if (ax.empty())
        for (std::size_t i = 0; i < rank; ++i) ax.push_back(static_cast<std::int64_t>(i));
    auto norm = normalize_axes(ax, rank, op_name);
    if (target.size() != norm.size())
        throw_error(error_code::shape, op_name + ": " + std::to_string(target.size()) + " target lengths for " +
                                           std::to_string(norm.size()) + " axes");
    crop_pad_plan p;
    p.pads.assign(2 * rank, 0);
    for (std::size_t k = 0; k < norm.size(); ++k) {
        auto a = norm[k];
        auto in = static_cast<std::int64_t>(lens[a]);
        auto t = target[k];
        if (t < 0) throw_error(error_code::shape, op_name + ": negative target length");
        if (in > t) {
            p.axes.push_back(static_cast<std::int64_t>(a));
            p.starts.push_back((in - t) / 2);
            p.ends.push_back((in - t) / 2 + t);
        } else if (in < t) {
            p.pads[a] = (t - in) / 2;
            p.pads[rank + a] = t - in - (t - in) / 2;
        }
    }
    return p;
}

shape center_crop_pad::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 2);
    if (!is_integer(in[1].get_type()))
        throw_error(error_code::type, name() + ": shape must be integer, got " + in[1].to_string());
    auto dd = in[0].to_dynamic_dims();
    std::vector<std::int64_t> ax = axes;
    if (ax.empty())
        for (std::size_t i = 0; i < dd.size(); ++i) ax.push_back(static_cast<std::int64_t>(i));
    for (auto a : normalize_axes(ax, dd.size(), name())) dd[a] = {0, dynamic_dimension::unbounded, {}};
    if (dd.empty()) return shape(in[0].get_type());
    return shape::make_dynamic(in[0].get_type(), dd);
}

argument center_crop_pad::compute(const shape&, const std::vector<argument>& args) const {
    auto p = plan_center_crop_pad(args[0].get_shape().lens(), read_ints(args[1], name(), "shape"), axes, name());
    slice s{p.axes, p.starts, p.ends, {}};
    argument cropped = s.compute(s.compute_shape({args[0].get_shape()}), {args[0]});
    pad pd{"constant", p.pads, {}};
    return pd.compute(pd.compute_shape({cropped.get_shape()}), {cropped});
}

KILN_REGISTER_OP(center_crop_pad)
KILN_REGISTER_OP(depth_to_space)
KILN_REGISTER_OP(space_to_depth)
KILN_REGISTER_OP(col2im)
KILN_REGISTER_OP(col2im_dynamic)

}  // namespace kiln::op
