// What handing work to a second thread costs on this machine: an empty OpenMP parallel
// region (libgomp's fork and join barriers) against one flag to a spinning worker and one
// flag back (what cpu::team does), and reading 73 KB the other core wrote against reading
// it where it was written. Built and run by hand (bench/README.md):
//   g++ -O3 -march=native -fopenmp bench/fork_join/fork_join.cpp -o /tmp/fork_join && OMP_WAIT_POLICY=active /tmp/fork_join
#include <omp.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#define PAUSE() _mm_pause()
#else
#define PAUSE() ((void)0)
#endif

namespace {

using clock_type = std::chrono::steady_clock;

double us_since(clock_type::time_point t0, int reps) {
    return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count() / reps;
}

double empty_region(int reps) {
    const auto t0 = clock_type::now();
    for (int r = 0; r < reps; ++r) {
#pragma omp parallel num_threads(2)
        { asm volatile(""); }
    }
    return us_since(t0, reps);
}

// Inside one OpenMP region (as cpu::team): thread 1 spins on `go`, answers on `done`.
double flag_round_trip(int reps) {
    alignas(64) static std::atomic<unsigned> go{0};
    alignas(64) static std::atomic<unsigned> done{0};
    double t = 0;
#pragma omp parallel num_threads(2)
    {
        if (omp_get_thread_num() == 1) {
            unsigned seen = go.load();
            for (int r = 0; r < reps; ++r) {
                unsigned g;
                while ((g = go.load(std::memory_order_acquire)) == seen) PAUSE();
                seen = g;
                done.store(g, std::memory_order_release);
            }
        } else {
            const auto t0 = clock_type::now();
            for (int r = 0; r < reps; ++r) {
                const unsigned g = go.load(std::memory_order_relaxed) + 1;
                go.store(g, std::memory_order_release);
                while (done.load(std::memory_order_acquire) != g) PAUSE();
            }
            t = us_since(t0, reps);
        }
    }
    return t;
}

// Thread 0 writes the buffer; then thread 0 (local) or thread 1 (remote) sums it.
void local_and_remote_reads(std::size_t bytes, int reps, double& local, double& remote) {
    std::vector<float> buf(bytes / sizeof(float), 1.0f);
    local = remote = 0;
    volatile float sink = 0;
#pragma omp parallel num_threads(2)
    {
        const int id = omp_get_thread_num();
        for (int r = 0; r < reps; ++r) {
            if (id == 0)
                for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>(r + i);
#pragma omp barrier
            if (id == (r & 1)) {
                const auto t0 = clock_type::now();
                float acc[16] = {};  // independent sums: the read streams, not one add chain
                for (std::size_t i = 0; i + 16 <= buf.size(); i += 16)
                    for (int j = 0; j < 16; ++j) acc[j] += buf[i + j];
                float s = 0;
                for (float a : acc) s += a;
                sink = sink + s;
                (id == 0 ? local : remote) += us_since(t0, 1);
            }
#pragma omp barrier
        }
    }
    local /= reps / 2;
    remote /= reps / 2;
}

}  // namespace

int main() {
    for (int round = 0; round < 3; ++round) {
        double local = 0, remote = 0;
        local_and_remote_reads(73 * 1024, 2000, local, remote);
        std::printf("empty OpenMP region %.2f us, flag to a spinning worker and back %.2f us, "
                    "73 KB read where written %.2f us, on the other core %.2f us\n",
                    empty_region(20000), flag_round_trip(200000), local, remote);
    }
}
