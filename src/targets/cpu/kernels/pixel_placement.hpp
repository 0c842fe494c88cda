// Where element (n, c, pixel p) of a 4-D float32 activation lives when its layout stores
// channels per pixel in groups of g: n * image + (c / g) * block + p * g + c % g. That covers
// oneDNN's blocked nChw8c / nChw16c (g = 8, 16), channels-last (g = C) and plain NCHW (g = 1,
// block = H * W), so kernels that take parts in any of them (cpu::channel_affine,
// cpu::channel_gather) address them one way.
#pragma once
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"

#include "ops/tensor_slice.hpp"

#include <kiln/errors.hpp>
#include <kiln/module.hpp>
#include <kiln/shape.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cpu {

// The channels stored together per pixel: pixel_channels (blocked or channels-last), 1 for
// a dense NCHW record, 0 for any other layout.
inline std::int64_t pixel_group_of(const md_record& r) {
    if (const std::int64_t g = pixel_channels(r)) return g;
    const auto& d = r.dims;
    if (d.size() != 4 || !r.inner_blks.empty() || r.offset0 != 0 || r.padded_dims != d || r.strides.size() != 4)
        return 0;
    const bool nchw = r.strides[3] == 1 && r.strides[2] == d[3] && r.strides[1] == d[2] * d[3] &&
                      r.strides[0] == d[1] * d[2] * d[3];
    return nchw ? 1 : 0;
}

struct pixel_placement {
    std::size_t g, image, block;
};

// The placement of a tensor of `channels` channels and `hw` pixels stored in `r` (empty:
// plain NCHW).
inline pixel_placement place_pixels(const md_record& r, std::size_t channels, std::size_t hw) {
    if (r.empty()) return {1, channels * hw, hw};
    const auto g = static_cast<std::size_t>(pixel_group_of(r));
    return {g, static_cast<std::size_t>(r.strides[0]), static_cast<std::size_t>(r.strides[1])};
}

// The channels of a part stored in `r` (empty: its IR shape s).
inline std::size_t channels_of(const md_record& r, const shape& s) {
    return r.empty() ? s.lens().at(1) : static_cast<std::size_t>(r.dims.at(1));
}

// The checks of a kernel that reads `parts` (the first inputs) in pixel-channels layouts or
// plain: every input a static tensor, each part a float32 NCHW tensor like the first outside
// the channels and stored as its record says. Returns the parts' channels summed.
inline std::size_t check_pixel_parts(const std::string& op, const std::vector<md_record>& parts,
                                     const std::vector<shape>& inputs) {
    auto bad = [&](const std::string& why) { throw_error(error_code::shape, op + ": " + why); };
    for (const auto& i : inputs)
        if (!i.is_tensor() || i.dynamic()) bad("inputs must be static tensors, got " + i.to_string());
    const auto lens0 = inputs[0].lens();
    std::size_t c = 0;
    for (std::size_t k = 0; k < parts.size(); ++k) {
        const shape& x = inputs[k];
        const auto& l = x.lens();
        if (x.ndim() != 4 || x.get_type() != type::float32 || l[0] != lens0[0] || l[2] != lens0[2] || l[3] != lens0[3])
            bad("part " + std::to_string(k) + " " + x.to_string() + " is not a float32 NCHW tensor like " +
                inputs[0].to_string() + " outside the channels");
        if (parts[k].empty() ? !x.standard() : (pixel_group_of(parts[k]) <= 0 || to_dims(l) != parts[k].to_md().dims()))
            bad("part " + std::to_string(k) + " is not stored as pixel channels or plain NCHW");
        c += l[1];
    }
    return c;
}

// The result `out` of such a kernel: its layout (empty: plain) stores channels per pixel and
// the output buffer holds it.
inline void check_pixel_result(const std::string& op, const md_record& layout, const shape& out, const shape& buffer) {
    auto bad = [&](const std::string& why) { throw_error(error_code::shape, op + ": " + why); };
    if (!layout.empty() && (pixel_group_of(layout) <= 0 || to_dims(out.lens()) != layout.to_md().dims()))
        bad("the result's layout does not store its channels per pixel");
    const std::size_t need = layout.empty() ? out.bytes() : layout.to_md().get_size();
    if (buffer.bytes() < need) bad("the output buffer is too small");
}

// A concat of 4-D tensors along their channels.
inline bool concat_on_channels(instruction_ref ins) {
    const auto* c = ins->get_operator().any_cast<op::concat>();
    return c && ins->get_shape().ndim() == 4 && (c->axis == 1 || c->axis == -3);
}

}  // namespace kiln::cpu
