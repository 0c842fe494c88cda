// InstanceNormalization on the cpu target (codegen/spell_out_instance_norm.hpp): spelled out
// into a generated reduction kernel, in static and generic programs, against the reference
// target's double-precision kernel on random non-zero data; and the reference kernel never
// runs for it.
#include "cpu_codegen_util.hpp"

#include <map>

using namespace kiln;
using namespace kiln::test;

namespace {

// y = instance_norm(x, scale, bias), then a GELU (PyTorch's GroupNorm as wav2vec2 uses it:
// the norm, its affine, the activation).
program norm_program(const shape& x_shape, std::size_t channels, bool affine) {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", x_shape);
    const shape cs(type::float32, {channels});
    auto scale = affine ? random_arg(cs, 11, 0.5f, 1.5f).to_vector<float>() : std::vector<float>(channels, 1.0f);
    auto bias = affine ? random_arg(cs, 12).to_vector<float>() : std::vector<float>(channels, 0.0f);
    auto y = m->add_instruction(make_op("instance_norm", {{"epsilon", 1e-5f}}),
                                {x, m->add_literal(literal(cs, scale)), m->add_literal(literal(cs, bias))});
    m->add_return({gelu(*m, y)});
    return p;
}

void expect_matches_ref(program& p, program& r, const std::vector<std::size_t>& lens, unsigned seed) {
    SCOPED_TRACE("x " + shape(type::float32, lens).to_string());
    // Values away from zero (3 to 9), so that subtracting the mean matters.
    auto x = random_arg(shape(type::float32, lens), seed, 3.0f, 9.0f);
    const param_map in{{"x", x}};
    auto got = p.eval(in);
    auto want = r.eval(in);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].get_shape().lens(), lens);
    expect_close(got[0], want[0], 2e-4, 1e-3);
    EXPECT_EQ(ops_run(p, in)["instance_norm"], 0u) << "instance_norm ran on the reference kernel";
}

}  // namespace

TEST(cpu_codegen_instance_norm, static_programs_match_ref) {
    scratch_cache cache;
    for (bool affine : {true, false})
        for (auto lens : std::vector<std::vector<std::size_t>>{{2, 6, 37}, {1, 512, 1001}, {1, 1, 12000}, {2, 4, 5, 7}}) {
            auto p = norm_program(shape(type::float32, lens), lens[1], affine), r = p;
            p.compile(*get_target("cpu"));
            r.compile(*get_target("ref"));
            EXPECT_EQ(count_ops(*p.get_main_module(), "instance_norm"), 0u);
            expect_matches_ref(p, r, lens, static_cast<unsigned>(lens[1] + lens[2] + affine));
        }
}

TEST(cpu_codegen_instance_norm, a_generic_program_matches_ref_at_every_size) {
    scratch_cache cache;
    const dynamic_dimension batch{1, 4, {}, "batch"}, samples{1, 20000, {}, "samples"};
    auto p = norm_program(shape::make_dynamic(type::float32, {batch, {8, 8, {}, {}}, samples}), 8, true), r = p;
    compile_options o;
    o.specialize_after = 0;  // every call on the generic program
    p.compile(*get_target("cpu"), o);
    r.compile(*get_target("ref"), o);
    ASSERT_TRUE(p.get_specialization_stats().generic) << p.get_specialization_stats().generic_unavailable;
    for (auto [b, s] : std::vector<std::pair<std::size_t, std::size_t>>{{1, 1}, {2, 9}, {3, 640}, {1, 19999}})
        expect_matches_ref(p, r, {b, 8, s}, static_cast<unsigned>(b * 7 + s));
}
