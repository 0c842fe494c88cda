#include "targets/cpu/kernels/gather_blocks/gather_blocks.hpp"

#include "ops/tensor_gather.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <cstring>
#include <string>

namespace kiln::cpu {

namespace {

template <class I>
void copy_blocks(const char* src, const I* ind, char* dst, std::size_t outer, std::size_t n_ind, std::size_t axis_len,
                 std::size_t block_bytes, const std::string& op_name) {
    // The blocks are scattered over a table that is usually far out of the caches (a
    // vocabulary's embeddings): asking for all their lines first overlaps the misses that
    // block-by-block copies would wait for one after another.
    constexpr std::size_t line = 64, max_prefetched = 1u << 20;
    if (outer * n_ind * block_bytes <= max_prefetched)
        for (std::size_t o = 0; o < outer; ++o)
            for (std::size_t j = 0; j < n_ind; ++j) {
                auto v = static_cast<std::int64_t>(ind[j]);
                if (v < 0) v += static_cast<std::int64_t>(axis_len);
                if (v < 0 || v >= static_cast<std::int64_t>(axis_len)) continue;  // checked below
                const char* from = src + (o * axis_len + static_cast<std::size_t>(v)) * block_bytes;
                for (std::size_t b = 0; b < block_bytes; b += line) __builtin_prefetch(from + b, 0, 3);
            }
    for (std::size_t o = 0; o < outer; ++o)
        for (std::size_t j = 0; j < n_ind; ++j) {
            const auto i = static_cast<std::size_t>(op::checked_index(static_cast<std::int64_t>(ind[j]), axis_len, op_name));
            std::memcpy(dst + (o * n_ind + j) * block_bytes, src + (o * axis_len + i) * block_bytes, block_bytes);
        }
}

}  // namespace

shape gather_blocks::compute_shape(const std::vector<shape>& inputs) const {
    auto bad = [&](const std::string& why) { throw_error(error_code::shape, name() + ": " + why); };
    if (inputs.size() != 3) bad("expected data, indices and an output buffer, got " + std::to_string(inputs.size()) + " inputs");
    for (const auto& s : inputs)
        if (!s.is_tensor() || s.dynamic()) bad("inputs must be static tensors, got " + s.to_string());
    const shape &data = inputs[0], &indices = inputs[1];
    if (!data.standard() || data.ndim() == 0) bad("data " + data.to_string() + " must be a row-major tensor");
    if (axis < 0 || static_cast<std::size_t>(axis) >= data.ndim())
        bad("axis " + std::to_string(axis) + " is outside data " + data.to_string());
    if ((indices.get_type() != type::int32 && indices.get_type() != type::int64) || !indices.standard())
        bad("indices must be row-major int32 or int64, got " + indices.to_string());
    const shape out = op::gather{axis}.compute_shape({data, indices});
    if (inputs[2].bytes() < out.bytes()) bad("the output buffer is too small");
    return out;
}

argument gather_blocks::compute(context&, const shape& out, const std::vector<argument>& args) const {
    const shape& ds = args[0].get_shape();
    const auto a = static_cast<std::size_t>(axis);
    const auto& dl = ds.lens();
    std::size_t outer = 1, inner = 1;
    for (std::size_t d = 0; d < a; ++d) outer *= dl[d];
    for (std::size_t d = a + 1; d < dl.size(); ++d) inner *= dl[d];
    const std::size_t n_ind = args[1].get_shape().elements(), block = inner * ds.type_size();
    const auto* src = reinterpret_cast<const char*>(args[0].data());
    auto* dst = reinterpret_cast<char*>(args.back().data());
    if (args[1].get_shape().get_type() == type::int64)
        copy_blocks(src, reinterpret_cast<const std::int64_t*>(args[1].data()), dst, outer, n_ind, dl[a], block, name());
    else
        copy_blocks(src, reinterpret_cast<const std::int32_t*>(args[1].data()), dst, outer, n_ind, dl[a], block, name());
    return args.back().reshape(out);
}

bool lower_gather_blocks(lower_env& env, instruction_ref ins) {
    if (ins->inputs().size() != 2) return false;
    auto data = ins->inputs()[0], idx = ins->inputs()[1];
    if (in_dnnl_layout(env, data)) data = plain(env, data);
    const shape &ds = data->get_shape(), &is = idx->get_shape();
    if (!ds.is_tensor() || ds.dynamic() || !is.is_tensor() || is.dynamic() || !ins->get_shape().is_tensor() ||
        ins->get_shape().dynamic() || !ds.standard() || !is.standard() || ds.ndim() == 0 || ds.elements() == 0)
        return false;
    if (is.get_type() != type::int32 && is.get_type() != type::int64) return false;
    auto axis = ins->get_operator().to_value().at("axis").get_int64();
    if (axis < 0) axis += static_cast<std::int64_t>(ds.ndim());
    if (axis < 0 || axis >= static_cast<std::int64_t>(ds.ndim())) return false;
    gather_blocks op;
    op.axis = axis;
    const shape out = op::gather{axis}.compute_shape({ds, is});
    if (out.lens() != ins->get_shape().lens()) return false;
    auto buf = env.m.insert_instruction(ins, builtin::allocate{out}, {});
    env.m.replace_instruction(ins, op, {data, idx, buf});
    return true;
}

KILN_REGISTER_OP(gather_blocks)

}  // namespace kiln::cpu
