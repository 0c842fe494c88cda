// The cpu target's kernel selection lists (selection.hpp): docs/architecture.md carries
// them as a table, each names real ops, and the lowering picks by them (the first
// candidate that takes an instruction, a switch removing one).
#include "targets/cpu/selection.hpp"

#include <kiln/register_op.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

std::string file_text(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

TEST(cpu_selection, architecture_doc_has_the_table) {
    const auto doc = file_text(fs::path(KILN_SOURCE_DIR) / "docs/architecture.md");
    const std::string begin = "<!-- selection-table: begin -->\n", end = "<!-- selection-table: end -->";
    const auto b = doc.find(begin), e = doc.find(end);
    ASSERT_NE(b, std::string::npos) << "docs/architecture.md has no selection table";
    ASSERT_NE(e, std::string::npos);
    EXPECT_EQ(doc.substr(b + begin.size(), e - b - begin.size()), kiln::cpu::selection_table_markdown())
        << "docs/architecture.md's table differs from src/targets/cpu/selection.cpp's lists; paste:\n"
        << kiln::cpu::selection_table_markdown();
}

TEST(cpu_selection, candidates_name_real_ops_once) {
    std::set<std::pair<std::string, std::string>> seen;
    for (const auto& c : kiln::cpu::anchor_candidates()) {
        EXPECT_TRUE(kiln::has_op(c.anchor)) << c.anchor;
        EXPECT_TRUE(seen.emplace(c.anchor, c.name).second) << c.anchor << " " << c.name;
        EXPECT_NE(std::string(c.rule), "") << c.name;
    }
    for (const auto& c : kiln::cpu::op_candidates()) {
        std::string op = c.op;
        if (op == "other") continue;
        if (op.back() == '*') op = op.substr(0, op.size() - 1) + "sum";  // reduce_* names reduce_sum
        EXPECT_TRUE(kiln::has_op(op)) << c.op;
        EXPECT_TRUE(seen.emplace(c.op, c.name).second) << c.op << " " << c.name;
    }
}

// Each anchor's list ends with oneDNN, which takes whatever it builds a primitive for.
TEST(cpu_selection, anchor_lists_end_with_onednn) {
    std::string last_conv, last_matmul;
    for (const auto& c : kiln::cpu::anchor_candidates())
        (std::string(c.anchor) == "convolution" ? last_conv : last_matmul) = c.name;
    EXPECT_EQ(last_conv, "onednn");
    EXPECT_EQ(last_matmul, "onednn");
}

}  // namespace
