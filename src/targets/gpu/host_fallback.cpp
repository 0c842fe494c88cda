#include "targets/gpu/host_fallback.hpp"

#include "ops/tensor_slice.hpp"
#include "ops/tensor_views.hpp"
#include "passes/rewrite_utils.hpp"
#include "targets/gpu/context.hpp"
#include "targets/gpu/device.hpp"
#include "targets/gpu/kernels/cudnn_conv.hpp"
#include "targets/gpu/kernels/fused_kernel.hpp"
#include "targets/gpu/kernels/lt_matmul.hpp"
#include "targets/ref/lowering.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <algorithm>
#include <iterator>

namespace kiln::gpu {

namespace {

// Device tensors to host memory; host values (literals, host results) as they are.
argument to_host(const argument& a, gpu_context& g, const std::string& what) {
    if (a.get_shape().is_tuple()) {
        std::vector<argument> e;
        for (std::size_t i = 0; i < a.elements().size(); ++i)
            e.push_back(to_host(a.elements()[i], g, what + " element " + std::to_string(i)));
        return argument::make_tuple(std::move(e));
    }
    if (a.location() != memory_location::device) return a;
    return download(a, g, what);
}

}  // namespace

shape host_kernel::compute_shape(const std::vector<shape>& inputs) const {
    if (!buffer) return op.compute_shape(inputs);
    if (inputs.empty()) throw_error(error_code::shape, "gpu::host_kernel(" + op.name() + "): missing its output buffer");
    std::vector<shape> in(inputs.begin(), inputs.end() - 1);
    auto s = op.compute_shape(in);
    if (!s.same_lens_and_type(inputs.back()))
        throw_error(error_code::shape, "gpu::host_kernel(" + op.name() + "): output " + s.to_string() +
                                           " does not fit its buffer " + inputs.back().to_string());
    return inputs.back();
}

argument host_kernel::compute(context& ctx, const shape& output, const std::vector<argument>& args) const {
    const std::string what = "gpu::host_kernel(" + op.name() + ")";
    auto& g = gpu_context_of(ctx, "gpu::host_kernel");
    refuse_in_capture(g.stream(), what + " (a host round trip)");
    const std::size_t n = buffer ? args.size() - 1 : args.size();
    std::vector<argument> host;
    std::vector<shape> shapes;
    for (std::size_t i = 0; i < n; ++i) {
        host.push_back(to_host(args[i], g, "input " + std::to_string(i) + " of " + what));
        shapes.push_back(host.back().get_shape());
    }
    static host_context reference;  // stateless
    argument result = op.compute(reference, op.compute_shape(shapes), host);
    if (!buffer) return result;
    const argument& dest = args.back();
    if (dest.location() != memory_location::device)
        throw_error(error_code::runtime, what + ": its output buffer is not device memory");
    argument staging(dest.get_shape());
    result.copy_to(staging);
    upload_into(staging, dest, g, "the result of " + what);
    // The copy may still read `staging` (pageable memory) after the call returns: wait
    // before it goes.
    g.finish();
    return dest.reshape(output);
}

shape device_literal::compute_shape(const std::vector<shape>& inputs) const {
    if (inputs.size() != 1) throw_error(error_code::shape, "gpu::device_literal: one input (the literal)");
    return inputs[0];
}

void device_literal::finalize(context& ctx, const shape&, const std::vector<shape>&,
                              const std::vector<argument>& constants) {
    auto* g = dynamic_cast<gpu_context*>(&ctx);
    if (!g || !gpu_context::has_device()) return;  // uploaded where the program runs
    if (constants.empty() || constants[0].empty())
        throw_error(error_code::runtime, "gpu::device_literal: its input is not a literal");
    uploaded = std::make_shared<argument>(
        upload(constants[0], *g, "literal " + constants[0].get_shape().to_string() + " (literal upload)", true));
}

argument device_literal::compute(context&, const shape&, const std::vector<argument>& args) const {
    if (!uploaded)
        throw_error(error_code::runtime, "gpu::device_literal " + args.at(0).get_shape().to_string() +
                                             ": not uploaded (the program was finalized where there was no device)");
    return *uploaded;
}

argument gpu_allocate::compute(context& ctx, const shape& output, const std::vector<argument>&) const {
    return device_allocate_async(output, gpu_context_of(ctx, "gpu::allocate"), "gpu::allocate " + output.to_string());
}

bool device_view(instruction_ref ins) {
    const auto& s = ins->get_shape();
    if (!s.is_tensor() || s.dynamic() || !ins->module_inputs().empty()) return false;
    const auto& op = ins->get_operator();
    const bool view = rewrite::is<op::reshape>(ins) || rewrite::is<op::flatten>(ins) || rewrite::is<op::squeeze>(ins) ||
                      rewrite::is<op::unsqueeze>(ins) || rewrite::is<op::transpose>(ins) ||
                      rewrite::is<op::broadcast>(ins) || rewrite::is<op::slice>(ins);
    if (!view || ins->inputs().size() != 1) return false;
    if (ins->inputs()[0]->get_shape().dynamic()) return false;
    return op.output_alias(to_shapes(ins->inputs())) == 0;
}

namespace {

bool device_work(const operation& op) {
    return op.any_cast<fused_kernel>() || op.any_cast<lt_matmul>() || op.any_cast<cudnn_conv>() ||
           op.any_cast<device_literal>() || op.any_cast<gpu_allocate>();
}

}  // namespace

void place_host_ops::apply(module& m) const {
    std::vector<instruction_ref> all;
    for (auto ins = m.begin(); ins != m.end(); ++ins) all.push_back(ins);
    for (auto ins : all) {
        if (ins->is_param() || ins->is_literal() || ins->is_return()) continue;
        const auto& op = ins->get_operator();
        if (device_work(op) || op.any_cast<host_kernel>()) continue;
        if (op.traits().builtin) continue;  // allocate (device_allocations), load (of the arena)
        if (!ins->module_inputs().empty())
            throw_error(error_code::unsupported, "gpu: " + op.name() + " has sub-modules (control flow), which the gpu " +
                                                     "target does not run yet (issue 21)");
        if (const auto* k = op.any_cast<ref::kernel>()) {
            m.replace_instruction(ins, host_kernel{k->op, true}, ins->inputs());
            continue;
        }
        if (device_view(ins)) continue;
        const auto& s = ins->get_shape();
        if (s.is_tensor() && !s.dynamic() && s.get_type() != type::string) {
            auto out = m.insert_instruction(ins, builtin::allocate{s}, {});
            auto inputs = ins->inputs();
            inputs.push_back(out);
            m.replace_instruction(ins, host_kernel{op, true}, inputs);
        } else {
            m.replace_instruction(ins, host_kernel{op, false}, ins->inputs());
        }
    }
    // The literal upload: device work (and device views) read a literal's device copy.
    for (auto ins : all) {
        if (!ins->is_literal()) continue;
        std::vector<instruction_ref> device_users;
        for (auto u : ins->outputs())
            if (!u->is_return() && !u->get_operator().any_cast<host_kernel>()) device_users.push_back(u);
        if (device_users.empty()) continue;
        std::sort(device_users.begin(), device_users.end(), [](auto a, auto b) { return &*a < &*b; });
        device_users.erase(std::unique(device_users.begin(), device_users.end()), device_users.end());
        auto d = m.insert_instruction(std::next(ins), device_literal{}, {ins});
        for (auto u : device_users) m.replace_argument(u, ins, d);
    }
}

void device_allocations::apply(module& m) const {
    for (auto ins = m.begin(); ins != m.end(); ++ins)
        if (const auto* a = ins->get_operator().any_cast<builtin::allocate>())
            m.replace_instruction(ins, gpu_allocate{a->s}, {});
}

KILN_REGISTER_OP(host_kernel)
KILN_REGISTER_OP(device_literal)
KILN_REGISTER_OP(gpu_allocate)

}  // namespace kiln::gpu
