#include "targets/gpu/codegen/emit_attention.hpp"

#include "codegen/hash.hpp"
#include "ops/nn_matmul.hpp"
#include "ops/pointwise_binary.hpp"
#include "ops/softmax.hpp"
#include "targets/gpu/codegen/emit.hpp"

#include <kiln/errors.hpp>

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <regex>
#include <sstream>

namespace kiln::gpu::codegen {

namespace {

constexpr std::size_t key_tile = 32;                // keys per step: one per lane
constexpr std::size_t warps = block_size / 32;      // 8
constexpr std::size_t max_head = 128;               // D and Dv
constexpr std::size_t shared_floats = 48 * 1024 / 4;  // static shared memory limit
constexpr std::size_t enough_blocks = 264;            // two per SM of an H100/H200 (132 SMs)

template <class T>
bool is(const op::fused_node& n) {
    return n.op.any_cast<T>() != nullptr;
}

std::string num(std::int64_t x) { return std::to_string(x) + "LL"; }
std::string num(std::size_t x) { return num(static_cast<std::int64_t>(x)); }

std::string float_literal(float v) {
    // A mask's fill may be -inf (flex attention's causal mask): C has no literal for it.
    if (std::isinf(v)) return v < 0 ? "(-kiln_inff())" : "kiln_inff()";
    if (std::isnan(v)) return "kiln_nanf(\"\")";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%af", static_cast<double>(v));
    return buf;
}

// The sizes and strides of one attention.
struct geometry {
    std::size_t rank = 0, batches = 1, sq = 0, d = 0, sk = 0, dv = 0;
    std::vector<std::size_t> batch_lens;
    std::vector<std::size_t> q, kt, v, mask;  // strides over [B.., row, col] (mask: broadcast ones 0)
    std::size_t rows_per_warp = 1;
    std::size_t rows_per_block() const { return warps * rows_per_warp; }
    std::size_t row_blocks() const { return (sq + rows_per_block() - 1) / rows_per_block(); }
    std::size_t k_stride() const { return d % 2 == 0 ? d + 1 : d; }  // odd: lanes hit distinct banks
    std::size_t columns() const { return (dv + 31) / 32; }           // output columns per lane
    std::size_t shared() const {
        return rows_per_block() * d + key_tile * k_stride() + key_tile * dv + warps * rows_per_warp * key_tile;
    }
};

std::vector<std::size_t> broadcast_strides(const shape& s, const std::vector<std::size_t>& full) {
    std::vector<std::size_t> out(full.size(), 0);
    const std::size_t lead = full.size() - s.ndim();
    for (std::size_t i = 0; i < s.ndim(); ++i)
        if (s.lens()[i] != 1) out[lead + i] = s.strides()[i];
    return out;
}

// Throws unsupported with the reason when the generator cannot take these shapes.
geometry geometry_of(const op::fused& body, const std::vector<shape>& in) {
    auto fail = [](const std::string& why) -> geometry { throw_error(error_code::unsupported, "gpu attention: " + why); };
    const auto form = attention_form_of(body);
    if (!form) return fail("not an attention body");
    if (in.size() != (form->mask ? 4u : 3u)) return fail("wrong number of inputs");
    for (std::size_t i = 0; i < in.size(); ++i) {
        const type want = i == 3 && form->select ? type::bool_ : type::float32;
        if (!in[i].is_tensor() || in[i].dynamic() || in[i].get_type() != want)
            return fail("static float32 operands and a float32 (added) or bool (select) mask only");
    }
    const shape &q = in[0], &kt = in[1], &v = in[2];
    geometry g;
    g.rank = q.ndim();
    const std::size_t r = g.rank;
    if (r < 2 || kt.ndim() != r || v.ndim() != r) return fail("q, kt and v must share one rank");
    g.batch_lens.assign(q.lens().begin(), q.lens().end() - 2);
    for (const auto* s : {&kt, &v})
        if (!std::equal(g.batch_lens.begin(), g.batch_lens.end(), s->lens().begin())) return fail("batch dims differ");
    for (auto l : g.batch_lens) g.batches *= l;
    g.sq = q.lens()[r - 2];
    g.d = q.lens()[r - 1];
    g.sk = kt.lens()[r - 1];
    g.dv = v.lens()[r - 1];
    if (kt.lens()[r - 2] != g.d || v.lens()[r - 2] != g.sk) return fail("q, kt and v do not chain");
    if (g.batches == 0 || g.sq == 0 || g.d == 0 || g.sk == 0 || g.dv == 0) return fail("an empty operand");
    if (g.d > max_head || g.dv > max_head) return fail("head dims over 128");
    g.q = q.strides();
    g.kt = kt.strides();
    g.v = v.strides();
    if (form->mask) {
        std::vector<std::size_t> full = g.batch_lens;
        full.push_back(g.sq);
        full.push_back(g.sk);
        const shape& m = in[3];
        if (m.ndim() > r) return fail("a mask of higher rank");
        for (std::size_t i = 0; i < m.ndim(); ++i)
            if (m.lens()[i] != 1 && m.lens()[i] != full[r - m.ndim() + i]) return fail("a mask that does not broadcast");
        g.mask = broadcast_strides(m, full);
    }
    // Up to 4 rows per warp: K and V tiles serve more rows per load, while short query
    // sequences do not leave most warps idle; fewer when that leaves too few blocks to fill
    // a large GPU (bert_small at batch 1 has a few heads of 128 rows).
    g.rows_per_warp = std::clamp<std::size_t>((g.sq + warps - 1) / warps, 1, 4);
    while (g.rows_per_warp > 1 && g.batches * g.row_blocks() < enough_blocks) g.rows_per_warp /= 2;
    while (g.rows_per_warp > 1 && g.shared() > shared_floats) --g.rows_per_warp;
    if (g.shared() > shared_floats) return fail("tiles over 48 KiB of shared memory");
    return g;
}

// sum(idx[i] * strides[i]) over the batch dims.
std::string batch_offset(const std::vector<std::string>& idx, const std::vector<std::size_t>& strides) {
    std::string s;
    for (std::size_t i = 0; i < idx.size(); ++i) {
        if (strides[i] == 0) continue;
        s += (s.empty() ? "" : " + ") + idx[i] + " * " + num(strides[i]);
    }
    return s.empty() ? "0LL" : s;
}

// A cooperative copy of a [rows, cols] tile into shared memory at row stride `stride`,
// the inner loop along the operand's smaller stride so a warp reads consecutive
// addresses. `src` is the element (r_, c_)'s global expression, `ok` whether it exists ("":
// always; else 0 is stored).
void stage(std::ostringstream& o, const std::string& dst, std::size_t rows, std::size_t cols, std::size_t stride,
           bool rows_inner, const std::string& src, const std::string& ok) {
    o << "    for (int e_ = threadIdx.x; e_ < " << rows * cols << "; e_ += " << block_size << ") {\n";
    if (rows_inner) o << "      const int r_ = e_ % " << rows << ", c_ = e_ / " << rows << ";\n";
    else o << "      const int r_ = e_ / " << cols << ", c_ = e_ % " << cols << ";\n";
    o << "      " << dst << "[r_ * " << stride << " + c_] = " << (ok.empty() ? src : ok + " ? " + src + " : 0.0f")
      << ";\n    }\n";
}

// Whether every element offset of the operands and the result, and the tile count, fit an int.
bool fits_int(const std::vector<shape>& inputs, const geometry& g) {
    constexpr std::size_t limit = 1u << 30;  // room for the sums of offsets in the kernel
    for (const auto& s : inputs) {
        std::size_t span = 1;
        for (std::size_t i = 0; i < s.ndim(); ++i) span += (s.lens()[i] - 1) * s.strides()[i];
        if (span >= limit) return false;
    }
    return g.batches * g.sq * g.dv < limit && g.batches * g.row_blocks() < limit;
}

}  // namespace

std::optional<attention_form> attention_form_of(const op::fused& body) {
    const auto& n = body.nodes;
    const auto in = [](std::size_t i) { return op::fused_input_arg(i); };
    if (n.size() < 3 || !is<op::matmul>(n[0]) || n[0].args != std::vector<std::int64_t>{in(0), in(1)}) return std::nullopt;
    attention_form f;
    std::size_t k = 1;
    std::int64_t scores = 0;
    if (k + 1 < n.size() && is<op::fused_literal>(n[k]) && (is<op::mul_op>(n[k + 1]) || is<op::div_op>(n[k + 1]))) {
        const auto lit = static_cast<std::int64_t>(k);
        const auto c = n[k].op.any_cast<op::fused_literal>()->value;
        if (c.get_shape().elements() != 1) return std::nullopt;
        f.c = c.to_vector<float>().at(0);
        f.scaling = is<op::mul_op>(n[k + 1]) ? attention_form::multiply : attention_form::divide;
        const auto& a = n[k + 1].args;
        if (a == std::vector<std::int64_t>{lit, scores} && f.scaling == attention_form::multiply) f.scale_first = true;
        else if (a != std::vector<std::int64_t>{scores, lit}) return std::nullopt;
        k += 2;
        scores = static_cast<std::int64_t>(k - 1);
    }
    if (k + 1 < n.size() && is<op::fused_literal>(n[k]) && is<op::where_op>(n[k + 1])) {
        const auto lit = static_cast<std::int64_t>(k);
        const auto fill = n[k].op.any_cast<op::fused_literal>()->value;
        if (fill.get_shape().elements() != 1 || fill.get_shape().get_type() != type::float32) return std::nullopt;
        f.fill = fill.to_vector<float>().at(0);
        f.mask = f.select = true;
        const auto& a = n[k + 1].args;
        if (a == std::vector<std::int64_t>{in(3), lit, scores}) f.fill_when_true = true;
        else if (a != std::vector<std::int64_t>{in(3), scores, lit}) return std::nullopt;
        k += 2;
        scores = static_cast<std::int64_t>(k - 1);
    } else if (k < n.size() && is<op::add_op>(n[k])) {
        f.mask = true;
        if (n[k].args == std::vector<std::int64_t>{in(3), scores}) f.mask_first = true;
        else if (n[k].args != std::vector<std::int64_t>{scores, in(3)}) return std::nullopt;
        scores = static_cast<std::int64_t>(k++);
    }
    if (k + 2 != n.size() || !is<op::softmax>(n[k]) || n[k].args != std::vector<std::int64_t>{scores}) return std::nullopt;
    if (!is<op::matmul>(n[k + 1]) || n[k + 1].args != std::vector<std::int64_t>{static_cast<std::int64_t>(k), in(2)})
        return std::nullopt;
    return f;
}

std::string attention_problem(const op::fused& body, const std::vector<shape>& inputs) {
    try {
        (void)geometry_of(body, inputs);
    } catch (const error& e) {
        if (e.code() != error_code::unsupported) throw;
        return e.what();
    }
    return "";
}

std::string emit_attention_kernel(const op::fused& body, const std::vector<shape>& inputs, const std::string& name) {
    const auto f = *attention_form_of(body);
    const auto g = geometry_of(body, inputs);
    const std::size_t r = g.rank, R = g.rows_per_warp, QB = g.rows_per_block(), KS = g.k_stride();
    std::ostringstream o;
    o << "extern \"C\" __global__ void __launch_bounds__(" << block_size << ") " << name << "(const kiln_args a_) {\n";
    o << "  const float* __restrict__ q = (const float*)a_.in[0];\n";
    o << "  const float* __restrict__ kt = (const float*)a_.in[1];\n";
    o << "  const float* __restrict__ v = (const float*)a_.in[2];\n";
    const std::string mask_type = f.select ? "bool" : "float";
    if (f.mask) o << "  const " << mask_type << "* __restrict__ mask = (const " << mask_type << "*)a_.in[3];\n";
    o << "  float* __restrict__ out = (float*)a_.out;\n";
    o << "  __shared__ float sq_[" << QB * g.d << "];\n";
    o << "  __shared__ float sk_[" << key_tile * KS << "];\n";
    o << "  __shared__ float sv_[" << key_tile * g.dv << "];\n";
    o << "  __shared__ float sp_[" << warps * R * key_tile << "];\n";
    o << "  const int lane_ = threadIdx.x & 31, warp_ = threadIdx.x >> 5;\n";
    o << "  for (long long t_ = blockIdx.x; t_ < " << num(g.batches * g.row_blocks()) << "; t_ += gridDim.x) {\n";
    o << "    const long long i0_ = (t_ % " << num(g.row_blocks()) << ") * " << QB << ";\n";
    o << "    long long b_ = t_ / " << num(g.row_blocks()) << ";\n";
    o << "    const long long bo_ = b_ * " << num(g.sq * g.dv) << ";\n";
    std::vector<std::string> idx(r - 2);
    for (std::size_t i = r - 2; i-- > 0;) {
        idx[i] = "b" + std::to_string(i) + "_";
        o << "    const long long " << idx[i] << " = b_ % " << num(g.batch_lens[i]) << "; b_ /= " << num(g.batch_lens[i])
          << ";\n";
    }
    o << "    const long long qo_ = " << batch_offset(idx, g.q) << ", ko_ = " << batch_offset(idx, g.kt)
      << ", vo_ = " << batch_offset(idx, g.v) << ";\n";
    if (f.mask) o << "    const long long mo_ = " << batch_offset(idx, g.mask) << ";\n";
    o << "    __syncthreads();  // the previous tile's readers of sq_ are done\n";
    // Rows past Sq read the last row (their results are not written).
    stage(o, "sq_", QB, g.d, g.d, g.q[r - 2] < g.q[r - 1],
          "q[qo_ + (i0_ + r_ < " + num(g.sq) + " ? i0_ + r_ : " + num(g.sq - 1) + ") * " + num(g.q[r - 2]) + " + c_ * " +
              num(g.q[r - 1]) + "]",
          "");
    const std::size_t C = g.columns();
    for (std::size_t i = 0; i < R; ++i) {
        o << "    float m" << i << "_ = -kiln_inff(), l" << i << "_ = 0.0f;\n";
        for (std::size_t c = 0; c < C; ++c) o << "    float acc" << i << "_" << c << " = 0.0f;\n";
    }
    o << "    for (long long k0_ = 0; k0_ < " << num(g.sk) << "; k0_ += " << key_tile << ") {\n";
    o << "      __syncthreads();  // the previous key tile's readers are done\n";
    // sk_[key][d] (K, i.e. kt transposed) and sv_[key][col].
    stage(o, "sk_", key_tile, g.d, KS, g.kt[r - 1] < g.kt[r - 2],
          "kt[ko_ + c_ * " + num(g.kt[r - 2]) + " + (k0_ + r_) * " + num(g.kt[r - 1]) + "]",
          "k0_ + r_ < " + num(g.sk));
    stage(o, "sv_", key_tile, g.dv, g.dv, g.v[r - 2] < g.v[r - 1],
          "v[vo_ + (k0_ + r_) * " + num(g.v[r - 2]) + " + c_ * " + num(g.v[r - 1]) + "]", "k0_ + r_ < " + num(g.sk));
    o << "      __syncthreads();\n";
    o << "      const long long k_ = k0_ + lane_;\n";
    o << "      const bool valid_ = k_ < " << num(g.sk) << ";\n";
    // The warp's R scores of key k_, K's element read once for all rows.
    o << "      const float* qw_ = sq_ + warp_ * " << R * g.d << ";\n";
    o << "      const float* kr_ = sk_ + lane_ * " << KS << ";\n";
    for (std::size_t i = 0; i < R; ++i) o << "      float s" << i << "_ = 0.0f;\n";
    o << "      for (int d_ = 0; d_ < " << g.d << "; ++d_) {\n        const float kd_ = kr_[d_];\n";
    for (std::size_t i = 0; i < R; ++i) o << "        s" << i << "_ += qw_[" << i * g.d << " + d_] * kd_;\n";
    o << "      }\n";
    for (std::size_t i = 0; i < R; ++i) {
        const std::string row = "(warp_ * " + std::to_string(R) + " + " + std::to_string(i) + ")";
        const std::string m = "m" + std::to_string(i) + "_", l = "l" + std::to_string(i) + "_";
        o << "      {\n";
        o << "        float s_ = s" << i << "_;\n";
        const std::string c = float_literal(f.c);
        if (f.scaling == attention_form::multiply) o << "        s_ = " << (f.scale_first ? c + " * s_" : "s_ * " + c) << ";\n";
        if (f.scaling == attention_form::divide) o << "        s_ = s_ / " << c << ";\n";
        if (f.mask) {
            o << "        long long i_ = i0_ + " << row << "; if (i_ > " << num(g.sq - 1) << ") i_ = " << num(g.sq - 1) << ";\n";
            const std::string at = "mask[mo_ + i_ * " + num(g.mask[r - 2]) + " + k_ * " + num(g.mask[r - 1]) + "]";
            if (f.select) {
                o << "        const bool mv_ = valid_ && " << at << ";\n";
                o << "        s_ = " << (f.fill_when_true ? "mv_ ? " + float_literal(f.fill) + " : s_" : "mv_ ? s_ : " + float_literal(f.fill)) << ";\n";
            } else {
                o << "        const float mv_ = valid_ ? " << at << " : 0.0f;\n";
                o << "        s_ = " << (f.mask_first ? "mv_ + s_" : "s_ + mv_") << ";\n";
            }
        }
        o << "        s_ = valid_ ? s_ : -kiln_inff();\n";
        o << "        const float tmax_ = kiln_warp_max(s_);\n";
        o << "        const float mnew_ = " << m << " > tmax_ ? " << m << " : tmax_;\n";
        o << "        const bool none_ = mnew_ == -kiln_inff();  // no finite score yet\n";
        o << "        const float corr_ = none_ ? 1.0f : kiln_expf(" << m << " - mnew_);\n";
        o << "        const float p_ = none_ || !valid_ ? 0.0f : kiln_expf(s_ - mnew_);\n";
        o << "        " << l << " = " << l << " * corr_ + kiln_warp_sumf(p_);\n";
        o << "        " << m << " = mnew_;\n";
        for (std::size_t cc = 0; cc < C; ++cc) o << "        acc" << i << "_" << cc << " *= corr_;\n";
        o << "        sp_[" << row << " * " << key_tile << " + lane_] = p_;\n";
        o << "      }\n";
    }
    o << "      __syncwarp();  // the warp's probabilities are in sp_\n";
    o << "      for (int j_ = 0; j_ < " << key_tile << "; ++j_) {\n";
    o << "        const float* vr_ = sv_ + j_ * " << g.dv << ";\n";
    for (std::size_t cc = 0; cc < C; ++cc) {
        const std::string col = "lane_ + " + std::to_string(32 * cc);
        const bool partial = 32 * (cc + 1) > g.dv;
        o << "        {\n          const float vv_ = " << (partial ? "(" + col + " < " + std::to_string(g.dv) + ") ? " : "")
          << "vr_[" << col << "]" << (partial ? " : 0.0f" : "") << ";\n";
        for (std::size_t i = 0; i < R; ++i)
            o << "          acc" << i << "_" << cc << " += sp_[(warp_ * " << R << " + " << i << ") * " << key_tile
              << " + j_] * vv_;\n";
        o << "        }\n";
    }
    o << "      }\n";
    o << "    }\n";
    for (std::size_t i = 0; i < R; ++i) {
        o << "    {\n      const long long i_ = i0_ + warp_ * " << R << " + " << i << ";\n";
        o << "      if (i_ < " << num(g.sq) << ") {\n";
        // One division per row: a division per element made ptxas spill around its slow path.
        o << "        const float inv_ = 1.0f / l" << i << "_;\n";
        for (std::size_t cc = 0; cc < C; ++cc) {
            const std::string col = "lane_ + " + std::to_string(32 * cc);
            const bool partial = 32 * (cc + 1) > g.dv;
            o << "        " << (partial ? "if (" + col + " < " + std::to_string(g.dv) + ") " : "") << "out[bo_ + i_ * "
              << num(g.dv) << " + " << col << "] = acc" << i << "_" << cc << " * inv_;\n";
        }
        o << "      }\n    }\n";
    }
    o << "  }\n}\n";
    if (!fits_int(inputs, g)) return o.str();
    // Every offset fits an int: 32-bit index arithmetic (with 64-bit offsets ptxas spilled
    // a few bytes around expf in some of these kernels).
    const std::regex wide_literal(R"(\b([0-9]+)LL\b)"), wide_type(R"(\blong long\b)");
    return std::regex_replace(std::regex_replace(o.str(), wide_literal, "$1"), wide_type, "int");
}

std::string attention_symbol(const op::fused& body, const std::vector<shape>& inputs) {
    return "kiln_gpu_attention_" + kiln::codegen::content_hash(emit_attention_kernel(body, inputs, "KERNEL")).substr(0, 24);
}

unsigned attention_grid(const op::fused& body, const std::vector<shape>& inputs) {
    const auto g = geometry_of(body, inputs);
    return static_cast<unsigned>(std::clamp<std::size_t>(g.batches * g.row_blocks(), 1, 65535u * 8));
}

}  // namespace kiln::gpu::codegen
