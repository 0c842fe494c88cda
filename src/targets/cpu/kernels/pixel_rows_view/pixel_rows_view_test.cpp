// A vision transformer's patch embedding on the cpu target: Conv -> Reshape (or Flatten) to
// [N, C, H * W] -> Transpose(0, 2, 1) reads the channels-last convolution result in place
// (cpu::pixel_rows_view) and the concat with the class token is Kiln's block copy
// (cpu::concat_plain); results match the ref target, also when the reshaped value has
// another reader, for batches, and after a save and load. Concat of row-major tensors
// along each axis, of three inputs, matches too; inputs in oneDNN's blocked layouts still
// go to oneDNN's concat.
#include "cpu_test_util.hpp"

#include "targets/cpu/cpu_features.hpp"

#include <kiln/serialize.hpp>

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

value arr(const std::vector<std::int64_t>& v) { return value(value::array(v.begin(), v.end())); }

// conv 4x4 stride 4 (patches) -> [n, c, h*w] -> [n, h*w, c] -> concat(cls, rows) + pos.
builder patch_embedding(std::size_t n, bool flatten, bool second_reader) {
    builder b;
    auto x = b.param("x", {n, 3, 32, 32});
    auto y = b.op("convolution", value::object{{"stride", arr({4, 4})}}, {x, b.constant({64, 3, 4, 4}, 0.3f), b.constant({64})});
    auto r = flatten ? b.op("reshape", {{"dims", arr({static_cast<std::int64_t>(n), 64, 64})}}, {y})
                     : b.op("reshape", {{"dims", arr({static_cast<std::int64_t>(n), 64, -1})}}, {y});
    auto t = b.op("transpose", {{"perm", arr({0, 2, 1})}}, {r});
    auto cls = b.param("cls", {n, 1, 64});
    auto c = b.op("concat", {{"axis", value(std::int64_t{1})}}, {cls, t});
    auto out = b.op("add", {c, b.constant({1, 65, 64})});
    if (second_reader) b.ret({out, b.op("relu", {r})});
    else b.ret({out});
    return b;
}

}  // namespace

TEST(cpu_patch_rows, patch_embedding_reads_the_convolution_in_place) {
    if (cpu::has_avx512()) {
        // There oneDNN's convolutions write channels-last: the view must be taken.
        auto r = run_both(patch_embedding(1, false, false), 2e-4, 2e-4);
        EXPECT_EQ(count_ops(r.cpu, "cpu::pixel_rows_view"), 1u) << text(r.cpu);
    }
    for (std::size_t n : {1u, 2u})
        for (bool flatten : {false, true})
            for (bool second : {false, true}) {
                auto r = run_both(patch_embedding(n, flatten, second), 2e-4, 2e-4);
                EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
                // Where oneDNN keeps the result channels-last (AVX-512 machines) it is read in
                // place and the concat's inputs are row-major; elsewhere (blocked layouts) the
                // transposed view of a plain copy goes to oneDNN's concat.
                if (count_ops(r.cpu, "cpu::pixel_rows_view") == 1u) {
                    EXPECT_EQ(count_ops(r.cpu, "cpu::concat_plain"), 1u) << text(r.cpu);
                    if (!second) {
                        EXPECT_EQ(count_ops(r.cpu, "cpu::reorder"), 0u) << text(r.cpu);
                    }
                } else {
                    EXPECT_EQ(count_ops(r.cpu, "cpu::concat"), 1u) << text(r.cpu);
                }
            }
}

TEST(cpu_patch_rows, saved_program_loads_and_runs) {
    auto b = patch_embedding(2, false, false);
    program ref = b.p;
    ref.compile(*get_target("ref"));
    program cpu = b.p;
    cpu.compile(*get_target("cpu"));
    const auto bytes = save_buffer(cpu);
    auto loaded = load_buffer(bytes.data(), bytes.size());
    EXPECT_EQ(count_ops(loaded, "cpu::pixel_rows_view"), count_ops(cpu, "cpu::pixel_rows_view"));
    expect_close(loaded.eval(b.inputs)[0], ref.eval(b.inputs)[0], 2e-4, 2e-4);
}

TEST(cpu_patch_rows, concat_of_row_major_tensors_on_each_axis) {
    for (std::int64_t axis : {0, 1, 2, -1}) {
        builder b;
        std::vector<std::size_t> l1{2, 3, 5}, l2{2, 3, 5}, l3{2, 3, 5};
        const auto a = static_cast<std::size_t>(axis < 0 ? axis + 3 : axis);
        l1[a] = 1;
        l2[a] = 4;
        l3[a] = 2;
        auto x = b.param("x", l1), y = b.param("y", l2), z = b.param("z", l3);
        b.ret({b.op("concat", {{"axis", value(axis)}}, {x, y, z})});
        auto r = run_both(b, 0.0, 0.0);
        EXPECT_EQ(count_ops(r.cpu, "cpu::concat_plain"), 1u) << text(r.cpu);
    }
    // A big one (the copies run in parallel).
    builder b;
    auto x = b.param("x", {4, 300, 64}), y = b.param("y", {4, 200, 64});
    b.ret({b.op("concat", {{"axis", value(std::int64_t{1})}}, {x, y})});
    auto r = run_both(b, 0.0, 0.0);
    EXPECT_EQ(count_ops(r.cpu, "cpu::concat_plain"), 1u) << text(r.cpu);
}

TEST(cpu_patch_rows, blocked_inputs_stay_on_onednn_concat) {
    builder b;
    auto x = b.param("x", {1, 16, 8, 8});
    auto y1 = b.op("convolution", value::object{{"padding", arr({1, 1, 1, 1})}}, {x, b.constant({32, 16, 3, 3}, 0.3f)});
    auto y2 = b.op("convolution", value::object{{"padding", arr({1, 1, 1, 1})}}, {x, b.constant({32, 16, 3, 3}, 0.3f)});
    b.ret({b.op("concat", {{"axis", value(std::int64_t{1})}}, {y1, y2})});
    auto r = run_both(b, 2e-4, 2e-4);
    EXPECT_EQ(count_ops(r.cpu, "cpu::concat_plain"), 0u) << text(r.cpu);
    EXPECT_EQ(count_ops(r.cpu, "cpu::concat"), 1u) << text(r.cpu);
}
