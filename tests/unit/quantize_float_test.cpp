// quantize_fp16 / quantize_bf16: which instructions become reduced, that inputs and outputs
// stay float32, and the results against a double-precision reference on random data.
#include <kiln/module_text.hpp>
#include <kiln/program.hpp>
#include <kiln/quantization.hpp>
#include <kiln/serialize.hpp>
#include <kiln/target.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

using namespace kiln;

namespace {

constexpr int rows = 4, depth = 32, cols = 8;

std::vector<float> random_values(std::mt19937& rng, std::size_t n) {
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

struct fixture {
    std::vector<float> x, w, b;
    explicit fixture(unsigned seed) {
        std::mt19937 rng(seed);
        x = random_values(rng, rows * depth);
        w = random_values(rng, depth * cols);
        b = random_values(rng, cols);
    }
    // softmax(relu(x w + b)) by rows, in double.
    std::vector<double> reference() const {
        std::vector<double> out(rows * cols);
        for (int r = 0; r < rows; ++r) {
            double sum = 0;
            for (int c = 0; c < cols; ++c) {
                double acc = b[c];
                for (int k = 0; k < depth; ++k) acc += double(x[r * depth + k]) * w[k * cols + c];
                out[r * cols + c] = std::exp(std::max(acc, 0.0));
                sum += out[r * cols + c];
            }
            for (int c = 0; c < cols; ++c) out[r * cols + c] /= sum;
        }
        return out;
    }
    program make() const {
        std::map<std::string, literal> named = {
            {"w", literal(shape(type::float32, {depth, cols}), w)},
            {"b", literal(shape(type::float32, {1, cols}), b)}};
        return parse_program(R"(
            module main
              x = @param -> float32[4, 32]
              w = @literal{float32[32, 8] {...}}
              b = @literal{float32[1, 8] {...}}
              y = matmul(x, w)
              z = add(y, b)
              r = relu(z)
              s = softmax{axis=1}(r)
              @return(s)
        )", {literals_by_name(named)});
    }
    std::vector<float> run(program p) const {
        p.compile(*get_target("ref"));
        auto out = p.eval({{"x", argument::borrow(shape(type::float32, {rows, depth}), const_cast<float*>(x.data()))}});
        return out.at(0).to_vector<float>();
    }
};

double rel_l2(const std::vector<float>& got, const std::vector<double>& want) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        num += (got[i] - want[i]) * (got[i] - want[i]);
        den += want[i] * want[i];
    }
    return std::sqrt(num / den);
}

// The element type of the first instruction with op `name`.
type type_of_op(const program& p, const std::string& name) {
    for (const auto& ins : *p.get_main_module())
        if (ins.name() == name) return ins.get_shape().get_type();
    ADD_FAILURE() << "no " << name;
    return type::bool_;
}

}  // namespace

TEST(quantize_float, fp16_computes_matmul_chain_reduced_softmax_float32) {
    fixture f(1);
    auto p = f.make();
    quantize_fp16(p);
    EXPECT_EQ(type_of_op(p, "matmul"), type::float16);
    EXPECT_EQ(type_of_op(p, "add"), type::float16);   // follows the matmul
    EXPECT_EQ(type_of_op(p, "relu"), type::float16);
    EXPECT_EQ(type_of_op(p, "softmax"), type::float32);
    EXPECT_EQ(p.get_parameter_shapes().at("x").get_type(), type::float32);
    EXPECT_EQ(p.get_output_shapes().at(0).get_type(), type::float32);
    EXPECT_EQ(quantized_type(p), type::float16);
    // Weights converted here, not by a convert at run time: the one convert reads x, one reads relu.
    int converts = 0;
    for (const auto& ins : *p.get_main_module()) {
        if (ins.name() != "convert") continue;
        ++converts;
        EXPECT_FALSE(ins.inputs().at(0)->is_literal());
    }
    EXPECT_EQ(converts, 2);

    const auto want = f.reference();
    const double err16 = rel_l2(f.run(p), want), err32 = rel_l2(f.run(f.make()), want);
    EXPECT_LT(err16, 2e-3);
    EXPECT_GT(err16, 10 * err32);  // it did compute in float16
}

TEST(quantize_float, bf16_within_its_precision) {
    fixture f(2);
    auto p = f.make();
    quantize_bf16(p);
    EXPECT_EQ(type_of_op(p, "matmul"), type::bfloat16);
    EXPECT_LT(rel_l2(f.run(p), f.reference()), 1.5e-2);
}

TEST(quantize_float, named_ops_only_and_unknown_names_refused) {
    fixture f(3);
    auto p = f.make();
    quantize_fp16(p, {"dot"});
    EXPECT_EQ(type_of_op(p, "matmul"), type::float16);
    EXPECT_EQ(type_of_op(p, "add"), type::float32);
    EXPECT_LT(rel_l2(f.run(p), f.reference()), 2e-3);
    auto q = f.make();
    EXPECT_THROW(quantize_fp16(q, {"convolutoin"}), error);
}

TEST(quantize_float, saves_and_loads_compiled) {
    fixture f(4);
    auto p = f.make();
    quantize_bf16(p);
    p.compile(*get_target("ref"));
    const auto bytes = save_buffer(p);
    auto q = load_buffer(bytes.data(), bytes.size());
    EXPECT_EQ(quantized_type(q), type::bfloat16);
    auto in = argument::borrow(shape(type::float32, {rows, depth}), const_cast<float*>(f.x.data()));
    EXPECT_EQ(q.eval({{"x", in}})[0].to_vector<float>(), p.eval({{"x", in}})[0].to_vector<float>());
}
