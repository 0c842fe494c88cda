#include "targets/cpu/kernels/packed_gemm/packed_gemm.hpp"

#include "targets/cpu/context.hpp"
#include "targets/cpu/cpu_features.hpp"
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"
#include "targets/cpu/kernels/packed_gemm/packed_gemm_args.hpp"
#include "targets/cpu/kernels/team/team.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/errors.hpp>
#include <kiln/float_types.hpp>
#include <kiln/register_op.hpp>

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <utility>
#include <string>

namespace kiln::cpu {

namespace {

// Fewest rows (all batches) worth the packed kernels. Measured against oneDNN's gemm:jit
// (packed_gemm_bench_test.cpp, 2 threads, min of 400 runs): from 2 rows up
// the packed product is as fast or faster (2x256x256 0.0056 vs 0.0091 ms, 2x2048x1000 0.16
// vs 0.25, 128x256x256 0.091 vs 0.096, 128x1024x256 with a residual 0.363 vs 0.358); with
// one row both stream B from memory and oneDNN's gemv is as fast or slightly faster
// (1x2048x1000 0.099 vs 0.093). With AVX-512 (Zen 5 EPYC, the classifiers of the shared
// models, 3 alternating runs each) the packed kernels win there too: 1x2048x1000
// 0.190-0.206 vs 0.204-0.233 ms, 1x1280x1000 0.103-0.116 vs 0.109-0.129.
constexpr std::size_t min_rows = 2;
std::size_t fewest_rows() { return has_avx512() ? 1 : min_rows; }
// K blocks: up to this depth in one block; deeper, in equal blocks of at most 256, so that a
// B micro-panel (kc x 16 floats, 16 KiB) stays in L1 while the tiles of a part sweep it.
constexpr std::size_t one_block_depth = 384;
constexpr std::size_t block_depth = 256;

using pgemm::panels;


// A binary post-op operand the kernels read: one value per column (broadcast over the
// rows), or a row-major tensor of the result's shape.
enum class operand_kind { none, column_vector, full };

operand_kind binary_operand(const shape& s, const std::vector<std::size_t>& dst_lens, std::size_t n) {
    if (!s.is_tensor() || s.dynamic() || s.get_type() != type::float32 || s.ndim() == 0) return operand_kind::none;
    if (s.elements() == n && s.lens().back() == n && s.strides().back() == 1) return operand_kind::column_vector;
    if (s.lens() == dst_lens && s.standard()) return operand_kind::full;
    return operand_kind::none;
}

// The work cut into row_parts x col_parts independent parts, one per thread: the columns
// first, so that each thread streams only its own B panels (at least two panels each),
// the rows (in whole 6-row tiles, at least one each) for the rest.
struct cut {
    std::size_t row_parts, col_parts;
};

cut plan_cut(std::size_t m, std::size_t n_panels, std::size_t threads) {
    threads = std::max<std::size_t>(threads, 1);
    std::size_t c = threads;
    while (c > 1 && (n_panels < 2 * c || threads % c != 0)) --c;
    std::size_t r = threads / c;
    while (r > 1 && m < pgemm::tile_rows * r) --r;
    return {r, c};
}

}  // namespace

std::vector<pgemm::post_step> packed_post_steps(const std::vector<post_op>& ops, const std::string& op_name,
                                                const std::function<bool(std::size_t)>& full) {
    std::vector<pgemm::post_step> out;
    for (const auto& po : ops) {
        pgemm::post_step s;
        const auto kind = fused_post_kind_of(po, true, true);
        if (!kind) throw_error(error_code::parse, op_name + ": post-op " + po.kind + " " + po.algorithm + " is not supported");
        s.kind = *kind;
        s.alpha = po.alpha;
        s.beta = po.beta;
        s.full = is_binary(s.kind) && full(static_cast<std::size_t>(po.input));
        out.push_back(s);
    }
    return out;
}

void bind_post_steps(pgemm::args& g, const std::vector<pgemm::post_step>& steps, const std::vector<post_op>& ops,
                     const std::vector<argument>& args) {
    g.n_post = 0;
    for (std::size_t i = 0; i < steps.size(); ++i) {
        auto& s = g.post[g.n_post++];
        s = steps[i];
        if (is_binary(s.kind)) s.src = reinterpret_cast<const float*>(args[static_cast<std::size_t>(ops[i].input)].data());
    }
}

std::vector<float> pack_gemm_weights(const std::vector<float>& b, std::size_t k, std::size_t n, bool trans_b) {
    const std::size_t np = panels(n);
    std::vector<float> out(np * k * pgemm::panel, 0.0f);
    for (std::size_t p = 0; p < np; ++p)
        for (std::size_t kk = 0; kk < k; ++kk)
            for (std::size_t j = 0; j < pgemm::panel && p * pgemm::panel + j < n; ++j) {
                const std::size_t col = p * pgemm::panel + j;
                out[(p * k + kk) * pgemm::panel + j] = trans_b ? b[col * k + kk] : b[kk * n + col];
            }
    return out;
}

std::vector<float> pack_gemm_weights_bf16(const std::vector<float>& b, std::size_t k, std::size_t n, bool trans_b) {
    const std::size_t np = panels(n), kp = (k + 1) / 2;
    std::vector<float> out(np * kp * pgemm::panel, 0.0f);
    auto* pairs = reinterpret_cast<std::uint16_t*>(out.data());
    for (std::size_t p = 0; p < np; ++p)
        for (std::size_t kk = 0; kk < k; ++kk)
            for (std::size_t j = 0; j < pgemm::panel && p * pgemm::panel + j < n; ++j) {
                const std::size_t col = p * pgemm::panel + j;
                const float v = trans_b ? b[col * k + kk] : b[kk * n + col];
                pairs[((p * kp + kk / 2) * pgemm::panel + j) * 2 + kk % 2] = bfloat16(v).bits;
            }
    return out;
}

namespace {

// Bf16 pairs (pack_gemm_weights_bf16) back to float32 panels (pack_gemm_weights): exact.
std::vector<float> widen_bf16_panels(const float* blob, std::size_t k, std::size_t n) {
    const std::size_t np = panels(n), kp = (k + 1) / 2;
    const auto* pairs = reinterpret_cast<const std::uint16_t*>(blob);
    std::vector<float> out(np * k * pgemm::panel);
    for (std::size_t p = 0; p < np; ++p)
        for (std::size_t kk = 0; kk < k; ++kk)
            for (std::size_t j = 0; j < pgemm::panel; ++j)
                out[(p * k + kk) * pgemm::panel + j] =
                    bfloat16::from_bits(pairs[((p * kp + kk / 2) * pgemm::panel + j) * 2 + kk % 2]);
    return out;
}

// Whether every value is a bf16 value (weights widened from a bf16 program's are).
bool bf16_exact(const std::vector<float>& v) {
    return std::all_of(v.begin(), v.end(), [](float x) { return static_cast<float>(bfloat16(x)) == x || x != x; });
}

}  // namespace

namespace pgemm {

bool has_bf16_kernels(isa_cap cap) { return cap == isa_cap::none && has_avx512() && has_native_bf16(); }

part_fn chosen_part(isa_cap cap) {
    if (cap == isa_cap::generic || !has_avx2_fma()) return generic_part();
    if (cap == isa_cap::avx2 || !has_avx512()) return avx2_part();
    return avx512_part();
}

const char* part_name(part_fn part) {
    if (part == avx512_bf16_part()) return "avx512_bf16";
    if (part == avx512_part()) return "avx512";
    if (part == avx2_part()) return "avx2";
    return "generic";
}

std::size_t depth_block(std::size_t k) {
    if (k <= one_block_depth) return std::max<std::size_t>(k, 1);
    const std::size_t blocks = (k + block_depth - 1) / block_depth;
    return (k + blocks - 1) / blocks;
}

namespace {

// How run_all cuts a product: threads, then parts.
cut cut_of(const args& g, bool tall) {
    // A small product (a decode step's projection) on the calling thread alone.
    const auto threads = g.m * g.n * g.k < single_thread_macs ? std::size_t{1} : team::threads();
    return tall ? cut{threads, 1} : plan_cut(g.m, panels(g.n), threads);
}

// Runs part `id` of the cut: its rows and panels, on the args given.
struct part_runner {
    const args& g;
    part_fn part;
    cut c;
    std::size_t rows_per, cols_per;
    part_runner(const args& a, part_fn f, cut cut_) : g(a), part(f), c(cut_) {
        // Whole tiles per part (12 rows in the tall order: the AVX-512 tiles' height).
        const std::size_t granule = g.tall ? 2 * tile_rows : tile_rows;
        const std::size_t tiles = (g.m + granule - 1) / granule;
        rows_per = (tiles + c.row_parts - 1) / c.row_parts * granule;
        cols_per = (panels(g.n) + c.col_parts - 1) / c.col_parts;
    }
    std::size_t parts() const { return c.row_parts * c.col_parts; }
    std::size_t column_of(std::size_t id) const { return id % c.col_parts; }
    std::pair<std::size_t, std::size_t> rows_of(std::size_t id) const {
        const std::size_t m0 = std::min(id / c.col_parts * rows_per, g.m);
        return {m0, std::min(m0 + rows_per, g.m)};
    }
    void operator()(std::size_t id, const args& on) const {
        const auto [m0, m1] = rows_of(id);
        const std::size_t np = panels(g.n), cp = column_of(id);
        const std::size_t p0 = std::min(cp * cols_per, np), p1 = std::min(p0 + cols_per, np);
        if (m0 < m1 && p0 < p1) part(on, m0, m1, p0, p1);
    }
};

}  // namespace

std::size_t column_parts(std::size_t m, std::size_t n, std::size_t k, std::size_t threads) {
    if (m * n * k < single_thread_macs || m >= tall_rows) return 1;
    return plan_cut(m, panels(n), threads).col_parts;
}

void run_all(const args& given, part_fn part, const float* a_f32) {
    args g = given;
    g.tall = g.m >= tall_rows;
    const part_runner run(g, part, cut_of(g, g.tall));
    auto convert = [&](std::size_t id, std::size_t nt) {
        if (!a_f32) return;
        const std::size_t r0 = g.m * id / nt, r1 = g.m * (id + 1) / nt;
        auto* out = const_cast<std::uint16_t*>(g.a_bf16);  // the run's own buffer
        if (r0 < r1) to_bf16_rows(a_f32 + r0 * g.k, r1 - r0, g.k, g.k, out + r0 * g.lda, g.lda);
    };
    if (run.parts() == 1) {
        convert(0, 1);
        run(0, g);
        return;
    }
    if (a_f32) {
        // Each thread its share of A's rows, then the parts (in one OpenMP region outside a
        // team: a region costs a fork and a join, a scheduler slice on a busy machine).
        if (team::active()) {
            const std::size_t nt = std::min(team::size(), run.parts());
            team::parallel(nt, [&](std::size_t id) { convert(id, nt); });
            team::parallel(run.parts(), [&](std::size_t i) { run(i, g); });
            return;
        }
#pragma omp parallel num_threads(static_cast<int>(run.parts()))
        {
            const auto id = static_cast<std::size_t>(omp_get_thread_num());
            const auto nt = static_cast<std::size_t>(omp_get_num_threads());
            convert(id, nt);
#pragma omp barrier
            for (std::size_t i = id; i < run.parts(); i += nt) run(i, g);
        }
        return;
    }
    team::parallel(run.parts(), [&](std::size_t i) { run(i, g); });
}

void run_all(const args& given, part_fn part, const a_fill& fill) {
    args g = given;
    g.tall = g.m >= tall_rows;
    const part_runner run(g, part, cut_of(g, g.tall));
    if (run.parts() == 1 || fill.copies < run.c.col_parts) {
        // One part, or too few copies for the column parts: all of A first, by the calling thread.
        fill.fill(fill.a, 0, g.m);
        g.a = fill.a;
        team::parallel(run.parts(), [&](std::size_t i) { run(i, g); });
        return;
    }
    team::parallel(run.parts(), [&](std::size_t i) {
        // The part's rows, into its column part's copy: the thread reads only what it wrote.
        args mine = g;
        mine.a = fill.a + run.column_of(i) * fill.copy_floats;
        const auto [m0, m1] = run.rows_of(i);
        if (m0 < m1) fill.fill(const_cast<float*>(mine.a), m0, m1);
        run(i, mine);
    });
}

}  // namespace pgemm

using pgemm::depth_block;

struct packed_gemm::plan {
    pgemm::part_fn part = nullptr;
    std::string isa;
    bool bf16 = false;  // the bf16 kernels run (else a bf16 op's panels are widened once)
    mutable std::once_flag widen_once;
    mutable std::vector<float> wide_b;
    // The epilogue's steps, mapped once: a run only points the binary ones at their inputs.
    std::vector<pgemm::post_step> post;
};

std::string packed_gemm::isa() const { return ready ? ready->isa : std::string(); }

shape packed_gemm::compute_shape(const std::vector<shape>& inputs) const {
    auto bad = [&](const std::string& why) { throw_error(error_code::shape, name() + ": " + why); };
    if (m <= 0 || n <= 0 || k <= 0) bad("m, n and k must be positive");
    const auto mu = static_cast<std::size_t>(m), nu = static_cast<std::size_t>(n), ku = static_cast<std::size_t>(k);
    const std::size_t base = 2 + (has_bias ? 1 : 0);
    if (inputs.size() < base + 1) bad("expected a, packed b, [bias] and output buffer inputs");
    for (const auto& s : inputs)
        if (!s.is_tensor() || s.dynamic()) bad("inputs must be static tensors, got " + s.to_string());
    std::vector<std::size_t> lens;
    std::size_t total = 1;
    for (auto d : out_lens) {
        if (d < 0) bad("negative result dim");
        lens.push_back(static_cast<std::size_t>(d));
        total *= lens.back();
    }
    if (lens.size() < 2 || total != mu * nu || lens.back() != nu)
        bad("result dims do not hold " + std::to_string(m) + " x " + std::to_string(n) + " values");
    const shape& a = inputs[0];
    if (a.get_type() != type::float32 || !a.standard() || a.ndim() < 2 || a.lens().back() != ku ||
        a.elements() != mu * ku)
        bad("a " + a.to_string() + " is not a row-major float32 tensor of " + std::to_string(m) + " rows of " +
            std::to_string(k));
    const std::size_t b_depth = bf16 ? (ku + 1) / 2 : ku;  // bf16: pairs of k, a float each
    if (inputs[1].get_type() != type::float32 || inputs[1].elements() < panels(nu) * b_depth * pgemm::panel)
        bad("the packed weights " + inputs[1].to_string() + " are too small");
    if (has_bias && (inputs[2].get_type() != type::float32 || inputs[2].elements() != nu))
        bad("the bias must have one float32 value per column");
    if (post_ops.size() > static_cast<std::size_t>(pgemm::max_post_steps)) bad("too many post-ops");
    const std::size_t copies = a_copy_stride > 0 ? 1 : 0;
    if (bf16 && (!copies || a_copy_stride % 2 != 0)) bad("a bf16 product needs an even a_copy_stride");
    if (a_copy_stride < 0 || (copies && static_cast<std::size_t>(a_copy_stride) < ku))
        bad("a_copy_stride " + std::to_string(a_copy_stride) + " is shorter than a row of " + std::to_string(k));
    if (inputs.size() < base + 1 + copies) bad("expected a buffer for the copy of a");
    if (copies && inputs[inputs.size() - 2].bytes() <
                      mu * static_cast<std::size_t>(a_copy_stride) * (bf16 ? sizeof(std::uint16_t) : sizeof(float)))
        bad("the buffer for the copy of a is too small");
    for (const auto& p : post_ops) {
        if (!fused_post_kind_of(p, true, true)) bad("post-op " + p.kind + " " + p.algorithm + " is not supported");
        if (p.kind != "binary") continue;
        const auto in = static_cast<std::size_t>(p.input);
        if (p.input < static_cast<std::int64_t>(base) || in >= inputs.size() - 1 - copies ||
            binary_operand(inputs[in], lens, nu) == operand_kind::none)
            bad("binary post-op input " + std::to_string(p.input) + " is neither a vector of " + std::to_string(n) +
                " nor a row-major tensor of the result's shape");
    }
    shape out(type::float32, lens);
    if (inputs.back().bytes() < out.bytes()) bad("the output buffer is too small");
    return out;
}

void packed_gemm::finalize(context& ctx, const shape&, const std::vector<shape>& inputs) {
    const auto cap = as_cpu_context(ctx, name()).options().packed_gemm_isa;
    auto p = std::make_shared<plan>();
    p->part = pgemm::chosen_part(cap);  // at load time: a program saved on one machine runs on another
    if (bf16 && pgemm::has_bf16_kernels(cap)) {
        p->part = pgemm::avx512_bf16_part();
        p->bf16 = true;
    }
    p->isa = pgemm::part_name(p->part);
    std::vector<std::size_t> lens(out_lens.begin(), out_lens.end());
    p->post = packed_post_steps(post_ops, name(), [&](std::size_t in) {
        return binary_operand(inputs.at(in), lens, static_cast<std::size_t>(n)) == operand_kind::full;
    });
    ready = std::move(p);
}

argument packed_gemm::compute(context&, const shape&, const std::vector<argument>& args) const {
    if (!ready) throw_error(error_code::runtime, name() + ": run before it was finalized");
    pgemm::args g;
    g.m = static_cast<std::size_t>(m);
    g.n = static_cast<std::size_t>(n);
    g.k = static_cast<std::size_t>(k);
    g.kc = depth_block(g.k);
    g.a = reinterpret_cast<const float*>(args[0].data());
    g.b = reinterpret_cast<const float*>(args[1].data());
    g.bias = has_bias ? reinterpret_cast<const float*>(args[2].data()) : nullptr;
    g.c = reinterpret_cast<float*>(args.back().data());
    bind_post_steps(g, ready->post, post_ops, args);
    if (bf16 && ready->bf16) {
        // A is converted into its bf16 rows by run_all, in the product's parallel region.
        g.a_bf16 = reinterpret_cast<std::uint16_t*>(args[args.size() - 2].data());
        g.b_bf16 = reinterpret_cast<const std::uint16_t*>(g.b);
        g.lda = static_cast<std::size_t>(a_copy_stride);
        pgemm::run_all(g, ready->part, g.a);
        return args.back();
    } else if (bf16) {
        // No bf16 kernels here: the float32 ones, on panels widened once, A read in place.
        std::call_once(ready->widen_once, [&] { ready->wide_b = widen_bf16_panels(g.b, g.k, g.n); });
        g.b = ready->wide_b.data();
    } else if (a_copy_stride > 0) {
        const auto lda = static_cast<std::size_t>(a_copy_stride);
        auto* copy = reinterpret_cast<float*>(args[args.size() - 2].data());
        const float* a = g.a;
        const auto rows = static_cast<std::int64_t>(g.m);
#pragma omp parallel for schedule(static)
        for (std::int64_t i = 0; i < rows; ++i)
            std::copy_n(a + static_cast<std::size_t>(i) * g.k, g.k, copy + static_cast<std::size_t>(i) * lda);
        g.a = copy;
        g.lda = lda;
    }
    pgemm::run_all(g, ready->part);
    return args.back();
}

bool lower_packed_gemm(lower_env& env, const matmul& mm, const std::vector<instruction_ref>& operands,
                       const shape& dst, instruction_ref pos, bool rules) {
    const auto& o = env.ctx.options();
    if (o.packed_gemm == packed_gemm_choice::off) return false;
    // Without the rules, every product that fits (as =all).
    const auto mode = rules ? o.packed_gemm : packed_gemm_choice::all;
    if (mm.trans_a || !mm.weights.empty() || operands.size() < 2 || !operands[1]->is_literal()) return false;
    if (!dst.is_tensor() || dst.dynamic() || dst.get_type() != type::float32 || !dst.standard() || dst.ndim() < 2)
        return false;
    const shape& a = operands[0]->get_shape();
    const shape& w = operands[1]->get_shape();
    if (env.layout.count(&*operands[0]) || a.get_type() != type::float32 || !a.standard() || a.ndim() < 2 ||
        w.get_type() != type::float32 || w.ndim() < 2)
        return false;
    const auto& wl = w.lens();
    for (std::size_t d = 0; d + 2 < wl.size(); ++d)
        if (wl[d] != 1) return false;  // batched weights
    const std::size_t k = mm.trans_b ? wl.back() : wl[wl.size() - 2];
    const std::size_t n = mm.trans_b ? wl[wl.size() - 2] : wl.back();
    if (k == 0 || n == 0 || a.lens().back() != k || dst.lens().back() != n) return false;
    const std::size_t m = a.elements() / k;
    if (m * n != dst.elements()) return false;  // A broadcast over batches
    if (m == 0) return false;
    // The timings behind min_rows are the AVX2 kernels'; the baseline ones (about 30 GFLOPS
    // on one core here, against 95 for AVX2) are there for loading a saved program on an
    // older CPU, not to replace oneDNN's SSE4.1 kernels, so without AVX2 products stay there.
    if (mode != packed_gemm_choice::all && (m < fewest_rows() || !has_avx2_fma())) return false;
    if (mm.post_ops.size() > static_cast<std::size_t>(pgemm::max_post_steps)) return false;
    if (mm.has_bias && (operands.size() < 3 || operands[2]->get_shape().elements() != n)) return false;
    for (const auto& p : mm.post_ops) {
        // GELU's erf is a polynomial (fused_post_kind.hpp): with fast_math only.
        if (!fused_post_kind_of(p, env.ctx.fast_math(), true)) return false;
        if (p.kind != "binary") continue;
        const auto in = static_cast<std::size_t>(p.input);
        if (p.input < 2 || in >= operands.size() || env.layout.count(&*operands[in]) ||
            binary_operand(operands[in]->get_shape(), dst.lens(), n) == operand_kind::none)
            return false;
    }
    packed_gemm op;
    op.m = static_cast<std::int64_t>(m);
    op.n = static_cast<std::int64_t>(n);
    op.k = static_cast<std::int64_t>(k);
    for (auto d : dst.lens()) op.out_lens.push_back(static_cast<std::int64_t>(d));
    op.has_bias = mm.has_bias;
    op.post_ops = mm.post_ops;
    const auto weights = operands[1]->get_literal().to_vector<float>();
    // A bf16 program's product (its weights bf16 values) where the bf16 kernels run.
    op.bf16 = env.ctx.bf16_matmuls && pgemm::has_bf16_kernels(o.packed_gemm_isa) && bf16_exact(weights);
    const auto packed = op.bf16 ? pack_gemm_weights_bf16(weights, k, n, mm.trans_b)
                                : pack_gemm_weights(weights, k, n, mm.trans_b);
    auto args = operands;
    args[1] = env.constant(pos, literal(shape(type::float32, {packed.size()}), packed));
    if (op.bf16) {
        // A's bf16 rows: an even stride (whole pairs), padded by a cache line where rows
        // would be 4 KiB apart (padded_a_stride's reason).
        std::size_t lda = (k + 1) / 2 * 2;
        if ((lda * sizeof(std::uint16_t)) % 4096 == 0 && m >= 24) lda += 32;
        op.a_copy_stride = static_cast<std::int64_t>(lda);
        args.push_back(env.m.insert_instruction(pos, builtin::allocate{shape(type::uint8, {m * lda * 2})}, {}));
    } else if (const std::size_t lda = pgemm::padded_a_stride(k, m); o.packed_gemm_copy_a && lda != k) {
        op.a_copy_stride = static_cast<std::int64_t>(lda);
        const std::size_t bytes = m * lda * sizeof(float);
        args.push_back(env.m.insert_instruction(pos, builtin::allocate{shape(type::uint8, {bytes})}, {}));
    }
    args.push_back(env.m.insert_instruction(pos, builtin::allocate{dst}, {}));
    env.m.replace_instruction(pos, op, args);
    return true;
}

KILN_REGISTER_OP(packed_gemm)

}  // namespace kiln::cpu
