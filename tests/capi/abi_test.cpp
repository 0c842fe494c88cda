// The C API's ABI against the committed list tests/capi/kiln_c.abi: a function that
// disappears from libkiln_c, or whose prototype in kiln.h changes, and an enum constant
// that changes its number, fail here. A new function must be added to the list (the
// failure prints its line), so the list stays the whole ABI. libkiln_c must export
// nothing but kiln_* (its version script).
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <sstream>

#include "abi_list.hpp"

namespace {

// Defined dynamic symbols of the C library, as "name@@VERSION" -> nm's type letter.
std::map<std::string, std::string> exported_symbols() {
    std::map<std::string, std::string> out;
    std::string cmd = std::string("nm -D --defined-only '") + KILN_C_LIBRARY + "'";
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return out;
    char line[4096];
    while (fgets(line, sizeof line, p)) {
        std::istringstream ss(line);
        std::string addr, type, name;
        if (ss >> addr >> type >> name) out[name] = type;
    }
    pclose(p);
    return out;
}

}  // namespace

TEST(capi_abi, exports_only_kiln_functions) {
    auto symbols = exported_symbols();
    ASSERT_FALSE(symbols.empty()) << "nm found no symbols in " << KILN_C_LIBRARY;
    for (auto& [name, type] : symbols) {
        if (type == "A") continue;  // the version node itself (KILN_C_0)
        EXPECT_EQ(name.rfind("kiln_", 0), 0u) << name << " is exported; only kiln_* may be (src/capi/kiln_c.map)";
        EXPECT_NE(name.find("@@KILN_C_0"), std::string::npos) << name << " lacks the symbol version";
        EXPECT_EQ(type, "T") << name << " is not a function";
    }
}

TEST(capi_abi, nothing_disappears_or_changes) {
    auto list = kiln_test::read_abi_list();
    auto header = kiln_test::read_header();
    ASSERT_GT(list.functions.size(), 50u);
    std::set<std::string> exported;
    for (auto& [name, type] : exported_symbols()) exported.insert(name.substr(0, name.find('@')));
    for (auto& [name, prototype] : list.functions) {
        EXPECT_TRUE(exported.count(name)) << name << " disappeared from libkiln_c";
        auto it = header.functions.find(name);
        if (it == header.functions.end()) {
            ADD_FAILURE() << name << " disappeared from kiln.h";
        } else {
            EXPECT_EQ(kiln_test::signature(it->second), kiln_test::signature(prototype))
                << name << " changed its signature";
        }
    }
    for (auto& [name, value] : list.constants) {
        auto it = header.constants.find(name);
        if (it == header.constants.end())
            ADD_FAILURE() << name << " disappeared from kiln.h";
        else
            EXPECT_EQ(it->second, value) << name << " changed its number";
    }
}

TEST(capi_abi, the_list_is_complete) {
    auto list = kiln_test::read_abi_list();
    auto header = kiln_test::read_header();
    for (auto& [name, prototype] : header.functions)
        EXPECT_TRUE(list.functions.count(name)) << "new function: add this line to tests/capi/kiln_c.abi:\n"
                                                << prototype;
    for (auto& [name, value] : header.constants)
        EXPECT_TRUE(list.constants.count(name)) << "new constant: add this line to tests/capi/kiln_c.abi:\n"
                                                << name << " = " << value;
    for (auto& [name, type] : [] {
             std::map<std::string, std::string> m;
             for (auto& [n, t] : exported_symbols())
                 if (t != "A") m[n.substr(0, n.find('@'))] = t;
             return m;
         }())
        EXPECT_TRUE(header.functions.count(name)) << name << " is exported but not declared in kiln.h";
}
