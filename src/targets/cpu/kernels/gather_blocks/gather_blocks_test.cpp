// ONNX Gather on the cpu target's block copies (cpu::gather_blocks): results match the ref
// target along the first, a middle and the last axis, with int64 and int32 indices
// (negative ones too) of several ranks, over float32 and int64 data; the data may come
// from a oneDNN convolution; out-of-range indices raise a runtime error naming the op;
// a saved program loads and runs.
#include "cpu_test_util.hpp"

#include <kiln/errors.hpp>
#include <kiln/serialize.hpp>

#include <string>

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

template <class I>
instruction_ref index_param(builder& b, const std::string& name, const std::vector<std::size_t>& lens,
                            const std::vector<I>& values) {
    const shape s(std::is_same_v<I, std::int64_t> ? type::int64 : type::int32, lens);
    b.inputs[name] = literal(s, values).get_argument();
    return b.m->add_parameter(name, s);
}

builder gather(const std::vector<std::size_t>& data_lens, std::int64_t axis, const std::vector<std::size_t>& idx_lens,
               const std::vector<std::int64_t>& idx, bool int32 = false) {
    builder b;
    auto data = b.param("data", data_lens);
    auto i = int32 ? index_param(b, "i", idx_lens, std::vector<std::int32_t>(idx.begin(), idx.end()))
                   : index_param(b, "i", idx_lens, idx);
    b.ret({b.op("gather", value::object{{"axis", value(axis)}}, {data, i})});
    return b;
}

void check(const builder& b) {
    auto r = run_both(b, 0.0, 0.0);
    EXPECT_EQ(count_ops(r.cpu, "cpu::gather_blocks"), 1u) << text(r.cpu);
    EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
}

}  // namespace

TEST(cpu_gather_blocks, embedding_rows_and_other_axes) {
    check(gather({50, 256}, 0, {1, 7}, {3, 49, 0, -1, 3, 17, -50}));      // an embedding lookup
    check(gather({50, 256}, 0, {2, 3}, {1, 2, 3, 4, 5, 6}, true));        // int32 indices
    check(gather({4, 9, 5}, 1, {2, 2}, {8, 0, -9, 4}));                   // a middle axis
    check(gather({4, 9, 5}, -1, {3}, {4, -5, 2}, true));                  // the last axis
    check(gather({6, 5}, 0, {}, {-2}));                                   // a scalar index (non-constant)
}

TEST(cpu_gather_blocks, int64_data_and_data_from_a_convolution) {
    builder b;
    const shape ds(type::int64, {5, 3});
    std::vector<std::int64_t> dv(15);
    for (std::size_t k = 0; k < dv.size(); ++k) dv[k] = static_cast<std::int64_t>(k * k) - 40;
    b.inputs["data"] = literal(ds, dv).get_argument();
    auto data = b.m->add_parameter("data", ds);
    auto i = index_param(b, "i", {4}, std::vector<std::int64_t>{4, 0, -1, 2});
    b.ret({b.op("gather", value::object{{"axis", value(std::int64_t{0})}}, {data, i})});
    check(b);

    builder c;
    auto x = c.param("x", {1, 16, 6, 6});
    auto y = c.op("convolution", value::object{}, {x, c.constant({32, 16, 1, 1}, 0.3f)});  // a oneDNN layout
    auto j = index_param(c, "i", {3}, std::vector<std::int64_t>{31, 0, 7});
    c.ret({c.op("gather", value::object{{"axis", value(std::int64_t{1})}}, {y, j})});
    auto r = run_both(c, 1e-5, 1e-6);
    EXPECT_EQ(count_ops(r.cpu, "cpu::gather_blocks"), 1u) << text(r.cpu);
}

TEST(cpu_gather_blocks, out_of_range_index_is_a_runtime_error) {
    auto b = gather({50, 8}, 0, {3}, {1, 2, 3});
    program p = b.p;
    p.compile(*get_target("cpu"));
    ASSERT_EQ(count_ops(p, "cpu::gather_blocks"), 1u) << text(p);
    for (std::int64_t bad : {50, -51, 1000}) {
        auto in = b.inputs;
        in["i"] = literal(shape(type::int64, {3}), std::vector<std::int64_t>{0, bad, 1}).get_argument();
        try {
            p.eval(in);
            ADD_FAILURE() << "index " << bad << " was accepted";
        } catch (const kiln::error& e) {
            EXPECT_NE(std::string(e.what()).find("cpu::gather_blocks"), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
        }
    }
}

TEST(cpu_gather_blocks, saved_program_loads_and_runs) {
    auto b = gather({30, 64}, 0, {2, 5}, {0, 29, -1, 7, 7, 3, 1, 2, 11, -30});
    program ref = b.p;
    ref.compile(*get_target("ref"));
    program cpu = b.p;
    cpu.compile(*get_target("cpu"));
    const auto bytes = save_buffer(cpu);
    auto loaded = load_buffer(bytes.data(), bytes.size());
    ASSERT_EQ(count_ops(loaded, "cpu::gather_blocks"), 1u);
    expect_close(loaded.eval(b.inputs)[0], ref.eval(b.inputs)[0], 0.0, 0.0);
}
