// Output comparison with the ONNX backend runner's rules: same count, exact shape,
// same element type, strings exact, otherwise |a-b| <= atol + rtol*|b| elementwise,
// NaN equals NaN, infinities exactly.
#pragma once
#include <kiln/argument.hpp>

#include <string>

namespace kiln::conformance {

struct tolerance {
    double rtol = 1e-3;
    double atol = 1e-7;
};

// Empty string when `actual` matches `expected`, else a one-line reason.
std::string compare(const argument& actual, const argument& expected, const tolerance& tol);

}  // namespace kiln::conformance
