// The sizes of one cpu::attention (attention.hpp) and the scratch it needs, shared by the
// kernel (attention.cpp) and the lowering that creates it (attention_lowering.cpp).
#pragma once
#include "targets/cpu/kernels/packed_gemm/packed_gemm_args.hpp"

#include <kiln/shape.hpp>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

namespace kiln::cpu::attention_detail {

constexpr std::size_t rows_per_task = 24;  // 4 register tiles: enough work per task, its scores in L1/L2

using pgemm::panels;
inline std::size_t round8(std::size_t n) { return (n + 7) / 8 * 8; }

struct geometry {
    std::size_t rank = 0, batches = 1, sq = 0, sk = 0, d = 0, dv = 0;
    std::vector<std::size_t> batch_lens;
    std::size_t packed_k() const { return panels(sk) * pgemm::panel * d; }
    std::size_t packed_v() const { return panels(dv) * pgemm::panel * sk; }
    std::size_t score_stride() const { return round8(sk); }
    // One part's scratch (a thread's): one batch index's packed K and V, and the score rows
    // of one task.
    std::size_t task_rows() const { return std::min(rows_per_task, sq); }
    std::size_t per_part() const { return packed_k() + packed_v() + task_rows() * score_stride(); }
    std::size_t scratch_bytes(std::size_t parts) const { return parts * per_part() * sizeof(float); }
    // How many parts a scratch of this many bytes holds.
    std::size_t parts_in(std::size_t bytes) const { return bytes / (per_part() * sizeof(float)); }
    // [batch..., Sq, Dv] and [batch..., Sq, Sk].
    std::vector<std::size_t> result_lens() const { return batch_lens_and(sq, dv); }
    std::vector<std::size_t> score_lens() const { return batch_lens_and(sq, sk); }

private:
    std::vector<std::size_t> batch_lens_and(std::size_t rows, std::size_t cols) const {
        auto l = batch_lens;
        l.push_back(rows);
        l.push_back(cols);
        return l;
    }
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

// Why q, kt and v (float32, one rank) cannot be attention's operands, or "" when they
// can: the same batch dims, [.., Sq, D], [.., D, Sk], [.., Sk, Dv], none of them empty,
// unit stride along D (q and kt) and Dv (v).
inline std::string operand_problem(const shape& q, const shape& kt, const shape& v) {
    const std::size_t r = q.ndim();
    if (r < 3 || kt.ndim() != r || v.ndim() != r)
        return "q, kt and v must share one rank with batch dims, got q " + q.to_string();
    const auto g = geometry_of(q, kt, v);
    auto batch_of = [&](const shape& s) { return std::vector<std::size_t>(s.lens().begin(), s.lens().end() - 2); };
    if (batch_of(kt) != g.batch_lens || batch_of(v) != g.batch_lens)
        return "q " + q.to_string() + ", kt " + kt.to_string() + " and v " + v.to_string() + " must share batch dims";
    if (kt.lens()[r - 2] != g.d || v.lens()[r - 2] != g.sk || g.sk == 0 || g.d == 0 || g.dv == 0)
        return "kt " + kt.to_string() + " must be [.., D, Sk] and v " + v.to_string() + " [.., Sk, Dv] for q " +
               q.to_string() + ", none empty";
    if ((g.d > 1 && (q.strides()[r - 1] != 1 || kt.strides()[r - 2] != 1)) || (g.dv > 1 && v.strides()[r - 1] != 1))
        return "q and kt need unit stride along D, v along Dv";
    return "";
}

// Whether `mask` (float32 added, or bool selecting with `select`) broadcasts to
// [batch..., Sq, Sk] with unit stride along Sk.
inline bool mask_fits(const geometry& g, const shape& mask, bool select = false) {
    if (mask.ndim() > g.rank || mask.ndim() == 0) return false;
    if (mask.get_type() != (select ? type::bool_ : type::float32)) return false;
    const auto full = g.score_lens();
    const std::size_t lead = g.rank - mask.ndim();
    for (std::size_t i = 0; i < mask.ndim(); ++i)
        if (mask.lens()[i] != 1 && mask.lens()[i] != full[lead + i]) return false;
    return mask.lens().back() == g.sk && (g.sk == 1 || mask.strides().back() == 1);
}

}  // namespace kiln::cpu::attention_detail
