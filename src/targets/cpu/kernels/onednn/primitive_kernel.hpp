// A oneDNN primitive, created once (at compile or load time), and how each of its
// arguments is found at run time: an input of the instruction (weights, activations,
// the planned output and scratchpad buffers) or memory the kernel owns (weights relaid
// out at load for another CPU). Running it allocates no buffers.
#pragma once
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"

#include <kiln/argument.hpp>
#include <kiln/context.hpp>

#include <dnnl.hpp>

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::cpu {

class cpu_context;

// The cpu_context of a compiled cpu program (a kiln runtime error for any other).
cpu_context& as_cpu_context(context& ctx, const std::string& op_name);

class primitive_kernel {
public:
    primitive_kernel(dnnl::primitive p, std::string impl) : prim_(std::move(p)), impl_(std::move(impl)) {}

    // Argument `arg` is input `input` of the instruction, seen through `md`.
    void bind(int arg, std::size_t input, const dnnl::memory::desc& md);
    // Argument `arg` is input `input` (seen through `from`) converted at each run into memory
    // of layout `to` (another element type: a float32 activation into bf16 for a bf16
    // convolution). The converted copy is the kernel's, one per run in flight.
    // `attr` may scale and shift on the way (a u8 activation into real values: the int8
    // kernels' float fallback, op_quant.cpp).
    void bind_converted(int arg, std::size_t input, const dnnl::memory::desc& from, const dnnl::memory::desc& to,
                        const dnnl::engine& eng, const dnnl::primitive_attr& attr = {});
    // The primitive writes its result into memory of its own, converted by a reorder with
    // `attr` into the output buffer when bind_output names it (a float result requantized
    // into u8). Call before bind_output.
    // With `accumulate` (a sum post-op), the buffer's values are converted into the
    // primitive's memory first (with `read_back_attr`: an 8-bit residual made real), so
    // that it adds to them.
    void convert_output(const dnnl::primitive_attr& attr, bool accumulate = false,
                        const dnnl::primitive_attr& read_back_attr = {}) {
        output_attr_ = attr, convert_output_ = true, accumulate_ = accumulate, read_back_attr_ = read_back_attr;
    }
    bool converts_output() const { return convert_output_; }
    // The result: output buffer `input` in layout `out`, written by the primitive as `dst`
    // (or through the conversion convert_output asked for).
    void bind_output(std::size_t input, const dnnl::memory::desc& dst, const dnnl::memory::desc& out,
                     const dnnl::engine& eng);
    // Argument `arg` is memory the kernel keeps (constant data).
    void bind_owned(int arg, dnnl::memory mem);
    // The primitive's scratchpad: input `input` when it is large enough (the planned
    // buffer), otherwise memory of its own; then runs are serialized, since concurrent
    // evals would share it. That only happens when a program compiled on one CPU is
    // loaded on another whose kernels need more scratch memory.
    void set_scratchpad(const dnnl::memory::desc& md, std::ptrdiff_t input, std::size_t input_bytes,
                        const dnnl::engine& eng);

    void run(context& ctx, const std::vector<argument>& args, const std::string& op_name) const;
    // Runs on the calling thread alone (small work; see single_thread_elements).
    void set_alone(bool alone) { alone_ = alone; }
    const std::string& impl() const { return impl_; }

private:
    struct input_binding {
        int arg;
        std::size_t input;
        dnnl::memory::desc md;
    };
    dnnl::primitive prim_;
    std::string impl_;
    std::vector<input_binding> inputs_;
    struct converted_binding {
        int arg;
        std::size_t input;
        dnnl::memory::desc from, to;
        dnnl::reorder convert;
    };
    std::vector<converted_binding> converted_;
    // The output conversion (convert_output): the primitive's result memory and the reorder.
    bool convert_output_ = false;
    bool accumulate_ = false;
    dnnl::primitive_attr output_attr_;
    dnnl::primitive_attr read_back_attr_;
    struct output_conversion {
        std::size_t input;
        dnnl::memory::desc from, to;
        dnnl::reorder convert;
        std::optional<dnnl::reorder> read_back;  // accumulate: buffer -> primitive's memory
    };
    std::optional<output_conversion> output_;
    std::vector<std::pair<int, dnnl::memory>> owned_;
    std::unique_ptr<std::mutex> serialize_;
    bool alone_ = false;
    // The argument maps of earlier runs, with their dnnl::memory objects: a run takes one
    // and re-points its memories at this run's buffers (set_data_handle: ~0.05 us for three)
    // instead of creating them (~1.5 us for three, per primitive and run; EfficientNet-B0
    // runs ~130 primitives). One map per run in flight, so concurrent evals stay apart.
    using arg_map = std::unordered_map<int, dnnl::memory>;
    struct run_memories {
        arg_map args;
        std::vector<dnnl::memory> sources;  // the inputs of converted_, seen as `from`
        dnnl::memory result;                // the output buffer, seen as output_->to
    };
    struct arg_cache {
        std::mutex mutex;
        std::vector<std::unique_ptr<run_memories>> free;
    };
    std::unique_ptr<arg_cache> cache_ = std::make_unique<arg_cache>();
};

// The reorder of `src` (in layout `from`) into a new memory in layout `to`, run once at
// compile or load time.
dnnl::memory reorder_constant(const dnnl::engine& eng, const dnnl::memory::desc& from, const void* src,
                              const dnnl::memory::desc& to);

// Binds constant weights (input `input`), stored in the layout `weights` records: as they
// are when the primitive wants that layout, else relaid out once into kernel-owned
// memory (a program compiled on one CPU, loaded on another).
void bind_constant_weights(primitive_kernel& k, const md_record& weights, const dnnl::memory::desc& wanted,
                           std::size_t input, const std::vector<argument>& constants, const dnnl::engine& eng,
                           const std::string& op_name, int arg = DNNL_ARG_WEIGHTS);

}  // namespace kiln::cpu
