// cpu::winograd_conv: a 3x3, stride-1 convolution as Winograd F(m x m, 3 x 3) (m = 4,
// or 2), on activations in oneDNN's blocked layout (the one the neighbouring oneDNN
// convolutions use, so no reorder appears between them).
//
// The weights are transformed once, at compile time, into U = G g G^T, stored as a
// literal laid out for the products: [alpha^2][Cout/16][Cin][16] (alpha = m + 2). At run
// time, each thread takes a range of tiles (or, for few tiles, of output channels) and,
// a group of tiles at a time (sized to stay in cache): the input transform V = B^T d B
// per tile and channel block, then alpha^2 products [tiles x Cin] x [Cin x Cout], then
// the output transform A^T M A with the bias and the fused post-ops. Threads never wait
// for each other (OpenMP, one parallel region). The kernels are chosen at load time by
// cpuid (AVX2+FMA, or the baseline), so a saved program runs on any x86-64.
//
// Inputs: (x, U, [bias], post-op inputs..., scratchpad, output buffer).
// KILN_CPU_WINOGRAD=0 keeps these convolutions on oneDNN; =2 uses F(2x2, 3x3); =4 only
// F(4x4, 3x3) (on AVX-512 machines the default takes F(2x2) where 4x4 tiles are too few
// but 2x2 ones are not); =all takes every one that fits, however few its tiles, in F(4x4)
// (for tests and measurements).
// KILN_CPU_WINOGRAD_ISA=avx2 or generic caps the kernels cpuid would choose.
#pragma once
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"
#include "targets/cpu/lowering_util.hpp"
#include "targets/cpu/kernels/onednn/op_conv.hpp"
#include "targets/cpu/kernels/onednn/post_ops.hpp"

#include <kiln/operation.hpp>

#include <cstdint>
#include <memory>
#include <vector>

namespace kiln::cpu {

struct winograd_conv {
    std::int64_t m = 4;                  // output tile: 4 or 2
    std::vector<std::int64_t> pads;      // top, left, bottom, right
    std::int64_t in_channels = 0, out_channels = 0;
    bool has_bias = false;
    std::vector<post_op> post_ops;       // binary inputs are full tensors in the output's layout
    // The work: tiles in tile_parts ranges x output columns in col_parts ranges, one part
    // per thread (parts are independent: no barrier), each in groups of group_tiles tiles
    // with its own V and M in the scratchpad.
    std::int64_t tile_parts = 1, col_parts = 1;
    std::int64_t group_tiles = 0;
    // Rows of V and M an odd number of cache lines apart (winograd.cpp, row_pitch); false in
    // programs saved before it, whose scratchpads were sized without the padding.
    bool odd_rows = false;
    std::int64_t scratchpad = -1;
    std::vector<md_record> layouts;      // per operand: the blocked layout (x, binary inputs)
    md_record dst_layout;

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.m, "m");
        f(self.pads, "pads");
        f(self.in_channels, "in_channels");
        f(self.out_channels, "out_channels");
        f(self.has_bias, "has_bias");
        f(self.post_ops, "post_ops");
        f(self.tile_parts, "tile_parts");
        f(self.col_parts, "col_parts");
        f(self.group_tiles, "group_tiles");
        f(self.odd_rows, "odd_rows");
        f(self.scratchpad, "scratchpad");
        f(self.layouts, "layouts");
        f(self.dst_layout, "dst_layout");
    }
    std::string name() const { return "cpu::winograd_conv"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void finalize(context& ctx, const shape& out, const std::vector<shape>& inputs);
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>& inputs) const {
        return static_cast<std::ptrdiff_t>(inputs.size()) - 1;
    }

    struct plan;
    std::shared_ptr<const plan> ready;  // built by finalize, not an attribute
};

// The weight transform U = G g G^T for w [cout, cin, 3, 3] (row-major), laid out as
// [alpha^2][cout16/16][cin_p][16] with zeros in the padding.
std::vector<float> winograd_weights(const std::vector<float>& w, std::size_t cout, std::size_t cin, int m,
                                    std::size_t cin_p, std::size_t cout16);

// Replaces `pos` by a winograd_conv computing convolution `c` (planned by the lowering:
// its layouts, bias and post-ops) over `operands` (x in its layout, the IR weights
// literal, [bias vector], post-op inputs), when the geometry and sizes suit it; false,
// changing nothing, otherwise. `rules` false: whenever it can (the tuner measures it), not
// only where the thresholds above choose it. `tile` 2 or 4 fixes the output tile (the tuner
// measures each as its own candidate); 0 lets the rules (or, without them, F(4x4)) decide.
bool lower_winograd(lower_env& env, const convolution& c, const std::vector<instruction_ref>& operands,
                    const shape& dst, instruction_ref pos, bool rules = true, int tile = 0);

}  // namespace kiln::cpu
