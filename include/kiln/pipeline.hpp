// The target-independent part of compilation: clean-up and simplification passes
// every target runs before its own lowering.
#pragma once
#include <kiln/compile_options.hpp>
#include <kiln/pass.hpp>

#include <string>
#include <vector>

namespace kiln {

std::vector<pass> target_independent_passes(const compile_options& opts);

// Every pass known by name, for `kiln read --passes=dce,cse` and tests.
std::vector<std::string> get_pass_names();
pass make_pass(const std::string& name);  // throws invalid_argument when unknown

}  // namespace kiln
