// The text form reads back: what module::print and program::print write parses into the
// same module (printing it again gives the same text), hand-written text with free names
// and left-out shapes reads too, and bad text is a kiln error naming its line.
#include "pass_text_util.hpp"

#include <kiln/errors.hpp>
#include <kiln/module_text.hpp>
#include <kiln/program.hpp>
#include <kiln/register_op.hpp>

#include <gtest/gtest.h>

#include <functional>
#include <random>

using namespace kiln;
using pass_text::expect_text_round_trip;

namespace {

shape f32(std::vector<std::size_t> lens) { return shape(type::float32, std::move(lens)); }

// The message of the kiln error `f` throws; fails the test when it throws none or another.
std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const kiln::error& e) {
        return e.what();
    } catch (const std::exception& e) {
        ADD_FAILURE() << "not a kiln error: " << e.what();
        return "";
    }
    ADD_FAILURE() << "no error";
    return "";
}

}  // namespace

TEST(module_text, reads_back_static_dynamic_and_tuple_shapes_literals_and_attributes) {
    program p;
    auto& m = *p.get_main_module();
    dynamic_dimension batch{1, 64, {8}, "batch"};
    dynamic_dimension any{0, dynamic_dimension::unbounded, {}, ""};
    auto x = m.add_parameter("x", shape::make_dynamic(type::float32, {batch, {6, 6, {}, ""}}));
    auto z = m.add_parameter("z", shape::make_dynamic(type::float32, {any}));
    auto strided = m.add_parameter("input.1", shape(type::float32, {3, 2}, {1, 3}));
    auto split = m.add_instruction(make_op("split", {{"axis", 1}, {"sizes", {2, 4}}}), {x});
    auto first = m.add_instruction(make_op("get_tuple_elem", {{"index", 0}}), {split});
    auto t = m.add_instruction(make_op("transpose", {{"perm", {1, 0}}}), {strided});
    auto k = m.add_literal(literal(f32({2}), std::vector<float>{0.5f, -1.25e-7f}));
    auto many = m.add_literal(literal(f32({4, 2, 3}), std::vector<float>(24, 3.5f)));
    m.add_literal(literal(shape(type::int64, {3}), std::vector<std::int64_t>{-1, 0, 7}));
    m.add_literal(literal(shape(type::bool_, {2}), std::vector<bool>{true, false}));
    m.add_literal(literal(shape(type::float16, {}), std::vector<float>{0.1f}));
    m.add_literal(literal(shape(type::string, {2}), std::vector<std::string>{"a \"quoted\" \\ word", ""}));
    m.add_literal(literal(f32({0}), std::vector<float>{}));
    auto y = m.add_instruction(make_op("mul"), {first, k});
    auto w = m.add_instruction(make_op("add"), {t, many});
    m.add_return({y, w, z, m.add_instruction(make_op("relu"), {z})});
    m.validate();

    expect_text_round_trip(p);
    auto q = parse_program(p.to_string(), {literals_of(p)});
    EXPECT_EQ(*q.get_main_module(), m);
    // Literals written whole read from their text; the elided one from the source.
    auto r = parse_program(p.to_string(), {literals_by_name({{"@" + std::to_string(m.index_of(many)), many->get_literal()}})});
    EXPECT_EQ(r.to_string(), p.to_string());
    auto it = r.get_main_module()->begin();
    std::advance(it, m.index_of(k));
    EXPECT_EQ(it->get_literal(), k->get_literal());  // 0.5 and -1.25e-7 print exactly
}

TEST(module_text, symbolic_dims_and_shape_values) {
    program p;
    auto& m = *p.get_main_module();
    dynamic_dimension past{0, 128, {}, "past"};
    dynamic_dimension seq{1, 128, {1}, "sequence"};
    auto k = m.add_parameter("past_key", shape::make_dynamic(type::float32, {{1, 1, {}, ""}, past, {8, 8, {}, ""}}));
    auto q = m.add_parameter("key", shape::make_dynamic(type::float32, {{1, 1, {}, ""}, seq, {8, 8, {}, ""}}));
    auto cat = m.add_instruction(make_op("concat", {{"axis", 1}}), {k, q});
    auto s = m.add_instruction(make_op("shape_of"), {cat});
    m.add_return({cat, s});
    auto text = p.to_string();
    EXPECT_NE(text.find("past + sequence"), std::string::npos) << text;
    expect_text_round_trip(p);
}

TEST(module_text, shape_values_that_are_numbers_read_back_from_the_ops) {
    // shape_of of a static x carries its values {2, 3} in its shape; print writes them only
    // when one is symbolic, so the reader computes them again: without them the
    // reshape_dynamic after the gather would be shaped dynamic, against its written shape.
    program p = pass_text::parse(R"(
        module main
          x = @param -> float32[2, 3]
          y = @param -> float32[3, 2, 4]
          s = shape_of(x)
          i = @literal{int64[2] {1, 0}}
          g = gather(s, i)
          m1 = @literal{int64[1] {-1}}
          c = concat(g, m1)
          r = reshape_dynamic(y, c)
          @return(r)
    )");
    EXPECT_EQ(p.get_main_module()->get_output_shapes()[0], f32({3, 2, 4}));
    expect_text_round_trip(p);
}

TEST(module_text, reads_a_program_with_sub_modules_in_print_order) {
    auto text = R"(module main
  c = @param -> bool[]
  x = @param -> float32[2]
  @2 = if{then_captured=["x"], else_captured=["x"]}(c, x, x) [then_branch, else_branch] -> tuple(float32[2])
  @3 = get_tuple_elem{index=0}(@2) -> float32[2]
  @return(@3)

module then_branch
  x = @param -> float32[2]
  @1 = relu(x) -> float32[2]
  @return(@1)

module else_branch
  x = @param -> float32[2]
  @1 = neg(x) -> float32[2]
  @return(@1)
)";
    auto p = parse_program(text);
    EXPECT_EQ(p.to_string(), text);
    auto run = [&](bool c) {
        return p.eval({{"c", literal(shape(type::bool_, {}), std::vector<bool>{c}).get_argument()},
                       {"x", literal(f32({2}), std::vector<float>{-1, 2}).get_argument()}})[0]
            .to_vector<float>();
    };
    EXPECT_EQ(run(true), (std::vector<float>{0, 2}));
    EXPECT_EQ(run(false), (std::vector<float>{1, -2}));
}

TEST(module_text, hand_written_text_takes_free_names_comments_and_no_shapes) {
    auto m = parse_module(R"(
        module main
          // a comment line, and a blank one:

          x = @param -> float32[2, 3]
          one = @literal{float32[1] {1}}
          scaled = mul(x, one)
          @return(scaled, x)
    )");
    EXPECT_EQ(m->to_string(), "module main\n"
                              "  x = @param -> float32[2, 3]\n"
                              "  @1 = @literal{float32[1] {1}} -> float32[1]\n"
                              "  @2 = mul(x, @1) -> float32[2, 3]\n"
                              "  @return(@2, x)\n");
}

TEST(module_text, elided_literals_come_from_the_literal_source) {
    const std::string text = R"(module main
  w = @literal{float32[8] {...}}  // values from the literal source
  @return(w)
)";
    EXPECT_NE(error_of([&] { parse_module(text); }).find("line 2: the values of literal w are elided"),
              std::string::npos);
    literal w(f32({8}), std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8});
    auto m = parse_module(text, {literals_by_name({{"w", w}})});
    EXPECT_EQ(m->begin()->get_literal(), w);
    literal wrong(f32({4}), std::vector<float>{1, 2, 3, 4});
    EXPECT_NE(error_of([&] { parse_module(text, {literals_by_name({{"w", wrong}})}); })
                  .find("the literal source gives float32[4] for w, the text says float32[8]"),
              std::string::npos);
}

TEST(module_text, small_binary_attributes_read_back) {
    program p;
    auto& m = *p.get_main_module();
    auto s = m.add_parameter("s", shape(type::int64, {2}));
    m.add_return({m.add_instruction(make_op("constant_of_shape", {{"value", to_value(literal(2.5f))}}), {s})});
    EXPECT_NE(p.to_string().find("data: 0x00002040"), std::string::npos) << p;
    expect_text_round_trip(p);
}

// Each bad text gives a kiln error whose message holds the expected words.
TEST(module_text, bad_text_is_an_error_naming_the_line) {
    const std::string head = "module main\n  x = @param -> float32[2, 3]\n";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"", "no 'module NAME' line"},
        {"  x = @param -> float32[2]\n", "line 1: expected 'module NAME' before the instructions"},
        {head + "  @1 = no_such_op(x)\n", "line 3: unknown operation 'no_such_op'"},
        {head + "  @1 = transpose{perms=[1, 0]}(x)\n", "line 3: transpose has no attribute 'perms' (it has: perm)"},
        {head + "  @1 = transpose{perm=\"a\"}(x)\n", "line 3: expected a value of kind array"},
        {head + "  @1 = relu(y)\n", "line 3: 'y' is not defined before it is used"},
        {head + "  x = relu(x)\n", "line 3: 'x' is defined twice"},
        {head + "  @1 = relu(x\n", "line 3: expected ')' after the inputs of relu, found the end of the line"},
        {head + "  @1 = relu(x) -> float32[3, 2]\n", "line 3: relu gives float32[2, 3], the text says float32[3, 2]"},
        {head + "  @1 = relu(x) -> float32[2, q]\n", "line 3: expected a shape after '->': malformed shape"},
        {head + "  @1 = relu(x) float32[2, 3]\n", "line 3: expected the end of the line after relu, found 'float32[2, 3]'"},
        {head + "  @1 = add(x, @0)\n", "line 3: '@0' is not defined"},
        {head + "  @1 = @literal{float32[3] {1, 2}}\n", "line 3: literal @1 of shape float32[3] needs 3 values, the text has 2"},
        {head + "  @1 = @literal{float32[2] {1, x}}\n", "line 3: expected a number, found 'x'"},
        {head + "  @1 = @literal{bool[1] {2}}\n", "line 3: expected true or false, found '2'"},
        {head + "  @1 = @literal{string[1] {\"open}}\n", "line 3: a string that does not end"},
        {head + "  @1 = @literal{float32[{n=1:4}] {1}}\n", "line 3: a literal needs a static tensor shape"},
        {head + "  @1 = constant_of_shape{value={shape: \"float32[1]\", data: <40 bytes>}}(x)\n",
         "line 3: a binary value printed only by its size"},
        {head + "  @1 = transpose{perm=[1, 0], perm=[0, 1]}(x)\n", "line 3: attribute 'perm' given twice"},
        {head + "  @return(x)\n  @2 = relu(x)\n", "line 4: nothing may follow the @return"},
        {head + "  @1 = add(x, x) [body]\n", "line 3: no module named 'body'"},
        {head + "  @1 = add(x, @literal)\n", "line 3: '@literal' is not defined"},
        {head + "  = relu(x)\n", "line 3: expected an instruction name or @return, found '= relu(x)'"},
        {head + "  @1 = @param -> float32[1]\n  x = @param -> float32[1]\n", "line 4: 'x' is defined twice"},
    };
    for (auto& [text, want] : cases) {
        SCOPED_TRACE(text);
        auto message = error_of([&] { parse_program(text); });
        EXPECT_NE(message.find(want), std::string::npos) << message;
    }
}

TEST(module_text, op_errors_keep_their_code_and_name_the_line) {
    try {
        parse_module("module main\n  x = @param -> float32[2]\n  y = @param -> float32[3]\n  @2 = add(x, y)\n");
        FAIL() << "no error";
    } catch (const kiln::error& e) {
        EXPECT_EQ(e.code(), error_code::shape);
        EXPECT_EQ(e.message().rfind("line 4: ", 0), 0u) << e.what();
    }
}

TEST(module_text, modules_that_refer_to_themselves_or_come_twice) {
    auto loop = "module main\n  c = @param -> bool[]\n  @1 = if(c) [a, a] -> tuple()\n  @return\n\n"
                "module a\n  c = @param -> bool[]\n  @1 = if(c) [a, a] -> tuple()\n  @return\n";
    EXPECT_NE(error_of([&] { parse_program(loop); }).find("line 8: module 'a' refers to itself"), std::string::npos);
    auto twice = "module main\n  @return\n\nmodule b\n  @return\n\nmodule b\n  @return\n";
    EXPECT_NE(error_of([&] { parse_program(twice); }).find("line 7: a second module named 'b'"), std::string::npos);
    EXPECT_NE(error_of([&] { parse_program("module other\n  @return\n"); }).find("line 1: a program's first module is 'main'"),
              std::string::npos);
    EXPECT_NE(error_of([&] { parse_module(twice); }).find("line 4: a second module"), std::string::npos);
}

// Random edits of a valid text never crash the reader: each one reads or is a kiln error.
TEST(module_text, mangled_text_is_read_or_refused_never_a_crash) {
    const std::string valid = R"(module main
  c = @param -> bool[]
  x = @param -> float32[{batch=1:8:[2]}, 3]
  s = @param -> int64[2]
  @3 = @literal{float32[3] {1, -2.5, 1e-05}} -> float32[3]
  @4 = add(x, @3) -> float32[{batch=1:8:[2]}, 3]
  @5 = transpose{perm=[1, 0]}(@4) -> float32[3, {batch=1:8:[2]}]
  @6 = constant_of_shape{value={shape: "float32[1]", data: 0x00002040}}(s) -> float32[{0:?}, {0:?}]
  @7 = @literal{string[2] {"a", "b\"c"}} -> string[2]
  @8 = if{then_captured=["x"], else_captured=["x"]}(c, x, x) [then_branch, else_branch] -> tuple(float32[{batch=1:8:[2]}, 3])
  @9 = get_tuple_elem{index=0}(@8) -> float32[{batch=1:8:[2]}, 3]
  @return(@5, @6, @7, @9)

module then_branch
  x = @param -> float32[{batch=1:8:[2]}, 3]
  @1 = relu(x) -> float32[{batch=1:8:[2]}, 3]
  @return(@1)

module else_branch
  x = @param -> float32[{batch=1:8:[2]}, 3]
  @return(x)
)";
    ASSERT_NO_THROW(parse_program(valid));
    const std::string alphabet = "@{}[]()<>=,:.\"\\-+ \n0123456789?xae_";
    std::mt19937 gen(19);
    std::size_t refused = 0;
    for (int trial = 0; trial < 3000; ++trial) {
        std::string t = valid;
        for (int edits = 1 + static_cast<int>(gen() % 3); edits > 0; --edits) {
            std::size_t at = gen() % t.size();
            switch (gen() % 4) {
                case 0: t.erase(at, 1 + gen() % 4); break;
                case 1: t.insert(at, 1, alphabet[gen() % alphabet.size()]); break;
                case 2: t[at] = alphabet[gen() % alphabet.size()]; break;
                default: {
                    std::size_t from = gen() % t.size();
                    t.insert(at, t.substr(from, 1 + gen() % 12));
                }
            }
        }
        try {
            auto p = parse_program(t);
            (void)p.to_string();
        } catch (const kiln::error&) {
            ++refused;
        } catch (const std::exception& e) {
            ADD_FAILURE() << "not a kiln error: " << e.what() << " for\n" << t;
        }
    }
    EXPECT_GT(refused, 1000u);
}
