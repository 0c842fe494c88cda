// The committed ABI of the C API (tests/capi/kiln_c.abi) and what kiln.h declares now,
// in one normalized form: "kiln_status kiln_f(kiln_program program, size_t* count);".
#pragma once
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

namespace kiln_test {

struct abi {
    std::map<std::string, std::string> functions;  // name -> prototype
    std::map<std::string, long> constants;         // KILN_STATUS_SHAPE -> 3
};

inline std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// The tokens joined the way kiln.h writes them: "const size_t** lens", "f(void);".
inline std::string normalize(const std::string& s) {
    static const std::regex token(R"(\w+|[()*,;])");
    std::string out, prev;
    for (auto it = std::sregex_iterator(s.begin(), s.end(), token); it != std::sregex_iterator(); ++it) {
        std::string t = it->str();
        bool tight = out.empty() || prev == "(" || t == ")" || t == "," || t == ";" || t == "*" || t == "(";
        out += (tight ? "" : " ") + t;
        prev = t;
    }
    return out;
}

// The prototype without its parameters' names, which are not part of the ABI:
// "kiln_status kiln_f(kiln_program, size_t*);".
inline std::string signature(const std::string& prototype) {
    auto open = prototype.find('('), close = prototype.rfind(')');
    if (open == std::string::npos || close == std::string::npos) return prototype;
    std::string out = prototype.substr(0, open + 1), params = prototype.substr(open + 1, close - open - 1);
    std::istringstream ss(params);
    bool first = true;
    for (std::string p; std::getline(ss, p, ',');) {
        static const std::regex named(R"(^\s*(.*[\w*])\s+\w+\s*$)");
        std::smatch m;
        if (std::regex_match(p, m, named)) p = m[1];
        p = std::regex_replace(p, std::regex(R"(^\s+|\s+$)"), "");
        out += (first ? "" : ", ") + p;
        first = false;
    }
    return out + prototype.substr(close);
}

inline void add_function(abi& a, const std::string& declaration) {
    static const std::regex proto(R"(^(kiln_status|const char\s*\*)\s*(kiln_\w+)\s*\()");
    std::smatch m;
    auto d = normalize(declaration);
    if (std::regex_search(d, m, proto)) a.functions[m[2]] = d;
}

inline void add_constants(abi& a, const std::string& text) {
    static const std::regex constant(R"((KILN_[A-Z0-9_]+)\s*=\s*(-?\d+))");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), constant); it != std::sregex_iterator(); ++it)
        a.constants[(*it)[1]] = std::stol((*it)[2]);
}

// What include/kiln/kiln.h declares: comments and preprocessor lines dropped.
inline abi read_header() {
    auto text = slurp(std::string(KILN_SOURCE_DIR) + "/include/kiln/kiln.h");
    text = std::regex_replace(text, std::regex(R"(/\*[\s\S]*?\*/)"), " ");
    text = std::regex_replace(text, std::regex(R"((^|\n)\s*#[^\n]*)"), "\n");
    abi a;
    add_constants(a, text);
    std::istringstream ss(text);
    for (std::string statement; std::getline(ss, statement, ';');) add_function(a, statement + ";");
    return a;
}

// The committed list: one prototype or "KILN_X = n" per line, '#' comments.
inline abi read_abi_list() {
    std::istringstream ss(slurp(std::string(KILN_SOURCE_DIR) + "/tests/capi/kiln_c.abi"));
    abi a;
    for (std::string line; std::getline(ss, line);) {
        if (line.empty() || line[0] == '#') continue;
        if (line.rfind("KILN_", 0) == 0)
            add_constants(a, line);
        else
            add_function(a, line);
    }
    return a;
}

}  // namespace kiln_test
