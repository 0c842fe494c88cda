// How many times each op ran in one profiled eval of a compiled program (tests that check
// which kernels a program runs, e.g. that no reference kernel does), and the compile of a
// program pair whose cpu half runs every call on its generic program.
#pragma once
#include <kiln/program.hpp>
#include <kiln/target.hpp>

#include <gtest/gtest.h>

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

// `cpu` compiled for the cpu target with every call on its generic program (no
// specialization), `ref` for the reference target; whether the generic program was made.
inline bool compile_generic_pair(program& cpu, program& ref) {
    compile_options o;
    o.specialize_after = 0;
    cpu.compile(*get_target("cpu"), o);
    ref.compile(*get_target("ref"), o);
    EXPECT_TRUE(cpu.get_specialization_stats().generic) << cpu.get_specialization_stats().generic_unavailable;
    return cpu.get_specialization_stats().generic;
}

}  // namespace kiln::test
