// Unit tests of kiln::literal: construction from values, bytes and arguments,
// conversion, equality and hashing.
#include <kiln/literal.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

using namespace kiln;

TEST(core_literal, from_values_converts_to_the_element_type) {
    literal l(shape(type::int8, {2, 2}), std::vector<double>{1.9, -2.9, 127, -128});
    EXPECT_EQ(l.get_shape(), shape(type::int8, {2, 2}));
    EXPECT_EQ(l.to_vector<int>(), (std::vector<int>{1, -2, 127, -128}));  // truncation toward zero
    literal h(shape(type::float16, {3}), std::vector<float>{0.1f, 65504.0f, -2.0f});
    auto hv = h.to_vector<float>();
    EXPECT_NEAR(hv[0], 0.1f, 1e-4f);
    EXPECT_EQ(hv[1], 65504.0f);
    EXPECT_EQ(hv[2], -2.0f);
    literal b(shape(type::bool_, {3}), std::vector<float>{0.0f, 0.5f, -3.0f});
    EXPECT_EQ(b.to_vector<int>(), (std::vector<int>{0, 1, 1}));
    literal s(shape(type::string, {2}), std::vector<std::string>{"x", "yz"});
    EXPECT_EQ(s.to_vector<std::string>(), (std::vector<std::string>{"x", "yz"}));
    EXPECT_THROW((literal(shape(type::string, {1}), std::vector<int>{1})), error);
    EXPECT_THROW((literal(shape(type::int32, {1}), std::vector<std::string>{"1"})), error);
}

TEST(core_literal, wrong_count_names_the_shape) {
    try {
        literal l(shape(type::float32, {2, 3}), std::vector<float>{1, 2});
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::shape);
        EXPECT_NE(e.message().find("float32[2, 3]"), std::string::npos) << e.what();
        EXPECT_NE(e.message().find("2 values"), std::string::npos) << e.what();
    }
}

TEST(core_literal, values_fill_a_non_standard_shape_in_row_major_order) {
    // The literal stores standard layout; the requested strides do not matter.
    literal l(shape(type::float32, {2, 2}, {1, 2}), std::vector<float>{1, 2, 3, 4});
    EXPECT_TRUE(l.get_shape().standard());
    EXPECT_EQ(l.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
}

TEST(core_literal, scalars) {
    literal f(2.5f);
    EXPECT_TRUE(f.get_shape().scalar());
    EXPECT_EQ(f.get_shape().get_type(), type::float32);
    EXPECT_EQ(f.to_vector<double>(), std::vector<double>{2.5});
    literal i(std::int64_t{-7});
    EXPECT_EQ(i.get_shape(), shape(type::int64));
    EXPECT_EQ(i.to_vector<std::int64_t>(), std::vector<std::int64_t>{-7});
    literal u(std::uint8_t{200});
    EXPECT_EQ(u.get_shape().get_type(), type::uint8);
    EXPECT_EQ(u.to_string(), "uint8[] {200}");
    literal d(1.0);
    EXPECT_EQ(d.get_shape().get_type(), type::float64);
}

TEST(core_literal, from_bytes_copies) {
    std::vector<std::int32_t> src{5, -6, 7};
    literal l(shape(type::int32, {3}), src.data());
    src[0] = 0;  // the literal has its own copy
    EXPECT_EQ(l.to_vector<std::int32_t>(), (std::vector<std::int32_t>{5, -6, 7}));
    EXPECT_NE(static_cast<const void*>(l.data()), static_cast<const void*>(src.data()));
    // Bytes in a transposed layout are read through the layout.
    std::vector<float> colmajor{1, 3, 2, 4};  // the 2x2 matrix [[1, 2], [3, 4]]
    literal t(shape(type::float32, {2, 2}, {1, 2}), colmajor.data());
    EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
    std::vector<std::string> strs{"a", "b"};
    literal s(shape(type::string, {2}), strs.data());
    EXPECT_EQ(s.to_vector<std::string>(), strs);
    literal z(shape(type::float32, {0}), nullptr);
    EXPECT_TRUE(z.to_vector<float>().empty());
    EXPECT_FALSE(z.empty());
}

TEST(core_literal, from_argument_makes_it_standard) {
    argument a(shape(type::float32, {2, 3}));
    for (int i = 0; i < 6; ++i) a.data_as<float>()[i] = static_cast<float>(i) + 0.5f;
    auto view = a.view(shape(type::float32, {3, 2}, {1, 3}));
    literal l(view);
    EXPECT_TRUE(l.get_shape().standard());
    EXPECT_EQ(l.to_vector<float>(), (std::vector<float>{0.5f, 3.5f, 1.5f, 4.5f, 2.5f, 5.5f}));
    literal same(a);
    EXPECT_EQ(static_cast<const void*>(same.data()), static_cast<const void*>(a.data()));  // shared, no copy
}

TEST(core_literal, empty_and_default) {
    literal e;
    EXPECT_TRUE(e.empty());
    EXPECT_FALSE(literal(1.0f).empty());
}

TEST(core_literal, equality_and_hash) {
    literal a(shape(type::float32, {2}), std::vector<float>{1, 2});
    literal b(shape(type::float32, {2}), std::vector<float>{1, 2});
    literal c(shape(type::float32, {2}), std::vector<float>{1, 3});
    literal d(shape(type::float32, {1, 2}), std::vector<float>{1, 2});
    literal e(shape(type::float64, {2}), std::vector<float>{1, 2});
    EXPECT_EQ(a, b);
    EXPECT_EQ(a.hash(), b.hash());
    EXPECT_NE(a, c);
    EXPECT_NE(a.hash(), c.hash());
    EXPECT_NE(a, d);
    EXPECT_NE(a, e);
    literal n1(shape(type::float32, {1}), std::vector<float>{std::nanf("")});
    literal n2(shape(type::float32, {1}), std::vector<float>{std::nanf("")});
    EXPECT_EQ(n1, n2);
    EXPECT_EQ(n1.hash(), n2.hash());
    EXPECT_NE(literal(0.0f), literal(-0.0f));
    // Only the first 4 KiB are hashed, but equality still sees every element.
    std::vector<float> big(2000, 1.0f), big2 = big;
    big2.back() = 2.0f;
    literal l1(shape(type::float32, {2000}), big), l2(shape(type::float32, {2000}), big2);
    EXPECT_NE(l1, l2);
    EXPECT_EQ(l1.hash(), l2.hash());
    literal s1(shape(type::string, {1}), std::vector<std::string>{"x"});
    literal s2(shape(type::string, {1}), std::vector<std::string>{"x"});
    EXPECT_EQ(s1, s2);
    EXPECT_EQ(s1.hash(), s2.hash());
}

TEST(core_literal, equal_literals_in_different_layouts_hash_alike) {
    std::vector<float> colmajor{1, 3, 2, 4};
    literal t(shape(type::float32, {2, 2}, {1, 2}), colmajor.data());
    literal s(shape(type::float32, {2, 2}), std::vector<float>{1, 2, 3, 4});
    ASSERT_EQ(t, s);
    EXPECT_EQ(t.hash(), s.hash());
}
