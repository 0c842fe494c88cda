// Strings, TfIdf, ai.onnx.ml, training optimizers, random generators and signal ops.
#include "ops/control_image.hpp"
#include "ops/control_ml.hpp"
#include "ops/control_signal.hpp"
#include "ops/control_string.hpp"
#include "ops/control_training.hpp"

#include <kiln/context.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <random>

using namespace kiln;

namespace {

argument strings(const std::vector<std::size_t>& lens, const std::vector<std::string>& v) {
    return literal(shape(type::string, lens), v).get_argument();
}
argument floats(const std::vector<std::size_t>& lens, const std::vector<float>& v) {
    return literal(shape(type::float32, lens), v).get_argument();
}
argument int64s(const std::vector<std::size_t>& lens, const std::vector<std::int64_t>& v) {
    return literal(shape(type::int64, lens), v).get_argument();
}
argument run(const operation& op, const std::vector<argument>& args) {
    std::vector<shape> shapes;
    for (auto& a : args) shapes.push_back(a.get_shape());
    host_context ctx;
    return op.compute(ctx, op.compute_shape(shapes), args);
}
std::vector<float> random_floats(std::size_t n, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> d(0.5f, 2.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = d(gen);
    return v;
}

}  // namespace

TEST(ops_control_misc, string_normalizer) {
    op::string_normalizer s{"UPPER", false, {"Stop", "the"}};
    auto r = run(s, {strings({1, 5}, {"stop", "Go", "THE", "abc", "StOp"})});
    EXPECT_EQ(r.get_shape().lens(), (std::vector<std::size_t>{1, 2}));
    EXPECT_EQ(r.to_vector<std::string>(), (std::vector<std::string>{"GO", "ABC"}));
    op::string_normalizer cs{"LOWER", true, {"stop"}};
    EXPECT_EQ(run(cs, {strings({3}, {"stop", "StOp", "X"})}).to_vector<std::string>(),
              (std::vector<std::string>{"stop", "x"}));
    auto all = run(cs, {strings({2}, {"stop", "stop"})});
    EXPECT_EQ(all.to_vector<std::string>(), (std::vector<std::string>{""}));
    EXPECT_THROW(run(s, {strings({2, 2}, {"a", "b", "c", "d"})}), error);
}

TEST(ops_control_misc, string_split_like_python) {
    auto r = run(op::string_split{"-", -1}, {strings({2}, {"a--b", "c"})});
    EXPECT_EQ(r.elements()[0].get_shape().lens(), (std::vector<std::size_t>{2, 3}));
    EXPECT_EQ(r.elements()[0].to_vector<std::string>(), (std::vector<std::string>{"a", "", "b", "c", "", ""}));
    EXPECT_EQ(r.elements()[1].to_vector<std::int64_t>(), (std::vector<std::int64_t>{3, 1}));
    auto ws = run(op::string_split{"", 1}, {strings({1}, {"  x  y z "})});
    EXPECT_EQ(ws.elements()[0].to_vector<std::string>(), (std::vector<std::string>{"x", "y z "}));
}

TEST(ops_control_misc, string_concat_broadcasts) {
    auto r = run(op::string_concat{}, {strings({2, 1}, {"a", "b"}), strings({3}, {"x", "y", ""})});
    EXPECT_EQ(r.to_vector<std::string>(), (std::vector<std::string>{"ax", "ay", "a", "bx", "by", "b"}));
    EXPECT_THROW(run(op::string_concat{}, {strings({2}, {"a", "b"}), floats({2}, {1, 2})}), error);
}

TEST(ops_control_misc, regex_full_match) {
    auto r = run(op::regex_full_match{"[a-z]+@(x|y)\\.com"}, {strings({3}, {"ab@x.com", "ab@z.com", "xab@y.com!"})});
    EXPECT_EQ(r.get_shape().get_type(), type::bool_);
    EXPECT_EQ(r.to_vector<int>(), (std::vector<int>{1, 0, 0}));
    EXPECT_THROW(op::regex_full_match{"(unclosed"}.compute_shape({shape(type::string, {1})}), error);
}

TEST(ops_control_misc, tfidf_counts_skip_grams) {
    op::tfidf_vectorizer t;
    t.min_gram_length = 1;
    t.max_gram_length = 2;
    t.max_skip_count = 1;
    t.ngram_counts = {0, 2};
    t.ngram_indexes = {0, 1, 2};
    t.pool_int64s = {4, 9, 4, 9};  // 1-grams 4, 9; 2-gram (4, 9)
    // 4 9 4 5 9: unigram 4 twice, 9 twice; (4,9) at skip 0 (pos 0) and skip 1 (pos 2->4).
    auto r = run(t, {int64s({5}, {4, 9, 4, 5, 9})});
    EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{2, 2, 2}));
    t.mode = "TFIDF";
    t.weights = {0.5f, 1.0f, 3.0f};
    EXPECT_EQ(run(t, {int64s({1, 5}, {4, 9, 4, 5, 9})}).to_vector<float>(), (std::vector<float>{1, 2, 6}));
}

TEST(ops_control_misc, label_encoder_and_binarizer_and_feature_extractor) {
    op::label_encoder e{literal(shape(type::string, {2}), std::vector<std::string>{"a", "b"}),
                        literal(shape(type::int64, {2}), std::vector<std::int64_t>{7, 8}),
                        literal(shape(type::int64), std::vector<std::int64_t>{-1})};
    EXPECT_EQ(run(e, {strings({3}, {"b", "z", "a"})}).to_vector<std::int64_t>(), (std::vector<std::int64_t>{8, -1, 7}));
    auto x = random_floats(6, 3);
    auto b = run(op::binarizer{1.2f}, {floats({2, 3}, x)}).to_vector<float>();
    for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(b[i], x[i] > 1.2f ? 1.0f : 0.0f);
    auto f = run(op::array_feature_extractor{}, {floats({2, 3}, x), int64s({2}, {2, 0})});
    EXPECT_EQ(f.to_vector<float>(), (std::vector<float>{x[2], x[0], x[5], x[3]}));
    EXPECT_THROW(run(op::array_feature_extractor{}, {floats({2, 3}, x), int64s({1}, {3})}), error);
}

TEST(ops_control_misc, tree_ensemble_sums_leaves) {
    // One tree: x0 <= 0.5 ? leaf0 (target 0, 2.0) : (x1 > 1 ? leaf1 (t1, 3.0) : leaf2 (t0, -1.0)); a second
    // tree that always gives leaf3 (t1, 0.5).
    op::tree_ensemble t;
    t.n_targets = 2;
    t.tree_roots = {0, 2};
    t.nodes_modes = {0, 3, 1};
    t.nodes_featureids = {0, 1, 0};
    t.nodes_splits = {0.5, 1.0, 100.0};
    t.nodes_truenodeids = {0, 1, 3};
    t.nodes_trueleafs = {1, 1, 1};
    t.nodes_falsenodeids = {1, 2, 3};
    t.nodes_falseleafs = {0, 1, 1};
    t.leaf_targetids = {0, 1, 0, 1};
    t.leaf_weights = {2.0, 3.0, -1.0, 0.5};
    auto r = run(t, {literal(shape(type::float64, {3, 2}), std::vector<double>{0.2, 5, 0.9, 1.5, 0.9, 0.1}).get_argument()});
    EXPECT_EQ(r.to_vector<double>(), (std::vector<double>{2.0, 0.5, 0.0, 3.5, -1.0, 0.5}));
}

TEST(ops_control_misc, optimizers_one_step) {
    auto X = random_floats(3, 4), G = random_floats(3, 5), V = random_floats(3, 6), H = random_floats(3, 7);
    const double R = 0.1, nc = 0.01;
    auto Ra = literal(shape(type::float32), std::vector<float>{float(R)}).get_argument();
    auto T1 = int64s({}, {2});
    op::adam a;
    a.alpha = 0.8f;
    a.beta = 0.7f;
    a.epsilon = 1e-3f;
    a.norm_coefficient = float(nc);
    auto r = run(a, {Ra, T1, floats({3}, X), floats({3}, G), floats({3}, V), floats({3}, H)});
    for (std::size_t i = 0; i < 3; ++i) {
        double g = nc * X[i] + G[i];
        double v = 0.8 * V[i] + 0.2 * g, h = 0.7 * H[i] + 0.3 * g * g;
        double radj = R * std::sqrt(1 - 0.7 * 0.7) / (1 - 0.8 * 0.8);
        EXPECT_NEAR(r.elements()[0].to_vector<float>()[i], X[i] - radj * v / (std::sqrt(h) + 1e-3), 1e-5);
        EXPECT_NEAR(r.elements()[1].to_vector<float>()[i], v, 1e-5);
        EXPECT_NEAR(r.elements()[2].to_vector<float>()[i], h, 1e-5);
    }
    op::momentum m{0.9f, 0.5f, float(nc), true};
    auto mr = run(m, {Ra, T1, floats({3}, X), floats({3}, G), floats({3}, V)});
    for (std::size_t i = 0; i < 3; ++i) {
        double g = nc * X[i] + G[i], v = 0.9 * V[i] + 0.5 * g;
        EXPECT_NEAR(mr.elements()[0].to_vector<float>()[i], X[i] - R * (g + 0.9 * v), 1e-5);
    }
    op::adagrad ad{0.5f, 1e-4f, float(nc)};
    auto ar = run(ad, {Ra, T1, floats({3}, X), floats({3}, G), floats({3}, H)});
    for (std::size_t i = 0; i < 3; ++i) {
        double g = nc * X[i] + G[i], h = H[i] + g * g, rr = R / (1 + 2 * 0.5);
        EXPECT_NEAR(ar.elements()[0].to_vector<float>()[i], X[i] - rr * g / (std::sqrt(h) + 1e-4), 1e-5);
    }
    EXPECT_THROW(run(ad, {Ra, T1, floats({3}, X), floats({2}, {1, 2}), floats({3}, H)}), error);
}

TEST(ops_control_misc, random_ops_respect_range_and_seed) {
    op::random_op u;
    u.a = 2;
    u.b = 3;
    u.lens = {50};
    u.seed = 7.0f;
    auto r1 = run(u, {});
    auto v = r1.to_vector<float>();
    for (auto x : v) EXPECT_TRUE(x >= 2 && x <= 3);
    EXPECT_EQ(run(u, {}), r1);  // seeded: reproducible
    op::random_op b;
    b.kind = op::random_kind::bernoulli;
    auto bits = run(b, {floats({4}, {0, 1, 0, 1})}).to_vector<float>();
    EXPECT_EQ(bits, (std::vector<float>{0, 1, 0, 1}));
    EXPECT_TRUE(operation(u).traits().nondeterministic);
}

TEST(ops_control_misc, dft_matches_the_definition) {
    const std::size_t N = 7;
    auto x = random_floats(2 * N, 8);  // batch 2, real
    op::dft d;
    d.axis = 1;
    auto r = run(d, {floats({2, N, 1}, x)}).to_vector<float>();
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t k = 0; k < N; ++k) {
            std::complex<double> s = 0;
            for (std::size_t n = 0; n < N; ++n) s += double(x[b * N + n]) * std::polar(1.0, -2 * M_PI * double(k * n) / N);
            EXPECT_NEAR(r[(b * N + k) * 2], s.real(), 1e-4);
            EXPECT_NEAR(r[(b * N + k) * 2 + 1], s.imag(), 1e-4);
        }
    // onesided, then inverse onesided gives x back (length 2*(4-1) = 6 != 7: give dft_length).
    d.onesided = true;
    auto half = run(d, {floats({2, N, 1}, x)});
    EXPECT_EQ(half.get_shape().lens(), (std::vector<std::size_t>{2, N / 2 + 1, 2}));
    op::dft inv;
    inv.axis = 1;
    inv.inverse = inv.onesided = true;
    inv.dft_length = N;
    auto back = run(inv, {half}).to_vector<float>();
    for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(back[i], x[i], 1e-4);
}

TEST(ops_control_misc, windows_and_stft) {
    op::window_function w;
    w.kind = op::window_kind::hann;
    auto hann = run(w, {int64s({}, {8})}).to_vector<float>();
    for (std::size_t i = 0; i < 8; ++i) EXPECT_NEAR(hann[i], 0.5 - 0.5 * std::cos(2 * M_PI * i / 8), 1e-6);
    w.kind = op::window_kind::blackman;
    w.periodic = false;
    auto bl = run(w, {int64s({}, {5})}).to_vector<float>();
    EXPECT_NEAR(bl[2], 1.0, 1e-6);
    EXPECT_NEAR(bl[0], 0.0, 1e-6);
    // STFT of a signal with frame 4, step 2: frame f is the DFT of x[2f .. 2f+4).
    auto x = random_floats(10, 9);
    op::stft s;
    s.has_frame_length = true;
    auto r = run(s, {floats({1, 10, 1}, x), int64s({}, {2}), int64s({}, {4})});
    EXPECT_EQ(r.get_shape().lens(), (std::vector<std::size_t>{1, 4, 3, 2}));
    auto v = r.to_vector<float>();
    for (std::size_t f = 0; f < 4; ++f)
        for (std::size_t k = 0; k < 3; ++k) {
            std::complex<double> acc = 0;
            for (std::size_t n = 0; n < 4; ++n) acc += double(x[2 * f + n]) * std::polar(1.0, -2 * M_PI * double(k * n) / 4);
            EXPECT_NEAR(v[(f * 3 + k) * 2], acc.real(), 1e-4);
            EXPECT_NEAR(v[(f * 3 + k) * 2 + 1], acc.imag(), 1e-4);
        }
}

namespace {
// A 24-bit bottom-up BMP of `w` x `h` RGB pixels (rows padded to 4 bytes).
std::vector<std::uint8_t> make_bmp(std::size_t w, std::size_t h, const std::vector<std::uint8_t>& rgb) {
    const std::size_t stride = (w * 3 + 3) / 4 * 4;
    std::vector<std::uint8_t> b(54 + stride * h, 0);
    auto put32 = [&](std::size_t at, std::uint32_t v) {
        for (int i = 0; i < 4; ++i) b[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
    };
    b[0] = 'B';
    b[1] = 'M';
    put32(2, static_cast<std::uint32_t>(b.size()));
    put32(10, 54);
    put32(14, 40);
    put32(18, static_cast<std::uint32_t>(w));
    put32(22, static_cast<std::uint32_t>(h));
    b[26] = 1;
    b[28] = 24;
    for (std::size_t y = 0; y < h; ++y)
        for (std::size_t x = 0; x < w; ++x)
            for (std::size_t c = 0; c < 3; ++c) b[54 + (h - 1 - y) * stride + x * 3 + c] = rgb[(y * w + x) * 3 + 2 - c];
    return b;
}
}  // namespace

TEST(ops_control_misc, image_decoder_bmp_and_pnm) {
    const std::size_t w = 3, h = 2;
    std::vector<std::uint8_t> rgb(w * h * 3);
    std::mt19937 gen(3);
    for (auto& v : rgb) v = static_cast<std::uint8_t>(gen() % 256);
    auto bmp = make_bmp(w, h, rgb);
    auto bytes = literal(shape(type::uint8, {bmp.size()}), bmp).get_argument();
    auto r = run(op::image_decoder{op::pixel_format::rgb}, {bytes});
    EXPECT_EQ(r.get_shape().lens(), (std::vector<std::size_t>{h, w, 3}));
    EXPECT_EQ(r.to_vector<std::uint8_t>(), rgb);
    auto g = run(op::image_decoder{op::pixel_format::grayscale}, {bytes}).to_vector<std::uint8_t>();
    auto bgr = run(op::image_decoder{op::pixel_format::bgr}, {bytes}).to_vector<std::uint8_t>();
    for (std::size_t i = 0; i < w * h; ++i) {
        double luma = 0.299 * rgb[i * 3] + 0.587 * rgb[i * 3 + 1] + 0.114 * rgb[i * 3 + 2];
        EXPECT_NEAR(g[i], luma, 0.51);
        EXPECT_EQ(bgr[i * 3], rgb[i * 3 + 2]);
    }
    std::string pnm = "P6\n# comment\n3 2\n255\n";
    std::vector<std::uint8_t> p(pnm.begin(), pnm.end());
    p.insert(p.end(), rgb.begin(), rgb.end());
    auto pr = run(op::image_decoder{}, {literal(shape(type::uint8, {p.size()}), p).get_argument()});
    EXPECT_EQ(pr.to_vector<std::uint8_t>(), rgb);
    std::vector<std::uint8_t> junk{1, 2, 3, 4, 5, 6, 7, 8, 9};
    EXPECT_THROW(run(op::image_decoder{}, {literal(shape(type::uint8, {junk.size()}), junk).get_argument()}), error);
    bmp.resize(60);  // truncated
    EXPECT_THROW(run(op::image_decoder{}, {literal(shape(type::uint8, {bmp.size()}), bmp).get_argument()}), error);
}
