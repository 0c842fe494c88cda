// quantize_int4_weights (include/kiln/quantization.hpp): weight-only int4, the low-bit path
// of LLM deployments. Every float32 matmul / gemm whose weights are a 2-D float32 literal
// becomes a matmul_int4 (src/ops/nn_matmul_int4.hpp): per block of `block_size` rows of K
// in each column one float32 scale, the values int4 symmetric (zero point 0, -8..7).
//
// Symmetric, not asymmetric: a block of trained weights is centred near 0, so a zero point
// buys little range, and without one the kernels' weight is a convert and a multiply (an
// ONNX model's own zero points are still taken, see fuse_int4.cpp). Each block's scale is
// the one of a few candidates (amax / 7 .. amax / 8) with the least squared error: amax / 8
// uses -8 and gives the largest magnitude one more step than amax / 7, at the cost of
// clipping a positive maximum to 7 / 8 of it; which wins depends on the block.
//
// Activations, convolutions and everything else stay float32: it is the weights' memory
// traffic that int4 cuts (a batch-1 product streams them once), and convolution weights
// are small next to their activations.
#include <kiln/quantization.hpp>

#include "ops/nn_matmul.hpp"
#include "ops/nn_matmul_int4.hpp"
#include "ops/pointwise_binary.hpp"
#include "passes/dead_code_elimination.hpp"
#include "passes/rewrite_utils.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/errors.hpp>

#include <algorithm>
#include <cmath>

namespace kiln {

namespace {

using rewrite::is;

bool f32_literal(instruction_ref x) {
    return x->is_literal() && x->get_shape().is_tensor() && x->get_shape().get_type() == type::float32 &&
           !x->get_shape().dynamic();
}

struct int4_block {
    float scale = 0;
    std::vector<std::int8_t> q;
};

// w: the block's values. The scale among amax / d, d in [7, 8], with the least squared error.
int4_block quantize_block(const std::vector<float>& w) {
    float amax = 0;
    for (float v : w)
        if (std::isfinite(v)) amax = std::max(amax, std::fabs(v));
    int4_block best;
    best.q.assign(w.size(), 0);
    if (!(amax > 0)) return best;  // scale 0: every weight 0
    double best_err = -1;
    std::vector<std::int8_t> q(w.size());
    for (float d : {7.0f, 7.25f, 7.5f, 7.75f, 8.0f}) {
        const float s = amax / d;
        double err = 0;
        for (std::size_t i = 0; i < w.size(); ++i) {
            float r = std::nearbyint(w[i] / s);
            if (std::isnan(r)) r = 0;
            q[i] = static_cast<std::int8_t>(std::clamp(r, -8.0f, 7.0f));
            const double e = double(w[i]) - double(float(q[i]) * s);
            err += std::isfinite(w[i]) ? e * e : 0.0;
        }
        if (best_err < 0 || err < best_err) {
            best_err = err;
            best.scale = s;
            best.q = q;
        }
    }
    return best;
}

struct int4_weights {
    std::vector<std::uint8_t> packed;
    std::vector<float> scales;  // [blocks][n]
};

// w: [k][n] row-major.
int4_weights quantize_weights(const std::vector<float>& w, std::size_t k, std::size_t n, std::size_t bs) {
    const std::size_t blocks = (k + bs - 1) / bs;
    std::vector<std::int8_t> q(k * n);
    int4_weights out;
    out.scales.resize(blocks * n);
    std::vector<float> col;
    for (std::size_t b = 0; b < blocks; ++b)
        for (std::size_t c = 0; c < n; ++c) {
            col.clear();
            for (std::size_t r = b * bs; r < std::min(k, (b + 1) * bs); ++r) col.push_back(w[r * n + c]);
            auto qb = quantize_block(col);
            out.scales[b * n + c] = qb.scale;
            for (std::size_t i = 0; i < col.size(); ++i) q[(b * bs + i) * n + c] = qb.q[i];
        }
    out.packed = op::pack_int4(q);
    return out;
}

}  // namespace

int4_summary quantize_int4_weights(program& p, std::size_t block_size) {
    if (p.is_compiled()) throw_error(error_code::invalid_argument, "quantize: the program is already compiled (quantize before compile)");
    if (quantized_type(p) != type::float32)
        throw_error(error_code::invalid_argument, "quantize_int4_weights: the program is already quantized (" +
                                                      std::string(type_name(quantized_type(p))) + ")");
    if (block_size == 0) throw_error(error_code::invalid_argument, "quantize_int4_weights: block_size must be positive");
    module& m = *p.get_main_module();
    int4_summary summary;
    std::vector<instruction_ref> chosen;
    for (auto ins = m.begin(); ins != m.end(); ++ins) {
        if (!is<op::matmul>(ins) && !is<op::gemm>(ins)) continue;
        const auto& in = ins->inputs();
        std::string why;
        if (!ins->get_shape().is_tensor() || ins->get_shape().get_type() != type::float32) why = "not a float32 result";
        else if (!f32_literal(in[1]) || in[1]->get_shape().ndim() != 2) why = "weights not a 2-D float32 constant";
        else if (in[0]->is_literal()) why = "constant first operand";
        else if (in[0]->get_shape().ndim() < 2) why = "a vector first operand";
        else if (is<op::gemm>(ins)) {
            const auto& g = ins->get_operator().get<op::gemm>();
            if (g.trans_a) why = "gemm with trans_a";
            else if (in.size() > 2 && !f32_literal(in[2])) why = "C not a constant";
        }
        if (!why.empty()) {
            summary.skipped.push_back(m.instruction_name(&*ins) + " " + ins->name() + ": " + why);
            continue;
        }
        chosen.push_back(ins);
    }
    for (auto ins : chosen) {
        auto in = ins->inputs();
        const auto& wl = in[1]->get_shape().lens();
        auto w = in[1]->get_literal().to_vector<float>();
        std::size_t k = wl[0], n = wl[1];
        float alpha = 1.0f;
        const op::gemm* g = is<op::gemm>(ins) ? &ins->get_operator().get<op::gemm>() : nullptr;
        if (g && g->trans_b) {
            std::vector<float> t(w.size());
            for (std::size_t r = 0; r < k; ++r)
                for (std::size_t c = 0; c < n; ++c) t[c * k + r] = w[r * n + c];
            w.swap(t);
            std::swap(k, n);
        }
        if (g) alpha = g->alpha;
        auto qw = quantize_weights(w, k, n, block_size);
        // Gemm's alpha scales the product: folded into the scales.
        if (alpha != 1.0f)
            for (auto& s : qw.scales) s *= alpha;
        const std::size_t blocks = (k + block_size - 1) / block_size;
        auto b = m.insert_literal(ins, literal(shape(type::uint8, {qw.packed.size()}), qw.packed));
        auto s = m.insert_literal(ins, literal(shape(type::float32, {blocks, n}), qw.scales));
        op::matmul_int4 op;
        op.block_size = static_cast<std::int64_t>(block_size);
        if (g && in.size() > 2 && g->beta != 0.0f) {
            // alpha A B + beta C: the product, then C (times beta) added.
            auto prod = m.insert_instruction(ins, op, {in[0], b, s});
            auto c = in[2];
            if (g->beta != 1.0f) {
                auto cv = c->get_literal().to_vector<float>();
                for (auto& v : cv) v *= g->beta;
                c = m.insert_literal(ins, literal(c->get_shape(), cv));
            }
            m.replace_instruction(ins, op::add_op{}, {prod, c});
        } else {
            m.replace_instruction(ins, op, {in[0], b, s});
        }
        ++summary.quantized_ops;
        summary.weight_bytes_before += k * n * sizeof(float);
        summary.weight_bytes_after += qw.packed.size() + qw.scales.size() * sizeof(float);
    }
    dead_code_elimination{}.apply(m);
    auto meta = p.get_metadata();
    if (!meta.is_object()) meta = value::make_object();
    meta["quantized"] = std::string("int4");
    meta["int4_block_size"] = static_cast<std::int64_t>(block_size);
    p.set_metadata(meta);
    return summary;
}

}  // namespace kiln
