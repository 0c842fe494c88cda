// schedule on lowered modules written as text (pass_text_util.hpp): the ref lowering's
// kernels and allocations, before and after.
#include "pass_text_util.hpp"
#include "passes/memory_coloring.hpp"
#include "passes/schedule.hpp"

using namespace kiln;

namespace {

void run_schedule(module& m) { schedule{}.apply(m); }

std::size_t arena(const module& m) {
    auto b = buffer_intervals(m);
    return assign_offsets(b, 64);
}

// Two branches from x, each a large intermediate reduced to one value, then joined;
// the ref lowering's form with every result in its own allocation.
constexpr const char* branch_by_branch = R"(
    module main
      x = @param -> float32[1024]
      relu_out = allocate{shape="float32[1024]"}
      a1 = ref::kernel{op={name: "relu", attributes: {}}}(x, relu_out)
      sum_a_out = allocate{shape="float32[1]"}
      a2 = ref::kernel{op={name: "reduce_sum", attributes: {axes: [0]}}}(a1, sum_a_out)
      exp_out = allocate{shape="float32[1024]"}
      b1 = ref::kernel{op={name: "exp", attributes: {}}}(x, exp_out)
      sum_b_out = allocate{shape="float32[1]"}
      b2 = ref::kernel{op={name: "reduce_sum", attributes: {axes: [0]}}}(b1, sum_b_out)
      add_out = allocate{shape="float32[1]"}
      y = ref::kernel{op={name: "add", attributes: {}}}(a2, b2, add_out)
      @return(y)
)";

}  // namespace

TEST(schedule_text, finishes_a_branch_before_starting_the_next) {
    // Both 4 KiB intermediates first: both live at once.
    auto interleaved = R"(
        module main
          x = @param -> float32[1024]
          relu_out = allocate{shape="float32[1024]"}
          a1 = ref::kernel{op={name: "relu", attributes: {}}}(x, relu_out)
          exp_out = allocate{shape="float32[1024]"}
          b1 = ref::kernel{op={name: "exp", attributes: {}}}(x, exp_out)
          sum_a_out = allocate{shape="float32[1]"}
          a2 = ref::kernel{op={name: "reduce_sum", attributes: {axes: [0]}}}(a1, sum_a_out)
          sum_b_out = allocate{shape="float32[1]"}
          b2 = ref::kernel{op={name: "reduce_sum", attributes: {axes: [0]}}}(b1, sum_b_out)
          add_out = allocate{shape="float32[1]"}
          y = ref::kernel{op={name: "add", attributes: {}}}(a2, b2, add_out)
          @return(y)
    )";
    EXPECT_EQ(arena(*pass_text::parse(interleaved).get_main_module()), 2 * 4096u + 64u);
    auto after = pass_text::expect_rewrite(interleaved, run_schedule, branch_by_branch);
    EXPECT_EQ(arena(*after.get_main_module()), 4096u + 2 * 64u);
}

TEST(schedule_text, leaves_a_good_order_alone) { pass_text::expect_unchanged(branch_by_branch, run_schedule); }

TEST(schedule_text, keeps_parameters_first_and_the_return_last) {
    // A parameter and a literal read only late stay at the top.
    pass_text::expect_unchanged(R"(
        module main
          x = @param -> float32[1024]
          y = @param -> float32[1]
          k = @literal{float32[1] {2}}
          relu_out = allocate{shape="float32[1024]"}
          a1 = ref::kernel{op={name: "relu", attributes: {}}}(x, relu_out)
          sum_out = allocate{shape="float32[1]"}
          a2 = ref::kernel{op={name: "reduce_sum", attributes: {axes: [0]}}}(a1, sum_out)
          mul_out = allocate{shape="float32[1]"}
          b = ref::kernel{op={name: "mul", attributes: {}}}(a2, k, mul_out)
          add_out = allocate{shape="float32[1]"}
          c = ref::kernel{op={name: "add", attributes: {}}}(b, y, add_out)
          @return(c)
    )", run_schedule);
}
