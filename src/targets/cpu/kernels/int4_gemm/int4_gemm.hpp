// cpu::int4_gemm: op::matmul_int4 (weight-only int4, src/ops/nn_matmul_int4.hpp) on Kiln's
// own kernels. The weights are repacked once, at compile time, into 16-column panels of
// nibbles with the scales beside them (int4_gemm_args.hpp): 0.5 byte per weight plus 8
// bytes per block and column, never widened in memory. The kernels unpack them in
// registers where they multiply (AVX-512, AVX2+FMA or the baseline, chosen by cpuid when
// the program is loaded, so a saved program runs on any x86-64).
//
// A batch-1 product streams its weights once: int4 reads an eighth of float32's bytes (plus
// the scales), which makes it 2.8-3.2x faster than the float32 GEMV when the weights come
// from memory and 1.0-1.8x when float32's stay in the caches (Zen 3; docs/quantization.md).
// Up to 7 rows share each unpacked row of weights in R-row register tiles (4 with AVX2, 8
// with AVX-512); from 8 rows (int4_wide_rows) each k block is unpacked once into a transient
// float32 tile that the packed GEMM's kernels multiply all rows by.
//
// Inputs: (a [..., K] float32 row-major, packed b, scales+offsets, output buffer).
// KILN_CPU_PACKED_GEMM_ISA=avx2 / generic lowers the kernels chosen, as for packed_gemm.
#pragma once
#include "targets/cpu/cpu_options.hpp"
#include "targets/cpu/kernels/int4_gemm/int4_gemm_args.hpp"
#include "targets/cpu/kernels/packed_gemm/packed_gemm_args.hpp"
#include "targets/cpu/lowering_util.hpp"

#include <kiln/operation.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::cpu {

struct int4_gemm {
    std::int64_t m = 0, n = 0, k = 0, block = 32;
    std::vector<std::int64_t> out_lens;

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.m, "m");
        f(self.n, "n");
        f(self.k, "k");
        f(self.block, "block");
        f(self.out_lens, "out_lens");
    }
    std::string name() const { return "cpu::int4_gemm"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void finalize(context& ctx, const shape& out, const std::vector<shape>& inputs);
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>& inputs) const {
        return static_cast<std::ptrdiff_t>(inputs.size()) - 1;
    }
    std::string isa() const;  // "avx512", "avx2", "generic", or "" before finalize

    struct plan;
    std::shared_ptr<const plan> ready;
};

// The kernels for this CPU (cpuid; `cap` lowers the choice): the register kernels, the
// unpacking into a float32 tile and the packed GEMM that multiplies by it.
struct int4_kernels {
    int4g::part_fn part = nullptr;
    int4g::unpack_fn unpack = nullptr;
    pgemm::part_fn gemm = nullptr;
    std::string isa;
};
int4_kernels int4_kernels_for(isa_cap cap);
// From this many rows (all batches) a product unpacks each k block of a panel once into a
// float32 tile and runs the packed GEMM's 6 x 16 tiles over it (`wide`); fewer rows run
// the register kernels. Zen 3, 2 threads (cpu_int4_gemm_bench_test.cpp, medians): the
// register kernels win up to 4 rows (4x1024x1024 0.097 against 0.120 ms, 4x4096x4096 1.57
// against 1.96), the two are even at 6-8, the tiles win from 12 (0.22 against 0.29) and 16
// (4.97 against 6.38 at 4096).
constexpr std::size_t int4_wide_rows = 8;
// All of C on the current OpenMP team.
void run_int4_gemm(const int4g::args& g, const int4_kernels& k, bool wide);

// matmul_int4's operands (b packed as ONNX int4, scales [blocks][n], zero points or null)
// in the kernels' layout: the panel bytes and the per-block scales and offsets.
struct int4_packed {
    std::vector<std::uint8_t> b;
    std::vector<float> so;
};
int4_packed pack_int4_weights(const std::uint8_t* b, const float* scales, const std::uint8_t* zero_points,
                              std::size_t k, std::size_t n, std::size_t block);

// Replaces a matmul_int4 `ins` by a cpu::int4_gemm when its operands suit (static, a
// row-major float32); false, changing nothing, otherwise (the ref kernel then runs it).
bool lower_int4_gemm(lower_env& env, instruction_ref ins);

}  // namespace kiln::cpu
