// slice, concat, split, pad, tile: values against element-by-element references
// written here (Python's slice clamping, numpy's pad modes), on strided inputs too.
#include "ops/tensor_layout.hpp"
#include "ops/tensor_slice.hpp"
#include "ops/tensor_views.hpp"
#include "tensor_test_util.hpp"

#include <algorithm>

using namespace kiln;
using namespace kiln::test;

namespace {

// Python's slice(start, stop, step).indices(n).
std::vector<std::size_t> py_slice(std::int64_t start, std::int64_t stop, std::int64_t step, std::int64_t n) {
    std::int64_t lower = step > 0 ? 0 : -1, upper = step > 0 ? n : n - 1;
    auto fix = [&](std::int64_t v) {
        if (v < 0) {
            v += n;
            if (v < lower) v = lower;
        } else if (v > upper) {
            v = upper;
        }
        return v;
    };
    std::vector<std::size_t> out;
    for (__int128 i = fix(start); step > 0 ? i < fix(stop) : i > fix(stop); i += step)  // no overflow, as in Python
        out.push_back(static_cast<std::size_t>(i));
    return out;
}

// Selects per-dimension index lists from a row-major tensor.
std::vector<double> pick(const std::vector<double>& v, const std::vector<std::size_t>& lens,
                         const std::vector<std::vector<std::size_t>>& sel, std::vector<std::size_t>& out_lens) {
    out_lens.clear();
    for (auto& s : sel) out_lens.push_back(s.size());
    std::vector<double> out(count(out_lens));
    for (std::size_t i = 0; i < out.size(); ++i) {
        auto o = unravel(i, out_lens);
        for (std::size_t d = 0; d < o.size(); ++d) o[d] = sel[d][o[d]];
        out[i] = v[ravel(o, lens)];
    }
    return out;
}

std::vector<std::size_t> all(std::size_t n) {
    std::vector<std::size_t> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = i;
    return v;
}

}  // namespace

TEST(ops_tensor_slice, slice_clamps_like_python) {
    const std::vector<std::size_t> lens{5, 7, 3};
    auto x = random_arg(type::float32, lens, 11);
    struct c {
        std::vector<std::int64_t> axes, starts, ends, steps;
    };
    const std::int64_t big = std::numeric_limits<std::int64_t>::max();
    std::vector<c> cases = {
        {{0, 1}, {1, 2}, {4, 6}, {}},
        {{1}, {-3}, {big}, {2}},
        {{-1, 0}, {0, 10}, {2, -big}, {1, -2}},
        {{1}, {-1}, {-big}, {-3}},
        {{0}, {100}, {200}, {1}},
        {{2, 1}, {-100, 5}, {100, 1}, {1, -1}},
        {{0, 1}, {1, 5}, {big, -big}, {big, -big}},
    };
    for (auto& k : cases) {
        std::vector<std::vector<std::size_t>> sel{all(5), all(7), all(3)};
        for (std::size_t i = 0; i < k.axes.size(); ++i) {
            auto a = static_cast<std::size_t>(k.axes[i] < 0 ? k.axes[i] + 3 : k.axes[i]);
            sel[a] = py_slice(k.starts[i], k.ends[i], k.steps.empty() ? 1 : k.steps[i], static_cast<std::int64_t>(lens[a]));
        }
        std::vector<std::size_t> ol;
        auto expected = pick(values(x), lens, sel, ol);
        op::slice s{k.axes, k.starts, k.ends, k.steps};
        for (bool compile : {false, true}) expect_values(run_op(s, {x}, compile).outputs[0], ol, expected);
        // The run-time form agrees.
        std::vector<argument> in{x, make_ints(k.starts), make_ints(k.ends), make_ints(k.axes)};
        if (!k.steps.empty()) in.push_back(make_ints(k.steps));
        expect_values(run_op(op::slice_dynamic{}, in).outputs[0], ol, expected);
    }
}

TEST(ops_tensor_slice, forward_slice_is_a_view_backward_copies) {
    shape s(type::float32, {6, 4});
    operation fwd = op::slice{{0}, {1}, {5}, {2}};
    auto fs = fwd.compute_shape({s});
    EXPECT_EQ(fwd.output_alias({s}), 0);
    EXPECT_EQ(fs.lens(), (std::vector<std::size_t>{2, 4}));
    EXPECT_EQ(fs.strides(), (std::vector<std::size_t>{8, 1}));
    operation bwd = op::slice{{0}, {5}, {0}, {-2}};
    EXPECT_EQ(bwd.output_alias({s}), -1);
    EXPECT_TRUE(bwd.compute_shape({s}).standard());
    EXPECT_THROW((op::slice{{0}, {0}, {1}, {0}}.compute_shape({s})), error);
    EXPECT_THROW((op::slice{{0, 0}, {0, 0}, {1, 1}, {}}.compute_shape({s})), error);
}

TEST(ops_tensor_slice, slice_of_transposed_view) {
    auto x = random_arg(type::float32, {4, 6}, 12);
    auto xv = values(x);
    // transpose -> [6, 4], then rows 1..5 step 2, cols reversed.
    auto prep = [](module& m, instruction_ref p, std::size_t) { return m.add_instruction(op::transpose{{1, 0}}, {p}); };
    std::vector<double> expected;
    for (std::size_t r = 1; r < 5; r += 2)
        for (std::size_t c = 4; c-- > 0;) expected.push_back(xv[c * 6 + r]);
    for (bool compile : {false, true})
        expect_values(run_op(op::slice{{0, 1}, {1, -1}, {5, -100}, {2, -1}}, {x}, compile, prep).outputs[0], {2, 4},
                      expected);
}

TEST(ops_tensor_slice, concat_along_each_axis) {
    auto a = random_arg(type::float32, {2, 3, 4}, 13);
    auto b = random_arg(type::float32, {2, 3, 4}, 14);
    auto av = values(a), bv = values(b);
    for (std::int64_t axis : {0, 1, 2, -1}) {
        auto ax = static_cast<std::size_t>(axis < 0 ? axis + 3 : axis);
        std::vector<std::size_t> ol{2, 3, 4};
        ol[ax] *= 2;
        std::vector<double> expected(count(ol));
        for (std::size_t i = 0; i < expected.size(); ++i) {
            auto o = unravel(i, ol);
            bool second = o[ax] >= std::vector<std::size_t>{2, 3, 4}[ax];
            if (second) o[ax] -= std::vector<std::size_t>{2, 3, 4}[ax];
            expected[i] = (second ? bv : av)[ravel(o, {2, 3, 4})];
        }
        for (bool compile : {false, true}) expect_values(run_op(op::concat{axis}, {a, b}, compile).outputs[0], ol, expected);
    }
    EXPECT_THROW(op::concat{0}.compute_shape({shape(type::float32, {2, 3}), shape(type::float32, {2, 4})}), error);
    EXPECT_THROW(op::concat{0}.compute_shape({shape(type::float32, {2}), shape(type::int64, {2})}), error);
}

TEST(ops_tensor_slice, concat_of_strided_inputs) {
    auto a = random_arg(type::int64, {3, 5}, 15);
    auto b = random_arg(type::int64, {3, 2}, 16);
    // a is transposed to [5, 3] inside the program; b is broadcast to [2, 3].
    auto prep = [](module& m, instruction_ref p, std::size_t i) {
        if (i == 0) return m.add_instruction(op::transpose{{1, 0}}, {p});
        auto s = m.add_instruction(op::slice{{1}, {0}, {1}, {}}, {p});  // [3, 1]
        auto t = m.add_instruction(op::transpose{{1, 0}}, {s});          // [1, 3]
        return m.add_instruction(op::broadcast{{2, 3}}, {t});
    };
    auto av = values(a), bv = values(b);
    std::vector<double> expected;
    for (std::size_t r = 0; r < 5; ++r)
        for (std::size_t c = 0; c < 3; ++c) expected.push_back(av[c * 5 + r]);
    for (std::size_t r = 0; r < 2; ++r)
        for (std::size_t c = 0; c < 3; ++c) expected.push_back(bv[c * 2]);
    for (bool compile : {false, true}) expect_values(run_op(op::concat{0}, {a, b}, compile, prep).outputs[0], {7, 3}, expected);
}

TEST(ops_tensor_slice, split_parts_are_views) {
    auto x = random_arg(type::float32, {3, 7}, 17);
    auto xv = values(x);
    for (bool compile : {false, true}) {
        auto r = run_op(op::split{1, {2, 0, 5}}, {x}, compile, 3);
        ASSERT_EQ(r.outputs.size(), 3u);
        std::vector<double> e0, e2;
        for (std::size_t i = 0; i < 3; ++i) {
            for (std::size_t j = 0; j < 2; ++j) e0.push_back(xv[i * 7 + j]);
            for (std::size_t j = 2; j < 7; ++j) e2.push_back(xv[i * 7 + j]);
        }
        expect_values(r.outputs[0], {3, 2}, e0);
        expect_values(r.outputs[1], {3, 0}, {});
        expect_values(r.outputs[2], {3, 5}, e2);
        // Even split of 7 into 3: ceil(7/3) = 3, 3, 1.
        r = run_op(op::split_dynamic{1, 3}, {x}, compile, 3);
        EXPECT_EQ(r.outputs[2].get_shape().lens(), (std::vector<std::size_t>{3, 1}));
        r = run_op(op::split_dynamic{-1, 2}, {x, make_ints({6, 1})}, compile, 2);
        EXPECT_EQ(r.outputs[1].get_shape().lens(), (std::vector<std::size_t>{3, 1}));
        EXPECT_EQ(values(r.outputs[1])[2], xv[2 * 7 + 6]);
    }
    EXPECT_EQ(op::even_split(8, 4), (std::vector<std::int64_t>{2, 2, 2, 2}));
    EXPECT_THROW((op::split{1, {2, 2}}.compute_shape({x.get_shape()})), error);
}

TEST(ops_tensor_slice, pad_modes_match_numpy) {
    const std::vector<std::size_t> lens{3, 4};
    auto x = random_arg(type::float32, lens, 18);
    auto xv = values(x);
    // numpy.pad semantics, written independently: reflect mirrors repeatedly.
    auto src = [](const std::string& mode, std::int64_t i, std::int64_t n) -> std::int64_t {
        if (i >= 0 && i < n) return i;
        if (mode == "constant") return -1;
        if (mode == "edge") return i < 0 ? 0 : n - 1;
        if (mode == "wrap") {
            while (i < 0) i += n;
            return i % n;
        }
        while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;
        return i;
    };
    std::vector<std::int64_t> pads{2, 3, 1, 5};  // begins (2, 3), ends (1, 5)
    for (std::string mode : {"constant", "reflect", "edge", "wrap"}) {
        std::vector<std::size_t> ol{6, 12};
        std::vector<double> expected;
        for (std::int64_t r = 0; r < 6; ++r)
            for (std::int64_t c = 0; c < 12; ++c) {
                auto sr = src(mode, r - 2, 3), sc = src(mode, c - 3, 4);
                expected.push_back(sr < 0 || sc < 0 ? 2.5 : xv[static_cast<std::size_t>(sr * 4 + sc)]);
            }
        auto value = make_arg(type::float32, {}, {2.5});
        for (bool compile : {false, true})
            expect_values(run_op(op::pad{mode, pads, {}}, {x, value}, compile).outputs[0], ol, expected);
        expect_values(run_op(op::pad_dynamic{mode, true, false}, {x, make_ints(pads), value}).outputs[0], ol, expected);
    }
}

TEST(ops_tensor_slice, pad_crops_and_takes_axes) {
    auto x = random_arg(type::int64, {3, 4}, 19);
    auto xv = values(x);
    // axes {1}: pad 1 before, crop 2 after on axis 1 only; zero fill.
    std::vector<double> expected;
    for (std::size_t r = 0; r < 3; ++r) {
        expected.push_back(0);
        expected.push_back(xv[r * 4 + 0]);
        expected.push_back(xv[r * 4 + 1]);
    }
    expect_values(run_op(op::pad{"constant", {1, -2}, {-1}}, {x}).outputs[0], {3, 3}, expected);
    expect_values(run_op(op::pad_dynamic{"constant", false, true}, {x, make_ints({1, -2}), make_ints({1})}).outputs[0],
                  {3, 3}, expected);
    EXPECT_THROW((op::pad{"constant", {1, 2}, {}}.compute_shape({x.get_shape()})), error);
    EXPECT_THROW((op::pad{"constant", {0, -5, 0, 0}, {}}.compute_shape({x.get_shape()})), error);
    EXPECT_THROW((op::pad{"mirror", {0, 0, 0, 0}, {}}.compute_shape({x.get_shape()})), error);
}

TEST(ops_tensor_slice, tile_repeats) {
    auto x = random_arg(type::float32, {2, 3}, 20);
    auto xv = values(x);
    std::vector<double> expected;
    for (std::size_t r = 0; r < 6; ++r)
        for (std::size_t c = 0; c < 6; ++c) expected.push_back(xv[(r % 2) * 3 + c % 3]);
    for (bool compile : {false, true}) {
        expect_values(run_op(op::tile{{3, 2}}, {x}, compile).outputs[0], {6, 6}, expected);
        expect_values(run_op(op::tile_dynamic{}, {x, make_ints({3, 2})}, compile).outputs[0], {6, 6}, expected);
    }
    EXPECT_THROW((op::tile{{3}}.compute_shape({x.get_shape()})), error);
    EXPECT_THROW((op::tile{{std::int64_t{1} << 40, std::int64_t{1} << 40}}.compute_shape({x.get_shape()})), error);
    EXPECT_THROW((op::pad{"constant", {0, std::numeric_limits<std::int64_t>::max(), 0, 1}, {}}.compute_shape({x.get_shape()})),
                 error);
}

TEST(ops_tensor_slice, center_crop_pad_crops_and_pads_centred) {
    auto x = random_arg(type::float32, {5, 2}, 21);
    auto xv = values(x);
    // axis 0: 5 -> 3 (crop rows 1..3); axis 1: 2 -> 5 (pad 1 before, 2 after).
    std::vector<double> expected;
    for (std::size_t r = 1; r < 4; ++r)
        for (std::size_t c = 0; c < 5; ++c) expected.push_back(c >= 1 && c < 3 ? xv[r * 2 + c - 1] : 0.0);
    expect_values(run_op(op::center_crop_pad{{}}, {x, make_ints({3, 5})}).outputs[0], {3, 5}, expected);
    auto p = op::plan_center_crop_pad({5, 2}, {3, 5}, {}, "t");
    EXPECT_EQ(p.starts, (std::vector<std::int64_t>{1}));
    EXPECT_EQ(p.pads, (std::vector<std::int64_t>{0, 1, 0, 2}));
}
