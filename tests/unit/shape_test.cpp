#include <kiln/shape.hpp>

#include <gtest/gtest.h>

using kiln::shape;
using kiln::type;

TEST(shape, standard_strides) {
    shape s(type::float32, {2, 3, 4});
    EXPECT_EQ(s.strides(), (std::vector<std::size_t>{12, 4, 1}));
    EXPECT_EQ(s.elements(), 24u);
    EXPECT_EQ(s.bytes(), 96u);
    EXPECT_TRUE(s.standard());
    EXPECT_TRUE(s.packed());
    EXPECT_FALSE(s.transposed());
    EXPECT_FALSE(s.broadcasted());
}
