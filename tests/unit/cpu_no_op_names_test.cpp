// The cpu and gpu targets (src/targets/cpu, src/targets/gpu), their shared kernel generator
// (src/codegen) and src/core/dynamic_padding.cpp ask op traits or typed
// matchers (rewrite::is<op::mul_op>(ins), any_cast) instead of op names, as src/passes
// does (passes_no_op_names_test.cpp). The cpu target's code also compares strings that are
// not op names (post-op kinds, oneDNN algorithms, option values), so this scan, on the
// same comment-blanked code, fails on
//   1. `==` or `!=` with a string literal that names a registered op (or a builtin, "@..."):
//      `n == "mul"`, `"relu" != x->name()`;
//   2. a call of `name()` through `.` or `->`, except in a message: on a line that calls
//      throw_error, or where the name is joined to a string literal by `+` or `<<`;
//   3. `make_op(` with a string literal.
// Names the target keys data by are allowed where that data is defined, listed below
// with the reason; an entry that no longer matches anything fails too, so the list stays
// as short as the code allows. (On the code before the traits, rules 1-3 found 139 lines
// in 28 of these files; 44 lines in 17 files are left, all in the allow-list.)
#include "unit/op_name_scan.hpp"

#include <kiln/register_op.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace {

using namespace kiln_test::op_name_scan;

struct allowed {
    const char* path;      // a file, or a folder ending in '/'
    const char* fragment;  // on the line; "" for any line of the file
    const char* why;
};

// The places that define data keyed by name, and strings that only look like op names.
const std::vector<allowed> allow_list = {
    {"src/targets/cpu/selection.cpp", "ins->name()",
     "the candidate table is keyed by op name; a binary or reduce op's name is also its oneDNN algorithm's"},
    {"src/targets/cpu/lowering_util.cpp", "bool is_cpu_kernel(",
     "defines is_cpu_kernel: the cpu ops share no type or trait, only their name's cpu:: prefix"},
    {"src/codegen/plan.cpp", "",
     "the fused-kernel generator's table of the ops it compiles: its plan nodes carry op names, and expr.cpp "
     "keys each op's C expression by name"},
    {"src/targets/cpu/codegen/interpreter.cpp", "", "runs those plan nodes, by name; reduction kinds (max, min)"},
    {"src/targets/cpu/codegen/emit.cpp", "kind ==", "reduction kinds (max, min), not ops"},
    {"src/targets/gpu/codegen/emit_reduction.cpp", "kind ==", "reduction kinds (max, min), not ops"},
    {"src/targets/cpu/codegen/lowering.cpp", "m.name()", "a module's name, not an op's"},
    {"src/targets/cpu/", "conv_geom(", "a typed convolution's own name, for conv_geom's messages"},
    {"src/targets/cpu/kernels/onednn/dnnl_op.hpp", "self.name()", "the kernel's own name, for its messages"},
    {"src/targets/cpu/tuning.cpp", "trials[", "a candidate kernel's name (the tuning cache's key), not an op's"},
    {"src/targets/cpu/", ".algorithm", "a post-op's oneDNN algorithm (add, relu, ...), not an op"},
    {"src/targets/cpu/", "== \"tanh\"", "gelu's `approximate` attribute, not the tanh op"},
    {"src/codegen/expr.cpp", "== \"tanh\"", "gelu's `approximate` attribute, not the tanh op"},
    {"src/targets/cpu/lower_ops.cpp", "nm == \"floor\"", "resize's `nearest_mode` attribute, not the floor op"},
};

bool is_allowed(const std::string& rel, const std::string& line, std::vector<bool>& used) {
    for (std::size_t i = 0; i < allow_list.size(); ++i) {
        const std::string path = allow_list[i].path;
        const bool in_path = path.back() == '/' ? rel.rfind(path, 0) == 0 : rel == path;
        if (in_path && line.find(allow_list[i].fragment) != std::string::npos) {
            used[i] = true;
            return true;
        }
    }
    return false;
}

// The op-name uses (rules 1-3 above) in `code`, one per matching line and rule; `ops` is
// the set of op names.
std::vector<finding> op_name_uses(const std::string& code, const std::set<std::string>& ops) {
    static const std::regex literal(R"re("((?:[^"\\\n]|\\.)*)")re");
    static const std::regex name_call(R"((\.|->)\s*name\s*\()");
    // The name joined to a string literal: a message.
    static const std::regex message(R"re("\s*(\+|<<)\s*[\w.\->\[\]()*]*name\s*\(\)|name\s*\(\)\s*(\+|<<)\s*")re");
    static const std::regex make_op_by_name(R"re(make_op\s*\(\s*R?")re");
    auto compared = [](const std::string& before, const std::string& after) {
        const auto e = before.find_last_not_of(" \t");
        const std::string b = e == std::string::npos ? "" : before.substr(0, e + 1);
        const auto s = after.find_first_not_of(" \t");
        const std::string a = s == std::string::npos ? "" : after.substr(s);
        auto ends = [&](const char* t) { return b.size() >= 2 && b.compare(b.size() - 2, 2, t) == 0; };
        return ends("==") || ends("!=") || a.rfind("==", 0) == 0 || a.rfind("!=", 0) == 0;
    };
    std::vector<finding> found;
    std::istringstream lines(without_comments(code));
    std::size_t number = 0;
    for (std::string line; std::getline(lines, line);) {
        ++number;
        for (auto it = std::sregex_iterator(line.begin(), line.end(), literal); it != std::sregex_iterator(); ++it) {
            const std::string text = (*it)[1];
            if (!ops.count(text) && text.rfind('@', 0) != 0) continue;
            const auto at = static_cast<std::size_t>(it->position());
            if (compared(line.substr(0, at), line.substr(at + static_cast<std::size_t>(it->length())))) {
                found.push_back({number, "op name compared with == or !=", line});
                break;
            }
        }
        if (std::regex_search(line, name_call) && line.find("throw_error(") == std::string::npos &&
            !std::regex_search(line, message))
            found.push_back({number, "name() called", line});
        if (std::regex_search(line, make_op_by_name)) found.push_back({number, "make_op by name", line});
    }
    return found;
}

std::set<std::string> op_names() {
    const auto names = kiln::get_operator_names();
    return {names.begin(), names.end()};
}

}  // namespace

TEST(cpu_no_op_names, the_scanner_finds_what_it_should) {
    const auto ops = op_names();
    ASSERT_TRUE(ops.count("mul") && ops.count("convolution") && ops.count("get_tuple_elem"));
    EXPECT_EQ(op_name_uses(R"(if (ins->name() == "add") return;)", ops).size(), 2u);  // rules 1 and 2
    EXPECT_EQ(op_name_uses(R"(return n == "reshape" || n != "flatten";)", ops).size(), 1u);
    EXPECT_EQ(op_name_uses(R"(if ("mul" == n) x();)", ops).size(), 1u);
    EXPECT_EQ(op_name_uses(R"(if (n == "@return") x();)", ops).size(), 1u);
    EXPECT_EQ(op_name_uses(R"(const auto n = ins.name();)", ops).size(), 1u);
    EXPECT_EQ(op_name_uses(R"(m.replace_instruction(ins, make_op("add"), {a, b});)", ops).size(), 1u);
    // Strings that are not op names, messages, comments and typed matchers are fine.
    EXPECT_TRUE(op_name_uses(R"(if (p.kind == "binary" && mode != "nearest") {})", ops).empty());
    EXPECT_TRUE(op_name_uses(R"(throw_error(error_code::shape, self.name() + ": bad");)", ops).empty());
    EXPECT_TRUE(op_name_uses(R"(return "op '" + ins.name() + "' is not known";)", ops).empty());
    EXPECT_TRUE(op_name_uses(R"(std::cerr << "module " << m.name() << ": ";)", ops).empty());
    EXPECT_TRUE(op_name_uses("// ins->name() == \"add\"\nint x = 1;", ops).empty());
    EXPECT_TRUE(op_name_uses(R"(std::string name() const { return "cpu::silu"; })", ops).empty());
    EXPECT_TRUE(op_name_uses(R"(if (rewrite::is<op::mul_op>(ins) && t.commutative) {})", ops).empty());
    EXPECT_TRUE(
        op_name_uses(R"re(m["isnan"] = [](const ctx& c) { return "(" + c.a[0] + " != " + c.a[0] + ")"; };)re", ops)
            .empty());
}

TEST(cpu_no_op_names, cpu_target_asks_traits_or_types_not_names) {
    const auto ops = op_names();
    std::vector<fs::path> files{source_dir / "src/core/dynamic_padding.cpp"};
    // The targets' shared generator (src/codegen) and the gpu target follow the same rule.
    for (const char* dir : {"src/targets/cpu", "src/codegen", "src/targets/gpu"})
        for (const auto& e : fs::recursive_directory_iterator(source_dir / dir)) {
            const auto ext = e.path().extension();
            // The kernels' tests (kernels/<kind>/*_test.cpp) build programs by op name on purpose.
            const bool test = e.path().stem().string().ends_with("_test");
            if (e.is_regular_file() && (ext == ".cpp" || ext == ".hpp") && !test) files.push_back(e.path());
        }
    EXPECT_GE(files.size(), 90u);
    std::vector<bool> used(allow_list.size(), false);
    for (const auto& p : files) {
        const auto rel = fs::relative(p, source_dir).generic_string();
        for (const auto& f : op_name_uses(file_text(p), ops)) {
            if (is_allowed(rel, f.text, used)) continue;
            ADD_FAILURE() << rel << ":" << f.line << ": " << f.rule << ": " << f.text
                          << "\n  ask an op trait (op_traits, declared in the op's traits()) or a typed matcher "
                             "(rewrite::is<op::...>(ins), any_cast) instead of the op's name";
        }
    }
    for (std::size_t i = 0; i < allow_list.size(); ++i)
        EXPECT_TRUE(used[i]) << "allow-list entry matches nothing now, remove it: " << allow_list[i].path << " '"
                             << allow_list[i].fragment << "'";
}
