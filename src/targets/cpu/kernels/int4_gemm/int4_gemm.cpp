#include "targets/cpu/kernels/int4_gemm/int4_gemm.hpp"

#include "ops/nn_matmul_int4.hpp"
#include "targets/cpu/context.hpp"
#include "targets/cpu/cpu_features.hpp"
#include "targets/cpu/kernels/int4_gemm/int4_gemm_args.hpp"
#include "targets/cpu/kernels/packed_gemm/packed_gemm_args.hpp"
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"
#include "targets/cpu/kernels/onednn/primitive_kernel.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <omp.h>

#include <algorithm>

namespace kiln::cpu {

namespace {

int4g::part_fn chosen_part(isa_cap cap) {
    if (cap == isa_cap::generic || !has_avx2_fma()) return int4g::generic_part();
    if (cap == isa_cap::avx2 || !has_avx512()) return int4g::avx2_part();
    return int4g::avx512_part();
}

int4g::unpack_fn chosen_unpack(isa_cap cap) {
    if (cap == isa_cap::generic || !has_avx2_fma()) return int4g::generic_unpack();
    if (cap == isa_cap::avx2 || !has_avx512()) return int4g::avx2_unpack();
    return int4g::avx512_unpack();
}

const char* part_name(int4g::part_fn part) {
    if (part == int4g::avx512_part()) return "avx512";
    if (part == int4g::avx2_part()) return "avx2";
    return "generic";
}

// Many rows: each panel's weights, a k block at a time, unpacked into a float32 tile on the
// stack (at most 384 x 16, in L1) that the packed GEMM's register tiles (6 x 16) multiply
// all the part's rows by, so the unpacking is paid once per weight, not once per 4 rows.
void wide_part(const int4g::args& g, const int4_kernels& k, std::size_t m0, std::size_t m1, std::size_t p0,
               std::size_t p1) {
    const std::size_t kc_max = pgemm::depth_block(g.k);
    alignas(64) float tile[384 * int4g::panel];
    for (std::size_t p = p0; p < p1; ++p) {
        for (std::size_t k0 = 0; k0 < g.k; k0 += kc_max) {
            const std::size_t kc = std::min(kc_max, g.k - k0);
            k.unpack(g, p, k0, kc, tile);
            pgemm::args pg;
            pg.m = g.m;
            pg.n = std::min(int4g::panel, g.n - p * int4g::panel);
            pg.k = pg.kc = kc;
            pg.a = g.a + k0;
            pg.lda = g.k;
            pg.b = tile;
            pg.c = g.c + p * int4g::panel;
            pg.ldc = g.n;
            pg.accumulate = k0 > 0;
            k.gemm(pg, m0, m1, 0, 1);
        }
    }
}

}  // namespace

int4_kernels int4_kernels_for(isa_cap cap) {
    int4_kernels k;
    k.part = chosen_part(cap);
    k.unpack = chosen_unpack(cap);
    k.gemm = pgemm::chosen_part(cap);
    k.isa = part_name(k.part);
    return k;
}

// Each thread its own panels (so each streams only its share of the weights), rows for
// the rest when the panels are too few to go round. The register kernels' sums of A per
// block are made first, once for all panels.
void run_int4_gemm(const int4g::args& given, const int4_kernels& k, bool wide) {
    int4g::args g = given;
    std::vector<float> asum;
    if (!wide && !g.asum) {
        asum.resize(g.m * int4g::blocks(g));
        int4g::fill_block_sums(g, asum.data());
        g.asum = asum.data();
    }
    const std::size_t np = int4g::panels(g.n);
    const std::size_t threads =
        g.m * g.n * g.k < single_thread_macs ? 1 : static_cast<std::size_t>(std::max(omp_get_max_threads(), 1));
    std::size_t cols = threads;
    while (cols > 1 && (np < 2 * cols || threads % cols != 0)) --cols;
    std::size_t rows = threads / cols;
    while (rows > 1 && g.m < 4 * rows) --rows;
    const std::size_t parts = rows * cols;
    const std::size_t rows_per = (g.m + rows - 1) / rows, cols_per = (np + cols - 1) / cols;
    auto run_part = [&](std::size_t id) {
        const std::size_t rp = id / cols, cp = id % cols;
        const std::size_t m0 = std::min(rp * rows_per, g.m), m1 = std::min(m0 + rows_per, g.m);
        const std::size_t p0 = std::min(cp * cols_per, np), p1 = std::min(p0 + cols_per, np);
        if (m0 >= m1 || p0 >= p1) return;
        if (wide) wide_part(g, k, m0, m1, p0, p1);
        else k.part(g, m0, m1, p0, p1);
    };
    if (parts == 1) {
        run_part(0);
        return;
    }
#pragma omp parallel for schedule(static) num_threads(static_cast<int>(parts))
    for (std::int64_t id = 0; id < static_cast<std::int64_t>(parts); ++id) run_part(static_cast<std::size_t>(id));
}

struct int4_gemm::plan {
    int4_kernels kernels;
    bool wide = false;
};

std::string int4_gemm::isa() const { return ready ? ready->kernels.isa : std::string(); }

int4_packed pack_int4_weights(const std::uint8_t* b, const float* scales, const std::uint8_t* zero_points,
                              std::size_t k, std::size_t n, std::size_t block) {
    using namespace int4g;
    const std::size_t np = panels(n), nb = (k + block - 1) / block;
    int4_packed out;
    out.b.assign(np * k * panel_bytes, 0x88);  // u = 8 (weight 0) in the padded columns
    out.so.assign(np * nb * 2 * panel, 0.0f);
    for (std::size_t c = 0; c < n; ++c) {
        const std::size_t p = c / panel, j = c % panel;
        for (std::size_t r = 0; r < k; ++r) {
            const auto u = static_cast<std::uint8_t>(op::int4_at(b, r * n + c) + 8);
            auto& byte = out.b[(p * k + r) * panel_bytes + j / 2];
            byte = j % 2 == 0 ? static_cast<std::uint8_t>((byte & 0xF0) | u) : static_cast<std::uint8_t>((byte & 0x0F) | (u << 4));
        }
        for (std::size_t blk = 0; blk < nb; ++blk) {
            const float s = scales[blk * n + c];
            const float z = zero_points ? static_cast<float>(op::int4_at(zero_points, blk * n + c)) : 0.0f;
            out.so[(p * nb + blk) * 2 * panel + j] = s;
            out.so[(p * nb + blk) * 2 * panel + panel + j] = -(8.0f + z) * s;
        }
    }
    return out;
}

shape int4_gemm::compute_shape(const std::vector<shape>& inputs) const {
    auto bad = [&](const std::string& why) { throw_error(error_code::shape, name() + ": " + why); };
    if (m <= 0 || n <= 0 || k <= 0 || block <= 0) bad("m, n, k and block must be positive");
    if (inputs.size() != 4) bad("expected a, packed b, scales and an output buffer");
    const auto mu = static_cast<std::size_t>(m), nu = static_cast<std::size_t>(n), ku = static_cast<std::size_t>(k);
    const std::size_t np = int4g::panels(nu), nb = (ku + static_cast<std::size_t>(block) - 1) / static_cast<std::size_t>(block);
    const shape& a = inputs[0];
    if (!a.is_tensor() || a.dynamic() || a.get_type() != type::float32 || !a.standard() || a.elements() != mu * ku ||
        a.lens().back() != ku)
        bad("a " + a.to_string() + " is not a row-major float32 tensor of " + std::to_string(m) + " rows of " +
            std::to_string(k));
    if (inputs[1].bytes() < np * ku * int4g::panel_bytes) bad("the packed weights are too small");
    if (inputs[2].get_type() != type::float32 || inputs[2].elements() < np * nb * 2 * int4g::panel)
        bad("the scales are too small");
    std::vector<std::size_t> lens(out_lens.begin(), out_lens.end());
    std::size_t total = 1;
    for (auto d : lens) total *= d;
    if (lens.empty() || lens.back() != nu || total != mu * nu) bad("result dims do not hold m x n values");
    shape out(type::float32, lens);
    if (inputs.back().bytes() < out.bytes()) bad("the output buffer is too small");
    return out;
}

void int4_gemm::finalize(context& ctx, const shape&, const std::vector<shape>&) {
    auto p = std::make_shared<plan>();
    p->kernels = int4_kernels_for(as_cpu_context(ctx, name()).options().packed_gemm_isa);  // at load time
    // The baseline GEMM kernels are no faster than the register path.
    p->wide = static_cast<std::size_t>(m) >= int4_wide_rows && p->kernels.isa != std::string("generic");
    ready = std::move(p);
}

argument int4_gemm::compute(context&, const shape&, const std::vector<argument>& args) const {
    if (!ready) throw_error(error_code::runtime, name() + ": run before it was finalized");
    int4g::args g;
    g.m = static_cast<std::size_t>(m);
    g.n = static_cast<std::size_t>(n);
    g.k = static_cast<std::size_t>(k);
    g.block = static_cast<std::size_t>(block);
    g.a = reinterpret_cast<const float*>(args[0].data());
    g.b = reinterpret_cast<const std::uint8_t*>(args[1].data());
    g.so = reinterpret_cast<const float*>(args[2].data());
    g.c = reinterpret_cast<float*>(args.back().data());
    run_int4_gemm(g, ready->kernels, ready->wide);
    return args.back();
}

bool lower_int4_gemm(lower_env& env, instruction_ref ins) {
    const auto* mi = ins->get_operator().any_cast<op::matmul_int4>();
    if (!mi) return false;
    const auto& in = ins->inputs();
    for (std::size_t i = 1; i < in.size(); ++i)
        if (!in[i]->is_literal()) return false;
    const shape& dst = ins->get_shape();
    if (!f32_static(ins) || !f32_static(in[0])) return false;
    auto a = plain(env, in[0]);
    if (!a->get_shape().standard()) return false;
    const std::size_t k = a->get_shape().lens().back(), n = dst.lens().back();
    if (k == 0 || n == 0) return false;
    const std::size_t m = a->get_shape().elements() / k;
    const auto block = static_cast<std::size_t>(mi->block_size);
    // env.constant keeps one copy of equal constants (split_batch's copies of a layer).
    const auto b = in[1]->get_literal().get_argument();
    const auto s = in[2]->get_literal().to_vector<float>();
    argument z;
    if (in.size() > 3) z = in[3]->get_literal().get_argument();
    auto packed = pack_int4_weights(b.data_as<std::uint8_t>(), s.data(), in.size() > 3 ? z.data_as<std::uint8_t>() : nullptr,
                                    k, n, block);
    auto b_ins = env.constant(ins, literal(shape(type::uint8, {packed.b.size()}), packed.b));
    auto so_ins = env.constant(ins, literal(shape(type::float32, {packed.so.size()}), packed.so));
    int4_gemm op;
    op.m = static_cast<std::int64_t>(m);
    op.n = static_cast<std::int64_t>(n);
    op.k = static_cast<std::int64_t>(k);
    op.block = mi->block_size;
    for (auto d : dst.lens()) op.out_lens.push_back(static_cast<std::int64_t>(d));
    auto out = env.m.insert_instruction(ins, builtin::allocate{shape(type::float32, dst.lens())}, {});
    env.m.replace_instruction(ins, op, {a, b_ins, so_ins, out});
    return true;
}

KILN_REGISTER_OP(int4_gemm)

}  // namespace kiln::cpu
