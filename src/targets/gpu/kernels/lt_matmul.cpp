#include "targets/gpu/kernels/lt_matmul.hpp"

#include "targets/gpu/context.hpp"
#include "targets/gpu/device.hpp"
#include "ops/nn_matmul.hpp"

#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <limits>
#include <mutex>
#include <optional>

namespace kiln::gpu {

shape lt_matmul::compute_shape(const std::vector<shape>& inputs) const {
    const std::size_t n = bias ? 5 : 4;
    if (inputs.size() != n)
        throw_error(error_code::shape, std::string("gpu::lt_matmul: expects a, b, ") + (bias ? "bias, " : "") +
                                           "workspace and output");
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
    const auto& out = inputs[n - 1];
    if (bias && (out.ndim() < 1 || inputs[2].elements() != out.lens().back()))
        throw_error(error_code::shape, "gpu::lt_matmul: bias " + inputs[2].to_string() + " is not one value per column of " +
                                           out.to_string());
    if (inputs[n - 2].bytes() < lt_workspace_bytes)
        throw_error(error_code::shape, "gpu::lt_matmul: workspace " + inputs[n - 2].to_string() + " is too small");
    return out;
}

namespace {

// One operand of logical lens [batch..., r, c] as cuBLASLt sees it (column-major): a
// row-major matrix (strides [c, 1]) is c x r with leading dim c; a transposed view of one
// (strides [1, r], e.g. a transpose of the last two dims) is r x c with leading dim r,
// marked transposed. Batch dims must collapse into one stride (0 for a broadcast batch).
// `batch_out`: the product's batch count, which this operand's batch dims must match or
// broadcast to. Nothing else is describable: nullopt.
std::optional<lt_layout> describe(const shape& s, std::uint64_t batch_out, bool transposed) {
    const auto& l = s.lens();
    const auto& st = s.strides();
    const std::size_t n = l.size();
    const std::uint64_t r = l[n - 2], c = l[n - 1];
    lt_layout v;
    // The leading dim is the other stride; it may exceed the matrix's (a view of a wider
    // tensor, e.g. one head of [batch, tokens, heads, dim]), as cuBLASLt allows.
    if ((st[n - 1] == 1 || c == 1) && (r == 1 || st[n - 2] >= c)) {
        v.rows = c;
        v.cols = r;
        v.ld = static_cast<std::int64_t>(std::max<std::uint64_t>(r == 1 ? c : st[n - 2], 1));
        v.transposed = transposed;
    } else if ((st[n - 2] == 1 || r == 1) && (c == 1 || st[n - 1] >= r)) {
        v.rows = r;
        v.cols = c;
        v.ld = static_cast<std::int64_t>(std::max<std::uint64_t>(c == 1 ? r : st[n - 1], 1));
        v.transposed = !transposed;
    } else {
        return std::nullopt;
    }
    // Batch dims of length > 1, outermost first, must be one run of strides.
    std::uint64_t batch = 1;
    std::int64_t inner_stride = -1;
    std::uint64_t inner_len = 0;
    for (std::size_t d = n - 2; d-- > 0;) {
        if (l[d] == 1) continue;
        const auto sd = static_cast<std::int64_t>(st[d]);
        if (inner_stride < 0) v.batch_stride = sd;
        else if (sd != inner_stride * static_cast<std::int64_t>(inner_len)) return std::nullopt;
        inner_stride = sd;
        inner_len = l[d];
        batch *= l[d];
    }
    if (batch == 1) v.batch_stride = 0;  // one matrix for every batch of the product
    else if (batch != batch_out) return std::nullopt;
    return v;
}

}  // namespace

lt_plan plan_lt(const shape& a, const shape& b, const shape& out, bool trans_a, bool trans_b) {
    const auto what = "gpu::lt_matmul(" + a.to_string() + ", " + b.to_string() + " -> " + out.to_string() + ")";
    for (const shape* s : {&a, &b, &out})
        if (!s->is_tensor() || s->dynamic() || s->ndim() < 2)
            throw_error(error_code::shape, what + ": cuBLASLt takes static operands of rank >= 2");
    if (!out.standard()) throw_error(error_code::shape, what + ": the output must be standard (row-major)");
    const auto& ol = out.lens();
    std::uint64_t batch = 1;
    for (std::size_t d = 0; d + 2 < ol.size(); ++d) batch *= ol[d];
    if (batch > static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max()))
        throw_error(error_code::shape, what + ": a batch of " + std::to_string(batch) + " matrices");
    // Batch dims must be the output's (or 1): align ranks from the right.
    for (const shape* s : {&a, &b}) {
        const auto& l = s->lens();
        if (l.size() > ol.size()) throw_error(error_code::shape, what + ": an operand of higher rank than the output");
        for (std::size_t d = 0; d + 2 < l.size(); ++d) {
            const auto od = ol[ol.size() - l.size() + d];
            if (l[d] != od && l[d] != 1) throw_error(error_code::shape, what + ": batch dims differ");
        }
    }
    auto va = describe(a, batch, trans_a);
    auto vb = describe(b, batch, trans_b);
    if (!va || !vb)
        throw_error(error_code::shape, what + ": an operand is neither row-major nor a transposed row-major matrix "
                                              "with one batch stride");
    lt_plan p;
    p.first = *vb;
    p.second = *va;
    p.out.rows = ol.back();
    p.out.cols = ol[ol.size() - 2];
    p.out.ld = static_cast<std::int64_t>(std::max<std::uint64_t>(p.out.rows, 1));
    p.out.batch_stride = batch > 1 ? static_cast<std::int64_t>(p.out.rows * p.out.cols) : 0;
    p.m = p.out.rows;  // N
    p.n = p.out.cols;  // M
    p.batch = static_cast<std::int32_t>(batch);
    // A batch of row-major a against one b: one product of batch * M rows.
    if (batch > 1 && p.first.batch_stride == 0 && !p.second.transposed &&
        p.second.ld == static_cast<std::int64_t>(p.second.rows) &&
        p.second.batch_stride == static_cast<std::int64_t>(p.second.rows * p.second.cols)) {
        p.second.cols *= batch;
        p.second.batch_stride = 0;
        p.out.cols *= batch;
        p.out.batch_stride = 0;
        p.n = p.out.cols;
        p.batch = 1;
    }
    const auto first_rows = p.first.transposed ? p.first.cols : p.first.rows;
    const auto first_cols = p.first.transposed ? p.first.rows : p.first.cols;
    const auto second_rows = p.second.transposed ? p.second.cols : p.second.rows;
    const auto second_cols = p.second.transposed ? p.second.rows : p.second.cols;
    if (first_rows != p.m || second_cols != p.n || first_cols != second_rows)
        throw_error(error_code::shape, what + ": the output's dims do not match the operands'");
    p.k = first_cols;
    return p;
}

bool lt_element_type(type t) { return t == type::float32 || t == type::float16 || t == type::bfloat16; }

lt_types lt_descriptor_types(type t, bool tf32) {
    lt_types r;
    r.scale = CUDA_R_32F;
    r.compute = CUBLAS_COMPUTE_32F;
    std::string data;
    switch (t) {
        case type::float32:
            r.data = CUDA_R_32F;
            data = "CUDA_R_32F";
            if (tf32) r.compute = CUBLAS_COMPUTE_32F_FAST_TF32;
            break;
        case type::float16: r.data = CUDA_R_16F; data = "CUDA_R_16F"; break;
        case type::bfloat16: r.data = CUDA_R_16BF; data = "CUDA_R_16BF"; break;
        default:
            throw_error(error_code::unsupported, "gpu::lt_matmul: no cuBLASLt type for " + std::string(type_name(t)));
    }
    r.text = "A/B/C/D " + data + ", compute " +
             (r.compute == CUBLAS_COMPUTE_32F ? "CUBLAS_COMPUTE_32F" : "CUBLAS_COMPUTE_32F_FAST_TF32") +
             ", scale CUDA_R_32F";
    return r;
}

struct lt_state {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t layouts[3] = {nullptr, nullptr, nullptr};  // A (b), B (a), C/D (out)
    cublasLtMatmulAlgo_t algo{};
    std::size_t workspace = 0;  // what the algorithm needs
    std::mutex mutex;           // compute sets the bias pointer on the shared descriptor
    std::string no_algorithm;   // why cuBLASLt has none: compute then runs on the host
    std::string problem;        // "m=.. n=.. k=.. batch=.."
    ~lt_state() {
        for (auto* l : layouts)
            if (l) (void)cublasLtMatrixLayoutDestroy(l);
        if (desc) (void)cublasLtMatmulDescDestroy(desc);
    }
};

namespace {

cublasLtMatrixLayout_t make_layout(const lt_layout& v, std::int32_t batch, int data, const std::string& what) {
    cublasLtMatrixLayout_t l = nullptr;
    check_cublas(cublasLtMatrixLayoutCreate(&l, static_cast<cudaDataType_t>(data), v.rows, v.cols, v.ld), "cublasLtMatrixLayoutCreate for " + what);
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
    g->use_device(true);
    const auto p = plan_lt(inputs.at(0), inputs.at(1), output, trans_a, trans_b);
    auto st = std::make_shared<lt_state>();
    st->problem = "m=" + std::to_string(p.m) + " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k) +
                  " batch=" + std::to_string(p.batch);
    if (bias) st->problem += " bias";
    if (output.get_type() != type::float32) st->problem += " " + std::string(type_name(output.get_type()));
    if (tf32) st->problem += " tf32";
    const std::string what = "gpu::lt_matmul (" + st->problem + ")";
    const auto types = lt_descriptor_types(output.get_type(), tf32);
    check_cublas(cublasLtMatmulDescCreate(&st->desc, static_cast<cublasComputeType_t>(types.compute),
                                          static_cast<cudaDataType_t>(types.scale)),
                 "cublasLtMatmulDescCreate for " + what);
    const cublasOperation_t op_a = p.first.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = p.second.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    check_cublas(cublasLtMatmulDescSetAttribute(st->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)),
                 "cublasLtMatmulDescSetAttribute(TRANSA) for " + what);
    check_cublas(cublasLtMatmulDescSetAttribute(st->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)),
                 "cublasLtMatmulDescSetAttribute(TRANSB) for " + what);
    if (bias) {
        // The bias is one value per row of cuBLASLt's D (our output's columns); its pointer
        // is set per run (an arena address, or the uploaded literal).
        const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
        check_cublas(cublasLtMatmulDescSetAttribute(st->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)),
                     "cublasLtMatmulDescSetAttribute(EPILOGUE_BIAS) for " + what);
        // A 16-bit product's bias is 16-bit too (quantize_* converts gemm's C with it).
        const auto bias_type = static_cast<cudaDataType_t>(types.data);
        check_cublas(cublasLtMatmulDescSetAttribute(st->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                    sizeof(bias_type)),
                     "cublasLtMatmulDescSetAttribute(BIAS_DATA_TYPE) for " + what);
    }
    st->layouts[0] = make_layout(p.first, p.batch, types.data, what + " operand b");
    st->layouts[1] = make_layout(p.second, p.batch, types.data, what + " operand a");
    st->layouts[2] = make_layout(p.out, p.batch, types.data, what + " output");

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
    const auto status = cublasLtMatmulAlgoGetHeuristic(g->lt_handle(), st->desc, st->layouts[0], st->layouts[1],
                                                       st->layouts[2], st->layouts[2], pref, 1, &result, &returned);
    if (status != CUBLAS_STATUS_SUCCESS || returned == 0 || result.state != CUBLAS_STATUS_SUCCESS) {
        // Not an error: the product still runs, on the host between copies (counted by
        // lt_host_fallbacks, which the device tests report).
        st->no_algorithm = std::string("cublasLtMatmulAlgoGetHeuristic: ") +
                           (status != CUBLAS_STATUS_SUCCESS ? cublasLtGetStatusString(status)
                            : returned == 0          ? "no algorithm"
                                                     : cublasLtGetStatusString(result.state)) +
                           " for " + what;
    } else {
        st->algo = result.algo;
        st->workspace = result.workspaceSize;
    }
    state = std::move(st);
}

argument lt_matmul::compute(context& ctx, const shape& output, const std::vector<argument>& args) const {
    auto& g = gpu_context_of(ctx, "gpu::lt_matmul");
    if (!state)
        throw_error(error_code::runtime, "gpu::lt_matmul: not planned on a device (the program was finalized where "
                                         "there was no device; compile or load it on the machine that runs it)");
    // Messages are built only on failure: this runs at every product.
    auto what = [&] { return "gpu::lt_matmul (" + state->problem + ")"; };
    const std::size_t n = bias ? 5 : 4;
    if (args.size() != n) throw_error(error_code::runtime, what() + ": expects " + std::to_string(n) + " arguments");
    const auto& a = args[0];
    const auto& b = args[1];
    const auto& ws = args[n - 2];
    const auto& out = args[n - 1];
    for (std::size_t i = 0; i < n; ++i) {
        auto which = [&] {
            return std::string(i == 0 ? "operand a" : i == 1 ? "operand b" : i == n - 2 ? "workspace" : i == n - 1 ? "output" : "bias");
        };
        if (args[i].location() != memory_location::device)
            throw_error(error_code::runtime, what() + ": " + which() + " (" + args[i].get_shape().to_string() +
                                                 ") is host memory; gpu kernels take device memory");
        if (i != n - 2 && reinterpret_cast<std::uintptr_t>(args[i].data()) % 16 != 0)
            throw_error(error_code::runtime, what() + ": " + which() + " is not 16-byte aligned");
    }
    const std::size_t workspace = ws.get_shape().bytes();
    if (workspace < state->workspace)
        throw_error(error_code::runtime, what() + ": the algorithm needs " + std::to_string(state->workspace) +
                                             " workspace bytes, the planned buffer has " + std::to_string(workspace));
    if (!state->no_algorithm.empty()) return on_host(g, output, args);
    const float beta = 0.0f;
    // One descriptor per instruction: evals on other threads set their bias pointer too.
    std::lock_guard<std::mutex> lock(state->mutex);
    if (bias) {
        const void* p = args[2].data();
        const auto st = cublasLtMatmulDescSetAttribute(state->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p, sizeof(p));
        if (st != CUBLAS_STATUS_SUCCESS) check_cublas(st, "cublasLtMatmulDescSetAttribute(BIAS_POINTER) for " + what());
    }
    const auto st = cublasLtMatmul(g.lt_handle(), state->desc, &alpha, b.data(), state->layouts[0], a.data(),
                                   state->layouts[1], &beta, out.data(), state->layouts[2], out.data(), state->layouts[2],
                                   &state->algo, ws.data(), workspace, g.stream());
    if (st != CUBLAS_STATUS_SUCCESS) check_cublas(st, "cublasLtMatmul for " + what());
    return out.reshape(output);
}

namespace {
std::atomic<std::size_t> host_fallbacks{0};
}  // namespace

std::size_t lt_host_fallbacks() { return host_fallbacks.load(); }

argument lt_matmul::on_host(gpu_context& g, const shape& output, const std::vector<argument>& args) const {
    ++host_fallbacks;
    const std::size_t n = bias ? 5 : 4;
    std::vector<argument> host;
    for (std::size_t i = 0; i + 2 < n; ++i) host.push_back(download(args[i], g, "an operand of gpu::lt_matmul (host run)"));
    if (bias) host.push_back(download(args[2], g, "the bias of gpu::lt_matmul (host run)"));
    static host_context reference;
    const operation op = !trans_a && !trans_b && alpha == 1.0f && !bias
                             ? operation(op::matmul{})
                             : operation(op::gemm{alpha, 1.0f, trans_a, trans_b});
    std::vector<shape> shapes;
    for (const auto& h : host) shapes.push_back(h.get_shape());
    const argument result = op.compute(reference, op.compute_shape(shapes), host);
    const auto& out = args[n - 1];
    argument staging(out.get_shape());
    result.copy_to(staging);
    upload_into(staging, out, g, "the result of gpu::lt_matmul (host run)");
    g.finish();
    return out.reshape(output);
}

KILN_REGISTER_OP(lt_matmul)

}  // namespace kiln::gpu
