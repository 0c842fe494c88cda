// The bf16 AVX-512 kernels (packed_gemm_avx512.inc, PG_BF16 1): A and B in bf16, one
// vdpbf16ps (two k, 16 columns) per step, float32 accumulation and epilogue. For CPUs with
// AVX512-BF16 only (pgemm::has_bf16_kernels()). Also A's conversion, with the same target.
#define PG_BF16 1
#include "targets/cpu/kernels/packed_gemm/packed_gemm_avx512.inc"

namespace kiln::cpu::pgemm {

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void to_bf16_rows(const float* a, std::size_t rows,
                                                                                 std::size_t k, std::size_t lda,
                                                                                 std::uint16_t* out,
                                                                                 std::size_t ld_out) {
    for (std::size_t i = 0; i < rows; ++i) {
        const float* src = a + i * lda;
        std::uint16_t* dst = out + i * ld_out;
        std::size_t j = 0;
        for (; j + 32 <= k; j += 32) {
            // cvtne2ps: round to nearest even, as the reference's conversion.
            const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + j + 16), _mm512_loadu_ps(src + j));
            _mm512_storeu_si512(dst + j, (__m512i)v);
        }
        for (; j < k; j += 16) {
            const auto m = static_cast<__mmask16>(k - j >= 16 ? 0xFFFF : (1u << (k - j)) - 1u);
            const __m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + j));
            _mm256_mask_storeu_epi16(dst + j, m, (__m256i)v);
        }
        for (j = k; j < ld_out; ++j) dst[j] = 0;  // pads: an odd k's last pair, the row padding
    }
}

}  // namespace kiln::cpu::pgemm
