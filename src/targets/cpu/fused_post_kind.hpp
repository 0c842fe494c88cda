// The post-ops Kiln's own kernels (Winograd convolution, packed GEMM) apply in their
// epilogues: the subset of oneDNN post-ops they implement (fused_post_kind_of in
// post_ops.hpp maps one to the other). Plain data, so the ISA variants can include it.
#pragma once

namespace kiln::cpu {

enum class fused_post_kind : int { relu, linear, clip, add, sub, mul, max, min };

// add..min read a second operand.
constexpr bool is_binary(fused_post_kind k) { return k >= fused_post_kind::add; }

}  // namespace kiln::cpu
