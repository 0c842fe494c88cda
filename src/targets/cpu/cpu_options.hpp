// Every behaviour switch of the cpu target in one struct, built in one place
// (read_cpu_options) from compile_options and the environment: the only code of the cpu
// target that reads the environment. Most switches exist for A/B measurements and for
// testing one kernel family on its own; docs/options.md lists them for users (a unit
// test checks that every field below is listed there, and that nothing else in src/
// reads the environment).
//
// Each cpu_context holds the options read when it was made (at compile or load), and the
// lowering and the kernels read them from there: a program keeps the switches it was
// compiled with, whatever the environment does afterwards. What is decided once per
// process (cpuid's answers, the process-wide core budget) reads process_cpu_options().
//
// An environment variable set to a value the switch does not know leaves the default
// (documented in docs/options.md), as before the options had a struct.
#pragma once
#include <kiln/compile_options.hpp>

#include <cstddef>
#include <string>

namespace kiln::cpu {

// A cap on the instruction set a family of Kiln's own kernels uses (testing the older
// kernels on a newer machine): none = the best cpuid allows.
enum class isa_cap { none, avx2, generic };

// KILN_CPU_PACKED_GEMM: which matrix products run on Kiln's packed GEMM.
enum class packed_gemm_choice { automatic, off, all };
// KILN_CPU_CONV_GEMM: which convolutions run as packed GEMMs (conv_gemm.hpp).
enum class conv_gemm_choice { automatic, off, pointwise, all, tall };
// KILN_CPU_WINOGRAD: which 3x3 convolutions run on Kiln's Winograd kernels (winograd.hpp).
enum class winograd_choice { automatic, off, f2, f4, all };
// KILN_CPU_MAX_POOL: which max poolings run on Kiln's kernel (max_pool_blocked.hpp).
enum class max_pool_choice { automatic, dnnl, all };
// KILN_CPU_LSTM: which kernel runs an LSTM (op_rnn.hpp).
enum class lstm_choice { own, portable, dnnl };
// KILN_CPU_TEAM: which programs' evals run on a thread team (team_rule.hpp).
enum class team_choice { automatic, off, on };
// KILN_CPU_TEAM_PARTS: where a team's kernel parts run (team_parts_trial.hpp).
enum class team_parts_choice { measured, team, caller, worker };
// KILN_CPU_INT8_KERNELS: what runs a quantized model's integer convolutions and products.
enum class int8_kernel_choice { automatic, onednn_everywhere, float_ops, onednn_vnni, own_vnni };

struct cpu_options {
    // Worker threads: compile_options::threads, else KILN_NUM_THREADS (a positive integer;
    // anything else is ignored), else the cores this process may run on.
    std::size_t threads = 1;
    // compile_options::fast_math (default on): faster approximations in the kernels.
    bool fast_math = true;
    // compile_options::exhaustive_tune (default off): each convolution and matrix product
    // times every kernel that can take it and keeps the fastest (tuning.hpp).
    bool exhaustive_tune = false;
    // KILN_TUNING_CACHE (default "": none): a file of tuned choices (by CPU model, ISA and
    // problem) read before tuning and written after, so a second compile does not measure.
    std::string tuning_cache;

    // KILN_CPU_SPLIT_BATCH (default on; 0 = off): a batched CNN's first layers image by
    // image (passes/split_batch.hpp).
    bool split_batch = true;  // read_cpu_options: on with AVX-512 unless KILN_CPU_SPLIT_BATCH says
    // KILN_CPU_DNNL (default on; 0 = off): the oneDNN lowering (cpu::lowering). Off leaves
    // everything to the generated and reference kernels.
    bool dnnl = true;
    // KILN_CPU_FUSION (default on; 0 = off): elementwise chains grouped into fused kernels
    // (single ops still get kernels).
    bool fusion = true;
    // KILN_CPU_DW_FUSION (default on; 0 = off): a depthwise 3x3 convolution fused into the
    // 1x1 convolution before it (dw_fusion.hpp).
    bool dw_fusion = true;
    // KILN_CPU_BF16 (default on; 0 = off): a bfloat16 program's convolutions compute in bf16
    // on oneDNN, and its constant-weight products on packed_gemm's bf16 kernels, where the
    // CPU has native bf16 (widen_reduced.hpp); off, in float32.
    bool bf16 = true;
    // KILN_CPU_BF16_ACTIVATIONS (default on; 0 = off): with `bf16`, activations that run from
    // one bf16 convolution to the next stay bf16 (bf16_activations.hpp), and attention's
    // products take bf16 operands (attention.hpp); off, float32.
    bool bf16_activations = true;
    // KILN_CPU_INT8_KERNELS: automatic (default) = oneDNN's int8 kernels where it has a VNNI
    // int8 dot product, else Kiln's own exact ones where they apply (int8_gemm.hpp) and float
    // ops for the rest (dequantize_without_vnni.hpp); all = oneDNN's cpu::quant_conv /
    // quant_matmul also without VNNI, computing in float inside, as a program compiled on a
    // VNNI CPU does when it is loaded there (op_quant.hpp); float = float ops wherever there
    // is no VNNI, as before the own kernels. With AVX-512 VNNI: onednn = oneDNN's int8 kernels
    // for every product (before the VNNI GEMM), own = the VNNI GEMM (int8_gemm_vnni.cpp)
    // for every product it can take, not only where the selection rule says it is faster.
    int8_kernel_choice int8_kernels = int8_kernel_choice::automatic;
    // KILN_CPU_DW_BLOCKED (default on; 0 = off): with AVX-512, large 1x1 + depthwise pairs
    // planned in 16-channel blocks so that oneDNN can fuse them (lowering.cpp).
    bool dw_blocked = true;
    // KILN_CPU_SUM_POST_OP (default on; 0 = off): a residual add as oneDNN's sum post-op
    // (sum_post_op.hpp).
    bool sum_post_op = true;
    // KILN_CPU_ATTENTION (default on; 0 = off): softmax(QK^T)V on Kiln's attention kernel
    // (attention.hpp; needs AVX2).
    bool attention = true;
    // KILN_CPU_CHANNEL_MUL (default on; dnnl = off): per-channel scaling on Kiln's kernel
    // rather than oneDNN's binary (channel_mul.hpp).
    bool channel_mul = true;
    // KILN_CPU_CHANNEL_AFFINE (default on; dnnl = off): concat -> batch norm -> relu as one
    // pass on Kiln's kernel rather than oneDNN's three (channel_affine.hpp).
    bool channel_affine = true;
    // KILN_CPU_CHANNEL_GATHER=0: a gather along the channels of a channels-last or blocked
    // activation (a channel shuffle) goes to plain layouts and back (channel_gather.hpp).
    bool channel_gather = true;
    // KILN_CPU_GLOBAL_POOL (default on; dnnl = off): global average pooling on Kiln's kernel
    // (global_avg_pool.hpp).
    bool global_pool = true;
    // KILN_CPU_INPUT_REORDER (default on; dnnl = off): NCHW inputs reordered to
    // channels-last by Kiln's kernel (nchw_to_pixel_channels.hpp); one quantized for int8
    // convolutions quantized straight into channels-last (quant_loops.hpp).
    bool input_reorder = true;
    // KILN_CPU_SILU (default on, with fast_math; dnnl = off): x * sigmoid(x) on Kiln's
    // kernel or as its own post-op (silu.hpp).
    bool silu = true;
    // KILN_CPU_SILU_MEANS (default on; 0 = off): a global average pooling of a cpu::silu's
    // result is summed by the SiLU's own pass (squeeze-and-excitation; silu.hpp).
    bool silu_means = true;
    // KILN_CPU_TEAM: automatic (default) = a small program's evals run on a thread team held
    // for the whole eval (team_rule.hpp: Kiln's own kernels get their parts by a flag instead
    // of an OpenMP region each, the others run on the calling thread alone); 0 = never;
    // 1 = every program's (for tests and measurements).
    team_choice team = team_choice::automatic;
    // KILN_CPU_TEAM_PARTS: measured (default) = the evals try, in turns, their kernel parts
    // spread over the team, all on the calling thread and all on a worker, and (a program the
    // rule leaves off the team) no team, and keep the fastest (team_parts_trial.hpp); team,
    // caller or worker = always that way on the team, and no trial off it.
    team_parts_choice team_parts = team_parts_choice::measured;
    // KILN_CPU_MAX_POOL (default automatic: blocked layouts only; dnnl = none; all = also
    // channels-last).
    max_pool_choice max_pool = max_pool_choice::automatic;
    // KILN_CPU_PACKED_GEMM (default automatic: products with enough rows, AVX2; 0 = none;
    // all = every product that fits).
    packed_gemm_choice packed_gemm = packed_gemm_choice::automatic;
    // KILN_CPU_PACKED_GEMM_ISA (default none; avx2, generic): caps the packed GEMM kernels,
    // which conv_gemm and attention share, chosen when a program is loaded.
    isa_cap packed_gemm_isa = isa_cap::none;
    // KILN_CPU_PACKED_GEMM_COPY_A (default on; 0 = off): A copied into padded rows where
    // its row stride would make rows share cache sets.
    bool packed_gemm_copy_a = true;
    // KILN_CPU_CONV_GEMM (default automatic; 0 = none; 1x1 = also few-pixel 1x1 layers;
    // all = also the few-pixel ones with AVX-512; tall = every 1x1 over many pixels with
    // AVX-512, whatever its size and depth).
    conv_gemm_choice conv_gemm = conv_gemm_choice::automatic;
    // KILN_CPU_CONV_GEMM_STRIDED (default on; 0 = off): with AVX-512, strided 1x1 layers too.
    bool conv_gemm_strided = true;
    // KILN_CPU_CONV_GEMM_TINY (default on; 0 = off): with AVX-512, layers over very few
    // pixels too.
    bool conv_gemm_tiny = true;
    // KILN_CPU_WINOGRAD (default automatic; 0 = none; 2 = F(2x2, 3x3); 4 = F(4x4, 3x3)
    // only; all = every 3x3 convolution that fits).
    winograd_choice winograd = winograd_choice::automatic;
    // KILN_CPU_WINOGRAD_ISA (default none; avx2, generic): caps the Winograd kernels,
    // chosen when a program is loaded.
    isa_cap winograd_isa = isa_cap::none;
    // KILN_CPU_LSTM (default own: the vector kernel; portable = the portable kernel;
    // dnnl = oneDNN's LSTM).
    lstm_choice lstm = lstm_choice::own;
    // KILN_CPU_MAX_ISA (default none; avx2, generic): Kiln's kernels behave as on a CPU
    // without AVX-512 (or AVX2). Read once per process: has_avx512 and has_avx2_fma
    // (cpu_features.hpp) answer from process_cpu_options().
    isa_cap max_isa = isa_cap::none;

    // KILN_CPU_ISA (default "": this CPU's level): the x86-64 level the fused kernels are
    // generated for (codegen/isa.hpp); a level Kiln does not know is ignored.
    std::string codegen_isa;
    // KILN_CXX (default "": g++, else c++, on the search path): the compiler of the fused
    // kernels, a path or a name.
    std::string cxx;
    // PATH (default /usr/bin:/bin when unset): where a compiler name is looked for.
    std::string search_path = "/usr/bin:/bin";
    // KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln (else "": none):
    // the cache of compiled fused kernels.
    std::string cache_dir;
    // KILN_CODEGEN_VERBOSE (default off; any value but "" and 0 = on): the fused kernels'
    // compile times and the compiler's troubles on stderr.
    bool codegen_verbose = false;
};

// The options for `opts` and the environment as it is now.
cpu_options read_cpu_options(const compile_options& opts);

// Read once, on first use, with default compile_options: for what the process decides
// once (KILN_CPU_MAX_ISA behind cpuid's cached answers; KILN_NUM_THREADS as the size of
// the process-wide core budget). Everything else reads its context's options.
const cpu_options& process_cpu_options();

}  // namespace kiln::cpu
