#include "targets/cpu/kernels/lstm/lstm_kernel.hpp"

#include "targets/cpu/cpu_features.hpp"
#include "targets/cpu/kernels/lstm/lstm_step.hpp"

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

using namespace lstm_detail;

// The team's barrier between time steps: a counter and a generation, spinning first (a
// step takes microseconds, less than the OpenMP barrier's own overhead), then sleeping on
// the generation (futex), so that an oversubscribed machine loses no time slices to it.
struct step_barrier {
    alignas(64) std::atomic<std::size_t> arrived{0};
    alignas(64) std::atomic<std::uint32_t> generation{0};
    // Nanoseconds the team spent in waits that outlasted the spin (spin included): a
    // teammate without a core. Time, not a count: a server's network threads take a core
    // for tens of microseconds a few times a run, which costs little, while a foreign
    // process holding a core costs half of every step.
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
        const auto t0 = std::chrono::steady_clock::now();
        // Tens of microseconds: a teammate that has its core arrives well within that (a
        // futex wake-up would cost more than a step); a longer wait means it lacks a core.
        for (unsigned spins = 0; spins < 4096; ++spins) {
            if (generation.load(std::memory_order_acquire) != gen) return;
#ifdef KILN_LSTM_X86
            _mm_pause();
#endif
        }
        while (generation.load(std::memory_order_acquire) == gen) generation.wait(gen, std::memory_order_acquire);
        slept_ns.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count(),
                           std::memory_order_relaxed);
    }
};

// When another process holds one of the team's cores, every step's barrier waits for a
// time slice and a run takes ten times longer than on one thread. Two runs in a row whose
// team lost more than `solo_after_lost_fraction` of their time in waits that outlasted the
// spin make the next runs of the process use one thread; after them, a team is tried again.
// (Two threads lose to one when a fraction f of the run is lost with 1 / (1 - f) above the
// team's speed-up, about 1.7-1.9 for two threads: f near 0.45; 0.35 leaves a margin. One
// run is not enough: the host taking a vCPU for half a millisecond once stalls one run, and
// one thread would cost 1.7x for the next 64.)
std::atomic<int> solo_runs_left{0};
std::atomic<int> contended_in_a_row{0};
constexpr int solo_runs_after_contention = 64;
constexpr double solo_after_lost_fraction = 0.35;

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

step_fn pick(lstm_isa isa) {
    if (isa == lstm_isa::best && step_avx2 && has_avx2_fma()) return step_avx2;
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
    return pick(isa) == step_avx2 ? "avx2" : "portable";
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
    if (team > 1) {
        const bool contended = static_cast<double>(slept_ns) > solo_after_lost_fraction * static_cast<double>(run_ns) * (team - 1);
        if (!contended) {
            contended_in_a_row.store(0, std::memory_order_relaxed);
        } else if (contended_in_a_row.fetch_add(1, std::memory_order_relaxed) + 1 >= 2) {
            contended_in_a_row.store(0, std::memory_order_relaxed);
            solo_runs_left.store(solo_runs_after_contention, std::memory_order_relaxed);
        }
    }
}

}  // namespace kiln::cpu
