// gpu::split_conv_bias: convolution(x, w, b) -> add(convolution(x, w), b as [M, 1, ...]),
// for the convolutions cuDNN runs (cudnn_conv_takes). cuDNN computes the product; the bias
// add then starts an elementwise group that fuse_pointwise extends over what follows
// (ReLU, a residual add, ...), so the whole epilogue is one generated kernel instead of a
// pass of its own. First in the gpu pipeline, before fusion (target.cpp).
#pragma once
#include "targets/gpu/gpu_options.hpp"

#include <kiln/module.hpp>

#include <string>

namespace kiln::gpu {

struct split_conv_bias {
    const gpu_options* options = nullptr;  // the gpu context's (it outlives the passes)
    std::string name() const { return "gpu::split_conv_bias"; }
    void apply(module& m) const;
};

}  // namespace kiln::gpu
