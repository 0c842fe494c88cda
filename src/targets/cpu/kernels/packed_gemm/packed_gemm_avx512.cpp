// The float32 AVX-512 kernels (packed_gemm_avx512.inc).
#define PG_BF16 0
#include "targets/cpu/kernels/packed_gemm/packed_gemm_avx512.inc"
