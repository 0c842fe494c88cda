// Data-movement ops move elements of every kiln element type unchanged: low-precision
// floats, sub-byte integers (stored one per byte), bool and strings.
#include "ops/tensor_gather.hpp"
#include "ops/tensor_slice.hpp"
#include "ops/tensor_views.hpp"
#include "tensor_test_util.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

// x [2, 3] -> transpose -> reversed rows -> concat with itself transposed -> gather rows
// {5, 2} -> edge pad (1 row before, 1 column after) -> tile columns twice.
program movement_chain(type t) {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(t, {2, 3}));
    auto tr = m->add_instruction(op::transpose{{1, 0}}, {x});
    auto rev = m->add_instruction(op::slice{{0}, {-1}, {-100}, {-1}}, {tr});
    auto cat = m->add_instruction(op::concat{0}, {rev, tr});
    auto idx = m->add_literal(literal(shape(type::int32, {2}), std::vector<int>{5, 2}));
    auto g = m->add_instruction(op::gather{0}, {cat, idx});
    auto pd = m->add_instruction(op::pad{"edge", {1, 0, 0, 1}, {}}, {g});
    m->add_return({m->add_instruction(op::tile{{1, 2}}, {pd})});
    return p;
}

// Element ids (positions in x) of the chain's result, worked out by hand.
const std::vector<std::size_t> chain_ids{2, 5, 5, 2, 5, 5, 2, 5, 5, 2, 5, 5, 0, 3, 3, 0, 3, 3};

std::vector<double> sample_values(type t) {
    switch (t) {
        case type::bool_: return {1, 0, 1, 1, 0, 1};
        case type::int2: return {-2, -1, 0, 1, -2, 1};
        case type::uint2: return {0, 1, 2, 3, 2, 1};
        case type::int4: return {-8, -3, 0, 5, 7, 1};
        case type::uint4: return {15, 3, 0, 5, 9, 1};
        case type::float8e8m0: return {0.25, 0.5, 1, 2, 4, 8};
        default: return {0.5, 1, 1.5, 2, 3, -6};  // exact in fp4e2m1 and every fp8
    }
}

}  // namespace

TEST(ops_tensor_types, movement_chain_keeps_every_numeric_type_exact) {
    for (type t : {type::float16, type::bfloat16, type::float32, type::float64, type::float8e4m3fn, type::float8e5m2,
                   type::float8e4m3fnuz, type::float8e5m2fnuz, type::float8e8m0, type::float4e2m1, type::int8,
                   type::int16, type::int32, type::int64, type::uint8, type::uint16, type::uint32, type::uint64,
                   type::int4, type::uint4, type::int2, type::uint2, type::bool_}) {
        SCOPED_TRACE(std::string(type_name(t)));
        auto v = sample_values(t);
        if (is_unsigned_int(t) || t == type::float8e8m0)
            for (auto& x : v) x = std::fabs(x);
        auto x = make_arg(t, {2, 3}, v);
        std::vector<double> expected;
        for (auto id : chain_ids) expected.push_back(values(x)[id]);
        for (bool compile : {false, true}) {
            auto p = movement_chain(t);
            if (compile) p.compile(*get_target("ref"));
            auto r = p.eval({{"x", x}})[0];
            EXPECT_EQ(r.get_shape().get_type(), t);
            expect_values(r, {3, 6}, expected);
        }
    }
}

TEST(ops_tensor_types, movement_chain_moves_strings) {
    std::vector<std::string> v{"a", "bb", "", "dddd", "e", "ffffff"};
    auto x = literal(shape(type::string, {2, 3}), v).get_argument();
    // Uncompiled only: the ref target's planned arena is raw bytes, which cannot hold
    // std::string objects (a lowering matter, outside these ops).
    auto r = movement_chain(type::string).eval({{"x", x}})[0].to_vector<std::string>();
    ASSERT_EQ(r.size(), chain_ids.size());
    for (std::size_t i = 0; i < r.size(); ++i) EXPECT_EQ(r[i], v[chain_ids[i]]) << i;
}
