// Unit tests of kiln::shape: layouts (standard, transposed, broadcast, sliced),
// sizes, dynamic dimensions, tuples/sequences/optionals, printing, equality, hashing.
#include <kiln/errors.hpp>
#include <kiln/shape.hpp>

#include <gtest/gtest.h>

#include <unordered_set>

using namespace kiln;

namespace {
using lens_t = std::vector<std::size_t>;
}

TEST(core_shape, default_is_float32_scalar) {
    shape s;
    EXPECT_TRUE(s.is_tensor());
    EXPECT_TRUE(s.scalar());
    EXPECT_EQ(s.get_type(), type::float32);
    EXPECT_EQ(s.ndim(), 0u);
    EXPECT_EQ(s.elements(), 1u);
    EXPECT_EQ(s.bytes(), 4u);
    EXPECT_EQ(s.to_string(), "float32[]");
    shape i(type::int64);
    EXPECT_TRUE(i.scalar());
    EXPECT_EQ(i.bytes(), 8u);
    EXPECT_EQ(i.to_string(), "int64[]");
    EXPECT_TRUE(i.standard());
}

TEST(core_shape, standard_layout) {
    shape s(type::int16, {2, 3, 4});
    EXPECT_EQ(s.strides(), (lens_t{12, 4, 1}));
    EXPECT_EQ(shape::standard_strides({5, 1, 7}), (lens_t{7, 7, 1}));
    EXPECT_EQ(s.elements(), 24u);
    EXPECT_EQ(s.element_space(), 24u);
    EXPECT_EQ(s.bytes(), 48u);
    EXPECT_EQ(s.type_size(), 2u);
    EXPECT_TRUE(s.standard());
    EXPECT_TRUE(s.packed());
    EXPECT_FALSE(s.transposed());
    EXPECT_FALSE(s.broadcasted());
    EXPECT_FALSE(s.dynamic());
    EXPECT_FALSE(s.scalar());
    EXPECT_EQ(s.to_string(), "int16[2, 3, 4]");
    for (std::size_t i = 0; i < 24; ++i) EXPECT_EQ(s.index(i), i);
    EXPECT_EQ(s.index({1, 2, 3}), 23u);
    EXPECT_EQ(s.multi(23), (lens_t{1, 2, 3}));
    EXPECT_EQ(s.multi(13), (lens_t{1, 0, 1}));
    // Explicit standard strides give an equal shape.
    EXPECT_EQ(s, shape(type::int16, {2, 3, 4}, {12, 4, 1}));
}

TEST(core_shape, transposed_layout) {
    // A 3x2 view of a row-major 2x3 buffer.
    shape t(type::float32, {3, 2}, {1, 3});
    EXPECT_FALSE(t.standard());
    EXPECT_TRUE(t.packed());
    EXPECT_TRUE(t.transposed());
    EXPECT_FALSE(t.broadcasted());
    EXPECT_EQ(t.elements(), 6u);
    EXPECT_EQ(t.element_space(), 6u);
    EXPECT_EQ(t.bytes(), 24u);
    // Row-major walk of the view: (0,0)=0 (0,1)=3 (1,0)=1 (1,1)=4 (2,0)=2 (2,1)=5
    std::vector<std::size_t> got;
    for (std::size_t i = 0; i < 6; ++i) got.push_back(t.index(i));
    EXPECT_EQ(got, (lens_t{0, 3, 1, 4, 2, 5}));
    EXPECT_EQ(t.index({2, 1}), 5u);
    EXPECT_EQ(t.to_string(), "float32[3, 2]{1, 3}");
    EXPECT_EQ(t.as_standard(), shape(type::float32, {3, 2}));
    EXPECT_TRUE(t.same_lens_and_type(shape(type::float32, {3, 2})));
    EXPECT_NE(t, shape(type::float32, {3, 2}));
}

TEST(core_shape, broadcast_stride_zero) {
    shape b(type::float32, {4, 3}, {0, 1});
    EXPECT_TRUE(b.broadcasted());
    EXPECT_FALSE(b.packed());
    EXPECT_FALSE(b.standard());
    EXPECT_FALSE(b.transposed());
    EXPECT_EQ(b.elements(), 12u);
    EXPECT_EQ(b.element_space(), 3u);  // one row is all the memory
    EXPECT_EQ(b.bytes(), 12u);
    EXPECT_EQ(b.index(7), 1u);  // row 2, column 1
    // Fully broadcast scalar.
    shape all(type::int32, {2, 5}, {0, 0});
    EXPECT_EQ(all.element_space(), 1u);
    EXPECT_EQ(all.bytes(), 4u);
    for (std::size_t i = 0; i < 10; ++i) EXPECT_EQ(all.index(i), 0u);
    // Stride 0 on a dimension of length 1 is not broadcasting.
    shape one(type::float32, {1, 3}, {0, 1});
    EXPECT_FALSE(one.broadcasted());
    EXPECT_TRUE(one.packed());
}

TEST(core_shape, sliced_view_has_gaps) {
    // Columns 1..2 of a 4x5 row-major tensor: lens {4, 2}, strides {5, 1}.
    shape v(type::float64, {4, 2}, {5, 1});
    EXPECT_FALSE(v.standard());
    EXPECT_FALSE(v.packed());
    EXPECT_FALSE(v.transposed());
    EXPECT_FALSE(v.broadcasted());
    EXPECT_EQ(v.elements(), 8u);
    EXPECT_EQ(v.element_space(), 1u + 3u * 5u + 1u);
    EXPECT_EQ(v.bytes(), 17u * 8u);
    EXPECT_EQ(v.index(5), 2u * 5u + 1u);
    // Every other row (step 2) of a 6x3 tensor.
    shape step(type::uint8, {3, 3}, {6, 1});
    EXPECT_EQ(step.element_space(), 1u + 2u * 6u + 2u);
    EXPECT_EQ(step.bytes(), 15u);
}

TEST(core_shape, zero_sized) {
    shape z(type::float32, {3, 0, 2});
    EXPECT_EQ(z.elements(), 0u);
    EXPECT_EQ(z.element_space(), 0u);
    EXPECT_EQ(z.bytes(), 0u);
    EXPECT_TRUE(z.standard());
    EXPECT_FALSE(z.scalar());
    EXPECT_EQ(z.to_string(), "float32[3, 0, 2]");
    // Odd strides do not matter when there are no elements.
    shape zs(type::float32, {0, 4}, {1, 7});
    EXPECT_EQ(zs.bytes(), 0u);
    EXPECT_TRUE(zs.standard());
    shape one_d(type::int8, {0});
    EXPECT_EQ(one_d.elements(), 0u);
    EXPECT_EQ(one_d.multi(0), (lens_t{0}));
}

TEST(core_shape, sub_byte_and_string_sizes) {
    EXPECT_EQ(shape(type::int4, {3, 3}).bytes(), 9u);  // unpacked: one byte per element
    EXPECT_EQ(shape(type::bool_, {5}).bytes(), 5u);
    EXPECT_EQ(shape(type::float16, {5}).bytes(), 10u);
    EXPECT_EQ(shape(type::string, {2}).bytes(), 2 * sizeof(std::string));
}

TEST(core_shape, invalid_strides_are_errors) {
    try {
        shape bad(type::float32, {2, 3}, {1});
        FAIL() << "rank mismatch accepted";
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::shape);
    }
}

TEST(core_shape, with_type_and_lens) {
    shape t(type::float32, {3, 2}, {1, 3});
    auto h = t.with_type(type::float16);
    EXPECT_EQ(h.get_type(), type::float16);
    EXPECT_EQ(h.strides(), t.strides());
    EXPECT_EQ(h.bytes(), 12u);
    auto l = t.with_lens({7});
    EXPECT_EQ(l, shape(type::float32, {7}));
    EXPECT_THROW((void)shape::tuple({t}).with_type(type::int8), error);
}

TEST(core_shape, dynamic_dimensions) {
    dynamic_dimension batch{1, 8, {1, 4}};
    dynamic_dimension fixed{3, 3, {}};
    dynamic_dimension any{0, dynamic_dimension::unbounded, {}};
    EXPECT_FALSE(batch.is_fixed());
    EXPECT_TRUE(fixed.is_fixed());
    EXPECT_TRUE(batch.has_optimal());
    EXPECT_TRUE(batch.contains(8));
    EXPECT_FALSE(batch.contains(9));
    EXPECT_FALSE(batch.contains(0));
    EXPECT_TRUE(any.contains(1u << 30));

    auto d = shape::make_dynamic(type::float32, {batch, fixed, any});
    EXPECT_TRUE(d.dynamic());
    EXPECT_FALSE(d.standard());
    EXPECT_FALSE(d.scalar());
    EXPECT_EQ(d.ndim(), 3u);
    EXPECT_EQ(d.dyn_dims().size(), 3u);
    EXPECT_EQ(d.dyn_dims()[0], batch);
    EXPECT_EQ(d.to_dynamic_dims(), d.dyn_dims());
    EXPECT_EQ(d.to_string(), "float32[{1:8:[1,4]}, 3, {0:?}]");
    EXPECT_THROW((void)d.lens(), error);
    EXPECT_THROW((void)d.strides(), error);
    EXPECT_THROW((void)d.elements(), error);
    EXPECT_THROW((void)d.bytes(), error);
    try {
        (void)d.lens();
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("{1:8:[1,4]}"), std::string::npos) << e.what();
    }
    // Optimals are part of equality.
    auto d2 = shape::make_dynamic(type::float32, {{1, 8, {}}, fixed, any});
    EXPECT_NE(d, d2);
    EXPECT_EQ(d, shape::make_dynamic(type::float32, {batch, fixed, any}));
    EXPECT_EQ(d.hash(), shape::make_dynamic(type::float32, {batch, fixed, any}).hash());
    EXPECT_EQ(d.with_type(type::int8).dyn_dims(), d.dyn_dims());
    EXPECT_EQ(d.with_type(type::int8).get_type(), type::int8);
}

TEST(core_shape, all_fixed_dynamic_dims_give_static_shape) {
    auto s = shape::make_dynamic(type::int32, {{2, 2, {}}, {5, 5, {}}});
    EXPECT_FALSE(s.dynamic());
    EXPECT_EQ(s, shape(type::int32, {2, 5}));
    EXPECT_EQ(s.to_dynamic_dims(), (std::vector<dynamic_dimension>{{2, 2, {}}, {5, 5, {}}}));
    EXPECT_TRUE(s.dyn_dims().empty());
}

TEST(core_shape, fixed_dims_carry_no_optimals) {
    auto a = shape::make_dynamic(type::float32, {{4, 4, {4}}, {1, 8, {2}}});
    auto b = shape::make_dynamic(type::float32, {{4, 4, {}}, {1, 8, {2}}});
    EXPECT_EQ(a, b);
    EXPECT_EQ(a.hash(), b.hash());
    EXPECT_TRUE(a.dyn_dims()[0].optimals.empty());
    EXPECT_EQ(a.dyn_dims()[1].optimals, (std::set<std::size_t>{2}));
    EXPECT_EQ(a.to_string(), "float32[4, {1:8:[2]}]");
}

TEST(core_shape, min_above_max_is_an_error) {
    try {
        (void)shape::make_dynamic(type::float32, {{4, 2, {}}});
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::shape);
        EXPECT_NE(e.message().find("min 4 > max 2"), std::string::npos) << e.what();
    }
}

TEST(core_shape, tuple_sequence_optional) {
    shape a(type::float32, {2, 3});
    shape b(type::int64, {4});
    auto t = shape::tuple({a, b});
    EXPECT_TRUE(t.is_tuple());
    EXPECT_FALSE(t.is_tensor());
    EXPECT_FALSE(t.scalar());
    EXPECT_FALSE(t.standard());
    EXPECT_FALSE(t.broadcasted());
    EXPECT_EQ(t.sub_shapes().size(), 2u);
    EXPECT_EQ(t.sub_shapes()[1], b);
    EXPECT_EQ(t.bytes(), 24u + 32u);
    EXPECT_EQ(t.elements(), 0u);
    EXPECT_EQ(t.to_string(), "tuple(float32[2, 3], int64[4])");
    EXPECT_NE(t, shape::tuple({b, a}));
    EXPECT_EQ(t, shape::tuple({a, b}));
    auto empty = shape::tuple({});
    EXPECT_EQ(empty.bytes(), 0u);
    EXPECT_EQ(empty.to_string(), "tuple()");
    auto nested = shape::tuple({t, a});
    EXPECT_EQ(nested.bytes(), 56u + 24u);

    auto seq = shape::sequence(a);
    EXPECT_TRUE(seq.is_sequence());
    EXPECT_EQ(seq.sub_shapes().front(), a);
    EXPECT_EQ(seq.get_type(), type::float32);
    EXPECT_EQ(seq.to_string(), "sequence(float32[2, 3])");
    auto opt = shape::optional(b);
    EXPECT_TRUE(opt.is_optional());
    EXPECT_EQ(opt.get_type(), type::int64);
    EXPECT_EQ(opt.to_string(), "optional(int64[4])");
    EXPECT_NE(seq, shape::optional(a));
    auto dseq = shape::sequence(shape::make_dynamic(type::float32, {{1, 3, {}}}));
    EXPECT_TRUE(dseq.dynamic());
}

TEST(core_shape, equality_and_hash) {
    std::vector<shape> distinct{shape(),
                                shape(type::float64),
                                shape(type::float32, {2, 3}),
                                shape(type::float32, {3, 2}),
                                shape(type::float32, {2, 3}, {1, 2}),
                                shape(type::float32, {2, 3}, {0, 1}),
                                shape(type::int32, {2, 3}),
                                shape(type::float32, {6}),
                                shape(type::float32, {0}),
                                shape::make_dynamic(type::float32, {{1, 4, {}}}),
                                shape::tuple({shape(type::float32, {2, 3})}),
                                shape::sequence(shape(type::float32, {2, 3})),
                                shape::optional(shape(type::float32, {2, 3}))};
    std::unordered_set<std::size_t> hashes;
    for (std::size_t i = 0; i < distinct.size(); ++i) {
        hashes.insert(distinct[i].hash());
        for (std::size_t j = 0; j < distinct.size(); ++j)
            EXPECT_EQ(distinct[i] == distinct[j], i == j) << distinct[i] << " vs " << distinct[j];
    }
    // Not a guarantee, but collisions among these would make hashing useless.
    EXPECT_GE(hashes.size(), distinct.size() - 1);
    // Copies share and compare equal; independently built equal shapes hash equal.
    shape c = distinct[4];
    EXPECT_EQ(c, distinct[4]);
    EXPECT_EQ(shape(type::float32, {2, 3}).hash(), distinct[2].hash());
}

TEST(core_shape, standard_layouts_are_equal_whatever_their_unit_dim_strides) {
    // Length-1 dims may have any stride and zero-sized tensors any strides: still row-major.
    shape canonical(type::float32, {1, 3});
    shape odd(type::float32, {1, 3}, {0, 1});
    ASSERT_TRUE(odd.standard());
    EXPECT_EQ(odd, canonical);
    EXPECT_EQ(odd.hash(), canonical.hash());
    EXPECT_EQ(odd.to_string(), canonical.to_string());
    shape z(type::float32, {0, 4}, {1, 7});
    EXPECT_EQ(z, shape(type::float32, {0, 4}));
    EXPECT_EQ(z.hash(), shape(type::float32, {0, 4}).hash());
    // Still different: other lens, other type, and real (non-standard) layouts.
    EXPECT_NE(odd, shape(type::float32, {3, 1}));
    EXPECT_NE(odd, shape(type::int32, {1, 3}));
    EXPECT_NE(shape(type::float32, {2, 3}, {1, 2}), shape(type::float32, {2, 3}));
}

TEST(core_shape, stream_output_matches_to_string) {
    shape s(type::bfloat16, {1, 2}, {0, 1});
    std::ostringstream os;
    os << s;
    EXPECT_EQ(os.str(), s.to_string());
    std::ostringstream dd;
    dd << dynamic_dimension{2, 2, {}} << " " << dynamic_dimension{0, 5, {}};
    EXPECT_EQ(dd.str(), "2 {0:5}");
}
