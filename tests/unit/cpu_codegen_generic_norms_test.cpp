// A generic program's batch and layer normalization on the cpu target
// (codegen/spell_out_generic_norms.hpp): spelled out into generated kernels over run-time
// sizes, against the reference target's double-precision kernels on random non-zero data
// at several sizes; the reference kernels never run for them. Static programs keep the ops.
#include "cpu_codegen_util.hpp"
#include "targets/cpu/codegen/spell_out_generic_norms.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

const dynamic_dimension batch{1, 4, {}, "batch"}, length{1, 300, {}, "length"};
dynamic_dimension fixed(std::size_t v) { return {v, v, {}, {}}; }

instruction_ref constant(module& m, std::vector<std::size_t> lens, unsigned seed, float lo, float hi) {
    return m.add_literal(literal(random_arg(shape(type::float32, std::move(lens)), seed, lo, hi)));
}

// DenseNet's shape: a batch norm after a concatenation (no convolution takes it), then a relu.
program batch_norm_program(std::size_t rank) {
    program p;
    auto* m = p.get_main_module();
    std::vector<dynamic_dimension> dims{batch, fixed(6)};
    for (std::size_t i = 2; i < rank; ++i) dims.push_back(i == 2 ? length : fixed(5));
    auto a = m->add_parameter("a", shape::make_dynamic(type::float32, dims));
    dims[1] = fixed(4);
    auto b = m->add_parameter("b", shape::make_dynamic(type::float32, dims));
    auto x = m->add_instruction(make_op("concat", {{"axis", 1}}), {a, b});
    auto y = m->add_instruction(make_op("batch_norm_inference", {{"epsilon", 1e-3f}}),
                                {x, constant(*m, {10}, 1, 0.5f, 1.5f), constant(*m, {10}, 2, -1.0f, 1.0f),
                                 constant(*m, {10}, 3, -2.0f, 2.0f), constant(*m, {10}, 4, 0.5f, 3.0f)});
    m->add_return({m->add_instruction(make_op("relu"), {y})});
    return p;
}

// A transformer's layer norm over the last `normalized` axes of [batch, length, 3, 16],
// with a random scale and bias (or ones and zeros, or no bias).
program layer_norm_program(std::int64_t axis, const std::string& affine) {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape::make_dynamic(type::float32, {batch, length, fixed(3), fixed(16)}));
    std::vector<std::size_t> lens{batch.min, length.min, 3, 16};
    const std::size_t first = static_cast<std::size_t>(axis < 0 ? axis + 4 : axis);
    std::vector<std::size_t> norm(lens.begin() + static_cast<std::ptrdiff_t>(first), lens.end());
    std::vector<instruction_ref> args{x};
    const shape ns(type::float32, norm);
    if (affine == "random") {
        args.push_back(constant(*m, norm, 5, 0.5f, 1.5f));
        args.push_back(constant(*m, norm, 6, -1.0f, 1.0f));
    } else if (affine == "identity") {
        args.push_back(m->add_literal(literal(ns, std::vector<float>(ns.elements(), 1.0f))));
        args.push_back(m->add_literal(literal(ns, std::vector<float>(ns.elements(), 0.0f))));
    } else {  // scale only
        args.push_back(constant(*m, norm, 7, 0.5f, 1.5f));
    }
    auto y = m->add_instruction(make_op("layer_norm", {{"axis", axis}, {"epsilon", 1e-5f}}), args);
    m->add_return({y});
    return p;
}

void expect_generic_matches_ref(program p, const std::string& op, const std::vector<std::vector<std::size_t>>& sizes,
                                const std::vector<std::string>& names) {
    program r = p;
    ASSERT_TRUE(compile_generic_pair(p, r));
    unsigned seed = 20;
    for (const auto& lens : sizes) {
        param_map in;
        for (const auto& n : names) {
            auto l = lens;
            if (n == "b") l[1] = 4;  // the concatenation's second part
            // Values away from zero (3 to 9), so that subtracting the mean matters.
            in.emplace(n, random_arg(shape(type::float32, l), seed++, 3.0f, 9.0f));
        }
        SCOPED_TRACE("first input " + in.begin()->second.get_shape().to_string());
        auto got = p.eval(in);
        auto want = r.eval(in);
        ASSERT_EQ(got.size(), 1u);
        EXPECT_EQ(got[0].get_shape().lens(), want[0].get_shape().lens());
        expect_close(got[0], want[0], 2e-4, 1e-2);  // outputs of order 1: near 0, 2e-6 absolute
        EXPECT_EQ(ops_run(p, in)[op], 0u) << op << " ran on the reference kernel";
    }
}

}  // namespace

TEST(cpu_codegen_generic_norms, a_generic_batch_norm_matches_ref_at_every_size) {
    scratch_cache cache;
    expect_generic_matches_ref(batch_norm_program(4), "batch_norm_inference",
                               {{1, 6, 1, 5}, {2, 6, 9, 5}, {3, 6, 300, 5}}, {"a", "b"});
    expect_generic_matches_ref(batch_norm_program(3), "batch_norm_inference", {{1, 6, 7}, {4, 6, 33}}, {"a", "b"});
}

TEST(cpu_codegen_generic_norms, a_generic_layer_norm_matches_ref_at_every_size) {
    scratch_cache cache;
    for (std::int64_t axis : {-1, 2})
        for (const std::string affine : {"random", "identity", "scale"}) {
            SCOPED_TRACE("axis " + std::to_string(axis) + ", " + affine);
            expect_generic_matches_ref(layer_norm_program(axis, affine), "layer_norm",
                                       {{1, 1, 3, 16}, {2, 9, 3, 16}, {3, 300, 3, 16}}, {"x"});
        }
}

TEST(cpu_codegen_generic_norms, static_programs_keep_their_norms) {
    // The pass leaves fixed shapes to the static kernels (oneDNN's, the folded affine).
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(type::float32, {2, 8, 16}));
    m->add_return({m->add_instruction(make_op("layer_norm", {{"axis", -1}, {"epsilon", 1e-5f}}),
                                      {x, constant(*m, {16}, 8, 0.5f, 1.5f), constant(*m, {16}, 9, -1.0f, 1.0f)})});
    auto before = count_ops(*p.get_main_module(), "reduce_mean");
    cpu::codegen::spell_out_generic_norms{}.apply(*p.get_main_module());
    EXPECT_EQ(count_ops(*p.get_main_module(), "layer_norm"), 1u);
    EXPECT_EQ(count_ops(*p.get_main_module(), "reduce_mean"), before);
}
