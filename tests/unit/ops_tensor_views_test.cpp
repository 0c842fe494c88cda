// reshape, flatten, squeeze, unsqueeze, transpose, broadcast and their run-time forms:
// values against index arithmetic done here, view-ness (no copy, no planned buffer)
// and copies for non-row-major inputs.
#include "ops/tensor_slice.hpp"
#include "ops/tensor_views.hpp"
#include "tensor_test_util.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

// Transposes a parameter inside the program, so the op under test sees strides.
auto transposed_input(std::vector<std::int64_t> perm) {
    return [perm](module& m, instruction_ref x, std::size_t i) {
        return i == 0 ? m.add_instruction(op::transpose{perm}, {x}) : x;
    };
}

std::vector<double> permute(const std::vector<double>& v, const std::vector<std::size_t>& lens,
                            const std::vector<std::size_t>& perm, std::vector<std::size_t>& out_lens) {
    out_lens.clear();
    for (auto p : perm) out_lens.push_back(lens[p]);
    std::vector<double> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
        auto o = unravel(i, out_lens);
        std::vector<std::size_t> src(lens.size());
        for (std::size_t d = 0; d < perm.size(); ++d) src[perm[d]] = o[d];
        out[i] = v[ravel(src, lens)];
    }
    return out;
}

}  // namespace

TEST(ops_tensor_views, reshape_resolves_zero_and_minus_one) {
    auto x = random_arg(type::float32, {2, 3, 5}, 1);
    auto r = run_op(op::reshape{{0, -1}, false}, {x});
    expect_values(r.outputs[0], {2, 15}, values(x));
    r = run_op(op::reshape{{5, 0, -1}, false}, {x});
    expect_values(r.outputs[0], {5, 3, 2}, values(x));
    // allowzero: 0 is a real zero-length dimension.
    auto e = make_arg(type::float32, {0, 3}, {});
    r = run_op(op::reshape{{3, 0}, true}, {e});
    expect_values(r.outputs[0], {3, 0}, {});
}

// A 0 that copies an empty input's dim (the batch-0 call of an exported attention) makes a
// target with more elements than the input: the error says what the shape resolved to.
TEST(ops_tensor_views, reshape_error_names_the_input_and_the_resolved_zeros) {
    operation op = op::reshape{{0, 32}, false};
    try {
        (void)op.compute_shape({shape(type::float32, {5, 0, 8})});
        FAIL() << "expected a shape error";
    } catch (const error& e) {
        EXPECT_EQ(std::string(e.what()), "shape error: reshape: cannot reshape {5, 0, 8} (0 elements) to {0, 32}, that is {5, 32} "
                                         "(a 0 copies the input's dimension without allowzero)");
    }
}

TEST(ops_tensor_views, reshape_is_a_view_of_standard_input) {
    auto x = random_arg(type::float32, {3, 7}, 2);
    operation op = op::reshape{{7, 3}, false};
    EXPECT_EQ(op.output_alias({x.get_shape()}), 0);
    host_context ctx;
    auto out = op.compute(ctx, op.compute_shape({x.get_shape()}), {x});
    EXPECT_EQ(out.data(), x.data());
    // A transposed input cannot be re-viewed: reshape copies, in row-major order of the view.
    shape t(type::float32, {7, 3}, {1, 7});
    EXPECT_EQ(op.output_alias({t}), -1);
}

TEST(ops_tensor_views, reshape_of_transposed_input_copies_in_logical_order) {
    auto x = random_arg(type::float32, {3, 4, 5}, 3);
    std::vector<std::size_t> tl;
    auto expected = permute(values(x), {3, 4, 5}, {2, 0, 1}, tl);
    for (bool compile : {false, true}) {
        auto r = run_op(op::reshape{{-1}, false}, {x}, compile, transposed_input({2, 0, 1}));
        expect_values(r.outputs[0], {60}, expected);
        r = run_op(op::flatten{2}, {x}, compile, transposed_input({2, 0, 1}));
        expect_values(r.outputs[0], {15, 4}, expected);
    }
}

TEST(ops_tensor_views, reshape_errors_name_the_op) {
    shape s(type::float32, {2, 3});
    EXPECT_THROW(op::reshape({4, -1}, false).compute_shape({s}), error);
    EXPECT_THROW(op::reshape({-1, -1}, false).compute_shape({s}), error);
    EXPECT_THROW(op::reshape({1, 0, 0, 0}, false).compute_shape({s}), error);
    EXPECT_THROW(op::reshape({std::int64_t{1} << 40, std::int64_t{1} << 40, 0}, true).compute_shape({s}), error);
    try {
        op::reshape({7}, false).compute_shape({s});
        FAIL();
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("reshape"), std::string::npos);
    }
}

TEST(ops_tensor_views, flatten_axes) {
    auto x = random_arg(type::int64, {2, 3, 5}, 4);
    for (std::int64_t axis : {0, 1, 2, 3, -1, -3}) {
        auto a = static_cast<std::size_t>(axis < 0 ? axis + 3 : axis);
        std::size_t outer = 1;
        for (std::size_t d = 0; d < a; ++d) outer *= std::vector<std::size_t>{2, 3, 5}[d];
        auto r = run_op(op::flatten{axis}, {x});
        expect_values(r.outputs[0], {outer, 30 / outer}, values(x));
    }
    EXPECT_THROW(op::flatten{4}.compute_shape({x.get_shape()}), error);
}

TEST(ops_tensor_views, squeeze_and_unsqueeze) {
    auto x = random_arg(type::float32, {1, 3, 1, 5}, 5);
    expect_values(run_op(op::squeeze{{}}, {x}).outputs[0], {3, 5}, values(x));
    expect_values(run_op(op::squeeze{{-2}}, {x}).outputs[0], {1, 3, 5}, values(x));
    EXPECT_THROW((op::squeeze{{1}}.compute_shape({x.get_shape()})), error);
    expect_values(run_op(op::unsqueeze{{0, 5}}, {x}).outputs[0], {1, 1, 3, 1, 5, 1}, values(x));
    expect_values(run_op(op::unsqueeze{{-1, 2}}, {x}).outputs[0], {1, 3, 1, 1, 5, 1}, values(x));
    // Unsqueezing a standard tensor keeps it standard (later reshapes stay views).
    auto s = op::unsqueeze{{1}}.compute_shape({shape(type::float32, {3, 5})});
    EXPECT_TRUE(s.standard());
    EXPECT_THROW((op::unsqueeze{{7}}.compute_shape({x.get_shape()})), error);
}

TEST(ops_tensor_views, transpose_is_a_strided_view) {
    auto x = random_arg(type::float32, {2, 3, 5}, 6);
    for (bool compile : {false, true}) {
        auto r = run_op(op::transpose{{2, 0, 1}}, {x}, compile);
        std::vector<std::size_t> ol;
        auto expected = permute(values(x), {2, 3, 5}, {2, 0, 1}, ol);
        expect_values(r.outputs[0], ol, expected);
        EXPECT_TRUE(r.output_shapes[0].transposed());
    }
    // Default: reverse the dimensions.
    std::vector<std::size_t> ol;
    auto expected = permute(values(x), {2, 3, 5}, {2, 1, 0}, ol);
    expect_values(run_op(op::transpose{{}}, {x}).outputs[0], ol, expected);
    EXPECT_THROW((op::transpose{{0, 1}}.compute_shape({x.get_shape()})), error);
    EXPECT_THROW((op::transpose{{0, 0, 1}}.compute_shape({x.get_shape()})), error);
}

TEST(ops_tensor_views, broadcast_is_bidirectional) {
    auto x = random_arg(type::float32, {3, 1}, 7);
    auto r = run_op(op::broadcast{{2, 1, 4}}, {x});
    std::vector<double> expected;
    auto v = values(x);
    for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t j = 0; j < 3; ++j)
            for (std::size_t k = 0; k < 4; ++k) expected.push_back(v[j]);
    expect_values(r.outputs[0], {2, 3, 4}, expected);
    EXPECT_TRUE(r.output_shapes[0].broadcasted());
    EXPECT_THROW((op::broadcast{{2, 2}}.compute_shape({shape(type::float32, {3, 1})})), error);
}

TEST(ops_tensor_views, run_time_forms_match_static_forms) {
    auto x = random_arg(type::float32, {2, 3, 4}, 8);
    for (bool compile : {false, true}) {
        auto r = run_op(op::reshape_dynamic{false}, {x, make_ints({4, -1})}, compile);
        EXPECT_TRUE(r.output_shapes[0].dynamic());
        expect_values(r.outputs[0], {4, 6}, values(x));
        r = run_op(op::squeeze_dynamic{true}, {x, make_ints({1, -1})}, compile);
        expect_values(r.outputs[0], {2, 1, 3, 4, 1}, values(x));
        r = run_op(op::expand_dynamic{}, {make_arg(type::float32, {1, 3}, {1, 2, 3}), make_ints({2, 1})}, compile);
        expect_values(r.outputs[0], {2, 3}, {1, 2, 3, 1, 2, 3});
    }
    auto s = op::expand_dynamic{}.compute_shape({shape(type::float32, {1, 3}), shape(type::int64, {3})});
    EXPECT_EQ(s.ndim(), 3u);
    EXPECT_TRUE(s.dyn_dims()[2].is_fixed());  // a non-1 input dim survives broadcasting
    EXPECT_THROW(run_op(op::reshape_dynamic{false}, {x, make_ints({5, -1})}), error);
}

TEST(ops_tensor_views, shape_of_and_size_of) {
    auto x = random_arg(type::float32, {2, 3, 5}, 9);
    expect_values(run_op(op::shape_of{}, {x}).outputs[0], {3}, {2, 3, 5});
    expect_values(run_op(op::shape_of{1, std::nullopt}, {x}).outputs[0], {2}, {3, 5});
    expect_values(run_op(op::shape_of{-1, -5}, {x}).outputs[0], {0}, {});
    expect_values(run_op(op::shape_of{-10, 2}, {x}).outputs[0], {2}, {2, 3});
    expect_values(run_op(op::size_of{}, {x}).outputs[0], {}, {30});
}

TEST(ops_tensor_views, views_take_no_planned_memory) {
    // x -> transpose (view) -> reshape (copy: not standard) -> unsqueeze, squeeze (views)
    // -> tile (a computed result, returned). Only the reshape's copy is planned.
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(type::float32, {4, 6}));
    auto t = m->add_instruction(op::transpose{{1, 0}}, {x});
    auto r = m->add_instruction(op::reshape{{24}, false}, {t});
    auto u = m->add_instruction(op::unsqueeze{{0}}, {r});
    auto s = m->add_instruction(op::squeeze{{0}}, {u});
    m->add_return({m->add_instruction(op::tile{{1}}, {s})});
    auto in = random_arg(type::float32, {4, 6}, 10);
    auto uncompiled = p.eval({{"x", in}})[0];
    p.compile(*get_target("ref"));
    auto compiled = p.eval({{"x", in}})[0];
    EXPECT_EQ(uncompiled, compiled);
    EXPECT_EQ(p.get_memory_usage().arena_bytes, 128u);  // 96 bytes, 64-byte aligned
    std::vector<std::size_t> ol;
    expect_values(compiled, {24}, permute(values(in), {4, 6}, {1, 0}, ol));
}
