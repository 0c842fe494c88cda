// cpu::widen_reduced_precision as before/after text (pass_text_util.hpp): 16-bit float
// instructions rebuilt in float32, converts between float32 and 16 bits dropped, 16-bit
// constants widened once, 16-bit results someone still needs converted back. (target_type
// is the element type's number: 9 float16, 11 float32.)
#include "pass_text_util.hpp"
#include "targets/cpu/widen_reduced.hpp"

#include <gtest/gtest.h>

using namespace kiln;
using pass_text::expect_rewrite;

namespace {
void widen(module& m) { cpu::widen_reduced_precision{}.apply(m); }
}  // namespace

TEST(cpu_widen_reduced, a_quantized_chain_computes_in_float32) {
    expect_rewrite(R"(
        module main
          x = @param -> float32[2, 4]
          w = @literal{float16[4, 3] {1, 0.5, 2, -1, 0, 0.25, 3, 1, -2, 1, 1, 1}}
          h = convert{target_type=9}(x)
          y = matmul(h, w)
          r = relu(y)
          o = convert{target_type=11}(r)
          @return(o)
    )", widen, R"(
        module main
          x = @param -> float32[2, 4]
          w = @literal{float32[4, 3] {1, 0.5, 2, -1, 0, 0.25, 3, 1, -2, 1, 1, 1}}
          y = matmul(x, w)
          r = relu(y)
          @return(r)
    )");
}

TEST(cpu_widen_reduced, a_16_bit_output_stays_16_bit) {
    expect_rewrite(R"(
        module main
          x = @param -> float16[2, 3]
          r = relu(x)
          @return(r)
    )", widen, R"(
        module main
          x = @param -> float16[2, 3]
          c = convert{target_type=11}(x)
          r = relu(c)
          n = convert{target_type=9}(r)
          @return(n)
    )");
}
