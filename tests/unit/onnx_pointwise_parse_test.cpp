// Parsing the pointwise family: opset differences the conformance data barely covers
// (Clip attributes, Cast-1's string type, pre-opset-7 broadcasting, old Dropout masks),
// the folds of variadic ops, and errors. Models are written with a minimal protobuf
// encoder, so the test needs no ONNX headers.
#include <kiln/onnx.hpp>
#include <kiln/program.hpp>
#include <kiln/target.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

using namespace kiln;

namespace {

// ---- protobuf wire format, just what a ModelProto needs
std::string varint(std::uint64_t v) {
    std::string s;
    do {
        auto b = static_cast<char>(v & 0x7F);
        v >>= 7;
        s += static_cast<char>(b | (v ? 0x80 : 0));
    } while (v);
    return s;
}
std::string key(int field, int wire) { return varint(static_cast<std::uint64_t>(field) << 3 | wire); }
std::string field_int(int f, std::int64_t v) { return key(f, 0) + varint(static_cast<std::uint64_t>(v)); }
std::string field_bytes(int f, const std::string& b) { return key(f, 2) + varint(b.size()) + b; }
std::string field_float(int f, float v) {
    std::string s(4, '\0');
    std::memcpy(s.data(), &v, 4);
    return key(f, 5) + s;
}

enum onnx_type { f32 = 1, u8 = 2, i8 = 3, i32 = 6, i64 = 7, boolean = 9, f16 = 10, f64 = 11 };

struct attr {
    std::string bytes;
    static attr i(const std::string& n, std::int64_t v) { return {field_bytes(1, n) + field_int(3, v) + field_int(20, 2)}; }
    static attr f(const std::string& n, float v) { return {field_bytes(1, n) + field_float(2, v) + field_int(20, 1)}; }
    static attr s(const std::string& n, const std::string& v) {
        return {field_bytes(1, n) + field_bytes(4, v) + field_int(20, 3)};
    }
};

struct model {
    int opset = 21;
    std::string graph;
    void input(const std::string& n, onnx_type t, const std::vector<std::int64_t>& dims) {
        graph += field_bytes(11, value_info(n, t, dims));
    }
    void output(const std::string& n, onnx_type t) {
        graph += field_bytes(12, field_bytes(1, n) + field_bytes(2, field_bytes(1, field_int(1, t))));
    }
    void float_initializer(const std::string& n, const std::vector<std::int64_t>& dims, const std::vector<float>& v) {
        std::string t;
        for (auto d : dims) t += field_int(1, d);
        t += field_int(2, f32) + field_bytes(8, n);
        std::string raw(v.size() * 4, '\0');
        std::memcpy(raw.data(), v.data(), raw.size());
        graph += field_bytes(5, t + field_bytes(9, raw));
    }
    void bool_scalar_initializer(const std::string& n, bool v) {
        graph += field_bytes(5, field_int(2, boolean) + field_bytes(8, n) + field_bytes(9, std::string(1, v ? 1 : 0)));
    }
    void node(const std::string& op, const std::vector<std::string>& in, const std::vector<std::string>& out,
              const std::vector<attr>& attrs = {}) {
        std::string n;
        for (auto& i : in) n += field_bytes(1, i);
        for (auto& o : out) n += field_bytes(2, o);
        n += field_bytes(4, op);
        for (auto& a : attrs) n += field_bytes(5, a.bytes);
        graph += field_bytes(1, n);
    }
    program parse() const {
        std::string m = field_int(1, 8) + field_bytes(8, field_bytes(1, "") + field_int(2, opset)) +
                        field_bytes(7, graph + field_bytes(2, "g"));
        return parse_onnx_buffer(m.data(), m.size());
    }
    static std::string value_info(const std::string& n, onnx_type t, const std::vector<std::int64_t>& dims) {
        std::string shape;
        // A negative dim is symbolic: dim_param "d1", "d2", ...
        for (auto d : dims)
            shape += field_bytes(1, d < 0 ? field_bytes(2, "d" + std::to_string(-d)) : field_int(1, d));
        return field_bytes(1, n) + field_bytes(2, field_bytes(1, field_int(1, t) + field_bytes(2, shape)));
    }
};

argument floats(std::vector<std::size_t> lens, const std::vector<float>& v) {
    return literal(shape(type::float32, std::move(lens)), v).get_argument();
}

std::vector<std::string> op_names(const program& p) {
    std::vector<std::string> names;
    for (auto& ins : *p.get_main_module())
        if (!ins.is_param() && !ins.is_literal() && !ins.is_return()) names.push_back(ins.name());
    return names;
}

std::vector<argument> run(program& p, const param_map& params) {
    p.compile(*get_target("ref"));
    return p.eval(params);
}

}  // namespace

TEST(onnx_pointwise_parse, variadic_ops_fold_into_binary_ops) {
    model m;
    m.input("a", f32, {2, 3});
    m.input("b", f32, {3});
    m.input("c", f32, {2, 1});
    m.node("Mean", {"a", "b", "c"}, {"y"});
    m.output("y", f32);
    auto p = m.parse();
    EXPECT_EQ(op_names(p), (std::vector<std::string>{"add", "add", "div"}));
    std::vector<float> a{1, 2, 3, 4, 5, 6}, b{0.5f, -1, 2}, c{3, -6};
    auto y = run(p, {{"a", floats({2, 3}, a)}, {"b", floats({3}, b)}, {"c", floats({2, 1}, c)}})[0];
    auto v = y.to_vector<float>();
    for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t j = 0; j < 3; ++j) EXPECT_EQ(v[i * 3 + j], (a[i * 3 + j] + b[j] + c[i]) / 3.0f);
}

TEST(onnx_pointwise_parse, clip_bounds_from_attributes_inputs_or_nothing) {
    model old;
    old.opset = 6;
    old.input("x", f32, {4});
    old.node("Clip", {"x"}, {"y"}, {attr::f("min", -1.0f)});
    old.output("y", f32);
    auto p6 = old.parse();
    auto inf = std::numeric_limits<float>::infinity();
    EXPECT_EQ(run(p6, {{"x", floats({4}, {-5, 0.5f, 9, inf})}})[0].to_vector<float>(),
              (std::vector<float>{-1, 0.5f, 9, inf}));
    model m;
    m.input("x", f32, {4});
    m.input("hi", f32, {});
    m.node("Clip", {"x", "", "hi"}, {"y"});
    m.output("y", f32);
    auto p = m.parse();
    EXPECT_EQ(run(p, {{"x", floats({4}, {-5, 0.5f, 9, -inf})}, {"hi", floats({}, {2})}})[0].to_vector<float>(),
              (std::vector<float>{-5, 0.5f, 2, -inf}));
}

TEST(onnx_pointwise_parse, cast_1_names_the_type_with_a_string) {
    model m;
    m.opset = 1;
    m.input("x", f32, {3});
    m.node("Cast", {"x"}, {"y"}, {attr::s("to", "INT32")});
    m.output("y", i32);
    auto p = m.parse();
    EXPECT_EQ(run(p, {{"x", floats({3}, {1.9f, -2.9f, 7})}})[0].to_vector<int>(), (std::vector<int>{1, -2, 7}));
    model bad;
    bad.opset = 1;
    bad.input("x", f32, {3});
    bad.node("Cast", {"x"}, {"y"}, {attr::s("to", "NOT_A_TYPE")});
    bad.output("y", i32);
    EXPECT_THROW(bad.parse(), error);
}

TEST(onnx_pointwise_parse, legacy_broadcast_with_axis_aligns_a_constant) {
    model m;
    m.opset = 6;
    m.input("a", f32, {2, 3, 2});
    m.float_initializer("b", {3}, {10, 20, 30});
    m.node("Add", {"a", "b"}, {"y"}, {attr::i("broadcast", 1), attr::i("axis", 1)});
    m.output("y", f32);
    auto p = m.parse();
    std::vector<float> a{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    auto v = run(p, {{"a", floats({2, 3, 2}, a)}})[0].to_vector<float>();
    for (std::size_t i = 0; i < 12; ++i) EXPECT_EQ(v[i], a[i] + 10.0f * static_cast<float>((i / 2) % 3 + 1));
}

// PRelu before opset 7 takes a [C] slope per channel, also where every dim of x is
// symbolic (PyTorch's PReLU exported with dynamic axes; it once failed to broadcast).
TEST(onnx_pointwise_parse, legacy_prelu_slope_per_channel_of_a_symbolic_x) {
    model m;
    m.opset = 6;
    m.input("x", f32, {-1, -2, -3});
    m.float_initializer("slope", {3}, {0.5f, -2.0f, 0.25f});
    m.node("PRelu", {"x", "slope"}, {"y"});
    m.output("y", f32);
    auto p = m.parse();
    std::vector<float> x{-1, 2, -4, -8, 1, -2};  // [2, 3, 1]
    auto y = run(p, {{"x", floats({2, 3, 1}, x)}})[0];
    EXPECT_EQ(y.get_shape().lens(), (std::vector<std::size_t>{2, 3, 1}));
    EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{-0.5f, 2, -1, -4, 1, -0.5f}));
}

// Softmax before opset 13 normalizes over every dim from `axis` on: with symbolic dims
// (PyTorch's opset 11 and 12 exports with dynamic axes) as flatten, softmax, and a reshape
// back to x's run-time shape (it was refused: "needs a static input shape").
TEST(onnx_pointwise_parse, legacy_softmax_over_several_symbolic_dims) {
    model m;
    m.opset = 11;
    m.input("x", f32, {-1, -2, -3});
    m.node("Softmax", {"x"}, {"y"}, {attr::i("axis", 1)});
    m.output("y", f32);
    auto p = m.parse();
    std::vector<float> x{0.5f, -1, 2, 0, 1.5f, -3, 1, 1, 0.25f, -2, 3, 0};  // [2, 2, 3]
    auto y = run(p, {{"x", floats({2, 2, 3}, x)}})[0];
    ASSERT_EQ(y.get_shape().lens(), (std::vector<std::size_t>{2, 2, 3}));
    auto v = y.to_vector<float>();
    for (std::size_t row = 0; row < 2; ++row) {
        double sum = 0;
        for (std::size_t j = 0; j < 6; ++j) sum += std::exp(static_cast<double>(x[row * 6 + j]));
        for (std::size_t j = 0; j < 6; ++j)
            EXPECT_NEAR(v[row * 6 + j], std::exp(static_cast<double>(x[row * 6 + j])) / sum, 1e-6) << row << " " << j;
    }
}

TEST(onnx_pointwise_parse, dropout_is_the_input_at_inference) {
    model m;
    m.opset = 13;
    m.input("x", f32, {2, 2});
    m.node("Dropout", {"x"}, {"y"});
    m.output("y", f32);
    EXPECT_TRUE(op_names(m.parse()).empty());
    // Dropout 7-9: the mask has x's type.
    model old;
    old.opset = 7;
    old.input("x", f32, {2, 2});
    old.node("Dropout", {"x"}, {"y", "mask"}, {attr::f("ratio", 0.3f)});
    old.output("y", f32);
    old.output("mask", f32);
    auto p = old.parse();
    auto r = run(p, {{"x", floats({2, 2}, {1, 2, 3, 4})}});
    EXPECT_EQ(r[0].to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
    EXPECT_EQ(r[1].get_shape().get_type(), type::float32);
    EXPECT_EQ(r[1].to_vector<float>(), (std::vector<float>{1, 1, 1, 1}));
}

TEST(onnx_pointwise_parse, dropout_in_training_mode_with_ratio_zero_is_the_input) {
    // PyTorch exports Swin-T's attention dropout as Dropout(x, 0, true): every element
    // kept, none scaled, so neither a random draw nor a pass over x. A ratio other than 0
    // still draws.
    auto make = [](float ratio) {
        model m;
        m.opset = 13;
        m.input("x", f32, {2, 3});
        m.float_initializer("ratio", {}, {ratio});
        m.bool_scalar_initializer("training", true);
        m.node("Dropout", {"x", "ratio", "training"}, {"y", "mask"});
        m.output("y", f32);
        return m.parse();
    };
    // y is x itself; the mask alone (unused here) still comes from a dropout op.
    auto has_dropout = [](const program& p) {
        auto names = op_names(p);
        return std::any_of(names.begin(), names.end(), [](const std::string& n) { return n.find("dropout") != n.npos; });
    };
    auto p = make(0.0f);
    std::vector<float> x{1, -2, 3, 4, 5, 6};
    EXPECT_EQ(run(p, {{"x", floats({2, 3}, x)}})[0].to_vector<float>(), x);
    EXPECT_FALSE(has_dropout(p));
    auto q = make(0.25f);
    run(q, {{"x", floats({2, 3}, x)}});
    EXPECT_TRUE(has_dropout(q));
}

TEST(onnx_pointwise_parse, bad_attributes_are_parse_errors) {
    model m;
    m.input("x", f32, {2});
    m.node("Gelu", {"x"}, {"y"}, {attr::s("approximate", "cubic")});
    m.output("y", f32);
    try {
        m.parse();
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::parse);
        EXPECT_NE(std::string(e.what()).find("cubic"), std::string::npos) << e.what();
    }
    model q;
    q.input("x", f32, {2});
    q.input("s", f32, {});
    q.input("z", u8, {});
    q.node("QuantizeLinear", {"x", "s", "z"}, {"y"}, {attr::i("output_dtype", i8)});
    q.output("y", u8);
    EXPECT_THROW(q.parse(), error);
}
