// Runs the first layers of a batched convolutional network image by image (micro-batching
// a prefix), so that each image's activations stay in the caches from layer to layer.
//
// Why: at batch 8, ResNet-50's early layers stream activations of 6-26 MB per tensor
// through memory between every pair of layers, while one image's (0.8-3.2 MB) stay in L2
// and L3. Their weights are small and each is reused over every pixel of an image, so
// nothing is lost by not sharing them across images. Late layers (few pixels per image,
// large weights) are the other way round: the batch is what reuses their weights, and they
// keep it. Measured per image on a 2-core Zen 5 (kiln perf --per-instruction, batch 1
// against batch 8, ms per image): layers at 56x56 3.06 vs 4.46, 28x28 3.96 vs 4.96, 14x14
// 6.14 vs 6.89, but 7x7 4.09 vs 3.65.
//
// What: the longest prefix of the program (in program order) of batch-separable
// instructions — convolutions with at least `min_pixels` output pixels per image, pooling,
// pointwise ops, and concatenations off the batch axis, whose non-constant inputs all
// carry the batch — is cut where the fewest of its values are read after it (the latest
// such place), copied once per image on a batch-1 slice of its inputs (literals shared),
// and the values read after the cut are the concatenation of the copies' results.
// Nothing happens at batch 1, without a qualifying convolution, or when the prefix's
// tensors are small enough (`min_bytes` at full batch) to stay in the caches anyway.
#pragma once
#include <kiln/module.hpp>

#include <cstddef>
#include <string>

namespace kiln {

struct split_batch {
    // Convolutions with fewer output pixels per image than this end the prefix: their
    // weights are reused too few times within one image to be worth re-reading per image.
    std::size_t min_pixels = 100;
    // The prefix's largest result at full batch must be at least this large.
    std::size_t min_bytes = 2u << 20;
    std::string name() const { return "split_batch"; }
    void apply(module& m) const;
};

}  // namespace kiln
