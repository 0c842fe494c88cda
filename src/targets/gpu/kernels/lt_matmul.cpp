#include "targets/gpu/kernels/lt_matmul.hpp"

#include "targets/gpu/context.hpp"
#include "targets/gpu/device.hpp"

#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <limits>

namespace kiln::gpu {

shape lt_matmul::compute_shape(const std::vector<shape>& inputs) const {
    if (inputs.size() != 4) throw_error(error_code::shape, "gpu::lt_matmul: expects a, b, workspace and output");
    const auto& a = inputs[0].lens();
    const auto& b = inputs[1].lens();
    if (a.size() < 2 || b.size() < 2)
        throw_error(error_code::shape, "gpu::lt_matmul: operands of rank 2 or more, got " + inputs[0].to_string() +
                                           " and " + inputs[1].to_string());
    const auto k_a = trans_a ? a[a.size() - 2] : a.back();
    const auto k_b = trans_b ? b.back() : b[b.size() - 2];
    if (k_a != k_b)
        throw_error(error_code::shape, "gpu::lt_matmul: inner dims differ: " + inputs[0].to_string() + " and " +
                                           inputs[1].to_string());
    if (inputs[2].bytes() < lt_workspace_bytes)
        throw_error(error_code::shape, "gpu::lt_matmul: workspace " + inputs[2].to_string() + " is too small");
    return inputs[3];
}

namespace {

// A row-major stored matrix [.., r, c] seen column-major: c x r, leading dim c.
lt_layout column_major_view(const shape& s, bool transposed) {
    const auto& l = s.lens();
    lt_layout v;
    v.rows = l[l.size() - 1];
    v.cols = l[l.size() - 2];
    v.ld = static_cast<std::int64_t>(std::max<std::uint64_t>(v.rows, 1));
    v.batch_stride = static_cast<std::int64_t>(v.rows * v.cols);
    v.transposed = transposed;
    return v;
}

}  // namespace

lt_plan plan_lt(const shape& a, const shape& b, const shape& out, bool trans_a, bool trans_b) {
    const auto what = "gpu::lt_matmul(" + a.to_string() + ", " + b.to_string() + " -> " + out.to_string() + ")";
    for (const shape* s : {&a, &b, &out})
        if (!s->is_tensor() || s->dynamic() || !s->standard() || s->ndim() < 2 || s->ndim() != out.ndim())
            throw_error(error_code::shape, what + ": cuBLASLt takes standard (row-major) operands of one rank >= 2");
    std::uint64_t batch = 1;
    for (std::size_t d = 0; d + 2 < out.ndim(); ++d) {
        if (a.lens()[d] != out.lens()[d] || b.lens()[d] != out.lens()[d])
            throw_error(error_code::shape, what + ": batch dims differ (broadcast batches are not planned)");
        batch *= out.lens()[d];
    }
    if (batch > static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max()))
        throw_error(error_code::shape, what + ": a batch of " + std::to_string(batch) + " matrices");
    lt_plan p;
    p.first = column_major_view(b, trans_b);
    p.second = column_major_view(a, trans_a);
    p.out = column_major_view(out, false);
    p.m = p.out.rows;  // N
    p.n = p.out.cols;  // M
    p.k = trans_a ? a.lens()[a.ndim() - 2] : a.lens().back();
    p.batch = static_cast<std::int32_t>(batch);
    const auto first_rows = p.first.transposed ? p.first.cols : p.first.rows;
    const auto second_cols = p.second.transposed ? p.second.rows : p.second.cols;
    if (first_rows != p.m || second_cols != p.n)
        throw_error(error_code::shape, what + ": the output's dims do not match the operands'");
    return p;
}

struct lt_state {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t layouts[3] = {nullptr, nullptr, nullptr};  // A (b), B (a), C/D (out)
    cublasLtMatmulAlgo_t algo{};
    std::size_t workspace = 0;  // what the algorithm needs
    std::string problem;        // "m=.. n=.. k=.. batch=.."
    ~lt_state() {
        for (auto* l : layouts)
            if (l) (void)cublasLtMatrixLayoutDestroy(l);
        if (desc) (void)cublasLtMatmulDescDestroy(desc);
    }
};

namespace {

cublasLtMatrixLayout_t make_layout(const lt_layout& v, std::int32_t batch, const std::string& what) {
    cublasLtMatrixLayout_t l = nullptr;
    check_cublas(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, v.rows, v.cols, v.ld), "cublasLtMatrixLayoutCreate for " + what);
    if (batch > 1) {
        std::int64_t stride = v.batch_stride;
        auto ok = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch));
        if (ok == CUBLAS_STATUS_SUCCESS)
            ok = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride));
        if (ok != CUBLAS_STATUS_SUCCESS) (void)cublasLtMatrixLayoutDestroy(l);
        check_cublas(ok, "cublasLtMatrixLayoutSetAttribute (batch) for " + what);
    }
    return l;
}

}  // namespace

void lt_matmul::finalize(context& ctx, const shape& output, const std::vector<shape>& inputs) {
    auto* g = dynamic_cast<gpu_context*>(&ctx);
    if (!g || !gpu_context::has_device()) return;  // compiled ahead: planned where it runs
    const auto p = plan_lt(inputs.at(0), inputs.at(1), output, trans_a, trans_b);
    auto st = std::make_shared<lt_state>();
    st->problem = "m=" + std::to_string(p.m) + " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k) +
                  " batch=" + std::to_string(p.batch);
    const std::string what = "gpu::lt_matmul (" + st->problem + ")";
    check_cublas(cublasLtMatmulDescCreate(&st->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate for " + what);
    const cublasOperation_t op_a = p.first.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = p.second.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    check_cublas(cublasLtMatmulDescSetAttribute(st->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)),
                 "cublasLtMatmulDescSetAttribute(TRANSA) for " + what);
    check_cublas(cublasLtMatmulDescSetAttribute(st->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)),
                 "cublasLtMatmulDescSetAttribute(TRANSB) for " + what);
    st->layouts[0] = make_layout(p.first, p.batch, what + " operand b");
    st->layouts[1] = make_layout(p.second, p.batch, what + " operand a");
    st->layouts[2] = make_layout(p.out, p.batch, what + " output");

    cublasLtMatmulPreference_t pref = nullptr;
    check_cublas(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate for " + what);
    std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, void (*)(cublasLtMatmulPreference_t)> pref_guard(
        pref, [](cublasLtMatmulPreference_t q) { (void)cublasLtMatmulPreferenceDestroy(q); });
    const std::uint64_t max_workspace = lt_workspace_bytes;
    check_cublas(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace,
                                                      sizeof(max_workspace)),
                 "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES) for " + what);
    // Arena buffers are 64-byte aligned (memory_coloring), caller buffers at least 16:
    // ask only for algorithms that need no more (compute checks it).
    const std::uint32_t align = 16;
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
        check_cublas(cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align)),
                     "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT) for " + what);
    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    check_cublas(cublasLtMatmulAlgoGetHeuristic(g->lt_handle(), st->desc, st->layouts[0], st->layouts[1], st->layouts[2],
                                                st->layouts[2], pref, 1, &result, &returned),
                 "cublasLtMatmulAlgoGetHeuristic for " + what);
    if (returned == 0 || result.state != CUBLAS_STATUS_SUCCESS)
        throw_error(error_code::unsupported, "gpu: cuBLASLt has no algorithm for " + what +
                                                 " within a " + std::to_string(lt_workspace_bytes) + "-byte workspace");
    st->algo = result.algo;
    st->workspace = result.workspaceSize;
    state = std::move(st);
}

argument lt_matmul::compute(context& ctx, const shape& output, const std::vector<argument>& args) const {
    auto& g = gpu_context_of(ctx, "gpu::lt_matmul");
    if (!state)
        throw_error(error_code::runtime, "gpu::lt_matmul: not planned on a device (the program was finalized where "
                                         "there was no device; compile or load it on the machine that runs it)");
    const std::string what = "gpu::lt_matmul (" + state->problem + ")";
    if (args.size() != 4) throw_error(error_code::runtime, what + ": expects a, b, workspace and output");
    const char* names[] = {"operand a", "operand b", "workspace", "output"};
    for (std::size_t i = 0; i < 4; ++i) {
        if (args[i].location() != memory_location::device)
            throw_error(error_code::runtime, what + ": " + names[i] + " (" + args[i].get_shape().to_string() +
                                                 ") is host memory; gpu kernels take device memory");
        if (i != 2 && reinterpret_cast<std::uintptr_t>(args[i].data()) % 16 != 0)
            throw_error(error_code::runtime, what + ": " + names[i] + " is not 16-byte aligned");
    }
    const std::size_t workspace = args[2].get_shape().bytes();
    if (workspace < state->workspace)
        throw_error(error_code::runtime, what + ": the algorithm needs " + std::to_string(state->workspace) +
                                             " workspace bytes, the planned buffer has " + std::to_string(workspace));
    const float beta = 0.0f;
    check_cublas(cublasLtMatmul(g.lt_handle(), state->desc, &alpha, args[1].data(), state->layouts[0], args[0].data(),
                                state->layouts[1], &beta, args[3].data(), state->layouts[2], args[3].data(),
                                state->layouts[2], &state->algo, args[2].data(), workspace, g.stream()),
                 "cublasLtMatmul for " + what);
    return args[3].reshape(output);
}

KILN_REGISTER_OP(lt_matmul)

}  // namespace kiln::gpu
