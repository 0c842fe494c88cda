#include "targets/cpu/kernels/lstm/lstm_kernel.hpp"

#include "targets/cpu/cpu_features.hpp"

#include <kiln/errors.hpp>

#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KILN_LSTM_X86 1
#endif

namespace kiln::cpu {

namespace {

constexpr std::size_t B = lstm_block;
constexpr std::size_t G = lstm_gates * lstm_block;  // floats per packed row of a block

// The team's barrier between time steps: a counter and a generation, spinning first (a
// step takes microseconds, less than the OpenMP barrier's own overhead), then sleeping on
// the generation (futex), so that an oversubscribed machine loses no time slices to it.
struct step_barrier {
    alignas(64) std::atomic<std::size_t> arrived{0};
    alignas(64) std::atomic<std::uint32_t> generation{0};
    // Nanoseconds the team spent asleep in waits that outlasted the spin: a teammate
    // without a core. Time, not a count: a server's network threads take a core for tens
    // of microseconds a few times a run, which costs little, while a foreign process
    // holding a core costs half of every step.
    std::atomic<long long> slept_ns{0};
    std::size_t team = 1;

    void wait() {
        if (team == 1) return;
        const std::uint32_t gen = generation.load(std::memory_order_acquire);
        if (arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == team) {
            arrived.store(0, std::memory_order_relaxed);
            generation.store(gen + 1, std::memory_order_release);
            generation.notify_all();
            return;
        }
        // Tens of microseconds: a teammate that has its core arrives well within that (a
        // futex wake-up would cost more than a step); a longer wait means it lacks a core.
        for (unsigned spins = 0; spins < 4096; ++spins) {
            if (generation.load(std::memory_order_acquire) != gen) return;
#ifdef KILN_LSTM_X86
            _mm_pause();
#endif
        }
        const auto t0 = std::chrono::steady_clock::now();
        while (generation.load(std::memory_order_acquire) == gen) generation.wait(gen, std::memory_order_acquire);
        slept_ns.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count(),
                           std::memory_order_relaxed);
    }
};

// When another process holds one of the team's cores, every step's barrier waits for a
// time slice and a run takes ten times longer than on one thread. A run whose team slept
// through more than `solo_after_lost_fraction` of its time makes the next runs of the
// process use one thread; after them, a team is tried again. (Two threads lose to one
// when a fraction f of the run is lost with 1 / (1 - f) above the team's speed-up, about
// 1.9 for two threads: f near 0.47; 0.35 leaves a margin.)
std::atomic<int> solo_runs_left{0};
constexpr int solo_runs_after_contention = 64;
constexpr double solo_after_lost_fraction = 0.35;

// What one time step of one direction needs (batch rows n: h_prev + n*H, g + n*gstride,
// c + n*blocks*B, y + n*H).
struct step_args {
    std::size_t N, H, blocks, gstride;
    const float* r;     // this direction's packed R [blocks, H, 32]
    const float* bias;  // [C]
    const float* peep;  // [blocks, 3, 8] or null
    const float* h_prev;  // null: zeros (first step without initial_h)
    const float* g;       // input projection of time t
    float* c;             // cell state, updated in place
    float* y;             // h_t
    // Visit the blocks last to first: alternate steps do, so that each step starts on the
    // blocks the previous one touched last, still in L2 (a thread's share of R is about
    // as large as L2 itself, where a cyclic walk in one direction would always miss).
    bool backwards;
};

// The i-th block of [b0, b1) in the order of this step.
inline std::size_t block_at(const step_args& a, std::size_t b0, std::size_t b1, std::size_t i) {
    return a.backwards ? b1 - 1 - i : b0 + i;
}

using step_fn = void (*)(const step_args&, std::size_t, std::size_t);

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

void step_portable(const step_args& a, std::size_t b0, std::size_t b1) {
    for (std::size_t n = 0; n < a.N; ++n)
        for (std::size_t i = 0; i < b1 - b0; ++i) {
            const std::size_t b = block_at(a, b0, b1, i);
            float acc[G] = {};
            if (a.h_prev) {
                const float* h = a.h_prev + n * a.H;
                const float* rp = a.r + b * a.H * G;
                for (std::size_t k = 0; k < a.H; ++k)
                    for (std::size_t j = 0; j < G; ++j) acc[j] += rp[k * G + j] * h[k];
            }
            const float* gp = a.g + n * a.gstride + b * G;
            const float* bp = a.bias + b * G;
            float* cp = a.c + (n * a.blocks + b) * B;
            for (std::size_t j = 0; j < B && b * B + j < a.H; ++j) {
                float pi = acc[j] + gp[j] + bp[j], po = acc[B + j] + gp[B + j] + bp[B + j];
                float pf = acc[2 * B + j] + gp[2 * B + j] + bp[2 * B + j];
                const float pc = acc[3 * B + j] + gp[3 * B + j] + bp[3 * B + j];
                const float c_prev = cp[j];
                const float* pp = a.peep ? a.peep + b * 3 * B : nullptr;
                if (pp) {
                    pi += pp[j] * c_prev;
                    pf += pp[2 * B + j] * c_prev;
                }
                const float c = sigmoid(pf) * c_prev + sigmoid(pi) * std::tanh(pc);
                if (pp) po += pp[B + j] * c;
                cp[j] = c;
                a.y[n * a.H + b * B + j] = sigmoid(po) * std::tanh(c);
            }
        }
}

#ifdef KILN_LSTM_X86
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

KILN_AVX2 void step_avx2(const step_args& a, std::size_t b0, std::size_t b1) {
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

#endif

step_fn pick(lstm_isa isa) {
#ifdef KILN_LSTM_X86
    if (isa == lstm_isa::best && has_avx2_fma()) return step_avx2;
#endif
    (void)isa;
    return step_portable;
}

// gates[:, 0:cols] = x [T*N, I] x w[:, 0:cols] (both with row stride D*C).
// False when oneDNN fails (it cannot for valid sizes; lstm_run then throws).
bool project(const lstm_dims& d, const float* x, const float* w, std::size_t cols, float* gates) {
    const std::size_t M = d.T * d.N, DC = d.D * d.columns();
    if (cols == 0) return true;
    if (d.I == 0) {
        for (std::size_t m = 0; m < M; ++m) std::fill(gates + m * DC, gates + m * DC + cols, 0.0f);
        return true;
    }
    const auto st = dnnl_sgemm('N', 'N', static_cast<dnnl_dim_t>(M), static_cast<dnnl_dim_t>(cols),
                               static_cast<dnnl_dim_t>(d.I), 1.0f, x, static_cast<dnnl_dim_t>(d.I), w,
                               static_cast<dnnl_dim_t>(DC), 0.0f, gates, static_cast<dnnl_dim_t>(DC));
    return st == dnnl_success;
}

}  // namespace

const char* lstm_kernel_name(lstm_isa isa) {
    return isa == lstm_isa::best && has_avx2_fma() ? "avx2" : "portable";
}

lstm_packed_weights lstm_pack(const lstm_dims& d, const float* w, const float* r, const float* b, const float* p) {
    const std::size_t H = d.H, I = d.I, nb = d.blocks(), C = d.columns(), DC = d.D * C;
    lstm_packed_weights out;
    out.w.assign(I * DC, 0.0f);
    out.r.assign(d.D * nb * H * G, 0.0f);
    out.bias.assign(DC, 0.0f);
    if (p) out.peep.assign(d.D * nb * 3 * B, 0.0f);
    for (std::size_t dir = 0; dir < d.D; ++dir)
        for (std::size_t g = 0; g < lstm_gates; ++g)
            for (std::size_t u = 0; u < H; ++u) {
                const std::size_t row = (dir * lstm_gates + g) * H + u;  // ONNX row (gates i, o, f, c)
                const std::size_t blk = u / B, lane = u % B, col = blk * G + g * B + lane;
                for (std::size_t k = 0; k < I; ++k) out.w[k * DC + dir * C + col] = w[row * I + k];
                float* rd = out.r.data() + (dir * nb + blk) * H * G;
                for (std::size_t k = 0; k < H; ++k) rd[k * G + g * B + lane] = r[row * H + k];
                if (b) out.bias[dir * C + col] = b[dir * 2 * lstm_gates * H + g * H + u] +
                                                 b[dir * 2 * lstm_gates * H + (lstm_gates + g) * H + u];
                if (p && g < 3) out.peep[(dir * nb + blk) * 3 * B + g * B + lane] = p[(dir * 3 + g) * H + u];
            }
    return out;
}

void lstm_run(const lstm_dims& d, const float* x, const float* w, const float* r, const float* bias,
              const float* peep, const float* h0, const float* c0, float* workspace, float* y,
              std::size_t threads, lstm_isa isa, float* final_states) {
    const std::size_t T = d.T, N = d.N, H = d.H, nb = d.blocks(), C = d.columns(), DC = d.D * C;
    if (T == 0 || N == 0) return;
    float* gates = workspace;
    float* cell = workspace + T * N * DC;
    const step_fn step = pick(isa);
    if (solo_runs_left.load(std::memory_order_relaxed) > 0) {
        solo_runs_left.fetch_sub(1, std::memory_order_relaxed);
        threads = 1;
    }
    const int team = static_cast<int>(std::clamp<std::size_t>(threads, 1, nb));
    long long slept_ns = 0;
    const auto run_start = std::chrono::steady_clock::now();
    std::atomic<bool> failed{false};  // exceptions cannot leave an OpenMP region
    for (std::size_t dir = 0; dir < d.D; ++dir) {
        const bool rev = d.D == 2 ? dir == 1 : d.reverse;
        step_barrier barrier;
#pragma omp parallel num_threads(team)
        {
            const auto tid = static_cast<std::size_t>(omp_get_thread_num());
            const auto nth = static_cast<std::size_t>(omp_get_num_threads());
#pragma omp single
            barrier.team = nth;  // (single ends with a barrier: everyone sees it)
            const std::size_t b0 = tid * nb / nth, b1 = (tid + 1) * nb / nth;
            // The input projection of this thread's columns, for every time step: only this
            // thread reads them. oneDNN runs the product on the calling thread here.
            if (!project(d, x, w + dir * C + b0 * G, (b1 - b0) * G, gates + dir * C + b0 * G)) failed = true;
            for (std::size_t n = 0; n < N; ++n)
                for (std::size_t u = b0 * B; u < b1 * B; ++u)
                    cell[n * nb * B + u] = c0 && u < H ? c0[(dir * N + n) * H + u] : 0.0f;
            step_args a{N, H, nb, DC, r + dir * nb * H * G, bias + dir * C, peep ? peep + dir * nb * 3 * B : nullptr,
                        h0 ? h0 + dir * N * H : nullptr, nullptr, cell, nullptr, false};
            for (std::size_t s = 0; s < T; ++s) {
                const std::size_t t = rev ? T - 1 - s : s;
                if (s > 0) {
                    const std::size_t prev = rev ? t + 1 : t - 1;
                    a.h_prev = y + (prev * d.D + dir) * N * H;
                }
                a.g = gates + t * N * DC + dir * C;
                a.y = y + (t * d.D + dir) * N * H;
                a.backwards = s % 2 == 1;
                step(a, b0, b1);
                // Everyone's h_t is the next step's input.
                barrier.wait();
            }
            if (final_states) {
                // This thread's units: h from the last step's row of Y, c from the cell state.
                const std::size_t last = rev ? 0 : T - 1;
                float* yh = final_states + dir * N * H;
                float* yc = final_states + (d.D + dir) * N * H;
                for (std::size_t n = 0; n < N; ++n)
                    for (std::size_t u = b0 * B; u < std::min(b1 * B, H); ++u) {
                        yh[n * H + u] = y[((last * d.D + dir) * N + n) * H + u];
                        yc[n * H + u] = cell[n * nb * B + u];
                    }
            }
        }
        slept_ns += barrier.slept_ns.load();
        if (failed) throw_error(error_code::runtime, "cpu::lstm_packed: oneDNN's sgemm failed on the input projection");
    }
    const auto run_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - run_start).count();
    if (team > 1 && static_cast<double>(slept_ns) > solo_after_lost_fraction * static_cast<double>(run_ns) * (team - 1))
        solo_runs_left.store(solo_runs_after_contention, std::memory_order_relaxed);
}

}  // namespace kiln::cpu
