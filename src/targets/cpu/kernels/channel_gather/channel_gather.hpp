// cpu::channel_gather: Gather along the channel axis of a 4-D float32 activation with
// constant indices, y[n, k, h, w] = x[n, source[k], h, w], where x is one activation or the
// concatenation along channels of several (a Concat that only such gathers read is never
// made: each gather reads the parts).
//
// Why: ShuffleNet's channel shuffle (Concat, Reshape to [N, g, C/g, H, W], Transpose of the
// two channel axes, Reshape back, then a Slice of each half) is a gather of a constant
// permutation whose halves are gathers of their own (simplify_algebra_shuffle.cpp). On the
// cpu target each step of the original left the channels-last layout of the convolutions
// around it: oneDNN's `ref:any` concat, a reorder to plain, the transpose copied, and a
// reorder back per half (ShuffleNetV2 x1.0 at batch 1 on a Zen 5 EPYC: 51 reorders and 16
// concats, about half of a 3.0 ms run). Here each half is one pass that reads its channels
// from the parts where they are.
//
// Layouts: parts and result are pixel channels (pixel_placement.hpp): blocked, channels-last
// or plain NCHW, mixed. The result takes the kind of the first part in a oneDNN layout;
// channels padded to the block are written as zeros.
//
// Inputs: (part..., output buffer).
#pragma once
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"
#include "targets/cpu/lowering_util.hpp"

#include <kiln/operation.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::cpu {

struct channel_gather_plan;  // channel_gather.cpp: the picks, made once in finalize

struct channel_gather {
    std::vector<md_record> parts;  // each part's layout; empty: plain (row-major NCHW)
    md_record layout;              // the result's; empty: plain
    std::vector<std::int64_t> source;  // per result channel: its channel in the parts' concatenation

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.parts, "parts");
        f(self.layout, "layout");
        f(self.source, "source");
    }
    std::string name() const { return "cpu::channel_gather"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void finalize(context& ctx, const shape& out, const std::vector<shape>& inputs);
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>& inputs) const {
        return static_cast<std::ptrdiff_t>(inputs.size()) - 1;
    }

    std::shared_ptr<const channel_gather_plan> plan;  // made in finalize, for this CPU
};

// The selection table's entry points (selection.cpp). A gather is taken when its axis is
// the channels of a static 4-D float32 tensor, its indices a 1-D constant, and at least one
// part is in a layout that stores channels per pixel (plain data is gather_blocks' work).
// A concat along channels that only such gathers read waits (returns true, changing
// nothing); the last gather lowered removes it.
bool concat_waits_for_channel_gather(lower_env& env, instruction_ref concat);
bool lower_channel_gather(lower_env& env, instruction_ref gather);

}  // namespace kiln::cpu
