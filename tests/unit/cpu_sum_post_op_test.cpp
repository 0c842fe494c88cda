// Residual adds as oneDNN's in-place sum post-op (sum_post_op.hpp): ResNet-like chains of
// 1x1 blocks match the ref target with the add fused as a sum into the residual's buffer
// (each block's result then the next block's residual); where the residual is read after
// the convolution (returned, or by a later op) the add stays a binary post-op; a parameter
// is never written; KILN_CPU_SUM_POST_OP=0 keeps binary adds everywhere.
#include "cpu_test_util.hpp"

#include <string>

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

value one_by_one() {
    return value::object{{"padding", value(value::array{0, 0, 0, 0})}, {"group", value(1)}};
}

instruction_ref conv1x1(builder& b, instruction_ref x, std::size_t cin, std::size_t cout) {
    return b.op("convolution", one_by_one(), {x, b.constant({cout, cin, 1, 1}, 0.2f), b.constant({cout})});
}

// blocks x (relu(conv(relu(conv(r))) + r)), r = relu(conv(x)) first; also returns r when
// `return_residual` (a reader after every block), and adds r to the result once more when
// `late_reader`.
builder chain(std::size_t blocks, bool return_residual = false, bool late_reader = false, bool residual_is_param = false) {
    builder b;
    const std::size_t c = 32, n = 64;
    auto x = b.param("x", {2, c, 9, 11});
    auto r = residual_is_param ? b.param("r", {2, n, 9, 11}) : b.op("relu", {conv1x1(b, x, c, n)});
    auto first = r;
    auto y = r;
    for (std::size_t i = 0; i < blocks; ++i) {
        auto h = b.op("relu", {conv1x1(b, y, n, n / 2)});
        y = b.op("relu", {b.op("add", {conv1x1(b, h, n / 2, n), y})});
    }
    if (late_reader) y = b.op("add", {y, first});
    std::vector<instruction_ref> outs{y};
    if (return_residual) outs.push_back(first);
    b.ret(outs);
    return b;
}

std::size_t count_text(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

}  // namespace

TEST(cpu_sum_post_op, chain_of_blocks_writes_into_each_residual) {
    auto r = run_both(chain(3), 1e-4, 1e-5);
    const auto t = text(r.cpu);
    EXPECT_EQ(count_text(t, "kind: \"sum\""), 3u) << t;
    EXPECT_EQ(count_text(t, "kind: \"binary\""), 0u) << t;
    EXPECT_TRUE(ref_kernels(r.cpu).empty()) << t;
}

TEST(cpu_sum_post_op, residual_read_later_stays_binary) {
    {
        // The first residual is returned: only the later blocks may write into theirs.
        auto r = run_both(chain(2, true), 1e-4, 1e-5);
        const auto t = text(r.cpu);
        EXPECT_EQ(count_text(t, "kind: \"binary\""), 1u) << t;
        EXPECT_EQ(count_text(t, "kind: \"sum\""), 1u) << t;
    }
    {
        // The first residual is added again at the end.
        auto r = run_both(chain(2, false, true), 1e-4, 1e-5);
        const auto t = text(r.cpu);
        EXPECT_GE(count_text(t, "kind: \"binary\""), 1u) << t;
    }
}

TEST(cpu_sum_post_op, parameter_residual_is_never_written) {
    // A parameter residual may reach the convolution through a reorder of its own (a
    // buffer the sum may take), never as itself; the caller's input stays as it was.
    auto b = chain(1, false, false, true);
    auto r = run_both(b, 1e-4, 1e-5);
    for (const auto& ins : *r.cpu.get_main_module()) {
        if (ins.name() != "cpu::convolution") continue;
        if (ins.get_operator().to_value().at("post_ops").get_array().empty()) continue;
        EXPECT_FALSE(ins.inputs().back()->is_param()) << text(r.cpu);
    }
    const auto before = b.inputs.at("r").to_vector<float>();
    r.cpu.eval(b.inputs);
    EXPECT_EQ(b.inputs.at("r").to_vector<float>(), before);
}

TEST(cpu_sum_post_op, switched_off) {
    test::env_override off("KILN_CPU_SUM_POST_OP", "0");
    auto r = run_both(chain(2), 1e-4, 1e-5);
    EXPECT_EQ(count_text(text(r.cpu), "kind: \"sum\""), 0u) << text(r.cpu);
}
