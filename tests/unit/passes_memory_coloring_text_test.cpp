// memory_coloring as before/after text (pass_text_util.hpp) on modules in the ref
// lowering's form: each kernel writes into an `allocate`d buffer, which planning turns
// into a `load` at an offset of the `#scratch` arena (64-byte alignment). Offsets follow
// from the liveness intervals: largest buffer first, then earliest, at the lowest offset
// free over its whole interval.
#include "pass_text_util.hpp"
#include "passes/memory_coloring.hpp"

using namespace kiln;
using pass_text::expect_rewrite;
using pass_text::expect_unchanged;

namespace {

void plan(module& m) { memory_coloring{}.apply(m); }

// relu -> exp -> neg -> sigmoid, each result read only by the next: a buffer dies when the
// next kernel has read it, so the third reuses the first one's place.
constexpr const char* chain = R"(
    module main
      x = @param -> float32[1024]
      a_out = allocate{shape="float32[1024]"}
      a = ref::kernel{op={name: "relu", attributes: {}}}(x, a_out)
      b_out = allocate{shape="float32[1024]"}
      b = ref::kernel{op={name: "exp", attributes: {}}}(a, b_out)
      c_out = allocate{shape="float32[1024]"}
      c = ref::kernel{op={name: "neg", attributes: {}}}(b, c_out)
      d_out = allocate{shape="float32[1024]"}
      d = ref::kernel{op={name: "sigmoid", attributes: {}}}(c, d_out)
      @return(d)
)";

constexpr const char* chain_planned = R"(
    module main
      #scratch = @param -> uint8[8192]
      x = @param -> float32[1024]
      a_out = load{shape="float32[1024]", offset=0}(#scratch)
      a = ref::kernel{op={name: "relu", attributes: {}}}(x, a_out)
      b_out = load{shape="float32[1024]", offset=4096}(#scratch)
      b = ref::kernel{op={name: "exp", attributes: {}}}(a, b_out)
      c_out = load{shape="float32[1024]", offset=0}(#scratch)
      c = ref::kernel{op={name: "neg", attributes: {}}}(b, c_out)
      d_out = allocate{shape="float32[1024]"}
      d = ref::kernel{op={name: "sigmoid", attributes: {}}}(c, d_out)
      @return(d)
)";

}  // namespace

TEST(memory_coloring_text, a_chain_reuses_dead_buffers_and_leaves_the_result_alone) {
    // a_out lives over [a_out, b], b_out over [b_out, c], c_out over [c_out, d]: c_out
    // fits where a_out was. d_out reaches the @return: the caller's buffer, not planned.
    expect_rewrite(chain, plan, chain_planned);
}

TEST(memory_coloring_text, a_view_keeps_its_buffer_alive) {
    // v is a view of a (output_alias): a_out lives until c reads v, so b_out cannot take
    // its place, although a itself is last read by the view.
    expect_rewrite(R"(
        module main
          x = @param -> float32[1024]
          y = @param -> float32[32, 32]
          a_out = allocate{shape="float32[1024]"}
          a = ref::kernel{op={name: "relu", attributes: {}}}(x, a_out)
          v = reshape{dims=[32, 32]}(a)
          b_out = allocate{shape="float32[32, 32]"}
          b = ref::kernel{op={name: "exp", attributes: {}}}(y, b_out)
          c_out = allocate{shape="float32[32, 32]"}
          c = ref::kernel{op={name: "add", attributes: {}}}(v, b, c_out)
          @return(c)
    )", plan, R"(
        module main
          #scratch = @param -> uint8[8192]
          x = @param -> float32[1024]
          y = @param -> float32[32, 32]
          a_out = load{shape="float32[1024]", offset=0}(#scratch)
          a = ref::kernel{op={name: "relu", attributes: {}}}(x, a_out)
          v = reshape{dims=[32, 32]}(a)
          b_out = load{shape="float32[32, 32]", offset=4096}(#scratch)
          b = ref::kernel{op={name: "exp", attributes: {}}}(y, b_out)
          c_out = allocate{shape="float32[32, 32]"}
          c = ref::kernel{op={name: "add", attributes: {}}}(v, b, c_out)
          @return(c)
    )");
}

TEST(memory_coloring_text, the_largest_buffer_goes_first) {
    // s_out (64 bytes) is allocated first but placed after big_out (4 KiB), which is
    // live at the same time; t_out, live with both, goes after s_out (64-byte aligned);
    // r_out, live with big_out and t_out but after s's last reader, takes s_out's place.
    expect_rewrite(R"(
        module main
          x = @param -> float32[16]
          y = @param -> float32[1024]
          s_out = allocate{shape="float32[16]"}
          s = ref::kernel{op={name: "relu", attributes: {}}}(x, s_out)
          big_out = allocate{shape="float32[1024]"}
          big = ref::kernel{op={name: "exp", attributes: {}}}(y, big_out)
          t_out = allocate{shape="float32[16]"}
          t = ref::kernel{op={name: "neg", attributes: {}}}(s, t_out)
          r_out = allocate{shape="float32[1]"}
          r = ref::kernel{op={name: "reduce_sum", attributes: {axes: [0]}}}(big, r_out)
          u_out = allocate{shape="float32[16]"}
          u = ref::kernel{op={name: "add", attributes: {}}}(t, r, u_out)
          @return(u)
    )", plan, R"(
        module main
          #scratch = @param -> uint8[4224]
          x = @param -> float32[16]
          y = @param -> float32[1024]
          s_out = load{shape="float32[16]", offset=4096}(#scratch)
          s = ref::kernel{op={name: "relu", attributes: {}}}(x, s_out)
          big_out = load{shape="float32[1024]", offset=0}(#scratch)
          big = ref::kernel{op={name: "exp", attributes: {}}}(y, big_out)
          t_out = load{shape="float32[16]", offset=4160}(#scratch)
          t = ref::kernel{op={name: "neg", attributes: {}}}(s, t_out)
          r_out = load{shape="float32[1]", offset=4096}(#scratch)
          r = ref::kernel{op={name: "reduce_sum", attributes: {axes: [0]}}}(big, r_out)
          u_out = allocate{shape="float32[16]"}
          u = ref::kernel{op={name: "add", attributes: {}}}(t, r, u_out)
          @return(u)
    )");
}

TEST(memory_coloring_text, a_planned_module_stays_as_it_is) {
    // Planning twice is planning once: the #scratch parameter says it was done.
    expect_unchanged(chain_planned, plan);
}

TEST(memory_coloring_text, nothing_to_plan_adds_no_arena) {
    // No buffers at all (not lowered), and only the result's buffer.
    expect_unchanged(R"(
        module main
          x = @param -> float32[4]
          y = relu(x)
          @return(y)
    )", plan);
    expect_unchanged(R"(
        module main
          x = @param -> float32[4]
          y_out = allocate{shape="float32[4]"}
          y = ref::kernel{op={name: "relu", attributes: {}}}(x, y_out)
          @return(y)
    )", plan);
}
