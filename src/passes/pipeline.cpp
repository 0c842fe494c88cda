// The target-independent pipeline and the table of passes by name.
#include "passes/common_subexpression_elimination.hpp"
#include "passes/dead_code_elimination.hpp"
#include "passes/propagate_constants.hpp"
#include "passes/memory_coloring.hpp"
#include "passes/simplify_dynamic_ops.hpp"

#include <kiln/errors.hpp>
#include <kiln/pipeline.hpp>

#include <functional>
#include <map>

namespace kiln {

namespace {
const std::map<std::string, std::function<pass()>>& pass_table() {
    static const std::map<std::string, std::function<pass()>> table = {
        {"dead_code_elimination", [] { return pass(dead_code_elimination{}); }},
        {"dce", [] { return pass(dead_code_elimination{}); }},
        {"memory_coloring", [] { return pass(memory_coloring{}); }},
        {"common_subexpression_elimination", [] { return pass(common_subexpression_elimination{}); }},
        {"cse", [] { return pass(common_subexpression_elimination{}); }},
        {"propagate_constants", [] { return pass(propagate_constants{}); }},
        {"simplify_dynamic_ops", [] { return pass(simplify_dynamic_ops{}); }},
    };
    return table;
}
}  // namespace

std::vector<pass> target_independent_passes(const compile_options&) {
    return {
        dead_code_elimination{},
        propagate_constants{},
        dead_code_elimination{},
        common_subexpression_elimination{},
        dead_code_elimination{},
    };
}

std::vector<std::string> get_pass_names() {
    std::vector<std::string> names;
    for (auto& [k, v] : pass_table()) names.push_back(k);
    return names;
}

pass make_pass(const std::string& name) {
    auto it = pass_table().find(name);
    if (it == pass_table().end()) throw_error(error_code::invalid_argument, "unknown pass '" + name + "'");
    return it->second();
}

}  // namespace kiln
