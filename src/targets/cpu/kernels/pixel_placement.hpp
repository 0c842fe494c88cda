// Where element (n, c, pixel p) of a 4-D float32 activation lives when its layout stores
// channels per pixel in groups of g: n * image + (c / g) * block + p * g + c % g. That covers
// oneDNN's blocked nChw8c / nChw16c (g = 8, 16), channels-last (g = C) and plain NCHW (g = 1,
// block = H * W), so kernels that take parts in any of them (cpu::channel_affine,
// cpu::channel_gather) address them one way.
#pragma once
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"

#include "ops/tensor_slice.hpp"

#include <kiln/module.hpp>
#include <kiln/shape.hpp>

#include <cstddef>
#include <cstdint>

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

// A concat of 4-D tensors along their channels.
inline bool concat_on_channels(instruction_ref ins) {
    const auto* c = ins->get_operator().any_cast<op::concat>();
    return c && ins->get_shape().ndim() == 4 && (c->axis == 1 || c->axis == -3);
}

}  // namespace kiln::cpu
