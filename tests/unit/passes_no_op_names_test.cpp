// Passes ask op traits (op_traits in operation.hpp, declared by each op's traits()) or
// typed matchers (rewrite::is<op::mul_op>(ins), any_cast) instead of op names. This test
// scans src/passes/*.cpp and *.hpp, with comments blanked out, and fails on
//   1. `==` or `!=` with a string literal on either side (`ins->name() == "add"`,
//      `n != "mul"`): a name compared as text;
//   2. a call of `name()` through `.` or `->` (`ins->name()`, `op.name()`): a name read,
//      to be compared through a variable, a list (`fusible_reductions[]`) or a helper
//      (the old `is_op(ins, "mul")`). A pass's own `std::string name() const` is a
//      definition, not a call, and passes compare no other names;
//   3. `make_op(` with a string literal: an op built by its name instead of its struct.
// Attribute keys (`v.find("axes")`), pass names and messages are string literals used
// otherwise and do not match. Names in comments do not count. A helper that compares
// names must read them (rule 2) where it is defined, so one in src/passes is found there;
// a helper defined outside src/passes, called with a name, is not seen by this scan.
// (On the code before the traits, the scan found 40 lines in 8 of its files.)
#include "unit/op_name_scan.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace kiln_test::op_name_scan;

// The op-name uses (rules 1-3 above) in `code`, one per matching line and rule.
std::vector<finding> op_name_uses(const std::string& code) {
    static const std::vector<std::pair<std::string, std::regex>> rules = {
        {"string compared with == or !=", std::regex(R"re("[^"\n]*"\s*[!=]=|[!=]=\s*"|[!=]=\s*R")re")},
        {"name() called", std::regex(R"((\.|->)\s*name\s*\()")},
        {"make_op by name", std::regex(R"re(make_op\s*\(\s*"|make_op\s*\(\s*R")re")},
    };
    std::vector<finding> found;
    std::istringstream lines(without_comments(code));
    std::size_t number = 0;
    for (std::string line; std::getline(lines, line);) {
        ++number;
        for (const auto& [rule, re] : rules)
            if (std::regex_search(line, re)) found.push_back({number, rule, line});
    }
    return found;
}

}  // namespace

TEST(passes_no_op_names, the_scanner_finds_what_it_should) {
    EXPECT_EQ(op_name_uses(R"(if (ins->name() == "add") return;)").size(), 2u);  // rules 1 and 2
    EXPECT_EQ(op_name_uses(R"(return n == "reshape" || n != "flatten";)").size(), 1u);
    EXPECT_EQ(op_name_uses(R"(if ("mul" == name) x();)").size(), 1u);
    EXPECT_EQ(op_name_uses(R"(const auto n = ins.name();)").size(), 1u);
    EXPECT_EQ(op_name_uses(R"(auto n = ins -> name ();)").size(), 1u);
    EXPECT_EQ(op_name_uses(R"(m.replace_instruction(ins, make_op("mul"), {a, b});)").size(), 1u);
    // Comments, pass names, attribute keys, messages and other members are fine.
    EXPECT_TRUE(op_name_uses("// ins->name() == \"add\"\nint x = 1;").empty());
    EXPECT_TRUE(op_name_uses("/* n == \"add\"\n   op.name() */ int y = 2;").empty());
    EXPECT_TRUE(op_name_uses(R"(std::string name() const { return "split_batch"; })").empty());
    EXPECT_TRUE(op_name_uses(R"(if (const auto* a = v.find("axes"); a && a->is_array()) {})").empty());
    EXPECT_TRUE(op_name_uses(R"(throw_error(code, "a == b // not a comment");)").empty());
    EXPECT_TRUE(op_name_uses(R"(if (b.is_param() && !captured.count(b.param_name())) {})").empty());
    EXPECT_TRUE(op_name_uses(R"(if (rewrite::is<op::mul_op>(ins) && t.commutative) {})").empty());
    // A comment marker inside a string does not hide what follows the string.
    EXPECT_EQ(op_name_uses(R"(f("//"); if (op.name() == "add") {})").size(), 2u);
}

TEST(passes_no_op_names, passes_ask_traits_or_types_not_names) {
    std::size_t files = 0;
    for (const auto& e : fs::directory_iterator(source_dir / "src/passes")) {
        if (!e.is_regular_file()) continue;
        const auto ext = e.path().extension();
        if (ext != ".cpp" && ext != ".hpp") continue;
        ++files;
        const auto rel = fs::relative(e.path(), source_dir).generic_string();
        for (const auto& f : op_name_uses(file_text(e.path())))
            ADD_FAILURE() << rel << ":" << f.line << ": " << f.rule << ": " << f.text
                          << "\n  ask an op trait (op_traits, declared in the op's traits()) or a typed matcher "
                             "(rewrite::is<op::...>(ins)) instead of the op's name";
    }
    EXPECT_GE(files, 20u);
}
