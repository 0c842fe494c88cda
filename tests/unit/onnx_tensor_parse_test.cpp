// Parsing the tensor family: static forms for constant shape inputs, run-time forms
// otherwise, Shape of static tensors as literals (so exporter shape arithmetic folds),
// and opset differences (attributes before inputs).
#include "tensor_test_util.hpp"

#include <algorithm>

using namespace kiln;
using namespace kiln::test;

namespace {
bool has_op(const program& p, const std::string& name) {
    auto n = op_names(*p.get_main_module());
    return std::find(n.begin(), n.end(), name) != n.end();
}
}  // namespace

TEST(onnx_tensor_parse, shape_of_static_tensor_is_a_literal) {
    onnx_model m;
    m.input("x", onnx_float, {2, 3, 5});
    m.node("Shape", {"x"}, {"s"}, {onnx_attr::i("start", 1)});
    m.output("s", onnx_int64);
    auto p = m.parse();
    EXPECT_TRUE(op_names(*p.get_main_module()).empty());
    auto r = p.eval({{"x", random_arg(type::float32, {2, 3, 5}, 71)}});
    expect_values(r[0], {2}, {3, 5});
}

TEST(onnx_tensor_parse, exporter_shape_arithmetic_folds_into_a_static_reshape) {
    onnx_model m;
    m.input("x", onnx_float, {2, 3, 5});
    m.initializer("first", {1}, {0});
    m.initializer("rest", {1}, {-1});
    m.node("Shape", {"x"}, {"s"});
    m.node("Gather", {"s", "first"}, {"g"});
    m.node("Concat", {"g", "rest"}, {"c"}, {onnx_attr::i("axis", 0)});
    m.node("Reshape", {"x", "c"}, {"y"});
    m.output("y", onnx_float);
    auto p = m.parse();
    EXPECT_TRUE(has_op(p, "reshape"));
    EXPECT_FALSE(has_op(p, "reshape_dynamic"));
    EXPECT_EQ(p.get_output_shapes()[0].lens(), (std::vector<std::size_t>{2, 15}));
    auto x = random_arg(type::float32, {2, 3, 5}, 72);
    p.compile(*get_target("ref"));
    expect_values(p.eval({{"x", x}})[0], {2, 15}, values(x));
}

TEST(onnx_tensor_parse, run_time_shape_input_gives_the_dynamic_form) {
    onnx_model m;
    m.input("x", onnx_float, {2, 3, 4});
    m.input("shape", onnx_int64, {2});
    m.node("Reshape", {"x", "shape"}, {"y"});
    m.output("y", onnx_float);
    auto p = m.parse();
    EXPECT_TRUE(has_op(p, "reshape_dynamic"));
    p.compile(*get_target("ref"));
    auto x = random_arg(type::float32, {2, 3, 4}, 73);
    expect_values(p.eval({{"x", x}, {"shape", make_ints({0, -1})}})[0], {2, 12}, values(x));
    expect_values(p.eval({{"x", x}, {"shape", make_ints({-1, 2})}})[0], {12, 2}, values(x));
}

TEST(onnx_tensor_parse, shape_of_dynamic_input_stays_an_op) {
    onnx_model m;
    m.input("x", onnx_float, {-1, 3});
    m.node("Shape", {"x"}, {"s"});
    m.output("s", onnx_int64);
    onnx_options o;
    o.default_dyn_dim_value = {1, 8, {}};
    auto p = m.parse(o);
    EXPECT_TRUE(has_op(p, "shape_of"));
    p.compile(*get_target("ref"));
    expect_values(p.eval({{"x", random_arg(type::float32, {5, 3}, 74)}})[0], {2}, {5, 3});
}

TEST(onnx_tensor_parse, shape_of_only_fixed_dims_is_a_literal) {
    onnx_model m;
    m.input("x", onnx_float, {-1, 3, 4});
    m.node("Shape", {"x"}, {"s"}, {onnx_attr::i("start", -2)});
    m.output("s", onnx_int64);
    onnx_options o;
    o.default_dyn_dim_value = {1, 8, {}};
    auto p = m.parse(o);
    EXPECT_TRUE(op_names(*p.get_main_module()).empty());
    EXPECT_FALSE(p.get_output_shapes()[0].dynamic());
}

TEST(onnx_tensor_parse, dynamic_batch_reshape_runs_at_several_sizes) {
    // reshape(x, concat(unsqueeze(gather(shape(x), 0)), [-1])) with a dynamic batch.
    onnx_model m;
    m.opset = 13;
    m.input("x", onnx_float, {-1, 3, 4});
    m.initializer("zero", {}, {0});
    m.initializer("axes", {1}, {0});
    m.initializer("rest", {1}, {-1});
    m.node("Shape", {"x"}, {"s"});
    m.node("Gather", {"s", "zero"}, {"b"});
    m.node("Unsqueeze", {"b", "axes"}, {"b1"});
    m.node("Concat", {"b1", "rest"}, {"c"}, {onnx_attr::i("axis", 0)});
    m.node("Reshape", {"x", "c"}, {"y"});
    m.output("y", onnx_float);
    onnx_options o;
    o.default_dyn_dim_value = {1, 8, {}};
    auto p = m.parse(o);
    EXPECT_TRUE(has_op(p, "reshape_dynamic"));
    p.compile(*get_target("ref"));
    for (std::size_t b : {2, 5}) {
        auto x = random_arg(type::float32, {b, 3, 4}, 77 + static_cast<unsigned>(b));
        expect_values(p.eval({{"x", x}})[0], {b, 12}, values(x));
    }
}

TEST(onnx_tensor_parse, opset_differences) {
    auto x = random_arg(type::float32, {1, 6}, 75);
    {
        onnx_model m;  // Squeeze-11: axes attribute
        m.opset = 11;
        m.input("x", onnx_float, {1, 6});
        m.node("Squeeze", {"x"}, {"y"}, {onnx_attr::ints("axes", {0})});
        m.output("y", onnx_float);
        expect_values(m.parse().eval({{"x", x}})[0], {6}, values(x));
    }
    {
        onnx_model m;  // Squeeze-13: axes input (an initializer: static form)
        m.opset = 13;
        m.input("x", onnx_float, {1, 6});
        m.initializer("axes", {1}, {0});
        m.node("Squeeze", {"x", "axes"}, {"y"});
        m.output("y", onnx_float);
        auto p = m.parse();
        EXPECT_TRUE(has_op(p, "squeeze"));
        expect_values(p.eval({{"x", x}})[0], {6}, values(x));
    }
    {
        onnx_model m;  // Split-11 attribute, Split-18 num_outputs
        m.opset = 11;
        m.input("x", onnx_float, {1, 6});
        m.node("Split", {"x"}, {"a", "b"}, {onnx_attr::i("axis", 1), onnx_attr::ints("split", {4, 2})});
        m.output("b", onnx_float);
        auto xv = values(x);
        expect_values(m.parse().eval({{"x", x}})[0], {1, 2}, {xv[4], xv[5]});
        onnx_model n;
        n.opset = 18;
        n.input("x", onnx_float, {1, 6});
        n.node("Split", {"x"}, {"a", "b", "c", "d"}, {onnx_attr::i("axis", 1), onnx_attr::i("num_outputs", 4)});
        n.output("d", onnx_float);
        expect_values(n.parse().eval({{"x", x}})[0], {1, 0}, {});
    }
    {
        onnx_model m;  // Pad-2: pads and value attributes
        m.opset = 2;
        m.input("x", onnx_float, {1, 6});
        m.node("Pad", {"x"}, {"y"}, {onnx_attr::ints("pads", {0, 1, 0, 0}), onnx_attr::f("value", 1.5f)});
        m.output("y", onnx_float);
        auto xv = values(x);
        xv.insert(xv.begin(), 1.5);
        expect_values(m.parse().eval({{"x", x}})[0], {1, 7}, xv);
    }
    {
        onnx_model m;  // Tile-1: tiles and axis inputs
        m.opset = 1;
        m.input("x", onnx_float, {1, 6});
        m.initializer("tiles", {}, {3});
        m.initializer("axis", {}, {0});
        m.node("Tile", {"x", "tiles", "axis"}, {"y"});
        m.output("y", onnx_float);
        auto xv = values(x);
        std::vector<double> e;
        for (int i = 0; i < 3; ++i) e.insert(e.end(), xv.begin(), xv.end());
        expect_values(m.parse().eval({{"x", x}})[0], {3, 6}, e);
    }
    {
        onnx_model m;  // TopK-1: k attribute
        m.opset = 1;
        m.input("x", onnx_float, {1, 6});
        m.node("TopK", {"x"}, {"v", "i"}, {onnx_attr::i("k", 2)});
        m.output("i", onnx_int64);
        auto r = m.parse().eval({{"x", x}})[0];
        EXPECT_EQ(r.get_shape().lens(), (std::vector<std::size_t>{1, 2}));
    }
}

TEST(onnx_tensor_parse, known_values_give_static_or_literal_results) {
    onnx_model m;
    m.input("x", onnx_float, {3, 4});
    m.initializer("shape", {2}, {2, 3});
    m.initializer("start", {}, {1});
    m.initializer("limit", {}, {7});
    m.initializer("delta", {}, {2});
    m.node("ConstantOfShape", {"shape"}, {"c"});
    m.node("Range", {"start", "limit", "delta"}, {"r"});
    m.node("NonZero", {"shape"}, {"nz"});
    m.output("c", onnx_float);
    m.output("r", onnx_int64);
    m.output("nz", onnx_int64);
    auto p = m.parse();
    EXPECT_FALSE(has_op(p, "range"));
    EXPECT_FALSE(has_op(p, "nonzero"));
    EXPECT_FALSE(has_op(p, "constant_of_shape"));
    for (auto& s : p.get_output_shapes()) EXPECT_FALSE(s.dynamic()) << s;
    auto r = p.eval({{"x", random_arg(type::float32, {3, 4}, 76)}});
    expect_values(r[0], {2, 3}, std::vector<double>(6, 0));
    expect_values(r[1], {3}, {1, 3, 5});
    expect_values(r[2], {1, 2}, {0, 1});
}

TEST(onnx_tensor_parse, known_but_invalid_shape_is_a_parse_error_naming_the_node) {
    onnx_model m;
    m.input("x", onnx_float, {3, 4});
    m.initializer("shape", {2}, {2, 3});
    m.node("Expand", {"x", "shape"}, {"e"});
    m.output("e", onnx_float);
    try {
        m.parse();
        FAIL() << "expected a shape error";
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::shape);
        EXPECT_NE(std::string(e.what()).find("Expand"), std::string::npos) << e.what();
    }
}
