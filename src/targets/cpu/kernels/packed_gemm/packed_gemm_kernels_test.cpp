// The packed GEMM's micro-kernels called directly (pgemm::*_part), each against a
// double-precision product: every variant this CPU can run, on row-major C with row
// strides, and on channel-blocked C with blocks of 8 and of 16 (the layouts oneDNN picks
// on AVX2 and on AVX-512 machines; a whole-program test only meets the one its machine
// picks), with partial panels, every row remainder of the tiles, several k blocks, bias
// and a full-tensor residual; and C accumulated in place (args::accumulate: C holds the
// residual) in both orders, the tall one (args::tall, run_all for many rows) included.
// The bf16 kernels (where this CPU has them) take the same cases on A and B rounded to
// bf16 (A converted by pgemm::to_bf16_rows, B packed in pairs), against the double
// product of the rounded values. run_all with an a_fill (A gathered by the parts
// themselves) on two threads, with a copy of A per column part and with one.
#include "targets/cpu/cpu_features.hpp"
#include "targets/cpu/kernels/packed_gemm/packed_gemm.hpp"
#include "targets/cpu/kernels/packed_gemm/packed_gemm_args.hpp"

#include <kiln/float_types.hpp>

#include <gtest/gtest.h>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <random>
#include <utility>
#include <string>
#include <vector>

using namespace kiln::cpu;

namespace {

struct variant {
    const char* name;
    pgemm::part_fn part;
    bool bf16 = false;
};

std::vector<variant> variants() {
    std::vector<variant> v{{"generic", pgemm::generic_part()}};
    if (has_avx2_fma()) v.push_back({"avx2", pgemm::avx2_part()});
    if (has_avx512()) v.push_back({"avx512", pgemm::avx512_part()});
    if (pgemm::has_bf16_kernels(isa_cap::none)) v.push_back({"avx512_bf16", pgemm::avx512_bf16_part(), true});
    return v;
}

std::vector<float> random_values(std::size_t n, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = d(gen);
    return v;
}

struct product {
    std::size_t m, k, n;
    std::size_t block = 0, image_rows = 0;  // C channel-blocked when block > 0
    std::size_t lda = 0, ldc = 0;
    bool accumulate = false;  // the residual is C's own values instead of a binary post-op
};

// Where element (i, j) of C is in its buffer.
std::size_t c_index(const product& p, std::size_t i, std::size_t j) {
    if (p.block == 0) return i * (p.ldc ? p.ldc : p.n) + j;
    return (i / p.image_rows) * p.image_rows * p.n + (j / p.block) * p.image_rows * p.block +
           (i % p.image_rows) * p.block + j % p.block;
}

void check(const product& p, const variant& v, bool threaded) {
    const std::size_t lda = p.lda ? p.lda : p.k;
    auto a = random_values(p.m * lda, 1);
    auto b = random_values(p.k * p.n, 2);
    if (v.bf16) {
        for (auto& x : a) x = kiln::bfloat16(x);
        for (auto& x : b) x = kiln::bfloat16(x);
    }
    const auto bias = random_values(p.n, 3);
    const std::size_t c_size = p.block ? p.m * p.n : p.m * (p.ldc ? p.ldc : p.n);
    const auto residual = random_values(c_size, 4);
    const auto packed = v.bf16 ? pack_gemm_weights_bf16(b, p.k, p.n, false) : pack_gemm_weights(b, p.k, p.n, false);
    const std::size_t lda16 = (lda + 1) / 2 * 2;  // whole pairs
    std::vector<std::uint16_t> a16(p.m * lda16 + 1, 0xFFFF);  // past the rows: must not be read
    // run_all converts A itself when given it (rows k apart): the model's path.
    const bool convert_in_run = v.bf16 && threaded && p.lda == 0;
    if (v.bf16 && !convert_in_run) pgemm::to_bf16_rows(a.data(), p.m, p.k, lda, a16.data(), lda16);
    std::vector<float> c(c_size, 7.0f);  // outside the product's columns must stay 7
    if (p.accumulate)
        for (std::size_t i = 0; i < p.m; ++i)
            for (std::size_t j = 0; j < p.n; ++j) c[c_index(p, i, j)] = residual[c_index(p, i, j)];

    pgemm::args g;
    g.m = p.m, g.n = p.n, g.k = p.k, g.kc = pgemm::depth_block(p.k);
    g.a = a.data(), g.b = packed.data(), g.bias = bias.data(), g.c = c.data();
    g.block = p.block, g.image_rows = p.image_rows, g.lda = p.lda, g.ldc = p.ldc;
    if (v.bf16) {
        g.a_bf16 = a16.data(), g.b_bf16 = reinterpret_cast<const std::uint16_t*>(packed.data());
        g.lda = lda16;
    }
    g.accumulate = p.accumulate;
    g.post[0].kind = pgemm::post_kind::add;
    g.post[0].src = residual.data();
    g.post[0].full = true;
    g.post[1].kind = pgemm::post_kind::relu;
    g.post[1].alpha = 0.125f;  // leaky: both sides of zero count
    g.n_post = 2;
    if (p.accumulate) g.post[0] = g.post[1], g.n_post = 1;
    if (threaded) pgemm::run_all(g, v.part, convert_in_run ? a.data() : nullptr);
    else v.part(g, 0, p.m, 0, pgemm::panels(p.n));

    const std::string what = std::string(v.name) + " m " + std::to_string(p.m) + " k " + std::to_string(p.k) + " n " +
                             std::to_string(p.n) + " block " + std::to_string(p.block) +
                             (p.accumulate ? " accumulate" : "") + (threaded ? " run_all" : "");
    for (std::size_t i = 0; i < p.m; ++i)
        for (std::size_t j = 0; j < p.n; ++j) {
            double want = bias[j];
            double mag = std::fabs(want);
            for (std::size_t kk = 0; kk < p.k; ++kk) {
                want += static_cast<double>(a[i * lda + kk]) * b[kk * p.n + j];
                mag += std::fabs(static_cast<double>(a[i * lda + kk]) * b[kk * p.n + j]);
            }
            const std::size_t at = c_index(p, i, j);
            want += residual[at];
            if (want < 0) want *= 0.125;
            ASSERT_NEAR(c[at], want, 1e-5 * (mag + 1.0)) << what << " at " << i << "," << j;
        }
    if (p.ldc) {
        for (std::size_t i = 0; i < p.m; ++i)
            for (std::size_t j = p.n; j < p.ldc; ++j) ASSERT_EQ(c[i * p.ldc + j], 7.0f) << what << " ldc gap";
    }
}

}  // namespace

TEST(cpu_packed_gemm_kernels, row_major_every_tile_remainder) {
    for (const auto& v : variants())
        for (std::size_t m = 1; m <= 26; ++m)
            for (std::size_t n : {7, 16, 40, 64})
                for (std::size_t k : {5, 700}) check({m, k, n}, v, false);
}

TEST(cpu_packed_gemm_kernels, strided_a_and_c) {
    for (const auto& v : variants())
        for (std::size_t m : {3, 13, 30}) check({m, 33, 37, 0, 0, 50, 45}, v, false);
}

TEST(cpu_packed_gemm_kernels, channel_blocked_c_by_8_and_16) {
    for (const auto& v : variants())
        for (std::size_t block : {8, 16})
            for (std::size_t rows : {7, 49})
                for (std::size_t n : {16, 48, 64}) {
                    check({2 * rows, 300, n, block, rows}, v, false);
                    check({2 * rows, 300, n, block, rows}, v, true);
                }
}

TEST(cpu_packed_gemm_kernels, accumulate_into_c) {
    // Few rows (the panel order), rows and k blocks with remainders.
    for (const auto& v : variants())
        for (std::size_t m : {1, 13, 30})
            for (std::size_t k : {9, 700}) {
                product p{m, k, 40};
                p.accumulate = true;
                check(p, v, false);
                p.block = 8, p.image_rows = m;
                if (m % 8 == 0) check(p, v, false);
            }
}

TEST(cpu_packed_gemm_kernels, tall_products_by_rows) {
    // From pgemm::tall_rows rows run_all splits the rows and the AVX-512 kernels finish
    // each row tile before the next (panels in L2-sized blocks: k 2100 makes blocks of 2
    // panels); row counts that leave partial tiles, partial panels, several k blocks,
    // channel-blocked C, with and without accumulating.
    for (const auto& v : variants())
        for (bool acc : {false, true}) {
            for (std::size_t m : {pgemm::tall_rows, pgemm::tall_rows + 29})
                for (std::size_t n : {40, 64}) {
                    product p{m, 64, n};
                    p.accumulate = acc;
                    check(p, v, true);
                }
            product deep{300, 2100, 80};
            deep.accumulate = acc;
            check(deep, v, true);
            product blocked{2 * 147, 96, 48, 16, 147};
            blocked.accumulate = acc;
            check(blocked, v, true);
        }
}

TEST(cpu_packed_gemm_kernels, a_filled_by_the_parts) {
    // run_all with an a_fill (conv_gemm's im2col): on two threads, with a copy of A per
    // column part each part fills its own rows into its copy; with one copy the calling
    // thread fills all of A first. Either way C is the product of the rows fill writes.
    const int before = omp_get_max_threads();
    omp_set_num_threads(2);
    const auto part = has_avx512() ? pgemm::avx512_part() : has_avx2_fma() ? pgemm::avx2_part() : pgemm::generic_part();
    // Column parts (16 rows x 8 panels), rows and columns (49 x 4 panels), rows only (tall).
    for (const product p : {product{16, 1152, 128}, product{49, 576, 64}, product{300, 64, 64}}) {
        const auto source = random_values(p.m * p.k, 5);
        const auto b = random_values(p.k * p.n, 6);
        const auto packed = pack_gemm_weights(b, p.k, p.n, false);
        const std::size_t wanted = pgemm::column_parts(p.m, p.n, p.k, 2);
        if (p.m == 16) {
            EXPECT_EQ(wanted, 2u);
        }
        for (std::size_t copies : {std::size_t{1}, wanted}) {
            std::vector<float> a(copies * p.m * p.k, std::nanf(""));
            std::vector<float> c(p.m * p.n, 7.0f);
            std::vector<std::pair<std::size_t, std::size_t>> calls;
            std::mutex mutex;
            pgemm::a_fill fill;
            fill.a = a.data();
            fill.copies = copies;
            fill.copy_floats = p.m * p.k;
            fill.fill = [&](float* rows, std::size_t m0, std::size_t m1) {
                ASSERT_TRUE(rows >= a.data() && rows < a.data() + a.size());
                std::copy(source.begin() + static_cast<std::ptrdiff_t>(m0 * p.k),
                          source.begin() + static_cast<std::ptrdiff_t>(m1 * p.k),
                          rows + m0 * p.k);
                std::lock_guard<std::mutex> lock(mutex);
                calls.emplace_back(m0, m1);
            };
            pgemm::args g;
            g.m = p.m, g.n = p.n, g.k = p.k, g.kc = pgemm::depth_block(p.k);
            g.b = packed.data(), g.c = c.data();
            pgemm::run_all(g, part, fill);
            const std::string what = "m " + std::to_string(p.m) + " copies " + std::to_string(copies);
            // One copy (or a single column part): A once, whole or by row parts.
            if (copies < wanted) {
                ASSERT_EQ(calls.size(), 1u) << what;
                EXPECT_EQ(calls[0], std::make_pair(std::size_t{0}, p.m)) << what;
            } else {
                EXPECT_EQ(calls.size(), 2u) << what << ": one fill per part";
            }
            for (std::size_t i = 0; i < p.m; ++i)
                for (std::size_t j = 0; j < p.n; ++j) {
                    double want = 0, mag = 0;
                    for (std::size_t kk = 0; kk < p.k; ++kk) {
                        want += static_cast<double>(source[i * p.k + kk]) * b[kk * p.n + j];
                        mag += std::fabs(static_cast<double>(source[i * p.k + kk]) * b[kk * p.n + j]);
                    }
                    ASSERT_NEAR(c[i * p.n + j], want, 1e-5 * (mag + 1.0)) << what << " at " << i << "," << j;
                }
        }
    }
    omp_set_num_threads(before);
}
