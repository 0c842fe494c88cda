// .kiln round trips of the real models (../shared/models). Operators the frontend
// does not implement yet are parsed as placeholders, so this checks the structure and
// the weights of real graphs: text form, every literal bit for bit, compiled state.
// Once the ops land, add an eval comparison here (expect_same_outputs).
#include "../unit/serialize_helpers.hpp"
#include "shared_models.hpp"

#include <kiln/onnx.hpp>
#include <kiln/program.hpp>
#include <kiln/serialize.hpp>

#include <gtest/gtest.h>

namespace kiln::test {
namespace {

void expect_same_literals(const program& a, const program& b) {
    auto ma = a.get_modules();
    auto mb = b.get_modules();
    ASSERT_EQ(ma.size(), mb.size());
    std::size_t compared = 0;
    for (std::size_t i = 0; i < ma.size(); ++i) {
        ASSERT_EQ(ma[i]->size(), mb[i]->size());
        auto ib = mb[i]->begin();
        for (auto ia = ma[i]->begin(); ia != ma[i]->end(); ++ia, ++ib) {
            if (!ia->is_literal()) continue;
            ASSERT_TRUE(ib->is_literal());
            ASSERT_EQ(ia->get_literal(), ib->get_literal()) << ma[i]->name() << " " << ma[i]->instruction_name(&*ia);
            ++compared;
        }
    }
    EXPECT_GT(compared, 0u);
}

TEST(serialize_models, round_trip) {
    const auto files = shared_model_files();
    if (files.empty()) GTEST_SKIP() << "no shared models";
    std::size_t n = 0;
    for (const auto& onnx : files) {
        SCOPED_TRACE(onnx.parent_path().filename().string());
        onnx_options options;
        options.skip_unknown_operators = true;
        program p = parse_onnx(onnx.string(), options);
        auto q = round_trip(p);
        expect_same_literals(p, q);
        p.compile(*get_target("ref"));
        auto r = round_trip(p);
        expect_same_literals(p, r);
        ++n;
    }
    EXPECT_GT(n, 0u);
}

}  // namespace
}  // namespace kiln::test
