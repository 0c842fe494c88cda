// Pass tests as text, before and after (the text form of module_text.hpp):
//
//     expect_rewrite(R"(
//         module main
//           x = @param -> float32[2, 3]
//           one = @literal{float32[1] {1}}
//           y = mul(x, one)
//           @return(y)
//     )", simplify, R"(
//         module main
//           x = @param -> float32[2, 3]
//           @return(x)
//     )");
//
// Both texts are read and printed again, so instruction names are labels (printing
// numbers them by position) and shapes may be left out. Weights come by name from a
// literal_map; in the expected text, a literal written `{...}` that the map does not name
// matches any values of its shape (a folded weight: its numbers are the evaluation
// check's business, passes_test::check_same_results).
#pragma once
#include <kiln/module_text.hpp>
#include <kiln/program.hpp>

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::pass_text {

using literal_map = std::map<std::string, literal>;
using pass_fn = std::function<void(module&)>;

// The program whose modules `text` states, weights named in `literals` taken from there.
inline program parse(std::string_view text, const literal_map& literals = {}) {
    return parse_program(text, {literals_by_name(literals)});
}

namespace detail {
inline std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
}

// "  @3 = @literal{float32[4] {1, 2, 3, 4}} -> float32[4]" without its values.
inline std::string without_literal_values(const std::string& line) {
    auto open = line.find("@literal{");
    if (open == std::string::npos) return line;
    auto values = line.find(" {", open);
    auto close = line.rfind("} -> ");
    if (values == std::string::npos || close == std::string::npos || close < values) return line;
    return line.substr(0, values) + " {...}" + line.substr(close);
}
}  // namespace detail

// Compares `actual` with the module `expected` states (its first module), names
// normalised by printing both. Literals the map names are compared whole (print shows
// six values), those written whole by their text.
inline ::testing::AssertionResult module_matches(const module& actual, std::string_view expected,
                                                 const literal_map& literals = {}) {
    // Positions (line numbers of the printed form: line 0 is "module NAME") of literals
    // that match any values, and of those the map gives.
    std::set<std::size_t> any_values;
    std::map<std::size_t, literal> named;
    auto by_name = literals_by_name(literals);
    text_parse_options options;
    options.literals = [&](const literal_ref& ref) -> std::optional<literal> {
        if (auto l = by_name(ref)) {
            named.emplace(ref.index, *l);
            return l;
        }
        if (!ref.elided) return std::nullopt;
        any_values.insert(ref.index + 1);
        return literal(ref.s, std::vector<double>(ref.s.elements(), 0.0));
    };
    std::string want;
    try {
        want = parse_program(expected, options).get_main_module()->to_string();
    } catch (const std::exception& e) {
        return ::testing::AssertionFailure() << "the expected text does not read: " << e.what();
    }
    auto got = actual.to_string();
    auto got_lines = detail::lines_of(got), want_lines = detail::lines_of(want);
    bool same = got_lines.size() == want_lines.size();
    for (std::size_t i = 0; same && i < got_lines.size(); ++i) {
        if (any_values.count(i))
            same = detail::without_literal_values(got_lines[i]) == detail::without_literal_values(want_lines[i]);
        else
            same = got_lines[i] == want_lines[i];
    }
    if (!same) return ::testing::AssertionFailure() << "module is\n" << got << "expected\n" << want;
    std::size_t i = 0;
    for (auto& ins : actual) {
        auto it = named.find(i++);
        if (it != named.end() && !(ins.get_literal() == it->second))
            return ::testing::AssertionFailure() << "literal @" << i - 1 << " is " << ins.get_literal().to_string(64)
                                                 << "\nexpected " << it->second.to_string(64);
    }
    return ::testing::AssertionSuccess();
}

// Reads `before`, runs `pass` on its main module, checks the module is still valid and
// matches `after`. Returns the program after the pass, for further checks.
inline program expect_rewrite(std::string_view before, const pass_fn& pass, std::string_view after,
                              const literal_map& literals = {}) {
    program p = parse(before, literals);
    pass(*p.get_main_module());
    p.get_main_module()->validate();
    EXPECT_TRUE(module_matches(*p.get_main_module(), after, literals));
    return p;
}

// The pass leaves the module as it was.
inline void expect_unchanged(std::string_view text, const pass_fn& pass, const literal_map& literals = {}) {
    expect_rewrite(text, pass, text, literals);
}

// Printing `p`, reading that back with p's own literals and printing again gives the
// same text.
inline void expect_text_round_trip(const program& p) {
    auto text = p.to_string();
    try {
        EXPECT_EQ(parse_program(text, {literals_of(p)}).to_string(), text);
    } catch (const std::exception& e) {
        ADD_FAILURE() << e.what() << " in\n" << text;
    }
}

}  // namespace kiln::pass_text
