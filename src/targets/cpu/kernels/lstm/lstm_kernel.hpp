// A hand-written ONNX LSTM for the cpu target (default activations Sigmoid/Tanh/Tanh, no
// clip, input_forget 0, time-major layout; peepholes and initial states optional),
// faster than oneDNN's RNN primitive at small batch.
//
// Per direction it runs one matrix product for the input projection of every time step
// (X [T*N, I] x W^T, oneDNN's sgemm, all directions at once), then, per time step, the
// recurrent product h_{t-1} x R^T fused with the gate math. At batch 1 that product is a
// matrix-vector product over a 4*H*H weight that must stay in cache: the hidden units are
// cut into blocks of 8 (`lstm_block`), each thread always takes the same blocks (so its
// share of R stays in its own L2), and R is packed block by block, row k of a block
// holding its gates i, o, f, c side by side (32 floats), so a thread reads one contiguous
// stream and the gate math of a hidden unit needs nothing from the other threads. One
// barrier per time step; Y doubles as the hidden state (h_{t-1} is Y's previous row).
// Batched (a server joining requests), rows go in sixes, fours, pairs, then one: each R
// vector loaded feeds up to six rows, and those rows' gate math is interleaved (one row's
// exp/reciprocal chain is longer than the core's reorder window). Measured on Zen 3 (one
// core's FMA peak 50 GMAC/s), the recurrent part of a 256-unit layer over 100 steps, 1
// thread: batch 8 6.9 -> 5.9 ms, batch 6 5.3 -> 4.2 ms (rows in pairs before); its FMA
// loop then runs at about 90% of the peak and the gate math takes a fifth of the time.
//
// Packed layouts (C = blocks * 32 columns per direction, the last block zero-padded):
//   w     [I, D * C]        column d*C + b*32 + g*8 + j: gate g of unit b*8+j, direction d
//   r     [D, blocks, H, 32]
//   bias  [D, C]            ONNX's Wb + Rb
//   peep  [D, blocks, 3, 8] ONNX's P (i, o, f), when present
// The vector kernel (AVX2 + FMA) is chosen at run time; other CPUs run a portable one.
#pragma once
#include <cstddef>
#include <vector>

namespace kiln::cpu {

constexpr std::size_t lstm_block = 8;
constexpr std::size_t lstm_gates = 4;

struct lstm_dims {
    std::size_t T = 0, N = 0, I = 0, H = 0, D = 1;
    bool reverse = false;  // with D == 1: the one direction runs backwards
    std::size_t blocks() const { return (H + lstm_block - 1) / lstm_block; }
    std::size_t columns() const { return blocks() * lstm_block * lstm_gates; }  // C
    // Floats of scratch memory lstm_run needs.
    std::size_t workspace() const { return T * N * D * columns() + N * blocks() * lstm_block; }
};

struct lstm_packed_weights {
    std::vector<float> w, r, bias, peep;
};

// Packs ONNX's W [D, 4H, I], R [D, 4H, H], B [D, 8H] (null: zeros) and P [D, 3H] (null:
// none) into the layouts above.
lstm_packed_weights lstm_pack(const lstm_dims& d, const float* w, const float* r, const float* b, const float* p);

enum class lstm_isa { best, portable };

// Y [T, D, N, H] from x [T, N, I]; h0, c0 [D, N, H] or null (zeros); peep null when
// absent; workspace holds d.workspace() floats. `final_states`, when not null, receives
// ONNX's Y_h then Y_c ([2, D, N, H]: each direction's last hidden and cell state).
// Runs on up to `threads` OpenMP threads.
void lstm_run(const lstm_dims& d, const float* x, const float* w, const float* r, const float* bias,
              const float* peep, const float* h0, const float* c0, float* workspace, float* y,
              std::size_t threads, lstm_isa isa = lstm_isa::best, float* final_states = nullptr);

// The kernel lstm_run would use: "avx2" or "portable".
const char* lstm_kernel_name(lstm_isa isa = lstm_isa::best);

}  // namespace kiln::cpu
