// matmul, gemm, matmul_integer and qlinear_matmul against triple loops written here.
#include "ops/nn_matmul.hpp"
#include "ops_nn_helpers.hpp"

#include <algorithm>

using namespace kiln;
using namespace kiln::test_nn;
using lens_t = std::vector<std::size_t>;

namespace {

// NumPy matmul by definition: 1-D operands promoted, batch dims broadcast.
std::vector<double> naive_matmul(lens_t al, lens_t bl, const std::vector<double>& a, const std::vector<double>& b,
                                 lens_t& out) {
    const bool a1 = al.size() == 1, b1 = bl.size() == 1;
    if (a1) al.insert(al.begin(), 1);
    if (b1) bl.push_back(1);
    const std::size_t m = al[al.size() - 2], k = al.back(), n = bl.back();
    const std::size_t rank = std::max(al.size(), bl.size());
    al.insert(al.begin(), rank - al.size(), 1);
    bl.insert(bl.begin(), rank - bl.size(), 1);
    lens_t batch;
    for (std::size_t i = 0; i + 2 < rank; ++i) batch.push_back(std::max(al[i], bl[i]));
    std::size_t batches = 1;
    for (auto x : batch) batches *= x;
    std::vector<double> y;
    for (std::size_t bi = 0; bi < batches; ++bi) {
        std::size_t rest = bi, ao = 0, bo = 0, as = 1, bs = 1;
        for (std::size_t i = batch.size(); i-- > 0;) {
            const std::size_t idx = rest % batch[i];
            rest /= batch[i];
            ao += (al[i] == 1 ? 0 : idx) * as;
            bo += (bl[i] == 1 ? 0 : idx) * bs;
            as *= al[i];
            bs *= bl[i];
        }
        for (std::size_t i = 0; i < m; ++i)
            for (std::size_t j = 0; j < n; ++j) {
                double acc = 0;
                for (std::size_t p = 0; p < k; ++p) acc += a[(ao * m + i) * k + p] * b[(bo * k + p) * n + j];
                y.push_back(acc);
            }
    }
    out = batch;
    if (!a1) out.push_back(m);
    if (!b1) out.push_back(n);
    return y;
}

void check_matmul(const lens_t& al, const lens_t& bl, type t = type::float32, double tol = 1e-5) {
    auto a = random_arg(t, al), b = random_arg(t, bl);
    lens_t out;
    auto expected = naive_matmul(al, bl, a.to_vector<double>(), b.to_vector<double>(), out);
    auto y = run(op::matmul{}, {a, b});
    EXPECT_EQ(y.get_shape(), shape(t, out));
    expect_near(y, expected, tol, tol);
}

}  // namespace

TEST(ops_nn_matmul, shapes_and_broadcasting) {
    check_matmul({3, 5}, {5, 7});
    check_matmul({2, 3, 4}, {4, 6});
    check_matmul({2, 1, 3, 4}, {3, 4, 5});
    check_matmul({5}, {5});
    check_matmul({5}, {2, 5, 3});
    check_matmul({2, 3, 5}, {5});
    check_matmul({9, 300}, {300, 301}, type::float32, 1e-4);  // several column blocks
}

TEST(ops_nn_matmul, element_types) {
    check_matmul({2, 3, 4}, {4, 5}, type::float64, 1e-12);
    check_matmul({3, 4}, {4, 5}, type::float16, 1e-2);
    check_matmul({3, 4}, {4, 5}, type::bfloat16, 3e-2);
    // Integers wrap like fixed-width arithmetic.
    auto a = make_arg(type::int32, {1, 2}, std::vector<std::int64_t>{65536, 3});
    auto b = make_arg(type::int32, {2, 1}, std::vector<std::int64_t>{65536, -5});
    EXPECT_EQ(run(op::matmul{}, {a, b}).to_vector<std::int64_t>(), std::vector<std::int64_t>{-15});
    auto c = make_arg(type::int64, {2, 2}, std::vector<std::int64_t>{1, -2, 3, 4});
    EXPECT_EQ(run(op::matmul{}, {c, c}).to_vector<std::int64_t>(), (std::vector<std::int64_t>{-5, -10, 15, 10}));
}

TEST(ops_nn_matmul, errors) {
    expect_shape_error(op::matmul{}, {shape(type::float32, {2, 3}), shape(type::float32, {4, 2})}, error_code::shape);
    expect_shape_error(op::matmul{}, {shape(type::float32, {2, 2, 3}), shape(type::float32, {3, 3, 2})},
                       error_code::shape);
    expect_shape_error(op::matmul{}, {shape(type::float32, {2, 3}), shape(type::float64, {3, 2})}, error_code::type);
    expect_shape_error(op::matmul{}, {shape(type::float32), shape(type::float32, {3})}, error_code::shape);
    expect_shape_error(op::matmul{}, {shape(type::bool_, {2, 2}), shape(type::bool_, {2, 2})}, error_code::type);
}

TEST(ops_nn_matmul, gemm_attributes) {
    const std::size_t m = 5, k = 4, n = 3;
    for (bool ta : {false, true})
        for (bool tb : {false, true})
            for (const lens_t& cl : {lens_t{}, lens_t{n}, lens_t{m, 1}, lens_t{m, n}}) {
                auto a = random_arg(type::float32, ta ? lens_t{k, m} : lens_t{m, k});
                auto b = random_arg(type::float32, tb ? lens_t{n, k} : lens_t{k, n});
                auto c = random_arg(type::float32, cl);
                op::gemm op{0.5f, -1.5f, ta, tb};
                auto av = a.to_vector<double>(), bv = b.to_vector<double>(), cv = c.to_vector<double>();
                std::vector<double> want;
                for (std::size_t i = 0; i < m; ++i)
                    for (std::size_t j = 0; j < n; ++j) {
                        double acc = 0;
                        for (std::size_t p = 0; p < k; ++p)
                            acc += (ta ? av[p * m + i] : av[i * k + p]) * (tb ? bv[j * k + p] : bv[p * n + j]);
                        const double cij = cl.empty() ? cv[0] : cl.size() == 1 ? cv[j] : cl[1] == 1 ? cv[i] : cv[i * n + j];
                        want.push_back(0.5 * acc - 1.5 * cij);
                    }
                auto y = run(op, {a, b, c});
                EXPECT_EQ(y.get_shape().lens(), (lens_t{m, n}));
                expect_near(y, want);
                // Without C the result is alpha * A B.
                auto y2 = run(op, {a, b}).to_vector<double>();
                for (std::size_t i = 0; i < want.size(); ++i) {
                    const double cij = cl.empty() ? cv[0] : cl.size() == 1 ? cv[i % n] : cl[1] == 1 ? cv[i / n] : cv[i];
                    EXPECT_NEAR(y2[i], want[i] + 1.5 * cij, 1e-5);
                }
            }
    op::gemm g;
    expect_shape_error(g, {shape(type::float32, {2, 3}), shape(type::float32, {3, 4}), shape(type::float32, {3, 4})},
                       error_code::shape);
    expect_shape_error(g, {shape(type::float32, {2, 3, 1}), shape(type::float32, {3, 4})}, error_code::shape);
    g.trans_a = true;
    expect_shape_error(g, {shape(type::float32, {2, 3}), shape(type::float32, {3, 4})}, error_code::shape);
}

TEST(ops_nn_matmul, matmul_integer_zero_points) {
    const std::size_t m = 3, k = 4, n = 2;
    auto av = random_ints(m * k, 0, 255), bv = random_ints(k * n, -128, 127);
    auto a = make_arg(type::uint8, {m, k}, av), b = make_arg(type::int8, {k, n}, bv);
    std::vector<int> azp{10, 20, 30}, bzp{-3, 4};
    op::matmul_integer op{true, true};
    auto y = run(op, {a, b, make_arg(type::uint8, {m}, azp), make_arg(type::int8, {n}, bzp)});
    EXPECT_EQ(y.get_shape(), shape(type::int32, {m, n}));
    std::vector<double> want;
    for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) {
            double acc = 0;
            for (std::size_t p = 0; p < k; ++p) acc += (av[i * k + p] - azp[i]) * double(bv[p * n + j] - bzp[j]);
            want.push_back(acc);
        }
    expect_near(y, want, 0, 0);
    // Without zero points: a plain integer product.
    op::matmul_integer plain;
    std::vector<double> raw;
    for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) {
            double acc = 0;
            for (std::size_t p = 0; p < k; ++p) acc += av[i * k + p] * double(bv[p * n + j]);
            raw.push_back(acc);
        }
    expect_near(run(plain, {a, b}), raw, 0, 0);
    expect_shape_error(op, {a.get_shape(), b.get_shape(), shape(type::int8, {m}), shape(type::int8, {n})}, error_code::type);
    expect_shape_error(plain, {shape(type::float32, {m, k}), b.get_shape()}, error_code::type);
}

TEST(ops_nn_matmul, qlinear_matmul) {
    const std::size_t m = 2, k = 5, n = 3;
    auto av = random_ints(m * k, 0, 255), bv = random_ints(k * n, 0, 255);
    auto scalar = [](type t, double v) { return make_arg(t, {}, std::vector<double>{v}); };
    std::vector<argument> args{make_arg(type::uint8, {m, k}, av), scalar(type::float32, 0.05), scalar(type::uint8, 113),
                               make_arg(type::uint8, {k, n}, bv), scalar(type::float32, 0.02), scalar(type::uint8, 114),
                               scalar(type::float32, 0.5), scalar(type::uint8, 118)};
    auto y = run(op::qlinear_matmul{}, args);
    EXPECT_EQ(y.get_shape(), shape(type::uint8, {m, n}));
    std::vector<double> want;
    for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) {
            double acc = 0;
            for (std::size_t p = 0; p < k; ++p) acc += (av[i * k + p] - 113.0) * (bv[p * n + j] - 114.0);
            want.push_back(std::clamp(std::nearbyint(acc * 0.05 * 0.02 / 0.5) + 118, 0.0, 255.0));
        }
    expect_near(y, want, 0, 1);
    args[7] = scalar(type::int8, 0);
    EXPECT_EQ(shape_of(op::qlinear_matmul{}, args).get_type(), type::int8);
}

TEST(ops_nn_matmul, dynamic_dims) {
    // Inner dims that are both dynamic must not be sampled independently.
    const dynamic_dimension any{1, 64, {}};
    auto a = shape::make_dynamic(type::float32, {{2, 2, {}}, any, {1, 1, {}}, any});
    auto b = shape::make_dynamic(type::float32, {any, {8, 8, {}}, any, {5, 5, {}}});
    operation mm = op::matmul{};
    // Fixed sizes other than 1 win over dynamic ones, so every output dim is known.
    EXPECT_EQ(mm.compute_shape({a, b}), shape(type::float32, {2, 8, 1, 5}));
    auto c = shape::make_dynamic(type::float32, {any, {1, 1, {}}, any, {3, 3, {}}});
    auto s = mm.compute_shape({c, shape::make_dynamic(type::float32, {{1, 1, {}}, any, {3, 3, {}}, {5, 5, {}}})});
    ASSERT_TRUE(s.dynamic());
    EXPECT_EQ(s.dyn_dims()[0], any);
    EXPECT_EQ(s.dyn_dims()[1], any);
    EXPECT_EQ(s.dyn_dims()[2], any);
    EXPECT_EQ(s.dyn_dims()[3], (dynamic_dimension{5, 5, {}}));
    auto k3 = shape::make_dynamic(type::float32, {any, {3, 3, {}}});
    auto k4 = shape::make_dynamic(type::float32, {{4, 4, {}}, any});
    EXPECT_THROW(mm.compute_shape({k3, k4}), error);
    operation g = op::gemm{1.0f, 1.0f, false, true};
    auto gs = g.compute_shape({k3, shape::make_dynamic(type::float32, {any, {3, 3, {}}})});
    EXPECT_EQ(gs.dyn_dims()[0], any);
    EXPECT_EQ(gs.dyn_dims()[1], any);
}
