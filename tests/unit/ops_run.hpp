// How many times each op ran in one profiled eval of a compiled program (tests that check
// which kernels a program runs, e.g. that no reference kernel does).
#pragma once
#include <kiln/program.hpp>

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace kiln::test {

inline std::map<std::string, std::size_t> ops_run(program& p, const param_map& in) {
    std::vector<instruction_profile> profile;
    p.eval(in, profile);
    std::map<std::string, std::size_t> n;
    for (auto& e : profile) ++n[e.op_name];
    return n;
}

}  // namespace kiln::test
