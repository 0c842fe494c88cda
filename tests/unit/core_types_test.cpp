// Unit tests of element types: names, sizes, storage types, category predicates and
// the visitors.
#include <kiln/errors.hpp>
#include <kiln/types.hpp>

#include <gtest/gtest.h>

#include <set>

using namespace kiln;

namespace {
template <int I = 0>
void check_storage_round_trip() {
    if constexpr (I < type_count) {
        constexpr auto t = static_cast<type>(I);
        using C = storage_t<t>;
        static_assert(type_of<C>() == t, "type_of must invert storage_t");
        if constexpr (t == type::int4 || t == type::uint4 || t == type::int2 || t == type::uint2 ||
                      t == type::float4e2m1)
            EXPECT_EQ(type_size(t), 1u) << type_name(t);  // sub-byte types are unpacked
        else
            EXPECT_EQ(type_size(t), sizeof(C)) << type_name(t);
        // visit_type hands back the same storage type.
        bool same = visit_type(t, [](auto tag) { return std::is_same_v<typename decltype(tag)::type, C>; });
        EXPECT_TRUE(same) << type_name(t);
        check_storage_round_trip<I + 1>();
    }
}
}  // namespace

TEST(core_types, names_round_trip_and_are_unique) {
    std::set<std::string> names;
    for (int i = 0; i < type_count; ++i) {
        auto t = static_cast<type>(i);
        auto n = std::string(type_name(t));
        EXPECT_FALSE(n.empty());
        EXPECT_TRUE(names.insert(n).second) << n;
        EXPECT_EQ(type_from_name(n), t) << n;
    }
    EXPECT_EQ(type_name(type::float32), "float32");
    EXPECT_EQ(type_name(type::bool_), "bool");
    EXPECT_EQ(type_name(type::bfloat16), "bfloat16");
    EXPECT_EQ(type_name(type::string), "string");
}

TEST(core_types, unknown_name_is_an_error_naming_it) {
    try {
        (void)type_from_name("float33");
        FAIL();
    } catch (const error& e) {
        EXPECT_NE(e.message().find("float33"), std::string::npos) << e.what();
    }
    EXPECT_THROW((void)type_from_name(""), error);
    EXPECT_THROW((void)type_from_name("Float32"), error);
}

TEST(core_types, storage_types_and_sizes) {
    check_storage_round_trip();
    EXPECT_EQ(type_size(type::float16), 2u);
    EXPECT_EQ(type_size(type::float8e4m3fn), 1u);
    EXPECT_EQ(type_size(type::uint64), 8u);
    EXPECT_EQ(type_size(type::bool_), sizeof(bool));
}

TEST(core_types, categories_partition_the_numeric_types) {
    int floats = 0, ints = 0;
    for (int i = 0; i < type_count; ++i) {
        auto t = static_cast<type>(i);
        EXPECT_FALSE(is_signed_int(t) && is_unsigned_int(t)) << type_name(t);
        EXPECT_FALSE(is_float(t) && is_integer(t)) << type_name(t);
        EXPECT_EQ(is_integer(t), is_signed_int(t) || is_unsigned_int(t));
        EXPECT_TRUE(!is_fp8(t) || is_float(t)) << type_name(t);
        floats += is_float(t);
        ints += is_integer(t);
        bool other = t == type::bool_ || t == type::string;
        EXPECT_EQ(is_float(t) || is_integer(t), !other) << type_name(t);
    }
    EXPECT_EQ(floats, 10);
    EXPECT_EQ(ints, 12);
    EXPECT_TRUE(is_signed_int(type::int4));
    EXPECT_TRUE(is_unsigned_int(type::uint2));
    EXPECT_FALSE(is_fp8(type::float4e2m1));
}

TEST(core_types, visit_numeric_refuses_strings_naming_the_caller) {
    EXPECT_EQ(visit_numeric(type::int16, [](auto tag) { return sizeof(typename decltype(tag)::type); }), 2u);
    try {
        (void)visit_numeric(type::string, [](auto) { return 0; }, "my_kernel");
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::type);
        EXPECT_NE(e.message().find("my_kernel"), std::string::npos) << e.what();
        EXPECT_NE(e.message().find("string"), std::string::npos) << e.what();
    }
}

TEST(core_types, compute_types) {
    static_assert(std::is_same_v<compute_t<half>, float>);
    static_assert(std::is_same_v<compute_t<fp8e5m2>, float>);
    static_assert(std::is_same_v<compute_t<kiln::int4>, int>);
    static_assert(std::is_same_v<compute_t<double>, double>);
    static_assert(std::is_same_v<compute_t<std::int64_t>, std::int64_t>);
    EXPECT_EQ((convert<float, double>(0.1)), 0.1f);
    EXPECT_EQ((convert<std::int32_t, float>(-2.7f)), -2);  // truncation toward zero
    EXPECT_EQ((convert<std::uint8_t, float>(300.0f)), 255);  // clamps to the target range
    EXPECT_EQ((convert<std::int32_t, float>(std::numeric_limits<float>::quiet_NaN())), 0);
    EXPECT_TRUE((convert<bool, float>(std::numeric_limits<float>::quiet_NaN())));
}
