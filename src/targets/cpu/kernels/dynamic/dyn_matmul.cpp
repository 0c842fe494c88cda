#include "targets/cpu/kernels/dynamic/dyn_matmul.hpp"

#include "ops/nn_matmul.hpp"
#include "ops/pointwise_binary.hpp"
#include "ops/tensor_views.hpp"
#include "targets/cpu/context.hpp"
#include "targets/cpu/cpu_features.hpp"
#include "targets/cpu/fusion.hpp"
#include "targets/cpu/kernels/packed_gemm/packed_gemm.hpp"

#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstring>
#include <optional>
#include <mutex>
#include <unordered_set>

namespace kiln::cpu {

namespace {

// One operand's matrices as sgemm reads them: rows x cols at `data` + the batch offset,
// row-major with leading dimension `ld`, or its transpose.
struct matrix_operand {
    const float* data = nullptr;
    std::vector<std::size_t> batch_lens, batch_strides;  // in elements
    char trans = 'N';
    dnnl_dim_t ld = 0;
};

// `a` holds its matrices in place when the last two dims have a unit stride on one side
// (row-major, or a transposed view); otherwise `keep` gets a row-major copy.
matrix_operand operand_of(const argument& a, argument& keep) {
    const shape* s = &a.get_shape();
    auto place = [&](const shape& sh) {
        const auto& l = sh.lens();
        const auto& st = sh.strides();
        const std::size_t r = l.size(), rows = l[r - 2], cols = l[r - 1];
        matrix_operand m;
        if (st[r - 1] == 1 || cols == 1) {
            m.trans = 'N';
            m.ld = static_cast<dnnl_dim_t>(std::max<std::size_t>({st[r - 2], cols, 1}));
            if (rows > 1 && st[r - 2] < cols) return std::optional<matrix_operand>{};
        } else if (st[r - 2] == 1 || rows == 1) {
            m.trans = 'T';
            m.ld = static_cast<dnnl_dim_t>(std::max<std::size_t>({st[r - 1], rows, 1}));
            if (cols > 1 && st[r - 1] < rows) return std::optional<matrix_operand>{};
        } else {
            return std::optional<matrix_operand>{};
        }
        m.batch_lens.assign(l.begin(), l.end() - 2);
        m.batch_strides.assign(st.begin(), st.end() - 2);
        return std::optional<matrix_operand>{m};
    };
    auto m = place(*s);
    if (!m) {
        keep = a.copy();
        s = &keep.get_shape();
        m = place(*s);
        m->data = keep.data_as<float>();
        return *m;
    }
    m->data = a.data_as<float>();
    return *m;
}

}  // namespace

void dyn_matmul::finalize(context& ctx, const shape&, const std::vector<shape>&) {
    if (packed_n > 0) {
        const auto* cpu = dynamic_cast<const cpu_context*>(&ctx);
        part = pgemm::chosen_part(cpu ? cpu->options().packed_gemm_isa : isa_cap::none);
        steps_full = packed_post_steps(post_ops, name(), [](std::size_t) { return true; });
        steps_column = packed_post_steps(post_ops, name(), [](std::size_t) { return false; });
        return;
    }
    static std::once_flag warmed;
    std::call_once(warmed, [] {
        std::vector<float> a(16 * 16, 1.0f), b(16 * 16, 1.0f), c(16 * 16);
        (void)dnnl::sgemm('N', 'N', 16, 16, 16, 1.0f, a.data(), 16, b.data(), 16, 0.0f, c.data(), 16);
    });
}

shape dyn_matmul::compute_shape(const std::vector<shape>& inputs) const {
    if (packed_n <= 0) return op::matmul{}.compute_shape(inputs);
    // A [..., k] times the packed [k][n]: A's dims with n last.
    if (inputs.size() < 2 || !inputs[0].is_tensor() || inputs[0].ndim() < 2 || inputs[0].get_type() != type::float32)
        throw_error(error_code::shape, name() + ": a must be a float32 tensor of rank 2 or more");
    auto dims = inputs[0].to_dynamic_dims();
    if (!(dims.back() == dynamic_dimension{static_cast<std::size_t>(packed_k), static_cast<std::size_t>(packed_k), {}, {}}))
        throw_error(error_code::shape, name() + ": a " + inputs[0].to_string() + " does not have depth " +
                                           std::to_string(packed_k));
    dims.back() = dynamic_dimension{static_cast<std::size_t>(packed_n), static_cast<std::size_t>(packed_n), {}, {}};
    return shape::make_dynamic(type::float32, dims);
}

argument dyn_matmul::compute_packed(const shape& out, const std::vector<argument>& args) const {
    argument a = args.at(0);
    const shape result = out.dynamic() ? compute_shape({a.get_shape(), args.at(1).get_shape()}) : out.as_standard();
    if (!a.get_shape().standard()) a = a.copy();  // rows of k contiguous floats, one after the other
    auto y = argument::for_overwrite(result);  // every element written below
    pgemm::args g;
    g.k = static_cast<std::size_t>(packed_k);
    g.n = static_cast<std::size_t>(packed_n);
    g.m = a.get_shape().elements() / g.k;
    if (g.m == 0) return y;
    g.kc = pgemm::depth_block(g.k);
    g.a = a.data_as<float>();
    // Rows 4 KiB apart evict each other from L1 (packed_gemm.hpp): read from a padded copy.
    argument padded;
    if (const std::size_t lda = pgemm::padded_a_stride(g.k, g.m); lda != g.k) {
        padded = argument(shape(type::float32, {g.m * lda}));
        float* copy = padded.data_as<float>();
        const auto rows = static_cast<std::int64_t>(g.m);
        const float* src = g.a;
#pragma omp parallel for schedule(static) if (g.m * g.k >= (1u << 16))
        for (std::int64_t i = 0; i < rows; ++i)
            std::copy_n(src + static_cast<std::size_t>(i) * g.k, g.k, copy + static_cast<std::size_t>(i) * lda);
        g.a = copy;
        g.lda = lda;
    }
    g.b = args[1].data_as<float>();
    g.c = y.data_as<float>();
    if (has_bias) g.bias = args.at(2).data_as<float>();
    // The epilogue's operands (copies among them) live until the product is done.
    const auto operands = post_ops.empty() ? std::vector<argument>{} : bind_epilogue(g, result, args);
    pgemm::run_all(g, part ? part : pgemm::chosen_part(isa_cap::none));
    return y;
}

std::vector<argument> dyn_matmul::bind_epilogue(pgemm::args& g, const shape& result,
                                                const std::vector<argument>& args) const {
    if (steps_full.size() != post_ops.size()) throw_error(error_code::runtime, name() + ": run before it was finalized");
    // Each binary operand this call: the result's dims (row-major, copied if not) or one
    // value per column; lowering made sure its dims are the result's in every run.
    std::vector<argument> operands = args;
    std::vector<pgemm::post_step> steps = steps_full;
    for (std::size_t i = 0; i < post_ops.size(); ++i) {
        if (!is_binary(steps[i].kind)) continue;
        auto& x = operands.at(static_cast<std::size_t>(post_ops[i].input));
        const auto& xs = x.get_shape();
        if (xs.lens() == result.lens()) {
            if (!xs.standard()) x = x.copy();
        } else if (xs.elements() == g.n && xs.lens().back() == g.n && xs.strides().back() == 1) {
            steps[i] = steps_column[i];
        } else {
            throw_error(error_code::shape, name() + ": post-op operand " + xs.to_string() + " is neither the result " +
                                               result.to_string() + " nor one value per column");
        }
    }
    bind_post_steps(g, steps, post_ops, operands);
    return operands;
}

argument dyn_matmul::compute(context&, const shape& out, const std::vector<argument>& args) const {
    if (packed_n > 0) return compute_packed(out, args);
    const auto& as = args.at(0).get_shape();
    const auto& bs = args.at(1).get_shape();
    shape result = out.dynamic() ? compute_shape({as, bs}) : out.as_standard();
    if (as.ndim() < 2 || bs.ndim() < 2 || as.get_type() != type::float32 || bs.get_type() != type::float32)
        return op::matmul{}.compute(result, args);
    auto y = argument::for_overwrite(result);  // every element written below
    const auto& yl = result.lens();
    const std::size_t r = yl.size(), M = yl[r - 2], N = yl[r - 1], K = as.lens().back();
    if (result.elements() == 0) return y;
    float* c = y.data_as<float>();
    if (K == 0) {
        std::memset(c, 0, result.bytes());
        return y;
    }
    argument keep_a, keep_b;
    auto A = operand_of(args[0], keep_a);
    auto B = operand_of(args[1], keep_b);
    // Out batch index -> each operand's offset (NumPy broadcasting: dims aligned right,
    // a size-1 dim repeats).
    const std::size_t batch_rank = r - 2;
    auto offset_of = [&](const matrix_operand& m, const std::vector<std::size_t>& idx) {
        std::size_t off = 0;
        const std::size_t skip = batch_rank - m.batch_lens.size();
        for (std::size_t d = 0; d < m.batch_lens.size(); ++d)
            if (m.batch_lens[d] != 1) off += idx[skip + d] * m.batch_strides[d];
        return off;
    };
    std::vector<std::size_t> idx(batch_rank, 0);
    const std::size_t batches = result.elements() / (M * N);
    // A small product (a decode step's) on the calling thread alone (single_thread_macs).
    std::optional<omp_threads_scope> one_thread;
    if (batches * M * N * K < single_thread_macs) one_thread.emplace(1);
    for (std::size_t b = 0; b < batches; ++b) {
        auto status = dnnl::sgemm(A.trans, B.trans, static_cast<dnnl_dim_t>(M), static_cast<dnnl_dim_t>(N),
                                  static_cast<dnnl_dim_t>(K), 1.0f, A.data + offset_of(A, idx), A.ld,
                                  B.data + offset_of(B, idx), B.ld, 0.0f, c + b * M * N, static_cast<dnnl_dim_t>(N));
        if (status != dnnl::status::success)
            throw_error(error_code::runtime, "cpu::dyn_matmul: oneDNN sgemm failed for " + as.to_string() + " x " +
                                                 bs.to_string());
        for (std::size_t d = batch_rank; d-- > 0;) {
            if (++idx[d] < yl[d]) break;
            idx[d] = 0;
        }
    }
    return y;
}

namespace {

bool lowerable(instruction_ref ins) {
    if (!ins->get_operator().any_cast<op::matmul>() || ins->inputs().size() != 2 || !ins->get_shape().is_tensor() ||
        !ins->get_shape().dynamic())
        return false;
    for (auto in : ins->inputs()) {
        const auto& s = in->get_shape();
        if (!s.is_tensor() || s.get_type() != type::float32 || s.ndim() < 2) return false;
    }
    return true;
}

}  // namespace

bool dyn_matmul_packs(const cpu_options& options, instruction_ref ins) {
    if (!lowerable(ins)) return false;
    const auto w = ins->inputs()[1];
    const auto& ws = w->get_shape();
    const auto& ad = ins->inputs()[0]->get_shape().to_dynamic_dims();
    return w->is_literal() && ws.ndim() == 2 && options.packed_gemm != packed_gemm_choice::off && has_avx2_fma() &&
           ad.back().is_fixed() && ad.back().min == ws.lens()[0] && ws.elements() > 0;
}

fused_chain dyn_matmul_epilogue(const cpu_options& options, instruction_ref ins) {
    if (!options.fusion || !dyn_matmul_packs(options, ins)) return {};
    static const std::unordered_set<const instruction*> none;
    auto c = find_post_ops(ins, ins->get_shape().ndim() - 1, true, none);
    std::unordered_set<const instruction*> later;
    for (auto it = std::next(ins); !c.members.empty() && it != std::next(c.members.back()); ++it) later.insert(&*it);
    for (std::size_t step = 0; step < c.steps.size(); ++step) {
        const auto& mk = c.steps[step];
        const std::size_t before = step == 0 ? 0 : c.steps[step - 1].extra;
        for (std::size_t e = before; e < mk.extra; ++e)
            if (later.count(&*c.extra[e])) return truncate(c, step);
    }
    return c;
}

bool lower_dyn_matmul(lower_env& env, instruction_ref ins) {
    if (!lowerable(ins)) return false;
    std::vector<instruction_ref> args;
    for (auto in : ins->inputs()) args.push_back(in_dnnl_layout(env, in) ? plain(env, in) : in);
    if (!dyn_matmul_packs(env.ctx.options(), ins)) {
        env.m.replace_instruction(ins, dyn_matmul{}, args);
        return true;
    }
    // Constant 2-D weights (a linear layer's) on packed_gemm's kernels, packed once, with
    // the bias, activation and residual after them in the epilogue.
    const auto a = args[0], w = args[1];
    const std::size_t k = w->get_shape().lens()[0], n = w->get_shape().lens()[1];
    dyn_matmul op;
    op.packed_k = static_cast<std::int64_t>(k);
    op.packed_n = static_cast<std::int64_t>(n);
    const auto packed = pack_gemm_weights(w->get_literal().to_vector<float>(), k, n, false);
    std::vector<instruction_ref> inputs{a, env.constant(ins, literal(shape(type::float32, {packed.size()}), packed))};
    const auto chain = dyn_matmul_epilogue(env.ctx.options(), ins);
    if (chain.bias) {
        op.has_bias = true;
        const auto values = (*chain.bias)->get_literal().to_vector<float>();
        inputs.push_back(env.constant(ins, literal(shape(type::float32, {values.size()}), values)));
    }
    const std::size_t first_extra = inputs.size();
    for (auto x : chain.extra) inputs.push_back(in_dnnl_layout(env, x) ? plain(env, x) : x);
    op.post_ops = chain.post_ops;
    for (auto& p : op.post_ops)
        if (p.input >= 0) p.input += static_cast<std::int64_t>(first_extra);
    env.m.replace_instruction(ins, op, inputs);
    if (chain.members.empty()) return true;
    // The product takes the chain's place: its readers read the product, the chain goes
    // (last first; each member then has no readers left).
    env.m.replace_instruction(chain.members.back(), ins);
    for (auto it = chain.members.rbegin(); it != chain.members.rend(); ++it) env.m.remove_instruction(*it);
    return true;
}

bool lower_dyn_gemm(lower_env& env, instruction_ref ins) {
    const auto* g = ins->get_operator().any_cast<op::gemm>();
    if (!g || g->alpha != 1.0f || ins->inputs().size() < 2 || !ins->get_shape().is_tensor() ||
        !ins->get_shape().dynamic())
        return false;
    for (auto in : ins->inputs()) {
        const auto& s = in->get_shape();
        if (!s.is_tensor() || s.get_type() != type::float32) return false;
    }
    const bool bias = ins->inputs().size() == 3 && g->beta != 0.0f;
    if (bias && g->beta != 1.0f) return false;
    auto operand = [&](instruction_ref x, bool trans) {
        if (in_dnnl_layout(env, x)) x = plain(env, x);
        // A transposed view: sgemm reads it in place with its transpose flag.
        return trans ? env.m.insert_instruction(ins, op::transpose{{1, 0}}, {x}) : x;
    };
    auto a = operand(ins->inputs()[0], g->trans_a);
    auto b = operand(ins->inputs()[1], g->trans_b);
    if (a->get_shape().ndim() != 2 || b->get_shape().ndim() != 2) return false;
    if (!bias) {
        env.m.replace_instruction(ins, dyn_matmul{}, {a, b});
        return true;
    }
    auto product = env.m.insert_instruction(ins, dyn_matmul{}, {a, b});
    env.m.replace_instruction(ins, op::add_op{}, {product, ins->inputs()[2]});
    return true;
}

KILN_REGISTER_OP(dyn_matmul)

}  // namespace kiln::cpu
