// Ops that rearrange spatial blocks: depth_to_space, space_to_depth and col2im (the
// inverse of im2col, summing overlapping blocks).
#pragma once
#include "ops/tensor_common.hpp"

namespace kiln::op {

struct depth_to_space {
    std::int64_t blocksize = 1;
    std::string mode = "DCR";  // or CRD
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.blocksize, "blocksize");
        f(self.mode, "mode");
    }
    std::string name() const { return "depth_to_space"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

struct space_to_depth {
    std::int64_t blocksize = 1;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.blocksize, "blocksize"); }
    std::string name() const { return "space_to_depth"; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Col2Im with known image and block shapes. dilations/pads/strides empty = defaults.
struct col2im {
    std::vector<std::int64_t> image_shape;
    std::vector<std::int64_t> block_shape;
    std::vector<std::int64_t> dilations;
    std::vector<std::int64_t> pads;
    std::vector<std::int64_t> strides;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.image_shape, "image_shape");
        f(self.block_shape, "block_shape");
        f(self.dilations, "dilations");
        f(self.pads, "pads");
        f(self.strides, "strides");
    }
    std::string name() const { return "col2im"; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Col2Im(input, image_shape, block_shape) with both shapes read at run time.
struct col2im_dynamic {
    std::vector<std::int64_t> dilations;
    std::vector<std::int64_t> pads;
    std::vector<std::int64_t> strides;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.dilations, "dilations");
        f(self.pads, "pads");
        f(self.strides, "strides");
    }
    std::string name() const { return "col2im_dynamic"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
    std::optional<static_form> to_static(const known_inputs& k) const;
    shape compute_shape(const std::vector<shape>& in, const known_inputs& k) const {
        return shape_from_known(*this, in, k);
    }
};

// CenterCropPad(input, shape) with the target shape read at run time: each listed axis
// is cropped (centred window) or zero-padded (centred) to its target length. A known
// shape becomes slice + pad at parse time.
struct center_crop_pad {
    std::vector<std::int64_t> axes;  // empty: all
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.axes, "axes"); }
    std::string name() const { return "center_crop_pad"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// The slice starts/ends and pads that crop or pad `lens` to `target` on `axes`.
struct crop_pad_plan {
    std::vector<std::int64_t> axes, starts, ends, pads;  // pads: full rank, begins then ends
};
crop_pad_plan plan_center_crop_pad(const std::vector<std::size_t>& lens, const std::vector<std::int64_t>& target,
                                   const std::vector<std::int64_t>& axes, const std::string& op_name);

}  // namespace kiln::op
