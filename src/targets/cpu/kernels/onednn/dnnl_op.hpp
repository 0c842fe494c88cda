// What every lowered oneDNN op shares. Inputs are laid out as
//
//     (operands..., [scratchpad buffer], output buffer)
//
// in destination-passing style: the output buffer (last input) comes from an
// `allocate` that memory planning turns into a view of the arena, and so does the
// scratchpad (oneDNN's user-managed scratchpad), so eval allocates nothing.
//
// A Derived op provides
//     std::string name() const;
//     shape logical_shape(const std::vector<shape>& operands) const;   validate, result lens + type
//     dnnl::primitive_desc_base make_pd(const dnnl::engine&, const std::vector<shape>& operands,
//                                       const shape& dst) const;
//     void bind_operands(primitive_kernel&, const dnnl::primitive_desc_base&,
//                        const std::vector<shape>& operands, const std::vector<argument>& constants,
//                        const dnnl::engine&) const;
// and reflects `scratchpad`. Primitives are created in finalize (at compile time, and
// again when a saved program is loaded), from the reflected attributes and the shapes.
#pragma once
#include "targets/cpu/context.hpp"
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"
#include "targets/cpu/kernels/onednn/primitive_kernel.hpp"

#include <kiln/errors.hpp>
#include <kiln/operation.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::cpu {

template <class Derived>
struct dnnl_op {
    // Whether the op's work grows with its result's elements (false for products:
    // convolutions, matmuls, LSTMs, whose depth the result does not show).
    static constexpr bool work_per_element = true;
    // Input index of the scratchpad buffer; -1 when the primitive needs none.
    std::int64_t scratchpad = -1;
    // Activations in oneDNN's own (blocked) layouts: the layout of operand i when it is
    // not its IR shape's (empty record: the IR shape's strides), and of the output. An
    // instruction with a dst_layout has its logical row-major shape as its IR shape and
    // its bytes in that layout, in a buffer sized for it; only layout-aware cpu ops read
    // it (the lowering puts reorders before anything else).
    std::vector<md_record> layouts;
    md_record dst_layout;
    std::shared_ptr<const primitive_kernel> kernel;
    // Only while lowering (not attributes): let oneDNN choose the layout of operand 0
    // and of the output (format any); the lowering then records what it chose.
    bool any_src = false;
    bool any_dst = false;

    // The kernel finalize built (kernel_description), for profiles.
    std::string kernel_info() const { return kernel ? kernel->impl() : std::string(); }

    dnnl::memory::desc operand_md(std::size_t i, const shape& s) const {
        if (i == 0 && any_src) return any_md(s);
        if (i >= layouts.size() || layouts[i].empty()) return md_of(s);
        // A bf16 activation kept in a layout planned for float32 (bf16_activations.hpp).
        const auto md = layouts[i].to_md();
        if (s.get_type() == type::bfloat16 && md.data_type() == dnnl::memory::data_type::f32)
            return retyped(md, dnnl::memory::data_type::bf16);
        return md;
    }
    dnnl::memory::desc out_md(const shape& dst) const {
        if (any_dst) return any_md(dst);
        return dst_layout.empty() ? md_of(dst) : dst_layout.to_md();
    }
    // For ops that read and write plain (strided) tensors only.
    void expect_plain() const {
        const auto& self = static_cast<const Derived&>(*this);
        for (const auto& l : layouts)
            if (!l.empty())
                throw_error(error_code::unsupported, self.name() + ": operands in oneDNN layouts are not supported");
        if (!dst_layout.empty() || any_src || any_dst)
            throw_error(error_code::unsupported, self.name() + ": writes plain tensors only");
    }

    // The operands: inputs without the scratchpad and output buffers.
    std::vector<shape> operands(const std::vector<shape>& inputs) const {
        const std::size_t extra = 1 + (scratchpad >= 0 ? 1 : 0);
        const auto& self = static_cast<const Derived&>(*this);
        if (inputs.size() < extra)
            throw_error(error_code::shape, self.name() + ": expected its output buffer as the last input, got " +
                                               std::to_string(inputs.size()) + " inputs");
        if (scratchpad >= 0 && static_cast<std::size_t>(scratchpad) != inputs.size() - 2)
            throw_error(error_code::shape, self.name() + ": the scratchpad buffer must be input " +
                                               std::to_string(inputs.size() - 2) + ", not " + std::to_string(scratchpad));
        return {inputs.begin(), inputs.end() - static_cast<std::ptrdiff_t>(extra)};
    }

    shape compute_shape(const std::vector<shape>& inputs) const {
        const auto& self = static_cast<const Derived&>(*this);
        auto ops = operands(inputs);
        for (const auto& s : inputs)
            if (!s.is_tensor() || s.dynamic())
                throw_error(error_code::shape, self.name() + ": inputs must be static tensors, got " + s.to_string());
        shape want = self.logical_shape(ops);
        const shape& dst = inputs.back();
        if (!dst_layout.empty()) {
            const auto md = dst_layout.to_md();
            if (to_dims(want.lens()) != md.dims() || to_dnnl_type(want.get_type()) != md.data_type() ||
                dst.bytes() < md.get_size())
                throw_error(error_code::shape, self.name() + ": result " + want.to_string() + " does not fit its " +
                                                   std::to_string(md.get_size()) + "-byte layout in buffer " +
                                                   dst.to_string());
            return want.as_standard();
        }
        if (!want.same_lens_and_type(dst))
            throw_error(error_code::shape, self.name() + ": result " + want.to_string() +
                                               " does not fit its output buffer " + dst.to_string());
        return dst;
    }

    // Whether the work is small enough for the calling thread alone: elementwise-sized work on
    // a small result (a product says by its multiply-adds: op_conv.hpp).
    bool small_work(const std::vector<shape>&, const shape& out) const {
        return Derived::work_per_element && out.elements() < single_thread_elements;
    }

    void finalize(context& ctx, const shape& out, const std::vector<shape>& inputs,
                  const std::vector<argument>& constants) {
        const auto& self = static_cast<const Derived&>(*this);
        auto& c = as_cpu_context(ctx, self.name());
        // Small work runs on the calling thread alone (made and run with one thread: oneDNN
        // sizes its parallel loops by the threads it sees).
        auto ops = operands(inputs);
        const bool alone = self.small_work(ops, out);
        omp_threads_scope threads(alone ? 1 : c.threads());
        try {
            auto pd = self.make_pd(c.engine(), ops, out);
            auto k = std::make_shared<primitive_kernel>(dnnl::primitive(pd.get()), kernel_description(pd));
            k->set_alone(alone);
            self.bind_operands(*k, pd, ops, constants, c.engine());
            const auto planned = dst_layout.empty() ? md_of(out) : dst_layout.to_md();
            k->bind_output(inputs.size() - 1, pd.dst_desc(), planned, c.engine());
            // A converted result (another element type) keeps the planned blocking.
            if (!dst_layout.empty() &&
                pd.dst_desc() != (k->converts_output() ? retyped(planned, pd.dst_desc().data_type()) : planned))
                throw_error(error_code::runtime, self.name() + ": the kernel writes another layout than planned");
            const auto sp = scratchpad >= 0 ? static_cast<std::size_t>(scratchpad) : 0;
            k->set_scratchpad(pd.scratchpad_desc(), scratchpad, scratchpad >= 0 ? inputs[sp].bytes() : 0,
                              c.engine());
            kernel = std::move(k);
        } catch (const dnnl::error& e) {
            throw_error(error_code::unsupported, self.name() + ": oneDNN cannot build this kernel on this CPU: " +
                                                     e.what());
        }
    }

    argument compute(context& ctx, const shape&, const std::vector<argument>& args) const {
        const auto& self = static_cast<const Derived&>(*this);
        if (!kernel) throw_error(error_code::runtime, self.name() + ": run before its kernel was built (finalize)");
        kernel->run(ctx, args, self.name());
        return args.back();
    }

    std::ptrdiff_t output_alias(const std::vector<shape>& inputs) const {
        return static_cast<std::ptrdiff_t>(inputs.size()) - 1;
    }
};

// Binds each operand i < count as oneDNN argument args[i] with its own layout.
inline void bind_plain(primitive_kernel& k, const std::vector<int>& args, const std::vector<shape>& operands) {
    for (std::size_t i = 0; i < args.size() && i < operands.size(); ++i) k.bind(args[i], i, md_of(operands[i]));
}

// The members every dnnl_op declares (defined in the op's .cpp).
#define KILN_CPU_DNNL_OP_DECLS(NAME)                                                                            \
    std::string name() const { return NAME; }                                                                  \
    shape logical_shape(const std::vector<shape>& operands) const;                                            \
    dnnl::primitive_desc_base make_pd(const dnnl::engine& eng, const std::vector<shape>& operands,             \
                                      const shape& dst) const;                                                 \
    void bind_operands(primitive_kernel& k, const dnnl::primitive_desc_base& pd,                               \
                       const std::vector<shape>& operands, const std::vector<argument>& constants,             \
                       const dnnl::engine& eng) const;

}  // namespace kiln::cpu
