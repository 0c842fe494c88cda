#include "targets/cpu/kernels/onednn/primitive_kernel.hpp"

#include "targets/cpu/context.hpp"
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"

#include <kiln/errors.hpp>

#include <optional>
#include <unordered_map>

namespace kiln::cpu {

cpu_context& as_cpu_context(context& ctx, const std::string& op_name) {
    auto* c = dynamic_cast<cpu_context*>(&ctx);
    if (!c)
        throw_error(error_code::runtime, op_name + ": a cpu kernel ran in the context of target '" +
                                             ctx.target_name() + "' (compile the program for 'cpu')");
    return *c;
}

void primitive_kernel::bind(int arg, std::size_t input, const dnnl::memory::desc& md) {
    inputs_.push_back({arg, input, md});
}

void primitive_kernel::bind_converted(int arg, std::size_t input, const dnnl::memory::desc& from,
                                      const dnnl::memory::desc& to, const dnnl::engine& eng,
                                      const dnnl::primitive_attr& attr) {
    converted_.push_back(
        {arg, input, from, to, dnnl::reorder(dnnl::reorder::primitive_desc(eng, from, eng, to, attr))});
}

void primitive_kernel::bind_output(std::size_t input, const dnnl::memory::desc& dst, const dnnl::memory::desc& out,
                                   const dnnl::engine& eng) {
    if (!convert_output_) {
        bind(DNNL_ARG_DST, input, dst);
        return;
    }
    // A product computed on folded rows (matmul) writes the same bytes as the buffer's dims.
    const auto to = out.dims() == dst.dims() ? out : retyped(dst, out.data_type());
    output_ = output_conversion{input, dst, to,
                                dnnl::reorder(dnnl::reorder::primitive_desc(eng, dst, eng, to, output_attr_)),
                                std::nullopt};
    if (accumulate_)
        output_->read_back = dnnl::reorder(dnnl::reorder::primitive_desc(eng, to, eng, dst, read_back_attr_));
}

void primitive_kernel::bind_owned(int arg, dnnl::memory mem) { owned_.emplace_back(arg, std::move(mem)); }

void primitive_kernel::set_scratchpad(const dnnl::memory::desc& md, std::ptrdiff_t input, std::size_t input_bytes,
                                      const dnnl::engine& eng) {
    const std::size_t need = md.get_size();
    if (need == 0) return;
    if (input >= 0 && input_bytes >= need) {
        bind(DNNL_ARG_SCRATCHPAD, static_cast<std::size_t>(input), md);
        return;
    }
    bind_owned(DNNL_ARG_SCRATCHPAD, dnnl::memory(md, eng));
    serialize_ = std::make_unique<std::mutex>();
}

void primitive_kernel::run(context& ctx, const std::vector<argument>& args, const std::string& op_name) const {
    auto& c = as_cpu_context(ctx, op_name);
    for (const auto& b : inputs_)
        if (b.input >= args.size())
            throw_error(error_code::runtime, op_name + ": kernel reads input " + std::to_string(b.input) + " of " +
                                                 std::to_string(args.size()));
    for (const auto& b : converted_)
        if (b.input >= args.size())
            throw_error(error_code::runtime, op_name + ": kernel reads input " + std::to_string(b.input) + " of " +
                                                 std::to_string(args.size()));
    if (output_ && output_->input >= args.size())
        throw_error(error_code::runtime, op_name + ": kernel writes input " + std::to_string(output_->input) + " of " +
                                             std::to_string(args.size()));
    std::unique_ptr<run_memories> cached;
    {
        std::lock_guard<std::mutex> lock(cache_->mutex);
        if (!cache_->free.empty()) {
            cached = std::move(cache_->free.back());
            cache_->free.pop_back();
        }
    }
    if (cached) {
        for (const auto& b : inputs_) cached->args.at(b.arg).set_data_handle(args[b.input].data());
        for (std::size_t i = 0; i < converted_.size(); ++i)
            cached->sources[i].set_data_handle(args[converted_[i].input].data());
        if (output_) cached->result.set_data_handle(args[output_->input].data());
    } else {
        cached = std::make_unique<run_memories>();
        cached->args.reserve(inputs_.size() + owned_.size() + converted_.size());
        for (const auto& b : inputs_) cached->args.emplace(b.arg, dnnl::memory(b.md, c.engine(), args[b.input].data()));
        for (const auto& [arg, mem] : owned_) cached->args.emplace(arg, mem);
        for (const auto& b : converted_) {
            cached->sources.emplace_back(b.from, c.engine(), args[b.input].data());
            cached->args.emplace(b.arg, dnnl::memory(b.to, c.engine()));
        }
        if (output_) {
            cached->args.emplace(DNNL_ARG_DST, dnnl::memory(output_->from, c.engine()));
            cached->result = dnnl::memory(output_->to, c.engine(), args[output_->input].data());
        }
    }
    const arg_map& m = cached->args;
    auto& s = c.stream();
    std::optional<omp_threads_scope> one_thread;
    if (alone_) one_thread.emplace(1);
    try {
        for (std::size_t i = 0; i < converted_.size(); ++i)
            converted_[i].convert.execute(s, cached->sources[i], cached->args.at(converted_[i].arg));
        if (output_ && output_->read_back)
            output_->read_back->execute(s, cached->result, cached->args.at(DNNL_ARG_DST));
        if (serialize_) {
            std::lock_guard<std::mutex> lock(*serialize_);
            prim_.execute(s, m);
        } else {
            prim_.execute(s, m);
        }
        if (output_) output_->convert.execute(s, cached->args.at(DNNL_ARG_DST), cached->result);
    } catch (const dnnl::error& e) {
        throw_error(error_code::runtime, op_name + ": oneDNN (" + impl_ + ") failed: " + e.what());
    }
    std::lock_guard<std::mutex> lock(cache_->mutex);
    cache_->free.push_back(std::move(cached));
}

dnnl::memory reorder_constant(const dnnl::engine& eng, const dnnl::memory::desc& from, const void* src,
                              const dnnl::memory::desc& to) {
    dnnl::memory in(from, eng, const_cast<void*>(src));
    dnnl::memory out(to, eng);
    dnnl::stream s(eng);
    dnnl::reorder(in, out).execute(s, in, out);
    s.wait();
    return out;
}

void bind_constant_weights(primitive_kernel& k, const md_record& weights, const dnnl::memory::desc& wanted,
                           std::size_t input, const std::vector<argument>& constants, const dnnl::engine& eng,
                           const std::string& op_name, int arg) {
    const auto stored = weights.to_md();
    if (stored == wanted) {
        k.bind(arg, input, wanted);
        return;
    }
    if (constants.size() <= input || constants[input].empty() ||
        constants[input].get_shape().bytes() < stored.get_size())
        throw_error(error_code::runtime, op_name + ": needs its constant weights (" +
                                             std::to_string(stored.get_size()) + " bytes) to relay them out");
    k.bind_owned(arg, reorder_constant(eng, stored, constants[input].data(), wanted));
}

}  // namespace kiln::cpu
