// cpu::dyn_resize (a generic program's Resize) against the reference kernel: after a
// convolution (a channels-last input) and on a parameter (row-major), in every mode, up
// and down, with the sizes or the scales given when it runs, at several sizes; a resize of
// the channels (the reference kernel's work) still right.
#include "cpu_test_util.hpp"
#include "ops_run.hpp"

#include "ops/nn_conv.hpp"

#include <kiln/program.hpp>

using namespace kiln;
using namespace kiln::cpu_test;
using kiln::test::compile_generic_pair;
using kiln::test::ops_run;

namespace {

const dynamic_dimension batch{1, 3, {}, "batch"}, height{4, 40, {}, "h"}, width{4, 40, {}, "w"};
dynamic_dimension fixed(std::size_t v) { return {v, v, {}, {}}; }

struct resize_case {
    std::string mode, transform, nearest = "round_prefer_floor";
    bool after_conv = true;  // a channels-last input; else the parameter itself
    bool sizes = true;       // sizes given at run time; else scales
};

program resize_program(const resize_case& c) {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape::make_dynamic(type::float32, {batch, fixed(5), height, width}));
    if (c.after_conv) {
        op::convolution conv;
        conv.padding = {1, 1, 1, 1};
        x = m->add_instruction(conv, {x, m->add_literal(random_literal({19, 5, 3, 3}, 0.3f))});
    }
    auto how = m->add_parameter("how", shape::make_dynamic(c.sizes ? type::int64 : type::float32, {fixed(4)}));
    value::object options{{"mode", value(c.mode)},
                          {"coordinate_transformation_mode", value(c.transform)},
                          {"nearest_mode", value(c.nearest)}};
    auto y = m->add_instruction(make_op("resize_dynamic", {{"options", value(options)}, {"use_sizes", value(c.sizes)}}),
                                {x, how});
    m->add_return({m->add_instruction(make_op("relu"), {y})});
    return p;
}

argument how_arg(bool sizes, std::vector<double> v) {
    if (sizes) return literal(shape(type::int64, {4}), std::vector<std::int64_t>(v.begin(), v.end())).get_argument();
    return literal(shape(type::float32, {4}), std::vector<float>(v.begin(), v.end())).get_argument();
}

}  // namespace

TEST(cpu_dyn_resize, a_generic_resize_matches_ref_in_every_mode) {
    std::vector<resize_case> cases{{"linear", "pytorch_half_pixel"}, {"linear", "half_pixel", "round_prefer_floor", false},
                                   {"linear", "align_corners"},     {"nearest", "asymmetric", "floor"},
                                   {"nearest", "half_pixel", "round_prefer_ceil", false},
                                   {"cubic", "half_pixel"},          {"linear", "asymmetric", "floor", true, false}};
    for (const auto& c : cases) {
        SCOPED_TRACE(c.mode + " " + c.transform + (c.after_conv ? ", channels-last input" : ", row-major input") +
                     (c.sizes ? ", sizes" : ", scales"));
        program p = resize_program(c), r = p;
        ASSERT_TRUE(compile_generic_pair(p, r));
        for (auto [n, h, w, up] : std::vector<std::tuple<std::size_t, std::size_t, std::size_t, bool>>{
                 {1, 4, 4, true}, {2, 9, 13, true}, {3, 40, 17, false}, {1, 8, 8, false}}) {
            SCOPED_TRACE("x [" + std::to_string(n) + ", 5, " + std::to_string(h) + ", " + std::to_string(w) + "]" +
                         (up ? " up" : " down"));
            const std::size_t ch = c.after_conv ? 19 : 5;
            std::vector<double> how;
            if (c.sizes) how = {double(n), double(ch), up ? double(4 * h + 3) : double(h / 2), up ? double(2 * w) : double(w / 3 + 1)};
            else how = {1, 1, up ? 2.0 : 0.5, up ? 3.0 : 0.5};
            const param_map in{{"x", random_literal({n, 5, h, w}).get_argument()}, {"how", how_arg(c.sizes, how)}};
            auto got = p.eval(in);
            auto want = r.eval(in);
            ASSERT_EQ(got.size(), 1u);
            EXPECT_EQ(got[0].get_shape().lens(), want[0].get_shape().lens());
            expect_close(got[0], want[0], 1e-4, 1e-5);
            EXPECT_EQ(ops_run(p, in)["cpu::dyn_resize(resize_dynamic)"], 1u);
        }
    }
}

TEST(cpu_dyn_resize, a_resize_of_the_channels_runs_the_reference_kernel_inside) {
    program p = resize_program({"linear", "half_pixel", "round_prefer_floor", false}), r = p;
    ASSERT_TRUE(compile_generic_pair(p, r));
    const param_map in{{"x", random_literal({2, 5, 6, 7}).get_argument()}, {"how", how_arg(true, {2, 9, 6, 14})}};
    auto got = p.eval(in);
    auto want = r.eval(in);
    EXPECT_EQ(got[0].get_shape().lens(), (std::vector<std::size_t>{2, 9, 6, 14}));
    expect_close(got[0], want[0], 1e-4, 1e-5);
}
