// program::eval_into on the real models (cpu): every float model's outputs are computed straight
// into the caller's aligned buffers (no copy) and equal eval's bit for bit.
#include "shared_models.hpp"

#include <kiln/onnx.hpp>
#include <kiln/program.hpp>
#include <kiln/target.hpp>

#include <gtest/gtest.h>

#include <algorithm>

using namespace kiln;

TEST(models_eval_into, cpu_outputs_land_in_the_callers_buffers) {
    auto files = test::shared_model_files();
    if (files.empty()) GTEST_SKIP() << "../shared/models is not there";
    for (const auto& file : files) {
        const auto name = file.parent_path().filename().string();
        if (name != "resnet50" && name != "mobilenet_v2" && name != "bert_small" && name != "lstm_seq") continue;
        auto p = parse_onnx(file.string());
        p.compile(*get_target("cpu"));
        param_map in;
        for (const auto& [input, s] : p.get_parameter_shapes()) {
            std::vector<std::size_t> lens;  // a dynamic dim at its first optimal, else its min (at least 1)
            for (const auto& d : s.dyn_dims())
                lens.push_back(d.has_optimal() ? *d.optimals.begin() : std::max<std::size_t>(d.min, 1));
            shape fixed(s.get_type(), lens);
            argument a(fixed.as_standard());
            // Non-zero data; integer inputs (token ids) stay 0, a valid id.
            if (fixed.get_type() == type::float32)
                for (std::size_t i = 0; i < fixed.elements(); ++i)
                    a.data_as<float>()[i] = static_cast<float>((i * 37) % 101) / 101.f - 0.5f;
            in[input] = a;
        }
        auto want = p.eval(in);
        std::vector<argument> outs;
        for (auto& w : want) outs.emplace_back(w.get_shape().as_standard());
        const auto in_place = p.eval_into(in, outs);
        EXPECT_EQ(in_place, outs.size()) << name << ": outputs copied instead of computed in place";
        for (std::size_t i = 0; i < outs.size(); ++i) EXPECT_EQ(outs[i], want[i]) << name << " output " << i;
    }
}
