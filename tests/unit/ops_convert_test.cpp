// convert (Cast), bitcast (BitCast) and the string <-> number rules of Cast.
#include "ops/convert.hpp"

#include <kiln/context.hpp>
#include <kiln/literal.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace kiln;

namespace {

argument run(const operation& op, const argument& x) {
    host_context ctx;
    return op.compute(ctx, op.compute_shape({x.get_shape()}), {x});
}

op::convert_op to(type t, bool saturate = true, e8m0_round mode = e8m0_round::up) {
    op::convert_op c;
    c.target_type = t;
    c.saturate = saturate;
    c.round_mode = mode;
    return c;
}

argument floats(std::vector<std::size_t> lens, const std::vector<float>& v) {
    return literal(shape(type::float32, std::move(lens)), v).get_argument();
}
argument strings(const std::vector<std::string>& v) {
    return literal(shape(type::string, {v.size()}), v).get_argument();
}

}  // namespace

TEST(ops_convert, float_to_ints_truncates_and_int_to_int_wraps) {
    auto x = floats({6}, {2.9f, -2.9f, 0.5f, -0.5f, 127.9f, 3.0f});
    EXPECT_EQ(run(to(type::int32), x).to_vector<int>(), (std::vector<int>{2, -2, 0, 0, 127, 3}));
    auto big = literal(shape(type::int16, {3}), std::vector<int>{200, -129, 300}).get_argument();
    EXPECT_EQ(run(to(type::int8), big).to_vector<int>(), (std::vector<int>{-56, 127, 44}));
    auto b = run(to(type::bool_), floats({3}, {0.0f, -0.0f, 0.25f}));
    EXPECT_EQ(b.to_vector<int>(), (std::vector<int>{0, 0, 1}));
}

TEST(ops_convert, strided_input_and_shape) {
    std::vector<float> data{1, 2, 3, 4, 5, 6};
    auto base = floats({2, 3}, data);
    auto t = base.reshape(shape(type::float32, {3, 2}, {1, 3}));
    auto r = run(to(type::float64), t);
    EXPECT_EQ(r.get_shape(), shape(type::float64, {3, 2}));
    EXPECT_EQ(r.to_vector<double>(), (std::vector<double>{1, 4, 2, 5, 3, 6}));
}

TEST(ops_convert, fp8_saturates_unless_asked_not_to) {
    auto x = floats({4}, {1000.0f, -1000.0f, std::numeric_limits<float>::infinity(), 0.3f});
    auto sat = run(to(type::float8e4m3fn), x).to_vector<float>();
    EXPECT_EQ(sat[0], 448.0f);
    EXPECT_EQ(sat[1], -448.0f);
    EXPECT_EQ(sat[2], 448.0f);
    EXPECT_EQ(sat[3], static_cast<float>(fp8e4m3fn(0.3f)));
    auto no = run(to(type::float8e4m3fn, false), x).to_vector<float>();
    EXPECT_TRUE(std::isnan(no[0]) && std::isnan(no[1]) && std::isnan(no[2]));
    auto e5 = run(to(type::float8e5m2, false), x).to_vector<float>();
    EXPECT_EQ(e5[2], std::numeric_limits<float>::infinity());
}

TEST(ops_convert, e8m0_round_modes) {
    auto x = floats({3}, {3.0f, 5.0f, 0.75f});
    auto up = run(to(type::float8e8m0), x).to_vector<float>();
    EXPECT_EQ(up, (std::vector<float>{4.0f, 8.0f, 1.0f}));
    auto down = run(to(type::float8e8m0, true, e8m0_round::down), x).to_vector<float>();
    EXPECT_EQ(down, (std::vector<float>{2.0f, 4.0f, 0.5f}));
    auto nearest = run(to(type::float8e8m0, true, e8m0_round::nearest), x).to_vector<float>();
    EXPECT_EQ(nearest, (std::vector<float>{4.0f, 4.0f, 1.0f}));
}

TEST(ops_convert, strings_to_numbers) {
    auto s = strings({"3.14", "1e-5", "-1E8", "INF", "-inf", "+Inf", "NaN", " 42 "});
    auto f = run(to(type::float32), s).to_vector<float>();
    EXPECT_EQ(f[0], 3.14f);
    EXPECT_EQ(f[1], 1e-5f);
    EXPECT_EQ(f[2], -1e8f);
    EXPECT_EQ(f[3], std::numeric_limits<float>::infinity());
    EXPECT_EQ(f[4], -std::numeric_limits<float>::infinity());
    EXPECT_EQ(f[5], std::numeric_limits<float>::infinity());
    EXPECT_TRUE(std::isnan(f[6]));
    EXPECT_EQ(f[7], 42.0f);
    auto i = run(to(type::int64), strings({"9223372036854775807", "-17", "100.5"})).to_vector<std::int64_t>();
    EXPECT_EQ(i, (std::vector<std::int64_t>{9223372036854775807LL, -17, 100}));
    EXPECT_EQ(run(to(type::bool_), strings({"True", "false", "0", "2"})).to_vector<int>(),
              (std::vector<int>{1, 0, 0, 1}));
    try {
        run(to(type::float32), strings({"Hello World!"}));
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::runtime);
        EXPECT_NE(std::string(e.what()).find("Hello World!"), std::string::npos);
    }
}

TEST(ops_convert, numbers_to_strings_round_trip) {
    auto f = floats({9}, {314.15926f, 1.0f, 0.001f, 1e-5f, 1.5e16f, -2.5f, 0.1f,
                          std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()});
    EXPECT_EQ(run(to(type::string), f).to_vector<std::string>(),
              (std::vector<std::string>{"314.15927", "1.0", "0.001", "1e-05", "1.5e+16", "-2.5", "0.1", "inf", "nan"}));
    auto d = literal(shape(type::float64, {2}), std::vector<double>{0.1, 123456.789}).get_argument();
    EXPECT_EQ(run(to(type::string), d).to_vector<std::string>(), (std::vector<std::string>{"0.1", "123456.789"}));
    auto h = literal(shape(type::float16, {1}), std::vector<float>{0.1f}).get_argument();
    EXPECT_EQ(run(to(type::string), h).to_vector<std::string>(), (std::vector<std::string>{"0.1"}));
    auto i = literal(shape(type::int32, {2}), std::vector<int>{-7, 12}).get_argument();
    EXPECT_EQ(run(to(type::string), i).to_vector<std::string>(), (std::vector<std::string>{"-7", "12"}));
    auto b = literal(shape(type::bool_, {2}), std::vector<int>{1, 0}).get_argument();
    EXPECT_EQ(run(to(type::string), b).to_vector<std::string>(), (std::vector<std::string>{"True", "False"}));
    // Random floats read back exactly.
    std::mt19937 gen(5);
    std::uniform_real_distribution<float> dist(-1e6f, 1e6f);
    std::vector<float> v(50);
    for (auto& x : v) x = dist(gen) * std::pow(10.0f, static_cast<float>(static_cast<int>(gen() % 20)) - 10.0f);
    auto text = run(to(type::string), floats({v.size()}, v));
    auto back = run(to(type::float32), text).to_vector<float>();
    EXPECT_EQ(back, v);
}

TEST(ops_convert, bitcast_keeps_bits) {
    op::bitcast_op b;
    b.target_type = type::int32;
    auto r = run(b, floats({3}, {1.0f, -2.0f, 0.15625f}));
    auto bits = r.to_vector<std::int32_t>();
    for (std::size_t i = 0; i < 3; ++i) {
        float f = std::vector<float>{1.0f, -2.0f, 0.15625f}[i];
        std::int32_t e;
        std::memcpy(&e, &f, 4);
        EXPECT_EQ(bits[i], e);
    }
    // int4 -1 is 0b1111: uint4 15.
    b.target_type = type::uint4;
    auto i4 = literal(shape(type::int4, {3}), std::vector<int>{-1, 7, -8}).get_argument();
    EXPECT_EQ(run(b, i4).to_vector<int>(), (std::vector<int>{15, 7, 8}));
    b.target_type = type::uint8;
    auto bo = literal(shape(type::bool_, {2}), std::vector<int>{1, 0}).get_argument();
    EXPECT_EQ(run(b, bo).to_vector<int>(), (std::vector<int>{1, 0}));
    // Widths must agree.
    b.target_type = type::int64;
    try {
        run(b, floats({1}, {1.0f}));
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::type);
        EXPECT_NE(std::string(e.what()).find("32 bits"), std::string::npos) << e.what();
    }
}

TEST(ops_convert, traits_and_name) {
    operation c = to(type::float16, false);
    EXPECT_EQ(c.name(), "convert");
    EXPECT_TRUE(c.traits().pointwise);
    EXPECT_EQ(c.get<op::convert_op>().apply<half>(1.0f).bits, half(1.0f).bits);
}
