// What one run of a packed GEMM (packed_gemm.hpp) needs: sizes, pointers, the fused
// epilogue, and the part-runner each ISA variant provides. Plain data only, so that the
// variants (compiled with different target attributes) share nothing but this header.
#pragma once
#include "targets/cpu/cpu_options.hpp"
#include "targets/cpu/kernels/fused_post_kind.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>

namespace kiln::cpu::pgemm {

constexpr std::size_t panel = 16;  // columns per packed panel of B
constexpr std::size_t tile_rows = 6;  // rows per micro-tile (12 ymm accumulators)

// A fused post-op as the epilogue applies it, in order, after the bias.
using post_kind = fused_post_kind;
struct post_step {
    post_kind kind = post_kind::relu;
    float alpha = 0.0f, beta = 0.0f;
    const float* src = nullptr;  // binary: [n] per column (full false) or laid out as C
    bool full = false;
};
constexpr int max_post_steps = 8;

struct args {
    std::size_t m = 0, n = 0, k = 0;  // C[m][n] = A[m][k] B[k][n]
    std::size_t kc = 0;               // k block: the B micro-panel kc x 16 stays in L1
    const float* a = nullptr;         // [m][k] row-major
    const float* b = nullptr;         // [ceil(n/16)][k][16], zero-padded columns
    // The bf16 kernels (avx512_bf16_part) read these instead of a and b: A in bf16 rows
    // (lda in bf16 values, even, zero past k), B as [ceil(n/16)][ceil(k/2)][16][2] bf16
    // (pack_gemm_weights_bf16: each column's pair of consecutive k, zero-padded).
    const std::uint16_t* a_bf16 = nullptr;
    const std::uint16_t* b_bf16 = nullptr;
    const float* bias = nullptr;      // [n] or null
    float* c = nullptr;               // [m][n] row-major, or blocked (see block)
    // 0: C is row-major. 8 or 16: C is a channel-blocked activation, the rows its pixels
    // (image by image, `image_rows` each), the columns its channels (n a multiple of
    // block): [images][n / block][image_rows][block]. Full-tensor binary post-op operands
    // are laid out as C.
    std::size_t block = 0, image_rows = 0;
    // Row strides of A and of a row-major C, in floats (0: k and n, the packed ones);
    // attention's products read and write strided views of bigger tensors.
    std::size_t lda = 0, ldc = 0;
    post_step post[max_post_steps];
    int n_post = 0;
    // C already holds values the product adds to (a residual the result overwrites in
    // place): the first k block starts from them instead of from zero. The bias and the
    // post-ops follow the sum.
    bool accumulate = false;
    // Many rows (run_all decides): the kernels that can finish each row tile across all
    // of K and a block of panels before the next tile, so that A and C stream through
    // memory once (only the AVX-512 ones do; the others take it as a hint).
    bool tall = false;
};

// A's row stride.
inline std::size_t a_stride(const args& g) { return g.lda ? g.lda : g.k; }

// The row stride to give a copy of A (rows of k floats, `rows` of them): rows 4 KiB apart
// (or a multiple) share one L1 cache set, so an AVX-512 register tile's 12 rows evict each
// other and B (packed_gemm.hpp has the measurement); from two tiles of rows up they are
// padded by a cache line. k itself where nothing aliases.
inline std::size_t padded_a_stride(std::size_t k, std::size_t rows) {
    constexpr std::size_t aliasing_bytes = 4096, padding = 16, min_rows = 24;
    return (k * sizeof(float)) % aliasing_bytes == 0 && rows >= min_rows ? k + padding : k;
}
// Where C's row i starts, and where its column j (a multiple of 8) is from there.
inline std::size_t row_offset(const args& g, std::size_t i) {
    if (g.block == 0) return i * (g.ldc ? g.ldc : g.n);
    return (i / g.image_rows) * g.image_rows * g.n + (i % g.image_rows) * g.block;
}
inline std::size_t col_offset(const args& g, std::size_t j) {
    return g.block == 0 ? j : (j / g.block) * g.image_rows * g.block + j % g.block;
}

// Computes C rows [m0, m1) x panels [p0, p1) completely (all k blocks, bias, post-ops).
// Parts are independent: threads run disjoint parts without synchronization.
using part_fn = void (*)(const args&, std::size_t m0, std::size_t m1, std::size_t p0, std::size_t p1);

part_fn generic_part();
part_fn avx2_part();    // only for CPUs with AVX2 and FMA
part_fn avx512_part();  // only for CPUs with AVX-512 F, DQ, VL and BW (cpu::has_avx512())
part_fn avx512_bf16_part();  // only where has_bf16_kernels(): A and B in bf16 (a_bf16, b_bf16)
// Whether this CPU runs avx512_bf16_part (AVX-512 and AVX512-BF16, as capped by
// KILN_CPU_MAX_ISA and ONEDNN_MAX_CPU_ISA) and `cap` leaves the AVX-512 kernels chosen.
bool has_bf16_kernels(isa_cap cap);
// Rows [0, rows) of float32 A (row stride lda) into bf16 (round to nearest even), rows
// ld_out apart, zero from k to ld_out. Only where has_bf16_kernels().
void to_bf16_rows(const float* a, std::size_t rows, std::size_t k, std::size_t lda, std::uint16_t* out,
                  std::size_t ld_out);

// Packed panels of B for n columns.
inline std::size_t panels(std::size_t n) { return (n + panel - 1) / panel; }

// Defined in packed_gemm.cpp, for every user of these kernels (avx2_part needs
// cpu::has_avx2_fma(), cpu_features.hpp):
// the kernels for this CPU, asked of cpuid (a saved program runs on another machine):
// avx512_part where it has AVX-512, else avx2_part where it has AVX2 and FMA, else
// generic_part; `cap` (KILN_CPU_PACKED_GEMM_ISA=avx2 or generic) lowers the choice (for testing the
// other kernels and for measurements);
part_fn chosen_part(isa_cap cap);
// "avx512", "avx2" or "generic";
const char* part_name(part_fn part);
// the k block for depth k (g.kc);
std::size_t depth_block(std::size_t k);
// all of C, on the current OpenMP team: each thread its own B panels (at least two
// each), then rows in whole tiles; tall products (tall_rows and more) by rows only, each
// thread a contiguous range of whole tiles, in the kernels' tall order (args::tall).
constexpr std::size_t tall_rows = 256;
// With `a_f32` (the bf16 kernels): first converts that float32 A (rows k apart) into
// g.a_bf16 (to_bf16_rows), each thread its share of the rows, in the same parallel region
// as the product (a region costs a fork and a join: a scheduler slice on a busy machine).
void run_all(const args& g, part_fn part, const float* a_f32 = nullptr);

// A that each part fills itself (conv_gemm's im2col rows): `fill(a, m0, m1)` writes rows
// [m0, m1) of A (row stride a_stride(g)) into a. With at least as many copies (copy_floats
// apart from `a`) as the cut has column parts, every part fills its own rows into its
// column part's copy inside the product's parallel region, so a thread reads only rows it
// wrote itself: on a 2-vCPU Zen 5 VM, A written by one core and read by the other, or
// written where the other core last read it, cost ~12 us for a 73 KB im2col where one core
// alone takes 0.9 us (docs/performance.md, "A thread team for small programs"). With
// fewer copies the calling thread fills all of A first.
struct a_fill {
    std::function<void(float* a, std::size_t m0, std::size_t m1)> fill;
    float* a = nullptr;
    std::size_t copies = 1, copy_floats = 0;
};
void run_all(const args& g, part_fn part, const a_fill& fill);
// The column parts run_all cuts an m x n x k product into on `threads` threads (1 for a
// single-threaded or a tall one): the A copies an a_fill needs.
std::size_t column_parts(std::size_t m, std::size_t n, std::size_t k, std::size_t threads);

}  // namespace kiln::cpu::pgemm
