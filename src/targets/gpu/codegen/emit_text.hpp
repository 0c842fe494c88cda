// Pieces of kernel text shared by the CUDA generator's files (emit.cpp: the kernel frame
// and elementwise loops; emit_reduction.cpp: reduction rows).
#pragma once
#include "codegen/expr.hpp"
#include "codegen/plan.hpp"

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace kiln::gpu::codegen::text {

inline std::string v(std::size_t k) { return "v" + std::to_string(k); }

// 16-bit floats are stored as kiln_half / kiln_bf16 (c_type) and held in float: loads
// widen, each 16-bit node's value is rounded once to its type (the reference rounds each
// op's result), stores narrow (kiln_device.h's conversions).
inline bool is_16bit(type t) { return t == type::float16 || t == type::bfloat16; }
inline std::string var_type(type t) { return is_16bit(t) ? "float" : kiln::codegen::c_type(t); }
inline std::string load(type t, const std::string& e) { return is_16bit(t) ? "kiln_ld(" + e + ")" : e; }
inline std::string rounded(type t, const std::string& e) {
    if (!is_16bit(t)) return e;
    return (t == type::float16 ? "kiln_rh(" : "kiln_rb(") + e + ")";
}
inline std::string store(type t, const std::string& e) {
    if (!is_16bit(t)) return e;
    return (t == type::float16 ? "kiln_f2h(" : "kiln_f2b(") + e + ")";
}
// A node's variable: `const T vK = <value>;` for input, constant or op nodes.
inline std::string node_decl(const kiln::codegen::node& n, std::size_t k, const std::string& value) {
    return "const " + var_type(n.t) + " " + v(k) + " = " + value + ";\n";
}
inline std::string num(std::int64_t x) { return std::to_string(x) + "LL"; }
inline std::string num(std::size_t x) { return num(static_cast<std::int64_t>(x)); }

// sum(idx[d] * strides[d]).
inline std::string offset(const std::vector<std::string>& idx, const std::vector<std::int64_t>& strides) {
    std::string s;
    for (std::size_t d = 0; d < idx.size(); ++d) {
        if (strides[d] == 0) continue;
        if (!s.empty()) s += " + ";
        s += idx[d] + (strides[d] == 1 ? "" : " * " + num(strides[d]));
    }
    return s.empty() ? "0" : s;
}

// Splits the flat index `flat` over `lens` (row-major) into variables <prefix><d>_;
// returns their names (the flat index itself for one dim).
inline std::vector<std::string> split_index(std::ostringstream& o, const std::string& indent, const std::string& flat,
                                            const std::string& prefix, const std::vector<std::size_t>& lens) {
    std::vector<std::string> idx(lens.size());
    if (lens.size() == 1) {
        idx[0] = flat;
        return idx;
    }
    const std::string r = prefix + "r_";
    o << indent << "long long " << r << " = " << flat << ";\n";
    for (std::size_t d = lens.size(); d-- > 0;) {
        idx[d] = prefix + std::to_string(d) + "_";
        if (d == 0)
            o << indent << "const long long " << idx[d] << " = " << r << ";\n";
        else
            o << indent << "const long long " << idx[d] << " = " << r << " % " << num(lens[d]) << "; " << r
              << " /= " << num(lens[d]) << ";\n";
    }
    return idx;
}

// Emits the body of a reduction kernel (after its pointers and constants): the row loop.
void reduction_rows(std::ostringstream& o, const kiln::codegen::plan& p);

}  // namespace kiln::gpu::codegen::text
