// The Winograd phases, included by one source file per ISA variant inside an anonymous
// namespace, with WG_TARGET set to that variant's function attribute (empty for the
// baseline), WG_AVX2 telling whether AVX2 intrinsics may be used and WG_AVX512 whether
// AVX-512 may (the products on zmm; the transforms too where 16 channels lie together).
// Everything here has internal linkage and calls no inline library function: code
// compiled for AVX2 must never be picked by the linker for a caller on a CPU without it.
//
// Activations are in oneDNN's blocked layout (channel blocks of `block` = 8 or 16,
// innermost); transforms work on 8-lane vectors, block/8 of them per channel block, or
// with AVX-512 on 16-lane ones where a block holds 16.

typedef float vec __attribute__((vector_size(32)));
#if WG_AVX512
// The transforms' 16-lane vectors: one zmm per pixel of a 16-channel block.
typedef float vec16 __attribute__((vector_size(64)));
#endif
#define WG_INLINE WG_TARGET __attribute__((always_inline)) inline

// Lanes of a transform vector type.
template <class V>
constexpr std::size_t lanes_of = sizeof(V) / sizeof(float);

template <class V = vec>
WG_INLINE V loadv(const float* p) {
    V r;
    __builtin_memcpy(&r, p, sizeof r);
    return r;
}
template <class V>
WG_INLINE void storev(float* p, const V& v) {
    __builtin_memcpy(p, &v, sizeof v);
}
template <class V = vec>
WG_INLINE V splat(float f) {
    V r = {};
    return r + f;
}

// a * b + c: one fused instruction where the ISA has it.
WG_INLINE vec fmadd(const vec& a, const vec& b, const vec& c) {
#if WG_AVX2
    return (vec)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#else
    return a * b + c;
#endif
}
#if WG_AVX512
WG_INLINE vec16 fmadd(const vec16& a, const vec16& b, const vec16& c) {
    return (vec16)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
}
#endif

// B^T d for one column or row of a tile (`s`: stride between its elements).
template <int M, class V>
WG_INLINE void bt(const V* d, int s, V* r, int rs) {
    if constexpr (M == 4) {
        const V d0 = d[0], d1 = d[s], d2 = d[2 * s], d3 = d[3 * s], d4 = d[4 * s], d5 = d[5 * s];
        const V f4 = splat<V>(4.0f), m4 = splat<V>(-4.0f), m5 = splat<V>(-5.0f), f2 = splat<V>(2.0f),
                m2 = splat<V>(-2.0f);
        const V d31 = d3 - d1, d42 = d4 - d2;
        r[0] = fmadd(f4, d0, fmadd(m5, d2, d4));
        r[rs] = fmadd(m4, d1 + d2, d3 + d4);
        r[2 * rs] = fmadd(f4, d1 - d2, d4 - d3);
        r[3 * rs] = fmadd(f2, d31, d42);
        r[4 * rs] = fmadd(m2, d31, d42);
        r[5 * rs] = fmadd(f4, d1, fmadd(m5, d3, d5));
    } else {
        const V d0 = d[0], d1 = d[s], d2 = d[2 * s], d3 = d[3 * s];
        r[0] = d0 - d2;
        r[rs] = d1 + d2;
        r[2 * rs] = d2 - d1;
        r[3 * rs] = d1 - d3;
    }
}

// A^T m for one column or row of a tile.
template <int M, class V>
WG_INLINE void at(const V* d, int s, V* r, int rs) {
    if constexpr (M == 4) {
        const V m0 = d[0], m1 = d[s], m2 = d[2 * s], m3 = d[3 * s], m4 = d[4 * s], m5 = d[5 * s];
        const V a = m1 + m2, b = m1 - m2, c = m3 + m4, e = m3 - m4;
        r[0] = m0 + a + c;
        r[rs] = fmadd(splat<V>(2.0f), e, b);
        r[2 * rs] = fmadd(splat<V>(4.0f), c, a);
        r[3 * rs] = fmadd(splat<V>(8.0f), e, b) + m5;
    } else {
        const V m0 = d[0], m1 = d[s], m2 = d[2 * s], m3 = d[3 * s];
        r[0] = m0 + m1 + m2;
        r[rs] = m1 - m2 - m3;
    }
}

struct tile_pos {
    std::size_t img, ty, tx;
};
WG_INLINE tile_pos locate(const args& a, std::size_t t) {
    const std::size_t per_img = a.tiles_h * a.tiles_w;
    const std::size_t img = t / per_img, r = t % per_img;
    return {img, r / a.tiles_w, r % a.tiles_w};
}

// The next work item: the next tile of the group, or the first tile again with the next
// channel block (no divisions on the way).
WG_INLINE void next_item(const args& a, std::size_t t0, std::size_t count, std::size_t& cb, std::size_t& tl,
                         tile_pos& p) {
    if (++tl == count) {
        tl = 0;
        ++cb;
        p = locate(a, t0);
    } else if (++p.tx == a.tiles_w) {
        p.tx = 0;
        if (++p.ty == a.tiles_h) {
            p.ty = 0;
            ++p.img;
        }
    }
}

// What an edge tile reads for a pixel outside the image (as many lanes as the widest vector).
alignas(64) constexpr float zero_lanes[16] = {};

// The input transform of `count` tiles from t0, `lanes_of<V>` channels per vector.
template <int M, class V>
WG_TARGET void input_phase_lanes(const args& a, std::size_t t0, std::size_t count, float* v) {
    constexpr int A = M + 2;
    constexpr std::size_t L = lanes_of<V>;
    const std::size_t blk = a.in_block;
    const std::size_t ncb = a.cin_p / blk;
    const std::size_t parts = blk / L;
    // Channel block outermost: consecutive items are neighbouring tiles of one plane
    // (overlapping reads, writes to neighbouring rows of V).
    tile_pos p = locate(a, t0);
    std::size_t cb = 0, tl = 0;
    for (std::size_t item = 0; item < count * ncb; ++item, next_item(a, t0, count, cb, tl, p)) {
        const std::int64_t y0 = static_cast<std::int64_t>(p.ty) * M - a.pad_t;
        const std::int64_t x0 = static_cast<std::int64_t>(p.tx) * M - a.pad_l;
        const float* plane = a.x + (p.img * ncb + cb) * a.h * a.w * blk;
        const bool inside = y0 >= 0 && x0 >= 0 && y0 + A <= static_cast<std::int64_t>(a.h) &&
                            x0 + A <= static_cast<std::int64_t>(a.w);
        for (std::size_t hb = 0; hb < parts; ++hb) {
            V d[A][A], t[A][A], r[A][A];
            if (inside) {
                const float* base = plane + (static_cast<std::size_t>(y0) * a.w + static_cast<std::size_t>(x0)) *
                                                blk +
                                    hb * L;
                for (int i = 0; i < A; ++i)
                    for (int j = 0; j < A; ++j)
                        d[i][j] = loadv<V>(base + (static_cast<std::size_t>(i) * a.w + static_cast<std::size_t>(j)) *
                                                      blk);
            } else {
                // An edge tile: each pixel outside the image reads a vector of zeros. Chosen by
                // a pointer per pixel, not a branch, so that this unrolls like the path above
                // (a branch per pixel kept d on the stack and cost 2.5x the inside path: 14x14
                // images in 4x4 tiles, where three tiles in four touch an edge).
                const float* rows[A];
                for (int i = 0; i < A; ++i) {
                    const std::int64_t y = y0 + i;
                    rows[i] = y >= 0 && y < static_cast<std::int64_t>(a.h)
                                  ? plane + static_cast<std::size_t>(y) * a.w * blk + hb * L
                                  : nullptr;
                }
                std::int64_t cols[A];  // a pixel's offset in its row, or -1 outside
                for (int j = 0; j < A; ++j) {
                    const std::int64_t xx = x0 + j;
                    cols[j] = xx >= 0 && xx < static_cast<std::int64_t>(a.w) ? xx * static_cast<std::int64_t>(blk) : -1;
                }
#pragma GCC unroll 6
                for (int i = 0; i < A; ++i)
#pragma GCC unroll 6
                    for (int j = 0; j < A; ++j) {
                        const bool in = rows[i] != nullptr && cols[j] >= 0;
                        d[i][j] = loadv<V>(in ? rows[i] + cols[j] : zero_lanes);
                    }
            }
            for (int j = 0; j < A; ++j) bt<M>(&d[0][j], A, &t[0][j], A);
            for (int i = 0; i < A; ++i) bt<M>(&t[i][0], 1, &r[i][0], 1);
            float* dst = v + tl * a.cin_p + cb * blk + hb * L;
            const std::size_t k_stride = a.v_pitch;
            for (int i = 0; i < A; ++i)
                for (int j = 0; j < A; ++j) storev(dst + static_cast<std::size_t>(i * A + j) * k_stride, r[i][j]);
        }
    }
}

template <int M>
WG_TARGET void input_phase_m(const args& a, std::size_t t0, std::size_t count, float* v) {
#if WG_AVX512
    // Blocks of 16 channels (or channels-last with a multiple of 16): one zmm per pixel,
    // half the instructions of two 8-lane passes (fashion_resnet's 16-channel layers).
    if (a.in_block % 16 == 0) return input_phase_lanes<M, vec16>(a, t0, count, v);
#endif
    input_phase_lanes<M, vec>(a, t0, count, v);
}

// out[R][16] (=, or += with `acc`) V[R][k] * U[k][16].
template <int R>
WG_INLINE void micro(const float* v, std::size_t ldv, const float* u, std::size_t k, float* out, std::size_t ldo,
                     bool acc) {
#if WG_AVX2
    __m256 acc0[R], acc1[R];
    for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
    for (std::size_t c = 0; c < k; ++c) {
        const __m256 u0 = _mm256_loadu_ps(u + c * 16), u1 = _mm256_loadu_ps(u + c * 16 + 8);
        for (int r = 0; r < R; ++r) {
            const __m256 s = _mm256_broadcast_ss(v + static_cast<std::size_t>(r) * ldv + c);
            acc0[r] = _mm256_fmadd_ps(s, u0, acc0[r]);
            acc1[r] = _mm256_fmadd_ps(s, u1, acc1[r]);
        }
    }
    if (acc)
        for (int r = 0; r < R; ++r) {
            acc0[r] = _mm256_add_ps(acc0[r], _mm256_loadu_ps(out + static_cast<std::size_t>(r) * ldo));
            acc1[r] = _mm256_add_ps(acc1[r], _mm256_loadu_ps(out + static_cast<std::size_t>(r) * ldo + 8));
        }
    for (int r = 0; r < R; ++r) {
        _mm256_storeu_ps(out + static_cast<std::size_t>(r) * ldo, acc0[r]);
        _mm256_storeu_ps(out + static_cast<std::size_t>(r) * ldo + 8, acc1[r]);
    }
#else
    vec acc0[R], acc1[R];
    for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = splat(0.0f);
    for (std::size_t c = 0; c < k; ++c) {
        const vec u0 = loadv(u + c * 16), u1 = loadv(u + c * 16 + 8);
        for (int r = 0; r < R; ++r) {
            const vec s = splat(v[static_cast<std::size_t>(r) * ldv + c]);
            acc0[r] += s * u0;
            acc1[r] += s * u1;
        }
    }
    if (acc)
        for (int r = 0; r < R; ++r) {
            acc0[r] += loadv(out + static_cast<std::size_t>(r) * ldo);
            acc1[r] += loadv(out + static_cast<std::size_t>(r) * ldo + 8);
        }
    for (int r = 0; r < R; ++r) {
        storev(out + static_cast<std::size_t>(r) * ldo, acc0[r]);
        storev(out + static_cast<std::size_t>(r) * ldo + 8, acc1[r]);
    }
#endif
}

#if WG_AVX512
// out[R][16 P] (=, or += with `acc`) V[R][k] * U[k][16 P]: P column blocks of U, `u_step`
// floats apart, one zmm each per k step.
// With Ahead, one line per k step of each of the next product's `ahead_panels` column
// blocks of U at `ahead` (`u_step` apart too): U streams from memory once per run (at
// batch 1 it outgrows the caches), and without this the first tile of each product waits.
template <int R, int P, bool Ahead = false>
WG_INLINE void micro512(const float* v, std::size_t ldv, const float* u, std::size_t u_step, std::size_t k, float* out,
                        std::size_t ldo, bool acc, const float* ahead = nullptr, int ahead_panels = 0,
                        std::size_t ahead_k = 0) {
    __m512 sum[R][P];
    for (int r = 0; r < R; ++r)
        for (int q = 0; q < P; ++q) sum[r][q] = _mm512_setzero_ps();
    for (std::size_t c = 0; c < k; ++c) {
        if constexpr (Ahead) {
            if (c < ahead_k) {
                _mm_prefetch(reinterpret_cast<const char*>(ahead + c * 16), _MM_HINT_T0);
                if (ahead_panels > 1) _mm_prefetch(reinterpret_cast<const char*>(ahead + u_step + c * 16), _MM_HINT_T0);
            }
        }
        __m512 uq[P];
        for (int q = 0; q < P; ++q) uq[q] = _mm512_loadu_ps(u + static_cast<std::size_t>(q) * u_step + c * 16);
        for (int r = 0; r < R; ++r) {
            const __m512 s = _mm512_set1_ps(v[static_cast<std::size_t>(r) * ldv + c]);
            for (int q = 0; q < P; ++q) sum[r][q] = _mm512_fmadd_ps(s, uq[q], sum[r][q]);
        }
    }
    for (int r = 0; r < R; ++r)
        for (int q = 0; q < P; ++q) {
            float* o = out + static_cast<std::size_t>(r) * ldo + static_cast<std::size_t>(q) * 16;
            _mm512_storeu_ps(o, acc ? _mm512_add_ps(sum[r][q], _mm512_loadu_ps(o)) : sum[r][q]);
        }
}

// Rows 12 at a time (24 zmm accumulators with P = 2), then the rest in one tile.
constexpr int gemm_rows512 = 12;
// The first tile prefetches the next product's block of U (`ahead`, see micro512).
template <int P>
WG_INLINE void rows512(const float* v, std::size_t ldv, const float* u, std::size_t u_step, std::size_t k,
                       std::size_t count, float* out, std::size_t ldo, bool acc, const float* ahead, int ahead_panels,
                       std::size_t ahead_k) {
    std::size_t t = 0;
    if (ahead && count >= gemm_rows512) {
        micro512<gemm_rows512, P, true>(v, ldv, u, u_step, k, out, ldo, acc, ahead, ahead_panels, ahead_k);
        t = gemm_rows512;
    }
    for (; t + gemm_rows512 <= count; t += gemm_rows512)
        micro512<gemm_rows512, P>(v + t * ldv, ldv, u, u_step, k, out + t * ldo, ldo, acc);
    const float* vt = v + t * ldv;
    float* ot = out + t * ldo;
    switch (count - t) {
#define WG_REST(R) \
    case R: micro512<R, P>(vt, ldv, u, u_step, k, ot, ldo, acc); break;
        WG_REST(1)
        WG_REST(2)
        WG_REST(3)
        WG_REST(4)
        WG_REST(5)
        WG_REST(6)
        WG_REST(7)
        WG_REST(8)
        WG_REST(9)
        WG_REST(10)
        WG_REST(11)
#undef WG_REST
    default: break;
    }
}
#endif

#if WG_AVX2
constexpr int gemm_rows = 6;  // 12 accumulators + 2 weights + 1 broadcast of 16 ymm registers
#else
constexpr int gemm_rows = 4;
#endif

// Input channels per pass over a column block of U: 256 x 16 weights (16 KiB) stay in L1
// with the rows of V (two 256-channel 14x14 convolutions, one thread: 2.6 vs 3.0 ms with 128).
constexpr std::size_t gemm_kc = 256;

// Columns [16 c0, 16 c1) of the products of `count` tiles, into m (rows of 16 (c1 - c0)).
WG_TARGET void gemm_phase(const args& a, std::size_t count, const float* v, float* m, std::size_t c0, std::size_t c1) {
    const std::size_t alpha2 = static_cast<std::size_t>((a.m + 2) * (a.m + 2));
    const std::size_t ncol = a.cout16 / 16, ldm = (c1 - c0) * 16;
#if WG_AVX512
    // Column blocks in pairs: each k step of a tile loads two U rows for 12 broadcasts.
    // The products run in order (k, column pair, input-channel block); each fetches the
    // next one's U while it computes.
    const std::size_t u_step = a.cin_p * 16;
    auto u_at = [&](std::size_t k, std::size_t cb, std::size_t i0) { return a.u + (k * ncol + cb) * u_step + i0 * 16; };
    for (std::size_t k = 0; k < alpha2; ++k)
        for (std::size_t cb = c0; cb < c1; cb += 2) {
            const float* vk = v + k * a.v_pitch;
            float* mk = m + k * a.m_pitch + (cb - c0) * 16;
            for (std::size_t i0 = 0; i0 < a.cin_p; i0 += gemm_kc) {
                const std::size_t kc = a.cin_p - i0 < gemm_kc ? a.cin_p - i0 : gemm_kc;
                // The next product: the next input-channel block, else the next pair, else
                // the next k's first pair.
                std::size_t nk = k, ncb = cb, ni0 = i0 + gemm_kc;
                if (ni0 >= a.cin_p) {
                    ni0 = 0;
                    ncb = cb + 2;
                    if (ncb >= c1) ncb = c0, ++nk;
                }
                const float* ahead = nk < alpha2 ? u_at(nk, ncb, ni0) : nullptr;
                const int ahead_panels = ncb + 1 < c1 ? 2 : 1;
                const std::size_t ahead_k = a.cin_p - ni0 < gemm_kc ? a.cin_p - ni0 : gemm_kc;
                if (cb + 1 < c1)
                    rows512<2>(vk + i0, a.cin_p, u_at(k, cb, i0), u_step, kc, count, mk, ldm, i0 > 0, ahead, ahead_panels,
                               ahead_k);
                else
                    rows512<1>(vk + i0, a.cin_p, u_at(k, cb, i0), u_step, kc, count, mk, ldm, i0 > 0, ahead, ahead_panels,
                               ahead_k);
            }
        }
    return;
#endif
    for (std::size_t k = 0; k < alpha2; ++k)
        for (std::size_t cb = c0; cb < c1; ++cb) {
            const float* vk = v + k * a.v_pitch;
            const float* uk = a.u + (k * ncol + cb) * a.cin_p * 16;
            float* mk = m + k * a.m_pitch + (cb - c0) * 16;
            for (std::size_t i0 = 0; i0 < a.cin_p; i0 += gemm_kc) {
                const std::size_t kc = a.cin_p - i0 < gemm_kc ? a.cin_p - i0 : gemm_kc;
                const bool acc = i0 > 0;
                const float* vc = vk + i0;
                const float* u = uk + i0 * 16;
                std::size_t t = 0;
                for (; t + gemm_rows <= count; t += gemm_rows)
                    micro<gemm_rows>(vc + t * a.cin_p, a.cin_p, u, kc, mk + t * ldm, ldm, acc);
                const float* vt = vc + t * a.cin_p;
                float* mt = mk + t * ldm;
                switch (count - t) {
                case 5: micro<5>(vt, a.cin_p, u, kc, mt, ldm, acc); break;
                case 4: micro<4>(vt, a.cin_p, u, kc, mt, ldm, acc); break;
                case 3: micro<3>(vt, a.cin_p, u, kc, mt, ldm, acc); break;
                case 2: micro<2>(vt, a.cin_p, u, kc, mt, ldm, acc); break;
                case 1: micro<1>(vt, a.cin_p, u, kc, mt, ldm, acc); break;
                default: break;
                }
            }
        }
}

template <class V>
WG_INLINE void apply_post(const args& a, V& x, std::size_t off) {
    for (int i = 0; i < a.n_post; ++i) {
        const post_step& p = a.post[i];
        switch (p.kind) {
        case post_kind::relu: x = x > splat<V>(0.0f) ? x : x * splat<V>(p.alpha); break;
        case post_kind::linear: x = x * splat<V>(p.alpha) + splat<V>(p.beta); break;
        case post_kind::clip: {
            const V lo = splat<V>(p.alpha), hi = splat<V>(p.beta);
            x = x > lo ? x : lo;
            x = x < hi ? x : hi;
            break;
        }
        case post_kind::gelu_erf: break;   // never lowered here: fused_post_kind_of without GELU
        case post_kind::hardswish: break;  // nor this: without hardswish
        case post_kind::add: x = x + loadv<V>(p.src + off); break;
        case post_kind::sub: x = x - loadv<V>(p.src + off); break;
        case post_kind::mul: x = x * loadv<V>(p.src + off); break;
        case post_kind::max: {
            const V s = loadv<V>(p.src + off);
            x = x > s ? x : s;
            break;
        }
        case post_kind::min: {
            const V s = loadv<V>(p.src + off);
            x = x < s ? x : s;
            break;
        }
        }
    }
}

// The output transform of one tile for the `lanes_of<V>` channels from `ch` (one channel
// block's, or part of one): src is the tile's first row of M for them, `plane` the offset
// of channel `ch` in its block's plane of y.
template <int M, class V>
WG_INLINE void output_tile(const args& a, const float* src, std::size_t k_stride, std::size_t plane, std::size_t ch,
                           const tile_pos& p) {
    constexpr int A = M + 2;
    constexpr std::size_t L = lanes_of<V>;
    const std::size_t blk = a.out_block;
    V mv[A][A], t[M][A], o[M][M];
    for (int i = 0; i < A; ++i)
        for (int j = 0; j < A; ++j) mv[i][j] = loadv<V>(src + static_cast<std::size_t>(i * A + j) * k_stride);
    for (int j = 0; j < A; ++j) at<M>(&mv[0][j], A, &t[0][j], A);
    for (int i = 0; i < M; ++i) at<M>(&t[i][0], 1, &o[i][0], 1);
    // The layout's padding channels stay zero, as oneDNN leaves them.
    const bool padded = ch + L > a.cout;
    V bias = splat<V>(0.0f), keep = splat<V>(1.0f);
    if (!padded) {
        if (a.bias) bias = loadv<V>(a.bias + ch);
    } else {
        for (std::size_t l = 0; l < L; ++l) {
            if (ch + l >= a.cout) keep[l] = 0.0f;
            else if (a.bias) bias[l] = a.bias[ch + l];
        }
    }
    for (int i = 0; i < M; ++i) {
        const std::size_t oy = p.ty * M + static_cast<std::size_t>(i);
        if (oy >= a.ho) break;
        for (int j = 0; j < M; ++j) {
            const std::size_t ox = p.tx * M + static_cast<std::size_t>(j);
            if (ox >= a.wo) break;
            const std::size_t off = plane + (oy * a.wo + ox) * blk;
            V r = o[i][j] + bias;
            apply_post(a, r, off);
            if (padded) r = keep > splat<V>(0.5f) ? r : splat<V>(0.0f);
            storev(a.y + off, r);
        }
    }
}

template <int M>
WG_TARGET void output_phase_m(const args& a, std::size_t t0, std::size_t count, const float* m, std::size_t c0,
                              std::size_t c1) {
    const std::size_t blk = a.out_block;
    const std::size_t ncb = a.cout_p / blk;
    const std::size_t ldm = (c1 - c0) * 16, k_stride = a.m_pitch;
    // The channels [16 c0, 16 c1) in chunks that never straddle a channel block: 8 lanes
    // for blocks of 8; else 16 (blocks of 16, or channels-last's one block, whose last
    // chunk may hold only 8).
    const std::size_t chunk = blk == 8 ? 8 : 16;
    const std::size_t ch_end = c1 * 16 < a.cout_p ? c1 * 16 : a.cout_p;
    const std::size_t nchunks = ch_end > c0 * 16 ? (ch_end - c0 * 16 + chunk - 1) / chunk : 0;
    tile_pos p = locate(a, t0);
    std::size_t ci = 0, tl = 0;
    for (std::size_t item = 0; item < count * nchunks; ++item, next_item(a, t0, count, ci, tl, p)) {
        const std::size_t ch0 = c0 * 16 + ci * chunk;
        const std::size_t plane = (p.img * ncb + ch0 / blk) * a.ho * a.wo * blk + ch0 % blk;
        const std::size_t width = ch_end - ch0 < chunk ? ch_end - ch0 : chunk;
        const float* src = m + tl * ldm + (ch0 - c0 * 16);
#if WG_AVX512
        if (width == 16) {
            output_tile<M, vec16>(a, src, k_stride, plane, ch0, p);
            continue;
        }
#endif
        for (std::size_t hb = 0; hb < width / 8; ++hb)
            output_tile<M, vec>(a, src + hb * 8, k_stride, plane + hb * 8, ch0 + hb * 8, p);
    }
}

WG_TARGET void input_phase(const args& a, std::size_t t0, std::size_t count, float* v) {
    if (a.m == 4) input_phase_m<4>(a, t0, count, v);
    else input_phase_m<2>(a, t0, count, v);
}
WG_TARGET void output_phase(const args& a, std::size_t t0, std::size_t count, const float* m, std::size_t c0,
                            std::size_t c1) {
    if (a.m == 4) output_phase_m<4>(a, t0, count, m, c0, c1);
    else output_phase_m<2>(a, t0, count, m, c0, c1);
}

#undef WG_INLINE
