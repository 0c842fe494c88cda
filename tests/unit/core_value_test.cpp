// Unit tests of kiln::value and attribute reflection (to_value / from_value).
#include "test_ops.hpp"

#include <kiln/literal.hpp>
#include <kiln/operation.hpp>
#include <kiln/reflect.hpp>
#include <kiln/value.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <random>

using namespace kiln;

TEST(core_value, kinds_and_accessors) {
    EXPECT_TRUE(value().is_null());
    EXPECT_TRUE(value(nullptr).is_null());
    EXPECT_EQ(value(true).get_kind(), value::kind::boolean);
    EXPECT_EQ(value(-3).get_kind(), value::kind::int64);
    EXPECT_EQ(value(3u).get_kind(), value::kind::uint64);
    EXPECT_EQ(value(std::int8_t{-1}).get_int64(), -1);
    EXPECT_EQ(value(2.5).get_kind(), value::kind::float64);
    EXPECT_EQ(value(2.5f).get_double(), 2.5);
    EXPECT_EQ(value("s").get_kind(), value::kind::string);
    EXPECT_EQ(value(std::string_view("sv")).get_string(), "sv");
    EXPECT_EQ(value(value::binary{"ab\0c"}).get_kind(), value::kind::binary);
    EXPECT_TRUE(value::make_array().is_array());
    EXPECT_TRUE(value::make_object().is_object());
    EXPECT_TRUE(value(7).is_integer() && value(7).is_number());
    EXPECT_TRUE(value(7.0).is_number() && !value(7.0).is_integer());
    // Numeric conversions between kinds.
    EXPECT_EQ(value(7u).get_int64(), 7);
    EXPECT_EQ(value(7).get_uint64(), 7u);
    EXPECT_EQ(value(4.0).get_int64(), 4);
    EXPECT_EQ(value(-2).get_double(), -2.0);
    EXPECT_EQ(value(true).get_int64(), 1);
    EXPECT_TRUE(value(1).get_bool());
    EXPECT_FALSE(value(0).get_bool());
}

TEST(core_value, wrong_kind_errors_name_both_kinds) {
    try {
        (void)value("x").get_int64();
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::parse);
        EXPECT_NE(e.message().find("int64"), std::string::npos) << e.what();
        EXPECT_NE(e.message().find("string"), std::string::npos) << e.what();
    }
    EXPECT_THROW((void)value(1.5).get_int64(), error);
    EXPECT_THROW((void)value(-1).get_uint64(), error);
    EXPECT_THROW((void)value(std::numeric_limits<std::uint64_t>::max()).get_int64(), error);
    EXPECT_THROW((void)value(1).get_string(), error);
    EXPECT_THROW((void)value(1).get_array(), error);
    EXPECT_THROW((void)value("a").get_object(), error);
    EXPECT_THROW((void)value("a").get_double(), error);
    EXPECT_THROW((void)value(1).get_binary(), error);
    EXPECT_THROW((void)value(std::nan("")).get_int64(), error);
    EXPECT_THROW((void)value::make_object().at("missing"), error);
}

TEST(core_value, initializer_lists_make_objects_or_arrays) {
    value o{{"a", 1}, {"b", "two"}};
    ASSERT_TRUE(o.is_object());
    EXPECT_EQ(o.size(), 2u);
    EXPECT_EQ(o.at("a"), value(1));
    EXPECT_EQ(o.at("b").get_string(), "two");
    EXPECT_TRUE(o.contains("a"));
    EXPECT_FALSE(o.contains("c"));
    EXPECT_EQ(o.find("c"), nullptr);
    value arr{1, 2, 3};
    ASSERT_TRUE(arr.is_array());
    EXPECT_EQ(arr.size(), 3u);
    value mixed{{"a", 1}, 5};  // not all pairs: an array
    EXPECT_TRUE(mixed.is_array());
    value nested{1, {2, 3}};
    EXPECT_EQ(nested.get_array()[1].size(), 2u);
}

TEST(core_value, object_keeps_insertion_order_and_mutates) {
    value o = value::make_object();
    o["z"] = 1;
    o["a"] = 2;
    o["z"] = 3;  // existing key: replaced in place
    EXPECT_EQ(o.to_string(), "{z: 3, a: 2}");
    value n;
    n["k"] = "v";  // null becomes an object
    EXPECT_EQ(n.to_string(), "{k: \"v\"}");
    value a;
    a.push_back(1);  // null becomes an array
    a.push_back("x");
    EXPECT_EQ(a.to_string(), "[1, \"x\"]");
    value s = "str";
    EXPECT_THROW(s["k"], error);
    EXPECT_THROW(s.push_back(1), error);
    EXPECT_EQ(s.size(), 0u);
}

TEST(core_value, printing) {
    EXPECT_EQ(value().to_string(), "null");
    EXPECT_EQ(value(false).to_string(), "false");
    EXPECT_EQ(value(-12).to_string(), "-12");
    EXPECT_EQ(value(std::numeric_limits<std::uint64_t>::max()).to_string(), "18446744073709551615");
    EXPECT_EQ(value(1.0 / 3).to_string(), "0.333333333");  // 9 significant digits
    EXPECT_EQ(value(0.1).to_string(), "0.1");
    EXPECT_EQ(value(2.0).to_string(), "2");
    EXPECT_EQ(value("a\"b").to_string(), "\"a\\\"b\"");
    // Small binaries in hex (the text form reads them back), large ones by size.
    EXPECT_EQ(value(value::binary{std::string("\0\x80?\xff", 4)}).to_string(), "0x00803fff");
    EXPECT_EQ(value(value::binary{std::string(33, '\0')}).to_string(), "<33 bytes>");
    EXPECT_EQ(value({{"x", value{1, 2}}, {"y", value::make_object()}}).to_string(), "{x: [1, 2], y: {}}");
    std::ostringstream os;
    os << value{1, 2.5};
    EXPECT_EQ(os.str(), "[1, 2.5]");
    EXPECT_EQ(kind_name(value::kind::uint64), "uint64");
    EXPECT_EQ(kind_name(value::kind::object), "object");
}

TEST(core_value, equality_and_hash) {
    // Same number in int64 and uint64 storage is one value.
    EXPECT_EQ(value(5), value(5u));
    EXPECT_EQ(value(5).hash(), value(5u).hash());
    EXPECT_NE(value(-1), value(std::numeric_limits<std::uint64_t>::max()));
    EXPECT_NE(value(std::numeric_limits<std::uint64_t>::max()), value(-1));
    // Integers and doubles are different kinds.
    EXPECT_NE(value(1), value(1.0));
    EXPECT_NE(value(true), value(1));
    EXPECT_EQ(value(0.0), value(-0.0));
    EXPECT_EQ(value(0.0).hash(), value(-0.0).hash());
    EXPECT_NE(value("a"), value(value::binary{"a"}));
    EXPECT_NE(value(value::binary{"a"}), value(value::binary{"b"}));
    EXPECT_NE((value{1, 2}), (value{2, 1}));
    // Objects are ordered.
    EXPECT_NE((value{{"a", 1}, {"b", 2}}), (value{{"b", 2}, {"a", 1}}));
    EXPECT_EQ((value{{"a", 1}, {"b", 2}}), (value{{"a", 1}, {"b", 2}}));
    EXPECT_EQ((value{{"a", 1}, {"b", 2}}).hash(), (value{{"a", 1}, {"b", 2}}).hash());
    EXPECT_NE(value(), value(0));
    EXPECT_NE(value::make_array(), value::make_object());
}

TEST(core_value, nan_equals_nan_and_hashes_alike) {
    double q = std::numeric_limits<double>::quiet_NaN();
    value a(q), b(-q), c(std::nan("7"));
    EXPECT_EQ(a, b);
    EXPECT_EQ(a, c);
    // Equal values must hash equal (hash tables of ops with NaN attributes).
    EXPECT_EQ(a.hash(), b.hash());
    EXPECT_EQ(a.hash(), c.hash());
}

namespace {
enum class color : std::uint8_t { red = 1, blue = 7 };

struct inner {
    std::int32_t n = 0;
    std::vector<float> f;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.n, "n");
        f(self.f, "f");
    }
    friend bool operator==(const inner&, const inner&) = default;
};

struct attrs {
    bool flag = false;
    std::int8_t small = 0;
    std::uint16_t u = 0;
    std::int64_t big = 0;
    double d = 0;
    std::string s;
    color c = color::red;
    std::optional<std::int64_t> maybe;
    std::vector<std::vector<std::int64_t>> grid;
    inner in;
    shape sh;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.flag, "flag");
        f(self.small, "small");
        f(self.u, "u");
        f(self.big, "big");
        f(self.d, "d");
        f(self.s, "s");
        f(self.c, "c");
        f(self.maybe, "maybe");
        f(self.grid, "grid");
        f(self.in, "in");
        f(self.sh, "sh");
    }
    friend bool operator==(const attrs&, const attrs&) = default;
};
}  // namespace

TEST(core_reflect, struct_round_trip) {
    attrs a;
    a.flag = true;
    a.small = -100;
    a.u = 65535;
    a.big = std::numeric_limits<std::int64_t>::min();
    a.d = -1.25e-7;
    a.s = "hello";
    a.c = color::blue;
    a.maybe = 42;
    a.grid = {{1, 2}, {}, {-3}};
    a.in = {5, {0.5f, -1.0f}};
    a.sh = shape(type::float16, {3, 2}, {1, 3});
    value v = to_value(a);
    ASSERT_TRUE(v.is_object());
    EXPECT_EQ(v.size(), 11u);
    EXPECT_EQ(v.get_object().front().first, "flag");  // reflect order
    EXPECT_EQ(v.at("c"), value(7));
    EXPECT_EQ(v.at("grid").to_string(), "[[1, 2], [], [-3]]");
    EXPECT_EQ(v.at("in").to_string(), "{n: 5, f: [0.5, -1]}");
    attrs b;
    from_value(v, b);
    EXPECT_EQ(a, b);
    EXPECT_EQ(to_value(b), v);
    EXPECT_EQ(to_value(b).hash(), v.hash());
    // Empty optional <-> null.
    a.maybe.reset();
    EXPECT_TRUE(to_value(a).at("maybe").is_null());
    b.maybe = 3;
    from_value(to_value(a), b);
    EXPECT_FALSE(b.maybe.has_value());
}

TEST(core_reflect, missing_keys_keep_defaults) {
    attrs b;
    b.s = "keep";
    b.big = 9;
    from_value(value{{"big", 10}}, b);
    EXPECT_EQ(b.big, 10);
    EXPECT_EQ(b.s, "keep");
}

TEST(core_reflect, out_of_range_and_wrong_kind_are_parse_errors) {
    std::int8_t i8 = 0;
    try {
        from_value(value(200), i8);
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::parse);
        EXPECT_NE(e.message().find("200"), std::string::npos);
    }
    EXPECT_NO_THROW(from_value(value(-128), i8));
    EXPECT_EQ(i8, -128);
    std::uint8_t u8 = 0;
    EXPECT_THROW(from_value(value(256), u8), error);
    EXPECT_THROW(from_value(value(-1), u8), error);
    std::uint64_t u64 = 0;
    from_value(value(std::numeric_limits<std::uint64_t>::max()), u64);
    EXPECT_EQ(u64, std::numeric_limits<std::uint64_t>::max());
    std::vector<int> vec;
    EXPECT_THROW(from_value(value("x"), vec), error);
    std::string s;
    EXPECT_THROW(from_value(value(1), s), error);
}

// A corrupt .kiln file must not load an out-of-range enum attribute: from_value reads the
// enum's underlying integer type with its range check.
TEST(core_reflect, enums_out_of_range_are_parse_errors) {
    color c = color::red;
    from_value(value(7), c);
    EXPECT_EQ(c, color::blue);
    // 300 does not fit color's uint8_t: refuse rather than wrap to 44.
    EXPECT_THROW(from_value(value(300), c), error);
    EXPECT_THROW(from_value(value(-1), c), error);
    EXPECT_EQ(c, color::blue);
}

TEST(core_reflect, literals_in_strided_layouts_round_trip) {
    std::vector<float> colmajor{1, 3, 2, 4};
    literal t(shape(type::float32, {2, 2}, {1, 2}), colmajor.data());
    std::vector<float> row{7, 8, 9};
    literal b(shape(type::float32, {4, 3}, {0, 1}), row.data());
    for (auto* l : {&t, &b}) {
        auto back = literal_from_value(literal_to_value(*l));
        EXPECT_EQ(back, *l) << l->to_string();
        EXPECT_EQ(back.to_vector<float>(), l->to_vector<float>());
        EXPECT_EQ(back.hash(), l->hash());
    }
    EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{7, 8, 9, 7, 8, 9, 7, 8, 9, 7, 8, 9}));
}

TEST(core_reflect, shapes_round_trip) {
    std::vector<shape> shapes{shape(),
                              shape(type::int64, {0, 3}),
                              shape(type::float32, {4, 3}, {0, 1}),
                              shape(type::uint8, {2, 2}, {1, 2}),
                              shape::make_dynamic(type::float32, {{1, 8, {2, 4}}, {3, 3, {}},
                                                                  {0, dynamic_dimension::unbounded, {}}}),
                              shape::tuple({shape(type::bool_, {1}), shape::tuple({})}),
                              shape::sequence(shape(type::string, {2})),
                              shape::optional(shape(type::int4, {5}))};
    for (auto& s : shapes) {
        auto v = shape_to_value(s);
        EXPECT_EQ(shape_from_value(v), s) << s;
        shape t;
        from_value(to_value(s), t);
        EXPECT_EQ(t, s) << s;
    }
}

TEST(core_reflect, literals_round_trip_bitwise) {
    literal f(shape(type::float32, {2, 2}), std::vector<float>{1.5f, -0.0f, std::nanf(""), 3e38f});
    literal i(shape(type::int8, {3}), std::vector<int>{-128, 0, 127});
    literal s(shape(type::string, {2}), std::vector<std::string>{"a", ""});
    literal scalar(2.5);
    literal zero(shape(type::float32, {0, 4}), std::vector<float>{});
    for (auto* l : {&f, &i, &s, &scalar, &zero}) {
        auto back = literal_from_value(literal_to_value(*l));
        EXPECT_EQ(back, *l) << l->to_string();
        EXPECT_EQ(back.get_shape(), l->get_shape());
        EXPECT_EQ(back.hash(), l->hash());
    }
}

TEST(core_reflect, operations_round_trip) {
    operation op = test::test_scale{0.75f};
    auto v = operation_to_value(op);
    EXPECT_EQ(v.at("name").get_string(), "test_scale");
    EXPECT_EQ(v.at("attributes").at("factor"), value(0.75));
}

TEST(core_reflect, malformed_shape_text_is_a_parse_error) {
    for (const char* bad : {"", "float32", "float32[", "float32[2,", "float32[2, 3", "nosuchtype[2]", "float32[-1]",
                            "float32[2]{1", "float32[2]{1, 2}", "float32[2, 3]{1}", "tuple(", "tuple(float32[2]",
                            "float32[{1:}]", "float32[{3:1}]", "float32[99999999999999999999999]",
                            "float32[2] extra", "sequence()", "optional(float32[2], float32[3])"}) {
        try {
            (void)shape_from_value(value(bad));
            ADD_FAILURE() << "accepted '" << bad << "'";
        } catch (const error& e) {
            // Unknown element type names are type errors; everything else is malformed text.
            EXPECT_TRUE(e.code() == error_code::parse || e.code() == error_code::shape || e.code() == error_code::type)
                << bad << ": " << e.what();
        }
    }
    EXPECT_THROW((void)shape_from_value(value(3)), error);
}

TEST(core_reflect, mutated_shape_text_never_escapes_as_a_non_kiln_error) {
    std::vector<shape> seeds{shape(type::float32, {2, 3}, {1, 2}),
                             shape::make_dynamic(type::int8, {{1, 8, {2, 4}}, {0, dynamic_dimension::unbounded, {}}}),
                             shape::tuple({shape(type::bool_, {1}), shape::sequence(shape(type::float16, {3}))}),
                             shape::optional(shape(type::uint4, {5, 0}))};
    const std::string alphabet = "0123456789[]{}(),: ?-float32int8tupleseq";
    std::mt19937 rng(3);
    for (int trial = 0; trial < 4000; ++trial) {
        std::string text = shape_to_value(seeds[trial % seeds.size()]).get_string();
        int edits = 1 + static_cast<int>(rng() % 3);
        for (int e = 0; e < edits && !text.empty(); ++e) {
            auto pos = rng() % text.size();
            switch (rng() % 3) {
                case 0: text[pos] = alphabet[rng() % alphabet.size()]; break;
                case 1: text.erase(pos, 1); break;
                default: text.insert(text.begin() + static_cast<std::ptrdiff_t>(pos), alphabet[rng() % alphabet.size()]);
            }
        }
        try {
            auto s = shape_from_value(value(text));
            // Whatever parses must print back to something that parses to the same shape.
            EXPECT_EQ(shape_from_value(shape_to_value(s)), s) << text;
        } catch (const error&) {
        } catch (const std::exception& e) {
            ADD_FAILURE() << "'" << text << "' raised " << e.what();
        }
    }
}
