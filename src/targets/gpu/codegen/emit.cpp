#include "targets/gpu/codegen/emit.hpp"

#include "codegen/expr.hpp"
#include "codegen/hash.hpp"
#include "targets/gpu/codegen/emit_text.hpp"

#include <kiln/errors.hpp>

#include <algorithm>
#include <sstream>

namespace kiln::gpu::codegen {

using namespace kiln::codegen;

using namespace text;

bool can_emit(const plan& p) { return !p.reduction || !p.inner_lens.empty(); }

// A warp per row while each lane has at most 4 elements per pass (softmax over 128 keys,
// a layer norm over 128 features), or rows are many and each lane's loop stays short;
// longer rows take a block, so one row spreads over 256 threads.
bool warp_per_row(const plan& p) {
    const std::size_t inner = p.inner_size(), rows = p.outer_size();
    return inner <= 128 || (inner <= 1024 && rows >= 4096);
}

std::string emit_kernel(const plan& p, const std::string& name) {
    if (!can_emit(p)) throw_error(error_code::unsupported, "gpu fused kernel: a reduction without an inner space");
    if (p.inputs.size() > 64) throw_error(error_code::unsupported, "gpu fused kernel: more than 64 inputs");
    std::ostringstream o;
    o << "extern \"C\" __global__ void __launch_bounds__(" << block_size << ") " << name << "(const kiln_args a_) {\n";
    for (std::size_t i = 0; i < p.inputs.size(); ++i) {
        const auto t = c_type(p.inputs[i].t);
        o << "  const " << t << "* __restrict__ in" << i << " = (const " << t << "*)a_.in[" << i << "];\n";
    }
    o << "  " << c_type(p.output.t) << "* __restrict__ out = (" << c_type(p.output.t) << "*)a_.out;\n";
    // Constants and inputs read at one place: once per thread, outside the loop.
    for (std::size_t k = 0; k < p.nodes.size(); ++k) {
        const auto& n = p.nodes[k];
        if (n.kind == node_kind::constant)
            o << "  " << node_decl(n, k, constant_literal(n));  // a 16-bit constant is exact in float
        else if (n.kind == node_kind::input && p.inputs[n.input].invariant())
            o << "  " << node_decl(n, k, load(n.t, "in" + std::to_string(n.input) + "[0]"));
    }
    if (p.reduction) {
        reduction_rows(o, p);
        o << "}\n";
        return o.str();
    }
    const auto& L = p.outer_lens;
    o << "  for (long long i_ = (long long)blockIdx.x * blockDim.x + threadIdx.x; i_ < " << num(static_cast<std::int64_t>(p.outer_size()))
      << "; i_ += (long long)gridDim.x * blockDim.x) {\n";
    std::vector<std::string> idx(L.size());
    if (L.size() == 1) {
        idx[0] = "i_";
    } else {
        o << "    long long r_ = i_;\n";
        for (std::size_t d = L.size(); d-- > 0;) {
            idx[d] = "d" + std::to_string(d) + "_";
            if (d == 0) o << "    const long long d0_ = r_;\n";
            else o << "    const long long " << idx[d] << " = r_ % " << num(static_cast<std::int64_t>(L[d])) << "; r_ /= "
                   << num(static_cast<std::int64_t>(L[d])) << ";\n";
        }
    }
    for (std::size_t k = 0; k < p.nodes.size(); ++k) {
        const auto& n = p.nodes[k];
        if (n.kind == node_kind::input && !p.inputs[n.input].invariant())
            o << "    " << node_decl(n, k, load(n.t, "in" + std::to_string(n.input) + "[" + offset(idx, p.inputs[n.input].outer) + "]"));
        else if (n.kind == node_kind::op)
            o << "    " << node_decl(n, k, rounded(n.t, node_expression(p, k)));
    }
    o << "    out[" << offset(idx, p.output.outer) << "] = " << store(p.output.t, v(p.root)) << ";\n  }\n}\n";
    return o.str();
}

std::string kernel_symbol(const plan& p) { return "kiln_gpu_" + content_hash(emit_kernel(p, "KERNEL")).substr(0, 24); }

unsigned grid_size(const plan& p) {
    const std::size_t per_block = !p.reduction ? block_size : warp_per_row(p) ? warp_rows : 1;
    const std::size_t blocks = (p.outer_size() + per_block - 1) / per_block;
    return static_cast<unsigned>(std::clamp<std::size_t>(blocks, 1, 65535u * 8));
}

}  // namespace kiln::gpu::codegen
