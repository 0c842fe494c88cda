// The source scanner the op-name tests share (passes_no_op_names_test.cpp for src/passes,
// cpu_no_op_names_test.cpp for the cpu target): a file's text, its code with comments
// blanked out, and what a rule found.
#pragma once
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace kiln_test::op_name_scan {

namespace fs = std::filesystem;

inline const fs::path source_dir = fs::path(KILN_SOURCE_DIR);

inline std::string file_text(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// `code` with every comment replaced by spaces (newlines kept, so line numbers hold);
// string and character literals (raw strings too) are kept as they are.
inline std::string without_comments(const std::string& code) {
    std::string out = code;
    std::size_t i = 0;
    const std::size_t n = code.size();
    auto blank = [&](std::size_t from, std::size_t to) {
        for (std::size_t k = from; k < to && k < n; ++k)
            if (out[k] != '\n') out[k] = ' ';
    };
    while (i < n) {
        const char c = code[i];
        if (c == '/' && i + 1 < n && code[i + 1] == '/') {
            const auto end = code.find('\n', i);
            const std::size_t stop = end == std::string::npos ? n : end;
            blank(i, stop);
            i = stop;
        } else if (c == '/' && i + 1 < n && code[i + 1] == '*') {
            const auto end = code.find("*/", i + 2);
            const std::size_t stop = end == std::string::npos ? n : end + 2;
            blank(i, stop);
            i = stop;
        } else if (c == 'R' && i + 1 < n && code[i + 1] == '"') {  // R"delim( ... )delim"
            const auto open = code.find('(', i + 2);
            if (open == std::string::npos) break;
            const std::string close = ")" + code.substr(i + 2, open - i - 2) + "\"";
            const auto end = code.find(close, open);
            i = end == std::string::npos ? n : end + close.size();
        } else if (c == '"' || c == '\'') {
            std::size_t k = i + 1;
            while (k < n && code[k] != c && code[k] != '\n') k += code[k] == '\\' ? 2 : 1;
            i = k + 1;
        } else {
            ++i;
        }
    }
    return out;
}

struct finding {
    std::size_t line;
    std::string rule, text;
};

}  // namespace kiln_test::op_name_scan
