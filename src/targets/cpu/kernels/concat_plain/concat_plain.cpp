#include "targets/cpu/kernels/concat_plain/concat_plain.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <omp.h>

#include <algorithm>
#include <optional>
#include <cstring>
#include <string>

namespace kiln::cpu {

shape concat_plain::compute_shape(const std::vector<shape>& inputs) const {
    auto bad = [&](const std::string& why) { throw_error(error_code::shape, name() + ": " + why); };
    if (inputs.size() < 2) bad("expected inputs and an output buffer");
    const shape& first = inputs[0];
    if (axis < 0 || static_cast<std::size_t>(axis) >= first.ndim()) bad("axis " + std::to_string(axis) + " is outside " + first.to_string());
    const auto a = static_cast<std::size_t>(axis);
    auto lens = first.lens();
    lens[a] = 0;
    for (std::size_t i = 0; i + 1 < inputs.size(); ++i) {
        const shape& x = inputs[i];
        if (!x.is_tensor() || x.dynamic() || x.get_type() != type::float32 || !x.standard() || x.ndim() != first.ndim())
            bad("input " + std::to_string(i) + " " + x.to_string() + " is not a row-major float32 tensor of rank " +
                std::to_string(first.ndim()));
        for (std::size_t d = 0; d < x.ndim(); ++d)
            if (d != a && x.lens()[d] != first.lens()[d])
                bad("input " + std::to_string(i) + " " + x.to_string() + " differs from " + first.to_string() +
                    " outside the axis");
        if (!sizes.empty() && (sizes.size() + 1 != inputs.size() || sizes[i] != static_cast<std::int64_t>(x.lens()[a])))
            bad("sizes do not match the inputs' lengths along the axis");
        lens[a] += x.lens()[a];
    }
    shape out(type::float32, lens);
    if (inputs.back().bytes() < out.bytes()) bad("the output buffer is too small");
    return out;
}

std::size_t concat_plain::along(const std::vector<argument>& args, std::size_t i) const {
    return sizes.empty() ? args[i].get_shape().lens()[static_cast<std::size_t>(axis)] : static_cast<std::size_t>(sizes[i]);
}

argument concat_plain::compute(context&, const shape& out, const std::vector<argument>& args) const {
    const auto a = static_cast<std::size_t>(axis);
    const auto& ol = out.lens();
    std::size_t outer = 1, inner = 1;
    for (std::size_t d = 0; d < a; ++d) outer *= ol[d];
    for (std::size_t d = a + 1; d < ol.size(); ++d) inner *= ol[d];
    auto* y = reinterpret_cast<float*>(args.back().data());
    const std::size_t n_in = args.size() - 1, row = ol[a] * inner;
    // One task per (outer index, input): a block copy each.
    const auto tasks = static_cast<std::int64_t>(outer * n_in);
#pragma omp parallel for schedule(static) if (out.elements() > 65536 && tasks > 1)
    for (std::int64_t t = 0; t < tasks; ++t) {
        const std::size_t o = static_cast<std::size_t>(t) / n_in, i = static_cast<std::size_t>(t) % n_in;
        std::size_t at = 0;
        for (std::size_t j = 0; j < i; ++j) at += along(args, j) * inner;
        const std::size_t block = along(args, i) * inner;
        std::memcpy(y + o * row + at, reinterpret_cast<const float*>(args[i].data()) + o * block, block * sizeof(float));
    }
    return args.back().reshape(out);
}

namespace {

// The layout of the concatenation along dim 0 of ins's inputs, when they all have one
// oneDNN layout in which an item of dim 0 is one contiguous, unpadded block.
std::optional<md_record> batch_concat_layout(const lower_env& env, instruction_ref ins) {
    auto first = env.layout.find(&*ins->inputs().front());
    if (first == env.layout.end()) return std::nullopt;
    const md_record& r = first->second;
    if (r.dims.empty() || r.strides.size() != r.dims.size() || r.offset0 != 0 || r.padded_dims != r.dims) return std::nullopt;
    std::int64_t rest = 1;
    for (std::size_t d = 1; d < r.dims.size(); ++d) rest *= r.dims[d];
    if (r.strides[0] != rest) return std::nullopt;
    std::int64_t n = 0;
    for (auto x : ins->inputs()) {
        auto it = env.layout.find(&*x);
        if (it == env.layout.end()) return std::nullopt;
        md_record same = it->second;
        same.dims[0] = same.padded_dims[0] = r.dims[0];
        if (!same_layout(same, r)) return std::nullopt;
        n += it->second.dims[0];
    }
    md_record out = r;
    out.dims[0] = out.padded_dims[0] = n;
    if (out.to_md().get_size() != static_cast<std::size_t>(n * rest) * sizeof(float)) return std::nullopt;
    return out;
}

}  // namespace

bool lower_concat_plain(lower_env& env, instruction_ref ins) {
    auto axis = ins->get_operator().to_value().at("axis").get_int64();
    const auto rank = static_cast<std::int64_t>(ins->get_shape().ndim());
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank || ins->inputs().empty()) return false;
    // Along the batch, tensors in one oneDNN layout whose images are whole blocks (the
    // batch outermost, nothing padded: split_batch's per-image results) concatenate as
    // block copies too, into that layout.
    std::optional<md_record> images;
    if (axis == 0 && in_dnnl_layout(env, ins->inputs().front())) images = batch_concat_layout(env, ins);
    if (images) {
        for (auto x : ins->inputs())
            if (!f32_static(x)) return false;
    } else {
        for (auto x : ins->inputs())
            if (in_dnnl_layout(env, x) || !f32_static(x) || !x->get_shape().standard()) return false;
    }
    concat_plain op;
    op.axis = axis;
    for (auto x : ins->inputs()) op.sizes.push_back(static_cast<std::int64_t>(x->get_shape().lens()[axis]));
    auto operands = ins->inputs();
    operands.push_back(env.m.insert_instruction(ins, builtin::allocate{ins->get_shape().as_standard()}, {}));
    env.m.replace_instruction(ins, op, operands);
    if (images) env.layout[&*ins] = *images;
    return true;
}

KILN_REGISTER_OP(concat_plain)

}  // namespace kiln::cpu
