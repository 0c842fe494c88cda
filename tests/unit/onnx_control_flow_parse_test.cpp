// Control flow from ONNX whose bodies may not run: an If branch, or a Loop body, that
// cannot be built for the shapes it would get does not fail the parse or the compile; it
// fails, naming the node, only when it runs. A condition known before running (a
// constant, or a literal after the passes fold shape arithmetic) keeps only the taken
// branch. The case comes from a voice-activity model (silero-VAD style) with one If
// branch per sample rate, each branch sized for its own rate's chunks.
#include "tensor_test_util.hpp"

#include "ops/control_flow.hpp"
#include "passes/dead_code_elimination.hpp"
#include "passes/propagate_constants.hpp"

#include <kiln/errors.hpp>
#include <kiln/pass.hpp>
#include <kiln/register_op.hpp>
#include <kiln/serialize.hpp>

#include <algorithm>
#include <functional>

using namespace kiln;
using namespace kiln::test;

namespace {

constexpr int onnx_bool = 9;

// A GRAPH attribute holding `body` (its nodes, inputs and outputs) as graph `graph_name`.
onnx_attr graph_attr(const std::string& name, const onnx_model& body, const std::string& graph_name) {
    return {pb::field_bytes(1, name) + pb::field_bytes(6, body.graph + pb::field_bytes(2, graph_name)) +
            pb::field_varint(20, 5)};
}

// Raises the error `f` throws, or fails the test when it throws none.
kiln::error error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const kiln::error& e) {
        return e;
    }
    ADD_FAILURE() << "no error";
    return kiln::error(error_code::runtime, "no error");
}

bool has_op(const module& m, const std::string& name) {
    auto n = op_names(m);
    return std::find(n.begin(), n.end(), name) != n.end();
}

// y = If(sr == 16000) then Relu(Reshape(x, [2, 256])) else Reshape(x, [3, 256]): x is a
// 16 kHz chunk of 512 samples, which the 8 kHz branch's Reshape cannot take.
onnx_model vad_model(bool sr_constant, std::int64_t sr_value = 16000) {
    onnx_model then_g;
    then_g.node("Reshape", {"x", "shape16"}, {"r16"}, {});
    then_g.node("Relu", {"r16"}, {"y16"}, {});
    then_g.output("y16", onnx_float);
    onnx_model else_g;
    // The 8 kHz Reshape is named (NodeProto field 3) so the error can be checked for it.
    std::string r8 = pb::field_bytes(1, "x") + pb::field_bytes(1, "shape8") + pb::field_bytes(2, "y8") +
                     pb::field_bytes(3, "reshape_8k") + pb::field_bytes(4, "Reshape");
    else_g.graph += pb::field_bytes(1, r8);
    else_g.output("y8", onnx_float);
    onnx_model m;
    m.input("x", onnx_float, {1, 512});
    if (sr_constant) m.initializer("sr", {}, {sr_value});
    else m.input("sr", onnx_int64, {});
    m.initializer("sr16", {}, {16000});
    m.initializer("shape16", {2}, {2, 256});
    m.initializer("shape8", {2}, {3, 256});
    m.node("Equal", {"sr", "sr16"}, {"is16"});
    std::string n = pb::field_bytes(1, "is16") + pb::field_bytes(2, "y") + pb::field_bytes(3, "vad_if") +
                    pb::field_bytes(4, "If") + pb::field_bytes(5, graph_attr("then_branch", then_g, "then").bytes) +
                    pb::field_bytes(5, graph_attr("else_branch", else_g, "else").bytes);
    m.graph += pb::field_bytes(1, n);
    m.output("y", onnx_float);
    return m;
}

argument scalar_int64(std::int64_t v) { return literal(shape(type::int64), std::vector<std::int64_t>{v}).get_argument(); }

std::vector<double> relu(std::vector<double> v) {
    for (auto& x : v) x = std::max(x, 0.0);
    return v;
}

}  // namespace

TEST(onnx_control_flow_parse, untaken_if_branch_that_does_not_fit_parses_compiles_and_runs) {
    auto p = vad_model(false).parse();
    ASSERT_TRUE(has_op(*p.get_main_module(), "if"));
    EXPECT_EQ(p.get_output_shapes()[0].lens(), (std::vector<std::size_t>{2, 256}));
    auto x = random_arg(type::float32, {1, 512}, 91);
    for (const char* target : {"ref", "cpu"}) {
        SCOPED_TRACE(target);
        program c = p;
        c.compile(*get_target(target));
        expect_values(c.eval({{"x", x}, {"sr", scalar_int64(16000)}})[0], {2, 256}, relu(values(x)));
        // The 8 kHz branch runs only now, and fails as the shape error it is, naming the node.
        auto e = error_of([&] { c.eval({{"x", x}, {"sr", scalar_int64(8000)}}); });
        EXPECT_EQ(e.code(), error_code::shape) << e.what();
        EXPECT_NE(e.message().find("reshape_8k"), std::string::npos) << e.what();
        EXPECT_NE(e.message().find("vad_if"), std::string::npos) << e.what();
        EXPECT_NE(e.message().find("else_branch"), std::string::npos) << e.what();
    }
}

TEST(onnx_control_flow_parse, deferred_branch_is_saved_and_loaded) {
    auto p = vad_model(false).parse();
    EXPECT_NE(p.to_string().find("deferred_error"), std::string::npos);
    p.compile(*get_target("cpu"));
    auto bytes = save_buffer(p);
    auto q = load_buffer(bytes.data(), bytes.size());
    auto x = random_arg(type::float32, {1, 512}, 96);
    expect_values(q.eval({{"x", x}, {"sr", scalar_int64(16000)}})[0], {2, 256}, relu(values(x)));
    auto e = error_of([&] { q.eval({{"x", x}, {"sr", scalar_int64(8000)}}); });
    EXPECT_EQ(e.code(), error_code::shape) << e.what();
    EXPECT_NE(e.message().find("reshape_8k"), std::string::npos) << e.what();
}

TEST(onnx_control_flow_parse, constant_condition_keeps_only_the_taken_branch) {
    for (std::int64_t sr : {16000, 8000}) {
        SCOPED_TRACE(sr);
        if (sr == 8000) {
            // The only branch there is is the one that cannot run: that is the model's error.
            auto e = error_of([&] { vad_model(true, sr).parse(); });
            EXPECT_EQ(e.code(), error_code::shape);
            EXPECT_NE(e.message().find("reshape_8k"), std::string::npos) << e.what();
            continue;
        }
        auto p = vad_model(true, sr).parse();
        EXPECT_FALSE(has_op(*p.get_main_module(), "if"));
        EXPECT_EQ(p.get_modules().size(), 1u);
        p.compile(*get_target("cpu"));
        auto x = random_arg(type::float32, {1, 512}, 92);
        expect_values(p.eval({{"x", x}})[0], {2, 256}, relu(values(x)));
    }
}

TEST(onnx_control_flow_parse, both_branches_failing_is_a_parse_error) {
    onnx_model bad;
    bad.node("Reshape", {"x", "shape8"}, {"y8"});
    bad.output("y8", onnx_float);
    onnx_model m;
    m.input("x", onnx_float, {1, 512});
    m.input("c", onnx_bool, {});
    m.initializer("shape8", {2}, {3, 256});
    m.node("If", {"c"}, {"y"}, {graph_attr("then_branch", bad, "t"), graph_attr("else_branch", bad, "e")});
    m.output("y", onnx_float);
    auto e = error_of([&] { m.parse(); });
    EXPECT_EQ(e.code(), error_code::shape) << e.what();
}

TEST(onnx_control_flow_parse, unsupported_operator_in_an_untaken_branch_still_fails_the_parse) {
    onnx_model ok;
    ok.node("Relu", {"x"}, {"r"});
    ok.output("r", onnx_float);
    onnx_model unknown;
    unknown.node("NoSuchOperator", {"x"}, {"u"});
    unknown.output("u", onnx_float);
    onnx_model m;
    m.input("x", onnx_float, {2});
    m.input("c", onnx_bool, {});
    m.node("If", {"c"}, {"y"}, {graph_attr("then_branch", ok, "t"), graph_attr("else_branch", unknown, "e")});
    m.output("y", onnx_float);
    auto e = error_of([&] { m.parse(); });
    EXPECT_EQ(e.code(), error_code::unsupported) << e.what();
}

namespace {
// v_out = Loop(M, v): the body reshapes v to [3, 256], which a [1, 512] value cannot be.
onnx_model bad_loop(bool trip_count_constant, std::int64_t trips = 0) {
    onnx_model body;
    body.input("i", onnx_int64, {});
    body.input("cond", onnx_bool, {});
    body.input("v", onnx_float, {1, 512});
    body.node("Identity", {"cond"}, {"cond_out"});
    std::string n = pb::field_bytes(1, "v") + pb::field_bytes(1, "shape8") + pb::field_bytes(2, "v_out") +
                    pb::field_bytes(3, "reshape_in_loop") + pb::field_bytes(4, "Reshape");
    body.graph += pb::field_bytes(1, n);
    body.node("Relu", {"v_out"}, {"scan"});
    body.output("cond_out", onnx_bool);
    body.output("v_out", onnx_float);
    body.output("scan", onnx_float);
    onnx_model m;
    m.input("x", onnx_float, {1, 512});
    if (trip_count_constant) m.initializer("M", {}, {trips});
    else m.input("M", onnx_int64, {});
    m.initializer("shape8", {2}, {3, 256});
    m.node("Loop", {"M", "", "x"}, {"y", "ys"}, {graph_attr("body", body, "body")});
    m.output("y", onnx_float);
    m.output("ys", onnx_float);
    return m;
}
}  // namespace

TEST(onnx_control_flow_parse, loop_that_runs_zero_times_is_its_initial_values) {
    auto p = bad_loop(true, 0).parse();
    EXPECT_FALSE(has_op(*p.get_main_module(), "loop"));
    EXPECT_EQ(p.get_modules().size(), 1u);
    p.compile(*get_target("cpu"));
    auto x = random_arg(type::float32, {1, 512}, 93);
    auto r = p.eval({{"x", x}});
    expect_values(r[0], {1, 512}, values(x));
    EXPECT_EQ(r[1].get_shape().elements(), 0u);
    EXPECT_EQ(r[1].get_shape().lens().at(0), 0u);
}

TEST(onnx_control_flow_parse, loop_body_that_does_not_fit_fails_only_when_it_runs) {
    // A constant trip count of 1: the body certainly runs, so the model is wrong now.
    auto e = error_of([&] { bad_loop(true, 1).parse(); });
    EXPECT_EQ(e.code(), error_code::shape);
    EXPECT_NE(e.message().find("reshape_in_loop"), std::string::npos) << e.what();

    auto p = bad_loop(false).parse();
    ASSERT_TRUE(has_op(*p.get_main_module(), "loop"));
    auto x = random_arg(type::float32, {1, 512}, 94);
    for (const char* target : {"ref", "cpu"}) {
        SCOPED_TRACE(target);
        program c = p;
        c.compile(*get_target(target));
        auto r = c.eval({{"x", x}, {"M", scalar_int64(0)}});
        expect_values(r[0], {1, 512}, values(x));
        EXPECT_EQ(r[1].get_shape().elements(), 0u);
        auto err = error_of([&] { c.eval({{"x", x}, {"M", scalar_int64(2)}}); });
        EXPECT_EQ(err.code(), error_code::shape) << err.what();
        EXPECT_NE(err.message().find("reshape_in_loop"), std::string::npos) << err.what();
    }
}

namespace {
// main: y = if (c) then relu(x) else deferred_error; c a literal or a parameter.
program if_in_ir(bool cond) {
    program p;
    auto* m = p.get_main_module();
    shape s(type::float32, {2, 3});
    auto x = m->add_parameter("x", s);
    auto c = m->add_literal(literal(shape(type::bool_), std::vector<bool>{cond}));
    auto* t = p.create_module("then");
    auto tx = t->add_parameter("x", s);
    t->add_return({t->add_instruction(make_op("relu"), {tx})});
    auto* e = p.create_module("else");
    e->add_return({e->add_instruction(op::deferred_error{"the else branch cannot run", 3, s}, {})});
    auto i = m->add_instruction(op::if_op{{"x"}, {}}, {c, x}, {t, e});
    m->add_return({m->add_instruction(builtin::get_tuple_elem{0}, {i})});
    return p;
}
}  // namespace

TEST(onnx_control_flow_parse, literal_condition_folds_to_the_taken_branch_in_the_passes) {
    auto x = random_arg(type::float32, {2, 3}, 95);
    {
        auto p = if_in_ir(true);
        run_passes(p, {propagate_constants{}, dead_code_elimination{}});
        EXPECT_FALSE(has_op(*p.get_main_module(), "if"));
        // The untaken branch is gone from the program: never lowered nor run.
        EXPECT_EQ(p.get_modules().size(), 1u);
        expect_values(p.eval({{"x", x}})[0], {2, 3}, relu(values(x)));
    }
    {
        // The whole pipeline, on cpu: the stand-in of the untaken branch is never compiled.
        auto p = if_in_ir(true);
        p.compile(*get_target("cpu"));
        EXPECT_EQ(p.get_modules().size(), 1u);
        expect_values(p.eval({{"x", x}})[0], {2, 3}, relu(values(x)));
    }
    {
        // Taking the branch that cannot run compiles, and fails when run.
        auto p = if_in_ir(false);
        p.compile(*get_target("ref"));
        auto e = error_of([&] { p.eval({{"x", x}}); });
        EXPECT_EQ(e.code(), error_code::shape);
        EXPECT_NE(e.message().find("the else branch cannot run"), std::string::npos) << e.what();
    }
}

// torchvision's Faster R-CNN ends in y = Slice(If(no boxes) then <empty constant> else
// If(...) then Squeeze(keep) else keep, [0:100]): the inner If's branches disagree on the
// rank, so the else branch's rank is unknown. Merging that with the then branch's static
// [0] used to give [0], so the Slice was folded to no detections at all.
TEST(onnx_control_flow_parse, if_whose_branches_may_differ_in_rank_keeps_the_rank_unknown) {
    onnx_model inner_then;
    inner_then.initializer("axis0", {1}, {0});
    inner_then.node("Squeeze", {"nz", "axis0"}, {"flat"});
    inner_then.output("flat", onnx_int64);
    onnx_model inner_else;
    inner_else.node("Identity", {"nz"}, {"kept"});
    inner_else.output("kept", onnx_int64);
    onnx_model outer_then;
    outer_then.initializer("none", {0}, {});
    outer_then.node("Identity", {"none"}, {"empty"});
    outer_then.output("empty", onnx_int64);
    onnx_model outer_else;
    outer_else.node("If", {"c2"}, {"inner"},
                    {graph_attr("then_branch", inner_then, "inner_then"),
                     graph_attr("else_branch", inner_else, "inner_else")});
    outer_else.output("inner", onnx_int64);
    onnx_model m;
    m.input("x", onnx_float, {6});
    m.input("c", onnx_bool, {});
    m.input("c2", onnx_bool, {});
    m.initializer("starts", {1}, {0});
    m.initializer("ends", {1}, {100});
    m.initializer("axes", {1}, {0});
    m.node("NonZero", {"x"}, {"nz"});
    m.node("If", {"c"}, {"sel"},
           {graph_attr("then_branch", outer_then, "outer_then"), graph_attr("else_branch", outer_else, "outer_else")});
    m.node("Slice", {"sel", "starts", "ends", "axes"}, {"y"});
    m.output("y", onnx_int64);
    auto p = m.parse();
    auto x = literal(shape(type::float32, {6}), std::vector<float>{0.5f, 0, -2, 0, 0, 3}).get_argument();
    auto flag = [](bool v) { return literal(shape(type::bool_), std::vector<bool>{v}).get_argument(); };
    for (const char* target : {"ref", "cpu"}) {
        SCOPED_TRACE(target);
        program c = p;
        c.compile(*get_target(target));
        auto y = c.eval({{"x", x}, {"c", flag(false)}, {"c2", flag(true)}})[0];
        EXPECT_EQ(y.get_shape().lens(), (std::vector<std::size_t>{3}));
        EXPECT_EQ(y.to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 2, 5}));
        EXPECT_EQ(c.eval({{"x", x}, {"c", flag(true)}, {"c2", flag(true)}})[0].get_shape().elements(), 0u);
        // The other rank flows through too: [1, 3] sliced along its first axis.
        auto kept = c.eval({{"x", x}, {"c", flag(false)}, {"c2", flag(false)}})[0];
        EXPECT_EQ(kept.get_shape().lens(), (std::vector<std::size_t>{1, 3}));
        EXPECT_EQ(kept.to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 2, 5}));
    }
}
