// The sizes of one cpu::attention (attention.hpp) and the scratch it needs, shared by the
// kernel (attention.cpp) and the lowering that creates it (attention_lowering.cpp).
#pragma once
#include "targets/cpu/packed_gemm_args.hpp"

#include <kiln/shape.hpp>

#include <cstddef>
#include <vector>

namespace kiln::cpu::attention_detail {

constexpr std::size_t rows_per_task = 24;  // 4 register tiles: enough work per task, its scores in L1/L2

inline std::size_t panels(std::size_t n) { return (n + pgemm::panel - 1) / pgemm::panel; }
inline std::size_t round8(std::size_t n) { return (n + 7) / 8 * 8; }

struct geometry {
    std::size_t rank = 0, batches = 1, sq = 0, sk = 0, d = 0, dv = 0;
    std::vector<std::size_t> batch_lens;
    std::size_t packed_k() const { return panels(sk) * pgemm::panel * d; }
    std::size_t packed_v() const { return panels(dv) * pgemm::panel * sk; }
    std::size_t score_stride() const { return round8(sk); }
    std::size_t per_batch() const { return packed_k() + packed_v() + sq * score_stride(); }
    std::size_t scratch_bytes() const { return batches * per_batch() * sizeof(float); }
};

inline geometry geometry_of(const shape& q, const shape& kt, const shape& v) {
    geometry g;
    g.rank = q.ndim();
    const std::size_t r = g.rank;
    g.batch_lens.assign(q.lens().begin(), q.lens().end() - 2);
    for (auto l : g.batch_lens) g.batches *= l;
    g.sq = q.lens()[r - 2];
    g.d = q.lens()[r - 1];
    g.sk = kt.lens()[r - 1];
    g.dv = v.lens()[r - 1];
    return g;
}

// Whether `mask` broadcasts to [batch..., Sq, Sk] with unit stride along Sk.
inline bool mask_fits(const geometry& g, const shape& mask) {
    if (mask.ndim() > g.rank || mask.ndim() == 0) return false;
    std::vector<std::size_t> full = g.batch_lens;
    full.push_back(g.sq);
    full.push_back(g.sk);
    const std::size_t lead = g.rank - mask.ndim();
    for (std::size_t i = 0; i < mask.ndim(); ++i)
        if (mask.lens()[i] != 1 && mask.lens()[i] != full[lead + i]) return false;
    return mask.lens().back() == g.sk && (g.sk == 1 || mask.strides().back() == 1);
}

}  // namespace kiln::cpu::attention_detail
