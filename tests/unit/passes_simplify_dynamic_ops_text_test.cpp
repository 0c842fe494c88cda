// simplify_dynamic_ops as before/after text (pass_text_util.hpp), followed by dead-code
// elimination: run-time forms whose shape inputs are known become static ops, shape_of of
// fixed dims and value-dependent ops of known inputs become literals. Static modules are
// also evaluated before and after (bitwise).
#include "pass_text_util.hpp"
#include "passes/dead_code_elimination.hpp"
#include "passes/simplify_dynamic_ops.hpp"
#include "passes_test_util.hpp"

using namespace kiln;

namespace {

void simplify(module& m) {
    simplify_dynamic_ops{}.apply(m);
    dead_code_elimination{}.apply(m);
}

void expect_simplified(std::string_view before, std::string_view after) {
    auto q = passes_test::check_same_results(pass_text::parse(before), simplify, 0, 0);
    EXPECT_TRUE(pass_text::module_matches(*q.get_main_module(), after));
}

}  // namespace

TEST(simplify_dynamic_ops_text, exporter_shape_arithmetic_becomes_a_static_reshape) {
    // reshape(y, concat(gather(shape(x), [1, 0]), [-1])) with x static: [3, 2, -1].
    expect_simplified(R"(
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
    )", R"(
        module main
          x = @param -> float32[2, 3]
          y = @param -> float32[3, 2, 4]
          r = reshape{dims=[3, 2, -1]}(y)
          @return(r)
    )");
}

TEST(simplify_dynamic_ops_text, shape_of_folds_only_the_fixed_dims) {
    // x's batch is dynamic: shape_of{start=1} reads only fixed dims, the full shape not.
    pass_text::expect_rewrite(R"(
        module main
          x = @param -> float32[{batch=1:8}, 3, 5]
          tail = shape_of{start=1}(x)
          all = shape_of(x)
          @return(tail, all)
    )", simplify, R"(
        module main
          x = @param -> float32[{batch=1:8}, 3, 5]
          tail = @literal{int64[2] {3, 5}}
          all = shape_of(x)
          @return(tail, all)
    )");
}

TEST(simplify_dynamic_ops_text, known_inputs_make_literals_and_static_ops) {
    // range and nonzero of literals are literals; constant_of_shape of a known shape is a
    // broadcast scalar; split_dynamic of a static x is split into even parts.
    expect_simplified(R"(
        module main
          x = @param -> float32[4, 6]
          z = @literal{int64[] {0}}
          f = @literal{int64[] {5}}
          t = @literal{int64[] {2}}
          r = range(z, f, t)
          n = @literal{int64[4] {0, 3, 0, 1}}
          nz = nonzero(n)
          s = @literal{int64[2] {2, 2}}
          c = constant_of_shape{value={shape: "float32[]", data: 0x00002040}}(s)
          sp = split_dynamic{axis=1, count=3}(x)
          g = get_tuple_elem{index=2}(sp)
          @return(r, nz, c, g)
    )", R"(
        module main
          x = @param -> float32[4, 6]
          r = @literal{int64[3] {0, 2, 4}}
          nz = @literal{int64[1, 2] {1, 3}}
          k = @literal{float32[] {2.5}}
          c = broadcast{dims=[2, 2]}(k)
          sp = split{axis=1, sizes=[2, 2, 2]}(x)
          g = get_tuple_elem{index=2}(sp)
          @return(r, nz, c, g)
    )");
}

TEST(simplify_dynamic_ops_text, run_time_values_stay) {
    // The shape comes from a parameter, nonzero reads one: nothing is known.
    pass_text::expect_unchanged(R"(
        module main
          x = @param -> float32[2, 3]
          s = @param -> int64[1]
          r = reshape_dynamic(x, s)
          nz = nonzero(x)
          @return(r, nz)
    )", simplify);
}
