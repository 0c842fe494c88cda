// The AVX2 + FMA time step of cpu::lstm_packed: exp, sigmoid and tanh on 8 lanes, the
// recurrent sums of one block for one, two, four or six batch rows, and the gate math.
#include "targets/cpu/kernels/lstm/lstm_step.hpp"

#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

namespace kiln::cpu::lstm_detail {

namespace {

#define KILN_AVX2 __attribute__((target("avx2,fma")))

// exp(x) for x in [-87, 88]: x = n ln2 + r with |r| <= ln2/2, exp(r) by its Taylor
// series to r^7 (relative error below 1e-7), times 2^n built in the exponent bits.
KILN_AVX2 inline __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    // ln2 split in two so that n * hi is exact.
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440054690583e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

// 1/d by the hardware estimate (12 bits) and one Newton step (about 23 bits), cheaper
// than a division; d is in [1, inf) here (inf gives 0).
KILN_AVX2 inline __m256 reciprocal8(__m256 d) {
    const __m256 r = _mm256_rcp_ps(d);
    return _mm256_fmadd_ps(r, _mm256_fnmadd_ps(d, r, _mm256_set1_ps(1.0f)), r);
}

KILN_AVX2 inline __m256 sigmoid8(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f);
    return reciprocal8(_mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

// tanh(|x|) = 1 - 2 / (exp(2|x|) + 1) where that is accurate (|x| >= 1/4), its Taylor
// series to x^9 below (relative error below 1e-8 there), the sign put back.
KILN_AVX2 inline __m256 tanh8(__m256 x) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 ax = _mm256_andnot_ps(sign, x);
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 big = _mm256_fnmadd_ps(_mm256_set1_ps(2.0f), reciprocal8(_mm256_add_ps(exp8(_mm256_add_ps(ax, ax)), one)), one);
    const __m256 z = _mm256_mul_ps(ax, ax);
    __m256 p = _mm256_set1_ps(62.0f / 2835.0f);
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-17.0f / 315.0f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(2.0f / 15.0f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-1.0f / 3.0f));
    const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), ax, ax);
    const __m256 t = _mm256_blendv_ps(big, small, _mm256_cmp_ps(ax, _mm256_set1_ps(0.25f), _CMP_LT_OQ));
    return _mm256_or_ps(t, _mm256_and_ps(sign, x));
}

// The recurrent sum plus the input projection and bias of one gate of a block.
KILN_AVX2 inline __m256 preactivation(__m256 acc, const float* g, const float* bias) {
    return _mm256_add_ps(acc, _mm256_add_ps(_mm256_loadu_ps(g), _mm256_loadu_ps(bias)));
}

// The gate math of block b of batch row n, from the recurrent sums of its four gates.
KILN_AVX2 void finish_avx2(const step_args& a, std::size_t n, std::size_t b, __m256 ri, __m256 ro, __m256 rf,
                           __m256 rc) {
    const std::size_t H = a.H;
    const float* gp = a.g + n * a.gstride + b * G;
    const float* bp = a.bias + b * G;
    __m256 pi = preactivation(ri, gp, bp), po = preactivation(ro, gp + B, bp + B);
    __m256 pf = preactivation(rf, gp + 2 * B, bp + 2 * B);
    const __m256 pc = preactivation(rc, gp + 3 * B, bp + 3 * B);
    float* cp = a.c + (n * a.blocks + b) * B;
    const __m256 c_prev = _mm256_loadu_ps(cp);
    const float* pp = a.peep ? a.peep + b * 3 * B : nullptr;
    if (pp) {
        pi = _mm256_fmadd_ps(_mm256_loadu_ps(pp), c_prev, pi);
        pf = _mm256_fmadd_ps(_mm256_loadu_ps(pp + 2 * B), c_prev, pf);
    }
    const __m256 c = _mm256_fmadd_ps(sigmoid8(pf), c_prev, _mm256_mul_ps(sigmoid8(pi), tanh8(pc)));
    if (pp) po = _mm256_fmadd_ps(_mm256_loadu_ps(pp + B), c, po);
    _mm256_storeu_ps(cp, c);
    const __m256 hv = _mm256_mul_ps(sigmoid8(po), tanh8(c));
    float* yp = a.y + n * H + b * B;
    if (b * B + B <= H) {
        _mm256_storeu_ps(yp, hv);
    } else {
        // The last block's padding lanes would land on the next batch row (another
        // thread's units).
        alignas(32) float tmp[B];
        _mm256_store_ps(tmp, hv);
        std::memcpy(yp, tmp, (H - b * B) * sizeof(float));
    }
}

// Recurrent sums of two gates (vectors v and v+1 of the block's 32-float rows) for Rows
// batch rows: 2 * Rows accumulators, 2 weight loads and Rows broadcasts per k, so the FMAs,
// not the loads, set the pace, and R is read once per Rows rows (the block's 32 KB of R
// fills Zen 3's L1, so re-reading it per row pair came from L2). Six rows (12 chains, 15
// registers) hide the FMA latency that four (8 chains) only just cover.
template <std::size_t Rows>
KILN_AVX2 inline void rows_two_gates(const float* r, const float* h, std::size_t H, std::size_t v,
                                     __m256 out[][2]) {
    __m256 acc[Rows][2];
#pragma GCC unroll 6
    for (std::size_t q = 0; q < Rows; ++q) acc[q][0] = acc[q][1] = _mm256_setzero_ps();
    const float* rp = r + v * B;
    for (std::size_t k = 0; k < H; ++k, rp += G) {
        const __m256 w0 = _mm256_loadu_ps(rp), w1 = _mm256_loadu_ps(rp + B);
#pragma GCC unroll 6
        for (std::size_t q = 0; q < Rows; ++q) {
            const __m256 hk = _mm256_broadcast_ss(h + q * H + k);
            acc[q][0] = _mm256_fmadd_ps(w0, hk, acc[q][0]);
            acc[q][1] = _mm256_fmadd_ps(w1, hk, acc[q][1]);
        }
    }
#pragma GCC unroll 6
    for (std::size_t q = 0; q < Rows; ++q) out[q][0] = acc[q][0], out[q][1] = acc[q][1];
}

// finish_avx2 for Rows batch rows of block b, each step written for the rows side by side:
// one row's gate math is a chain of dependent exp/reciprocal steps longer than the core's
// reorder window, so rows done one after the other leave the FMA units idle.
template <std::size_t Rows>
KILN_AVX2 void finish_rows_avx2(const step_args& a, std::size_t n, std::size_t b, const __m256 io[][2],
                                const __m256 fc[][2]) {
    const std::size_t H = a.H;
    const float* bp = a.bias + b * G;
    const float* pp = a.peep ? a.peep + b * 3 * B : nullptr;
    __m256 pi[Rows], po[Rows], pf[Rows], pc[Rows], c_prev[Rows], si[Rows], sf[Rows], tc[Rows], c[Rows];
    for (std::size_t q = 0; q < Rows; ++q) {
        const float* gp = a.g + (n + q) * a.gstride + b * G;
        pi[q] = preactivation(io[q][0], gp, bp);
        po[q] = preactivation(io[q][1], gp + B, bp + B);
        pf[q] = preactivation(fc[q][0], gp + 2 * B, bp + 2 * B);
        pc[q] = preactivation(fc[q][1], gp + 3 * B, bp + 3 * B);
        c_prev[q] = _mm256_loadu_ps(a.c + ((n + q) * a.blocks + b) * B);
        if (pp) {
            pi[q] = _mm256_fmadd_ps(_mm256_loadu_ps(pp), c_prev[q], pi[q]);
            pf[q] = _mm256_fmadd_ps(_mm256_loadu_ps(pp + 2 * B), c_prev[q], pf[q]);
        }
    }
    for (std::size_t q = 0; q < Rows; ++q) si[q] = sigmoid8(pi[q]);
    for (std::size_t q = 0; q < Rows; ++q) sf[q] = sigmoid8(pf[q]);
    for (std::size_t q = 0; q < Rows; ++q) tc[q] = tanh8(pc[q]);
    for (std::size_t q = 0; q < Rows; ++q) {
        c[q] = _mm256_fmadd_ps(sf[q], c_prev[q], _mm256_mul_ps(si[q], tc[q]));
        if (pp) po[q] = _mm256_fmadd_ps(_mm256_loadu_ps(pp + B), c[q], po[q]);
        _mm256_storeu_ps(a.c + ((n + q) * a.blocks + b) * B, c[q]);
    }
    for (std::size_t q = 0; q < Rows; ++q) po[q] = sigmoid8(po[q]);
    for (std::size_t q = 0; q < Rows; ++q) c[q] = tanh8(c[q]);
    for (std::size_t q = 0; q < Rows; ++q) {
        const __m256 hv = _mm256_mul_ps(po[q], c[q]);
        float* yp = a.y + (n + q) * H + b * B;
        if (b * B + B <= H) {
            _mm256_storeu_ps(yp, hv);
        } else {
            alignas(32) float tmp[B];  // as in finish_avx2: the padding lanes are not ours
            _mm256_store_ps(tmp, hv);
            std::memcpy(yp, tmp, (H - b * B) * sizeof(float));
        }
    }
}

// Rows batch rows of block b: gates i, o, then f, c, then the gate math.
template <std::size_t Rows>
KILN_AVX2 void rows_avx2(const step_args& a, const float* r, std::size_t n, std::size_t b) {
    __m256 io[Rows][2], fc[Rows][2];
    rows_two_gates<Rows>(r, a.h_prev + n * a.H, a.H, 0, io);
    rows_two_gates<Rows>(r, a.h_prev + n * a.H, a.H, 2, fc);
    finish_rows_avx2<Rows>(a, n, b, io, fc);
}

KILN_AVX2 void step(const step_args& a, std::size_t b0, std::size_t b1) {
    const std::size_t H = a.H;
    const __m256 zero = _mm256_setzero_ps();
    for (std::size_t i = 0; i < b1 - b0; ++i) {
        const std::size_t b = block_at(a, b0, b1, i);
        const float* r = a.r + b * H * G;
        std::size_t n = 0;
        // Six batch rows at a time, then four (batch 8: six and a pair).
        for (; a.h_prev && n + 5 < a.N; n += 6) rows_avx2<6>(a, r, n, b);
        for (; a.h_prev && n + 3 < a.N; n += 4) rows_avx2<4>(a, r, n, b);
        // Two batch rows at a time read the block's R once for both: 8 independent FMA chains.
        for (; a.h_prev && n + 1 < a.N; n += 2) {
            __m256 i0 = zero, o0 = zero, f0 = zero, c0 = zero, i1 = zero, o1 = zero, f1 = zero, c1 = zero;
            const float* h = a.h_prev + n * H;
            const float* rp = r;
            for (std::size_t k = 0; k < H; ++k, rp += G) {
                const __m256 h0 = _mm256_broadcast_ss(h + k), h1 = _mm256_broadcast_ss(h + H + k);
                const __m256 wi = _mm256_loadu_ps(rp), wo = _mm256_loadu_ps(rp + B);
                const __m256 wf = _mm256_loadu_ps(rp + 2 * B), wc = _mm256_loadu_ps(rp + 3 * B);
                i0 = _mm256_fmadd_ps(wi, h0, i0);
                o0 = _mm256_fmadd_ps(wo, h0, o0);
                f0 = _mm256_fmadd_ps(wf, h0, f0);
                c0 = _mm256_fmadd_ps(wc, h0, c0);
                i1 = _mm256_fmadd_ps(wi, h1, i1);
                o1 = _mm256_fmadd_ps(wo, h1, o1);
                f1 = _mm256_fmadd_ps(wf, h1, f1);
                c1 = _mm256_fmadd_ps(wc, h1, c1);
            }
            finish_avx2(a, n, b, i0, o0, f0, c0);
            finish_avx2(a, n + 1, b, i1, o1, f1, c1);
        }
        for (; n < a.N; ++n) {
            __m256 i0 = zero, o0 = zero, f0 = zero, c0 = zero;
            if (a.h_prev) {
                // Two rows of R at a time into two sets of sums: 8 independent FMA chains.
                __m256 i1 = zero, o1 = zero, f1 = zero, c1 = zero;
                const float* h = a.h_prev + n * H;
                const float* rp = r;
                std::size_t k = 0;
                for (; k + 1 < H; k += 2, rp += 2 * G) {
                    const __m256 h0 = _mm256_broadcast_ss(h + k), h1 = _mm256_broadcast_ss(h + k + 1);
                    i0 = _mm256_fmadd_ps(_mm256_loadu_ps(rp), h0, i0);
                    o0 = _mm256_fmadd_ps(_mm256_loadu_ps(rp + B), h0, o0);
                    f0 = _mm256_fmadd_ps(_mm256_loadu_ps(rp + 2 * B), h0, f0);
                    c0 = _mm256_fmadd_ps(_mm256_loadu_ps(rp + 3 * B), h0, c0);
                    i1 = _mm256_fmadd_ps(_mm256_loadu_ps(rp + G), h1, i1);
                    o1 = _mm256_fmadd_ps(_mm256_loadu_ps(rp + G + B), h1, o1);
                    f1 = _mm256_fmadd_ps(_mm256_loadu_ps(rp + G + 2 * B), h1, f1);
                    c1 = _mm256_fmadd_ps(_mm256_loadu_ps(rp + G + 3 * B), h1, c1);
                }
                if (k < H) {
                    const __m256 h0 = _mm256_broadcast_ss(h + k);
                    i0 = _mm256_fmadd_ps(_mm256_loadu_ps(rp), h0, i0);
                    o0 = _mm256_fmadd_ps(_mm256_loadu_ps(rp + B), h0, o0);
                    f0 = _mm256_fmadd_ps(_mm256_loadu_ps(rp + 2 * B), h0, f0);
                    c0 = _mm256_fmadd_ps(_mm256_loadu_ps(rp + 3 * B), h0, c0);
                }
                i0 = _mm256_add_ps(i0, i1);
                o0 = _mm256_add_ps(o0, o1);
                f0 = _mm256_add_ps(f0, f1);
                c0 = _mm256_add_ps(c0, c1);
            }
            finish_avx2(a, n, b, i0, o0, f0, c0);
        }
    }
}

}  // namespace

const step_fn step_avx2 = step;

}  // namespace kiln::cpu::lstm_detail

#else

namespace kiln::cpu::lstm_detail {
const step_fn step_avx2 = nullptr;
}  // namespace kiln::cpu::lstm_detail

#endif
