// Data movement on the gpu target without a device (codegen/emit_move.hpp): reshape and
// flatten of strided inputs, gather and concat as generated kernels (NVRTC for sm_90, and
// their host build against the reference), split as slice views, and what stays as it was
// (views of row-major inputs, literal indices out of range).
#include "gpu_test_util.hpp"

#include "targets/gpu/codegen/emit_move.hpp"
#include "targets/gpu/host_fallback.hpp"
#include "targets/gpu/selection.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/literal.hpp>
#include <kiln/onnx.hpp>
#include <kiln/serialize.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <tuple>

using namespace kiln;
using namespace kiln::gpu_test;

namespace {

std::size_t count_ops(module& m, const std::string& name) {
    std::size_t n = 0;
    for (auto ins = m.begin(); ins != m.end(); ++ins) n += ins->name() == name;
    return n;
}

std::size_t host_kernels(module& m) { return count_ops(m, "gpu::host_kernel"); }

}  // namespace

TEST(gpu_move, every_move_compiles_for_sm90_and_matches_the_reference_on_the_host) {
    auto p = every_move();
    const auto n = p.get_main_module()->get_return()->inputs().size();
    compile_options o;
    o.memory_planning = false;
    compile_for_gpu(p, o);
    auto& m = *p.get_main_module();
    EXPECT_EQ(host_kernels(m), 0u) << m;
    const auto rep = check_kernels(m, "every move");
    EXPECT_EQ(rep.kernels, n);
}

TEST(gpu_move, views_of_row_major_inputs_stay_free) {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(type::float32, {4, 6}));
    auto y = m->add_instruction(make_op("reshape", {{"dims", ints({2, 12})}}), {m->add_instruction(make_op("relu"), {x})});
    m->add_return({m->add_instruction(make_op("exp"), {m->add_instruction(make_op("flatten", {{"axis", 0}}), {y})})});
    compile_options o;
    o.memory_planning = false;
    compile_for_gpu(p, o);
    for (auto ins : gpu_kernels(*p.get_main_module()))
        EXPECT_FALSE(gpu::codegen::is_move(ins->get_operator().get<gpu::fused_kernel>().body, {}))
            << "a reshape of a row-major input became a copy";
    EXPECT_EQ(host_kernels(*p.get_main_module()), 0u);
}

// Negative indices count from the end; an out-of-range one reads a clamped element and is
// recorded in kiln_error_ (finish raises it on a device).
TEST(gpu_move, gather_negative_and_out_of_range_indices) {
    program p;
    auto* m = p.get_main_module();
    auto data = m->add_parameter("data", shape(type::float32, {5, 3}));
    auto ids = m->add_parameter("ids", shape(type::int64, {4}));
    m->add_return({m->add_instruction(make_op("gather", {{"axis", 0}}), {data, ids})});
    compile_options o;
    o.memory_planning = false;
    compile_for_gpu(p, o);
    const auto kernels = gpu_kernels(*p.get_main_module());
    ASSERT_EQ(kernels.size(), 1u);
    const auto& k = kernels[0]->get_operator().get<gpu::fused_kernel>();
    // gpu_context::finish finds the record by this unmangled name (cudaLibraryGetGlobal).
    const auto built = gpu::codegen::compile_cuda(gpu::codegen::module_source(*p.get_main_module()), "sm_90", true, "");
    EXPECT_NE(built.ptx.find(".global .align 8 .b8 kiln_error_[24]"), std::string::npos) << built.ptx;
    EXPECT_NE(built.cubin.find("kiln_error_"), std::string::npos) << "kiln_error_ is not in the CUBIN's symbols";
    if (const char* dump = std::getenv("KILN_TEST_DUMP_CUBIN")) std::ofstream(dump, std::ios::binary) << built.cubin;
    host_library lib(gpu::codegen::module_source(*p.get_main_module()));
    ASSERT_TRUE(lib.ok());
    argument d(shape(type::float32, {5, 3}));
    for (std::size_t i = 0; i < 15; ++i) reinterpret_cast<float*>(d.data())[i] = static_cast<float>(i);
    auto run = [&](std::vector<std::int64_t> idx) {
        argument in(shape(type::int64, {4}));
        std::memcpy(in.data(), idx.data(), 4 * sizeof(std::int64_t));
        argument out(shape(type::float32, {4, 3}));
        lib.run(k.symbol, {d, in}, out, 1, 4);
        return out.to_vector<float>();
    };
    const auto got = run({-1, 0, -5, 2});
    EXPECT_EQ(got, (std::vector<float>{12, 13, 14, 0, 1, 2, 0, 1, 2, 6, 7, 8}));
    EXPECT_EQ(lib.take_error(), (std::vector<unsigned long long>{0, 0, 0}));
    const auto clamped = run({1, 5, -6, 4});
    EXPECT_EQ(clamped, (std::vector<float>{3, 4, 5, 12, 13, 14, 0, 1, 2, 12, 13, 14}));
    const auto e = lib.take_error();
    ASSERT_EQ(e.size(), 3u);
    EXPECT_EQ(e[0], 1u);
    EXPECT_TRUE(static_cast<long long>(e[1]) == 5 || static_cast<long long>(e[1]) == -6) << static_cast<long long>(e[1]);
    EXPECT_EQ(e[2], 5u);
}

TEST(gpu_move, literal_indices_out_of_range_stay_on_the_host) {
    program p;
    auto* m = p.get_main_module();
    auto data = m->add_parameter("data", shape(type::float32, {5, 3}));
    auto good = m->add_literal(literal(shape(type::int64, {2}), std::vector<std::int64_t>{-5, 4}));
    auto bad = m->add_literal(literal(shape(type::int64, {2}), std::vector<std::int64_t>{0, 5}));
    m->add_return({m->add_instruction(make_op("gather", {{"axis", 0}}), {data, good}),
                   m->add_instruction(make_op("gather", {{"axis", 0}}), {data, bad})});
    compile_options o;
    o.memory_planning = false;
    compile_for_gpu(p, o);
    EXPECT_EQ(gpu_kernels(*p.get_main_module()).size(), 1u);
    EXPECT_EQ(host_kernels(*p.get_main_module()), 1u);
}

TEST(gpu_move, split_parts_become_slice_views) {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(type::float32, {2, 12}));
    auto s = m->add_instruction(make_op("split", {{"axis", 1}, {"sizes", ints({4, 8})}}), {x});
    auto a = m->add_instruction(make_op("get_tuple_elem", {{"index", 0}}), {s});
    auto b = m->add_instruction(make_op("get_tuple_elem", {{"index", 1}}), {s});
    m->add_return({m->add_instruction(make_op("exp"), {a}), m->add_instruction(make_op("reshape", {{"dims", ints({16})}}), {b})});
    compile_options o;
    o.memory_planning = false;
    compile_for_gpu(p, o);
    auto& mm = *p.get_main_module();
    EXPECT_EQ(host_kernels(mm), 0u) << mm;
    EXPECT_EQ(count_ops(mm, "split"), 0u) << mm;
    EXPECT_EQ(count_ops(mm, "slice"), 2u) << mm;
    (void)check_kernels(mm, "split");
}

// The move kernels travel in .kiln bytes like the elementwise ones.
TEST(gpu_move, move_kernels_round_trip_through_their_attributes) {
    auto p = every_move();
    p.compile(*get_target("gpu"), {});
    std::size_t moves = 0;
    for (auto ins : gpu_kernels(*p.get_main_module())) {
        const auto& k = ins->get_operator().get<gpu::fused_kernel>();
        const operation back = ins->get_operator().with_value(ins->get_operator().to_value());
        const auto& k2 = back.get<gpu::fused_kernel>();
        EXPECT_TRUE(k2.body.nodes == k.body.nodes);
        EXPECT_EQ(k2.symbol, k.symbol);
        EXPECT_EQ(k2.library, k.library);
        moves += k.body.nodes.size() == 1 && k.body.nodes[0].op.name() != "exp";
    }
    EXPECT_GE(moves, 15u);
    const auto bytes = save_buffer(p);
    EXPECT_FALSE(bytes.empty());
}

TEST(gpu_move, the_selection_table_lists_them) {
    const auto t = gpu::selection_table();
    for (const char* op : {"reshape, flatten", "gather", "concat", "split"}) EXPECT_NE(t.find(op), std::string::npos) << op;
}

// The models with data movement, at fixed shapes: nothing of it is left on the host, and
// their move kernels compile and match the reference on the host. Prints what stays there.
TEST(gpu_move, the_models_move_data_on_the_device) {
    const auto shared = std::filesystem::path(KILN_SHARED_DIR) / "models";
    const auto dynamic = std::filesystem::path(KILN_SOURCE_DIR) / "tests" / "data" / "dynamic_models";
    const std::vector<std::size_t> kv = {1, 4, 12, 16};
    const std::vector<std::tuple<std::string, std::filesystem::path, std::map<std::string, std::vector<std::size_t>>>> models = {
        {"bert_small", shared / "bert_small" / "model.onnx", {{"input_ids", {1, 128}}, {"attention_mask", {1, 128}}}},
        {"vit_tiny", shared / "vit_tiny" / "model.onnx", {}},
        {"bert_dyn", dynamic / "bert_dyn" / "model.onnx", {{"input_ids", {1, 16}}, {"attention_mask", {1, 16}}}},
        {"gpt_kv", dynamic / "gpt_kv" / "model.onnx",
         {{"input_ids", {1, 4}}, {"past_key_0", kv}, {"past_value_0", kv}, {"past_key_1", kv}, {"past_value_1", kv}}},
    };
    const std::set<std::string> moves = {"reshape", "flatten", "gather", "concat", "split", "get_tuple_elem",
                                         "pad",     "tile",    "slice",  "squeeze", "unsqueeze", "transpose"};
    std::size_t ran = 0;
    for (const auto& [name, file, dims] : models) {
        if (!std::filesystem::exists(file)) continue;
        ++ran;
        onnx_options oo;
        oo.default_dim_value = 1;
        for (const auto& [input, lens] : dims) oo.map_input_dims[input] = lens;
        auto p = parse_onnx(file.string(), oo);
        compile_options o;
        o.memory_planning = false;
        compile_for_gpu(p, o);
        auto& m = *p.get_main_module();
        std::map<std::string, std::size_t> host;
        for (auto ins = m.begin(); ins != m.end(); ++ins)
            if (const auto* h = ins->get_operator().any_cast<gpu::host_kernel>()) ++host[h->op.name()];
        std::string line;
        for (const auto& [op, n] : host) {
            line += " " + op + "=" + std::to_string(n);
            EXPECT_FALSE(moves.count(op)) << name << ": " << n << "x " << op << " on the host";
        }
        const auto rep = check_kernels(m, name);
        std::cout << "[ gpu      ] " << name << ": " << rep.kernels << " generated kernels; on the host:" << line << "\n";
    }
    if (ran == 0) GTEST_SKIP() << "no models";
}

// Random layouts (seeded): each move over transposed inputs of random lens, so index math
// is checked beyond the hand-picked cases.
TEST(gpu_move, random_layouts_match_the_reference_on_the_host) {
    auto p = random_moves(2024, 40);
    const auto n = p.get_main_module()->get_return()->inputs().size();
    compile_options o;
    o.memory_planning = false;
    compile_for_gpu(p, o);
    EXPECT_EQ(host_kernels(*p.get_main_module()), 0u);
    const auto rep = check_kernels(*p.get_main_module(), "random layouts");
    // A few are no moves at all (a permutation that leaves the input row-major is a view,
    // zero pads and unit repeats are simplified away).
    EXPECT_GE(rep.kernels, n - 6);
}
