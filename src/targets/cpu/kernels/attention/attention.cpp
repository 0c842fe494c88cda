#include "targets/cpu/kernels/attention/attention.hpp"

#include "targets/cpu/kernels/attention/attention_geometry.hpp"
#include "ops/common.hpp"
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"

#include "targets/cpu/kernels/packed_gemm/packed_gemm_args.hpp"
#include "targets/cpu/kernels/onednn/primitive_kernel.hpp"
#include "targets/cpu/kernels/vec_exp.hpp"
#include "targets/cpu/kernels/team/team.hpp"

#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
// GCC 12's AVX-512 max, shift and reduction intrinsics pass _mm512_undefined_*() as the
// unused merge source, which its own flow analysis then reports as uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace kiln::cpu {

using namespace attention_detail;

namespace {

constexpr float exp_floor = -87.3f;  // exp(x - max) below this is under every normal float

// Strides of `s` seen as a tensor of `lens` (right-aligned numpy broadcast: 0 along
// broadcast dims).
std::vector<std::size_t> broadcast_strides(const shape& s, const std::vector<std::size_t>& lens) {
    std::vector<std::size_t> out(lens.size(), 0);
    const std::size_t lead = lens.size() - s.ndim();
    for (std::size_t i = 0; i < s.ndim(); ++i)
        out[lead + i] = s.lens()[i] == 1 ? 0 : s.strides()[i];
    return out;
}

// Offset of batch index b (row-major over g.batch_lens) in a tensor of these strides.
std::size_t batch_offset(const geometry& g, const std::vector<std::size_t>& strides, std::size_t b) {
    std::size_t off = 0;
    for (std::size_t i = g.batch_lens.size(); i-- > 0;) {
        off += (b % g.batch_lens[i]) * strides[i];
        b /= g.batch_lens[i];
    }
    return off;
}

// Kp[p][d][c] = K[16 p + c][d] (kt[d][j] in the IR), zero beyond Sk.
void pack_k(const geometry& g, const float* kt, std::size_t key_stride, float* kp) {
    const std::size_t np = panels(g.sk);
    std::fill(kp + (np - 1) * pgemm::panel * g.d, kp + np * pgemm::panel * g.d, 0.0f);
    for (std::size_t j = 0; j < g.sk; ++j) {
        const float* src = kt + j * key_stride;
        float* dst = kp + (j / pgemm::panel) * pgemm::panel * g.d + j % pgemm::panel;
        for (std::size_t k = 0; k < g.d; ++k) dst[k * pgemm::panel] = src[k];
    }
}

#define ATT_TARGET __attribute__((target("avx512f")))

// pack_k with AVX-512: 16 keys x 16 dims at a time, transposed in registers.
ATT_TARGET void pack_k_avx512(const geometry& g, const float* kt, std::size_t key_stride, float* kp) {
    const std::size_t np = panels(g.sk);
    for (std::size_t p = 0; p < np; ++p) {
        const std::size_t keys = std::min(pgemm::panel, g.sk - p * pgemm::panel);
        float* panel_out = kp + p * pgemm::panel * g.d;
        for (std::size_t k0 = 0; k0 < g.d; k0 += 16) {
            const std::size_t dims = std::min<std::size_t>(16, g.d - k0);
            const auto dm = static_cast<__mmask16>(dims == 16 ? 0xFFFFu : (1u << dims) - 1u);
            __m512 r[16], a[16], b[16];
            for (std::size_t j = 0; j < 16; ++j)
                r[j] = j < keys ? _mm512_maskz_loadu_ps(dm, kt + (p * pgemm::panel + j) * key_stride + k0)
                                : _mm512_setzero_ps();
            // Rows are keys, columns dims: after the two unpacks, 128-bit lane L of b[4 i + m]
            // holds column 4 L + m of keys 4 i .. 4 i + 3.
            for (int i = 0; i < 16; i += 2) {
                a[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
                a[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
            }
            for (int i = 0; i < 16; i += 4) {
                const __m512d a0 = _mm512_castps_pd(a[i]), a1 = _mm512_castps_pd(a[i + 1]);
                const __m512d a2 = _mm512_castps_pd(a[i + 2]), a3 = _mm512_castps_pd(a[i + 3]);
                b[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
                b[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
                b[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
                b[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
            }
            // Column c = 4 L + m gathers lane L of b[m], b[4 + m], b[8 + m], b[12 + m].
            for (int m = 0; m < 4; ++m) {
                const __m512 x0 = _mm512_shuffle_f32x4(b[m], b[4 + m], 0x44), x1 = _mm512_shuffle_f32x4(b[m], b[4 + m], 0xEE);
                const __m512 y0 = _mm512_shuffle_f32x4(b[8 + m], b[12 + m], 0x44);
                const __m512 y1 = _mm512_shuffle_f32x4(b[8 + m], b[12 + m], 0xEE);
                const __m512 cols[4] = {_mm512_shuffle_f32x4(x0, y0, 0x88), _mm512_shuffle_f32x4(x0, y0, 0xDD),
                                        _mm512_shuffle_f32x4(x1, y1, 0x88), _mm512_shuffle_f32x4(x1, y1, 0xDD)};
                for (std::size_t L = 0; L < 4; ++L) {
                    const std::size_t c = 4 * L + static_cast<std::size_t>(m);
                    if (c < dims) _mm512_storeu_ps(panel_out + (k0 + c) * pgemm::panel, cols[L]);
                }
            }
        }
    }
}

#undef ATT_TARGET

// Vp[p][j][c] = V[j][16 p + c], zero beyond Dv.
void pack_v(const geometry& g, const float* v, std::size_t row_stride, float* vp) {
    const std::size_t np = panels(g.dv);
    for (std::size_t p = 0; p < np; ++p) {
        const std::size_t c0 = p * pgemm::panel, width = std::min(pgemm::panel, g.dv - c0);
        for (std::size_t j = 0; j < g.sk; ++j) {
            float* dst = vp + (p * g.sk + j) * pgemm::panel;
            std::memcpy(dst, v + j * row_stride + c0, width * sizeof(float));
            std::fill(dst + width, dst + pgemm::panel, 0.0f);
        }
    }
}

#define ATT_TARGET __attribute__((target("avx2,fma")))

ATT_TARGET float hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

ATT_TARGET float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// The softmax of a score row without its normalization: x[j] = exp(y[j] - max y) with
// y[j] = scale x[j] + mask[j] (the scale and the mask already applied when `fused`: the
// scores' epilogue did that), returning the sum, by which the row's context is divided
// afterwards (Dv values instead of Sk).
ATT_TARGET float exp_row_avx2(float* x, const float* mask, std::size_t n, float scale, bool fused) {
    __m256 vmax = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
    std::size_t j = 0;
    if (fused) {
        for (; j + 8 <= n; j += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + j));
    } else {
        const __m256 vs = _mm256_set1_ps(scale);
        for (; j + 8 <= n; j += 8) {
            __m256 t = _mm256_mul_ps(_mm256_loadu_ps(x + j), vs);
            if (mask) t = _mm256_add_ps(t, _mm256_loadu_ps(mask + j));
            _mm256_storeu_ps(x + j, t);
            vmax = _mm256_max_ps(vmax, t);
        }
    }
    float mx = hmax(vmax);
    for (; j < n; ++j) {
        if (!fused) x[j] = x[j] * scale + (mask ? mask[j] : 0.0f);
        mx = std::max(mx, x[j]);
    }
    const __m256 vm = _mm256_set1_ps(mx), floor = _mm256_set1_ps(exp_floor);
    __m256 vsum = _mm256_setzero_ps();
    for (j = 0; j + 8 <= n; j += 8) {
        // max returns its second operand when either is NaN: a NaN score stays NaN.
        const __m256 e = vexp::exp_scaled8<0>(_mm256_max_ps(floor, _mm256_sub_ps(_mm256_loadu_ps(x + j), vm)));
        _mm256_storeu_ps(x + j, e);
        vsum = _mm256_add_ps(vsum, e);
    }
    float sum = hsum(vsum);
    for (; j < n; ++j) {
        const float d = x[j] - mx;
        x[j] = d != d ? d : vexp::exp_scaled<0>(std::max(exp_floor, d));
        sum += x[j];
    }
    return sum;
}

#undef ATT_TARGET

#define ATT_TARGET __attribute__((target("avx512f,fma")))

ATT_TARGET inline __mmask16 tail_mask(std::size_t left) {
    return left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1u);
}

// exp_row_avx2 with sixteen lanes, the row's last partial vector under a lane mask.
ATT_TARGET float exp_row_avx512(float* x, const float* mask, std::size_t n, float scale, bool fused) {
    const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    __m512 vmax = ninf;
    if (fused) {
        for (std::size_t j = 0; j < n; j += 16) {
            const __mmask16 m = tail_mask(n - j);
            vmax = _mm512_max_ps(vmax, _mm512_mask_loadu_ps(ninf, m, x + j));
        }
    } else {
        const __m512 vs = _mm512_set1_ps(scale);
        for (std::size_t j = 0; j < n; j += 16) {
            const __mmask16 m = tail_mask(n - j);
            __m512 t = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + j), vs);
            if (mask) t = _mm512_add_ps(t, _mm512_maskz_loadu_ps(m, mask + j));
            _mm512_mask_storeu_ps(x + j, m, t);
            vmax = _mm512_mask_max_ps(vmax, m, vmax, t);
        }
    }
    const __m512 vm = _mm512_set1_ps(_mm512_reduce_max_ps(vmax)), floor = _mm512_set1_ps(exp_floor);
    __m512 vsum = _mm512_setzero_ps();
    for (std::size_t j = 0; j < n; j += 16) {
        const __mmask16 m = tail_mask(n - j);
        // max returns its second operand when either is NaN: a NaN score stays NaN.
        const __m512 e = vexp::exp_scaled16<0>(_mm512_max_ps(floor, _mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + j), vm)));
        _mm512_mask_storeu_ps(x + j, m, e);
        vsum = _mm512_mask_add_ps(vsum, m, vsum, e);
    }
    return _mm512_reduce_add_ps(vsum);
}

#undef ATT_TARGET

#define ATT_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))

// Float32 panels [np][k][16] (pack_k, pack_v) into the bf16 kernels' pairs
// [np][ceil(k/2)][16][2] (round to nearest even), in place: pair kk of panel p lands at
// bytes (p ceil(k/2) + kk) 64, never past the float rows 2 kk and 2 kk + 1 of panel p it
// is read from (at (p k + 2 kk) 64), so nothing is overwritten before it is read.
ATT_TARGET void panels_to_bf16_pairs(float* panels_f32, std::size_t np, std::size_t k) {
    const std::size_t kp = (k + 1) / 2;
    auto* out = reinterpret_cast<std::uint16_t*>(panels_f32);
    for (std::size_t p = 0; p < np; ++p) {
        const float* in = panels_f32 + p * k * pgemm::panel;
        std::uint16_t* o = out + p * kp * 2 * pgemm::panel;
        for (std::size_t kk = 0; kk < kp; ++kk) {
            const __m512 lo = _mm512_loadu_ps(in + 2 * kk * pgemm::panel);
            const __m512 hi = 2 * kk + 1 < k ? _mm512_loadu_ps(in + (2 * kk + 1) * pgemm::panel) : _mm512_setzero_ps();
            const __m512i l = _mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(lo)));
            const __m512i h = _mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(hi)));
            _mm512_storeu_si512(o + kk * 2 * pgemm::panel, _mm512_or_si512(l, _mm512_slli_epi32(h, 16)));
        }
    }
}

#undef ATT_TARGET

// Row i of the n x cols rows at c (ld apart) times f[i].
void scale_rows(float* c, std::size_t n, std::size_t cols, std::size_t ld, const float* f) {
    for (std::size_t i = 0; i < n; ++i) {
        float* row = c + i * ld;
        const float x = f[i];
        for (std::size_t j = 0; j < cols; ++j) row[j] *= x;
    }
}

__attribute__((target("avx512f"))) void scale_rows_avx512(float* c, std::size_t n, std::size_t cols, std::size_t ld,
                                                          const float* f) {
    for (std::size_t i = 0; i < n; ++i) {
        float* row = c + i * ld;
        const __m512 x = _mm512_set1_ps(f[i]);
        for (std::size_t j = 0; j < cols; j += 16) {
            const auto m = static_cast<__mmask16>(cols - j >= 16 ? 0xFFFFu : (1u << (cols - j)) - 1u);
            _mm512_mask_storeu_ps(row + j, m, _mm512_mul_ps(x, _mm512_maskz_loadu_ps(m, row + j)));
        }
    }
}

// The same without AVX2 (a saved program on another CPU), or with std::exp.
float exp_row_scalar(float* x, const float* mask, std::size_t n, float scale, bool fused, bool exact) {
    float mx = -std::numeric_limits<float>::infinity();
    for (std::size_t j = 0; j < n; ++j) {
        if (!fused) x[j] = x[j] * scale + (mask ? mask[j] : 0.0f);
        mx = std::max(mx, x[j]);
    }
    float sum = 0.0f;
    for (std::size_t j = 0; j < n; ++j) {
        const float d = x[j] - mx;
        x[j] = exact || d != d ? std::exp(d) : vexp::exp_scaled<0>(std::max(exp_floor, d));
        sum += x[j];
    }
    return sum;
}

// The result's dims: q's batch dims and rows, v's columns (dynamic where any input is).
shape result_shape(const shape& q, const shape& v) {
    if (!q.dynamic() && !v.dynamic()) {
        auto lens = q.lens();
        lens.back() = v.lens().back();
        return shape(type::float32, lens);
    }
    auto dims = q.to_dynamic_dims();
    dims.back() = v.to_dynamic_dims().back();
    return shape::make_dynamic(type::float32, dims);
}

}  // namespace

shape attention::compute_shape(const std::vector<shape>& inputs) const {
    auto bad = [&](const std::string& why) { throw_error(error_code::shape, name() + ": " + why); };
    const std::size_t want = (has_mask ? 4 : 3) + (generic ? 0 : 2);
    if (inputs.size() != want)
        bad("expected q, kt, v" + std::string(has_mask ? ", mask" : "") +
            (generic ? "" : ", scratch and an output buffer") + ", got " + std::to_string(inputs.size()) + " inputs");
    if (generic) {
        // Sizes known when it runs: one rank, float32; the rest is checked per call.
        const std::size_t r = inputs[0].is_tensor() ? inputs[0].ndim() : 0;
        for (const auto& s : inputs) {
            const bool is_mask = has_mask && &s == &inputs[3];
            const type want_type = is_mask && select ? type::bool_ : type::float32;
            if (!s.is_tensor() || s.get_type() != want_type || (!is_mask && s.ndim() != r) || r < 3)
                bad("q, kt and v must be float32 tensors of one rank >= 3 and the mask " +
                    std::string(select ? "bool" : "float32") + ", got " + s.to_string());
        }
        return result_shape(inputs[0], inputs[2]);
    }
    for (const auto& s : inputs)
        if (!s.is_tensor() || s.dynamic()) bad("inputs must be static tensors, got " + s.to_string());
    const shape &q = inputs[0], &kt = inputs[1], &v = inputs[2], &out = inputs.back();
    const std::size_t r = q.ndim();
    for (const auto* s : {&q, &kt, &v, &out})
        if (s->get_type() != type::float32 || s->ndim() != r)
            bad("q, kt, v and the output must be float32 tensors of one rank, got " + s->to_string());
    if (auto why = operand_problem(q, kt, v); !why.empty()) bad(why);
    const auto g = geometry_of(q, kt, v);
    if (out.lens() != g.result_lens() || (g.dv > 1 && out.strides()[r - 1] != 1))
        bad("the output buffer " + out.to_string() + " must have the result's dims and unit stride along Dv");
    if (has_mask && !mask_fits(g, inputs[3], select))
        bad("the mask " + inputs[3].to_string() + " must be " + (select ? "bool" : "float32") +
            ", broadcast to the scores with unit stride along Sk");
    if (inputs[inputs.size() - 2].bytes() < g.scratch_bytes(1)) bad("the scratch buffer is too small");
    return out;
}

void attention::finalize(context& ctx, const shape&, const std::vector<shape>&) {
    const auto cap = as_cpu_context(ctx, name()).options().packed_gemm_isa;
    part = pgemm::chosen_part(cap);
    bf16_part = bf16 && pgemm::has_bf16_kernels(cap) ? pgemm::avx512_bf16_part() : nullptr;
}

argument attention::compute(context&, const shape&, const std::vector<argument>& args) const {
    if (part == nullptr) throw_error(error_code::runtime, name() + ": run before it was finalized");
    if (!generic) {
        const argument& scratch = args[args.size() - 2];
        run(args[0], args[1], args[2], has_mask ? &args[3] : nullptr, reinterpret_cast<float*>(scratch.data()),
            scratch.get_shape().bytes(), args.back());
        return args.back();
    }
    // Generic: operands in the layout the kernel reads (a copy where a call's strides do
    // not fit), the scratch this thread keeps for its calls, the result allocated here.
    argument q = args[0], kt = args[1], v = args[2];
    {
        // No keys: every probability row is empty and the context is zeros (as the ref
        // target's softmax and product give); nothing to compute without rows or columns.
        const auto e = geometry_of(q.get_shape(), kt.get_shape(), v.get_shape());
        if (e.batches == 0 || e.sq == 0 || e.dv == 0 || e.sk == 0) return argument{shape(type::float32, e.result_lens())};
    }
    if (!operand_problem(q.get_shape(), kt.get_shape(), v.get_shape()).empty()) {
        const auto last_two_swapped = [](const shape& s) {
            auto lens = s.lens(), strides = s.strides();
            std::swap(lens[lens.size() - 1], lens[lens.size() - 2]);
            std::swap(strides[strides.size() - 1], strides[strides.size() - 2]);
            return shape(s.get_type(), lens, strides);
        };
        const auto unit_last = [](const argument& a) { return a.get_shape().strides().back() == 1 ? a : a.copy(); };
        q = unit_last(q);
        v = unit_last(v);
        // kt is read as K [.., Sk, D] in rows: a copy of K, seen transposed again.
        if (kt.get_shape().strides()[kt.get_shape().ndim() - 2] != 1) {
            auto k = kt.view(last_two_swapped(kt.get_shape())).copy();
            kt = k.view(last_two_swapped(k.get_shape()));
        }
    }
    if (auto why = operand_problem(q.get_shape(), kt.get_shape(), v.get_shape()); !why.empty())
        throw_error(error_code::shape, name() + ": " + why);
    const auto g = geometry_of(q.get_shape(), kt.get_shape(), v.get_shape());
    argument mask;
    if (has_mask) {
        mask = args[3];
        const auto full = g.score_lens();
        const auto& ms = mask.get_shape();
        if (op::broadcast_lens({ms.lens(), full}, name()) != full)
            throw_error(error_code::shape, name() + ": the mask " + ms.to_string() +
                                               " does not broadcast to the scores of q " + q.get_shape().to_string() +
                                               " and kt " + kt.get_shape().to_string());
        // One the kernel cannot read as it is (broadcast along Sk, strided): spelled out.
        if (!mask_fits(g, ms, select)) mask = mask.view(op::broadcast_to(ms, full)).copy();
        if (!mask_fits(g, mask.get_shape(), select))
            throw_error(error_code::shape, name() + ": the mask " + ms.to_string() + " must be " +
                                               (select ? "bool" : "float32"));
    }
    auto out = argument::for_overwrite(shape(type::float32, g.result_lens()));  // every element written by run
    // Up to kept_scratch_bytes the scratch is kept by the calling thread and grown to its
    // largest call (a generic program's calls come one after another, and a fresh buffer per
    // call costs page faults); beyond, a long sequence's scores, it is the call's own.
    constexpr std::size_t kept_scratch_bytes = 32u << 20;
    const std::size_t floats = g.scratch_bytes(team::threads()) / sizeof(float);
    thread_local std::vector<float> kept;
    std::vector<float> own;
    auto& scratch = floats * sizeof(float) <= kept_scratch_bytes ? kept : own;
    if (scratch.size() < floats) scratch.resize(floats);
    run(q, kt, v, has_mask ? &mask : nullptr, scratch.data(), floats * sizeof(float), out);
    return out;
}

void attention::run(const argument& qa, const argument& ka, const argument& va, const argument* ma, float* scratch,
                    std::size_t scratch_bytes, const argument& oa) const {
    const shape &qs = qa.get_shape(), &ks = ka.get_shape(), &vs = va.get_shape();
    const shape& os = oa.get_shape();
    const auto g = geometry_of(qs, ks, vs);
    const std::size_t r = g.rank;
    const auto* q = reinterpret_cast<const float*>(qa.data());
    const auto* kt = reinterpret_cast<const float*>(ka.data());
    const auto* v = reinterpret_cast<const float*>(va.data());
    const float* mask = ma && !select ? reinterpret_cast<const float*>(ma->data()) : nullptr;
    const auto* cond = ma && select ? reinterpret_cast<const std::uint8_t*>(ma->data()) : nullptr;
    auto* out = reinterpret_cast<float*>(oa.data());
    const auto mask_strides = ma ? broadcast_strides(ma->get_shape(), g.score_lens()) : std::vector<std::size_t>();
    // The softmax rows follow the products' choice of kernels.
    const bool vec = part != pgemm::generic_part(), vec16 = part == pgemm::avx512_part();
    const std::size_t ld_s = g.score_stride();
    const std::size_t q_ld = qs.strides()[r - 2], o_ld = os.strides()[r - 2];
    // A part per thread, each with its own range of rows and its own scratch (attention.hpp;
    // a batch index two parts share is packed by both). A small attention (a decode step's:
    // one query row) on the calling thread alone.
    const std::size_t rows = g.batches * g.sq;
    const bool parallel = rows > 1 && g.batches * g.sq * g.sk * (g.d + g.dv) >= single_thread_macs;
    const std::size_t parts = parallel ? std::min({team::threads(), g.parts_in(scratch_bytes), rows}) : 1;
    if (parts == 0) throw_error(error_code::runtime, name() + ": the scratch buffer is too small");
    team::parallel(parts, [&](std::size_t part_no) {
        float* kp = scratch + part_no * g.per_part();
        float* vp = kp + g.packed_k();
        float* s = vp + g.packed_v();  // the task's score rows
        const std::size_t first = rows * part_no / parts, end = rows * (part_no + 1) / parts;
        std::size_t packed = g.batches;  // the batch index whose K and V are in kp and vp
        for (std::size_t at = first; at < end;) {
            const std::size_t b = at / g.sq, r0 = at % g.sq;
            const std::size_t n = std::min({rows_per_task, g.sq - r0, end - at});
            at += n;
            if (packed != b) {
                (vec16 ? pack_k_avx512 : pack_k)(g, kt + batch_offset(g, ks.strides(), b), ks.strides()[r - 1], kp);
                pack_v(g, v + batch_offset(g, vs.strides(), b), vs.strides()[r - 2], vp);
                if (bf16_part) {
                    panels_to_bf16_pairs(kp, panels(g.sk), g.d);
                    panels_to_bf16_pairs(vp, panels(g.dv), g.sk);
                }
                packed = b;
            }
            const float* q_rows = q + batch_offset(g, qs.strides(), b) + r0 * q_ld;
            pgemm::args sc;  // scores of rows r0 .. r0 + n: Q K^T, into s
            sc.m = n;
            sc.n = g.sk;
            sc.k = g.d;
            sc.kc = pgemm::depth_block(g.d);
            sc.a = q_rows;
            sc.lda = q_ld;
            sc.b = kp;
            sc.c = s;
            sc.ldc = ld_s;
            const float* mrow = mask ? mask + batch_offset(g, mask_strides, b) : nullptr;
            const std::uint8_t* crow = cond ? cond + batch_offset(g, mask_strides, b) : nullptr;
            // The scale, and a mask shared by all query rows, in the scores' epilogue (a
            // select's choice comes after the scale, row by row below).
            const bool fused = !cond && (!mask || mask_strides[r - 2] == 0);
            if (fused) {
                sc.post[sc.n_post++] = pgemm::post_step{pgemm::post_kind::linear, scale, 0.0f, nullptr, false};
                if (mask) sc.post[sc.n_post++] = pgemm::post_step{pgemm::post_kind::add, 0.0f, 0.0f, mrow, false};
            }
            // bf16: the task's Q rows, and then its probability rows, in bf16 (rows_per_task
            // x an even D or Sk).
            thread_local std::vector<std::uint16_t> rows16;
            if (bf16_part) {
                const std::size_t ld16 = std::max((g.d + 1) / 2, (g.sk + 1) / 2) * 2;
                if (rows16.size() < rows_per_task * ld16) rows16.resize(rows_per_task * ld16);
                sc.lda = (g.d + 1) / 2 * 2;
                pgemm::to_bf16_rows(q_rows, n, g.d, q_ld, rows16.data(), sc.lda);
                sc.a_bf16 = rows16.data();
                sc.b_bf16 = reinterpret_cast<const std::uint16_t*>(kp);
                bf16_part(sc, 0, n, 0, panels(g.sk));
            } else {
                part(sc, 0, n, 0, panels(g.sk));
            }
            float inv[rows_per_task];
            for (std::size_t i = 0; i < n; ++i) {
                const float* m = mrow ? mrow + (r0 + i) * mask_strides[r - 2] : nullptr;
                float* row = s + i * ld_s;
                float row_scale = scale;
                if (crow) {
                    // where(c, scale * s, fill) (or where(c, fill, scale * s)) as the graph
                    // says, then the softmax over it with nothing left to scale or add.
                    const std::uint8_t* c = crow + (r0 + i) * mask_strides[r - 2];
                    for (std::size_t j = 0; j < g.sk; ++j) row[j] = (c[j] != 0) != fill_first ? row[j] * scale : fill;
                    row_scale = 1.0f;
                }
                const float sum = exact_exp || !vec ? exp_row_scalar(row, m, g.sk, row_scale, fused, exact_exp)
                                  : vec16           ? exp_row_avx512(row, m, g.sk, row_scale, fused)
                                                    : exp_row_avx2(row, m, g.sk, row_scale, fused);
                inv[i] = 1.0f / sum;
            }
            pgemm::args ctx;  // context: exp(scores) V, then each row divided by its sum
            ctx.m = n;
            ctx.n = g.dv;
            ctx.k = g.sk;
            ctx.kc = pgemm::depth_block(g.sk);
            ctx.a = s;
            ctx.lda = ld_s;
            ctx.b = vp;
            ctx.c = out + batch_offset(g, os.strides(), b) + r0 * o_ld;
            ctx.ldc = o_ld;
            if (bf16_part) {
                ctx.lda = (g.sk + 1) / 2 * 2;
                pgemm::to_bf16_rows(s, n, g.sk, ld_s, rows16.data(), ctx.lda);
                ctx.a_bf16 = rows16.data();
                ctx.b_bf16 = reinterpret_cast<const std::uint16_t*>(vp);
                bf16_part(ctx, 0, n, 0, panels(g.dv));
            } else {
                part(ctx, 0, n, 0, panels(g.dv));
            }
            (vec16 ? scale_rows_avx512 : scale_rows)(ctx.c, n, g.dv, o_ld, inv);
        }
    });
}

KILN_REGISTER_OP(attention)

}  // namespace kiln::cpu
