// Pieces of kernel text shared by the CUDA generator's files (emit.cpp: the kernel frame
// and elementwise loops; emit_reduction.cpp: reduction rows).
#pragma once
#include "codegen/plan.hpp"

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace kiln::gpu::codegen::text {

inline std::string v(std::size_t k) { return "v" + std::to_string(k); }
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
