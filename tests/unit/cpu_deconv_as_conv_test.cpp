// cpu::deconvolution_as_convolution: a transposed convolution whose kernel tiles its output
// runs as a 1x1 convolution and a depth_to_space, with the results of the ref target's
// transposed convolution.
#include "cpu_test_util.hpp"

namespace kiln::cpu_test {
namespace {

value deconv_attrs(std::int64_t stride, std::vector<std::int64_t> pads = {0, 0, 0, 0}, std::int64_t group = 1) {
    value v = value::make_object();
    v["stride"] = value(value::array{value(stride), value(stride)});
    v["padding"] = value(value::array(pads.begin(), pads.end()));
    v["group"] = value(group);
    return v;
}

bool mentions(const program& p, const std::string& what) { return text(p).find(what) != std::string::npos; }

TEST(cpu_deconv_as_conv, a_tiling_kernel_becomes_a_1x1_convolution_and_depth_to_space) {
    KILN_CPU_NEEDS_OPS("deconvolution", "depth_to_space");
    // 2x2 stride 2 with a bias and a relu (Mask R-CNN's mask head), 3x3 stride 3 without.
    for (std::size_t k : {2, 3}) {
        builder b;
        auto x = b.param("x", {2, 8, 5, 6});
        auto w = b.constant({8, 6, k, k});
        std::vector<instruction_ref> args{x, w};
        if (k == 2) args.push_back(b.constant({6}));
        auto d = b.op("deconvolution", deconv_attrs(static_cast<std::int64_t>(k)), args);
        b.ret({k == 2 ? b.op("relu", {d}) : d});
        auto r = run_both(b, 1e-4, 1e-5);
        EXPECT_FALSE(mentions(r.cpu, "deconvolution")) << text(r.cpu);
        EXPECT_TRUE(mentions(r.cpu, "depth_to_space")) << text(r.cpu);
        EXPECT_EQ(r.cpu_out[0].get_shape().lens(), (std::vector<std::size_t>{2, 6, 5 * k, 6 * k}));
    }
}

TEST(cpu_deconv_as_conv, a_relu_read_elsewhere_stays_after_it) {
    KILN_CPU_NEEDS_OPS("deconvolution", "depth_to_space");
    builder b;
    auto x = b.param("x", {1, 4, 3, 3});
    auto d = b.op("deconvolution", deconv_attrs(2), {x, b.constant({4, 5, 2, 2}), b.constant({5})});
    b.ret({b.op("relu", {d}), d});  // the deconvolution is returned too: the relu cannot move
    run_both(b, 1e-4, 1e-5);
}

TEST(cpu_deconv_as_conv, kernels_that_overlap_or_pad_stay_transposed_convolutions) {
    KILN_CPU_NEEDS_OPS("deconvolution", "depth_to_space");
    struct other {
        std::size_t kernel;
        value attrs;
        std::size_t w_rows, w_cols;
    };
    for (const auto& c : std::vector<other>{{3, deconv_attrs(2), 4, 6},             // overlapping
                                            {2, deconv_attrs(2, {1, 1, 1, 1}), 4, 6},  // padded
                                            {2, deconv_attrs(2, {0, 0, 0, 0}, 2), 4, 3}}) {  // grouped
        builder b;
        auto x = b.param("x", {1, 4, 5, 5});
        b.ret({b.op("deconvolution", c.attrs, {x, b.constant({c.w_rows, c.w_cols, c.kernel, c.kernel})})});
        auto r = run_both(b, 1e-4, 1e-5);
        EXPECT_FALSE(mentions(r.cpu, "depth_to_space")) << text(r.cpu);
    }
}

TEST(cpu_deconv_as_conv, a_run_time_batch) {
    KILN_CPU_NEEDS_OPS("deconvolution", "depth_to_space");
    builder b;
    const dynamic_dimension rois{0, 64, {}};
    auto x = b.m->add_parameter("x", shape::make_dynamic(type::float32, {rois, {8, 8, {}}, {7, 7, {}}, {7, 7, {}}}));
    auto d = b.op("deconvolution", deconv_attrs(2), {x, b.constant({8, 4, 2, 2}), b.constant({4})});
    b.ret({b.op("relu", {d})});
    program ref = b.p, cpu = b.p;
    compile_options generic_only;
    generic_only.specialize_after = 0;  // every batch on the generic program
    ref.compile(*get_target("ref"));
    cpu.compile(*get_target("cpu"), generic_only);
    for (std::size_t n : {3, 1, 0, 17}) {
        param_map in{{"x", random_literal({n, 8, 7, 7}).get_argument()}};
        std::vector<instruction_profile> ran;
        auto want = ref.eval(in), got = cpu.eval(in, ran);
        ASSERT_EQ(got.size(), 1u);
        expect_close(got[0], want[0], 1e-4, 1e-5, "batch " + std::to_string(n));
        std::string ops;
        for (const auto& p : ran) ops += p.op_text + "\n";
        EXPECT_EQ(ops.find("deconvolution"), std::string::npos) << ops;
        EXPECT_NE(ops.find("depth_to_space"), std::string::npos) << ops;
    }
}

}  // namespace
}  // namespace kiln::cpu_test
