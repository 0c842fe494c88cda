#include "onnx/einsum_product.hpp"

#include <algorithm>
#include <cctype>
#include <map>

namespace kiln::onnx_frontend {

namespace {

bool has(const std::string& s, char c) { return s.find(c) != std::string::npos; }

// Letters only, none repeated: anything else (ellipsis, diagonal, bad character) is not a
// plain product.
bool plain_term(const std::string& t) {
    for (std::size_t i = 0; i < t.size(); ++i)
        if (!std::isalpha(static_cast<unsigned char>(t[i])) || t.find(t[i], i + 1) != std::string::npos) return false;
    return true;
}

// Where each label of `labels` sits in `term`.
std::vector<std::int64_t> positions(const std::string& term, const std::string& labels) {
    std::vector<std::int64_t> p;
    for (char c : labels) p.push_back(static_cast<std::int64_t>(term.find(c)));
    return p;
}

}  // namespace

std::optional<einsum_product> einsum_as_product(const std::string& equation) {
    std::string eq;
    for (char c : equation)
        if (!std::isspace(static_cast<unsigned char>(c))) eq += c;
    const auto arrow = eq.find("->");
    const std::string lhs = eq.substr(0, arrow);
    const auto comma = lhs.find(',');
    if (comma == std::string::npos || lhs.find(',', comma + 1) != std::string::npos) return std::nullopt;
    const std::string a = lhs.substr(0, comma), b = lhs.substr(comma + 1);
    std::string out;
    if (arrow != std::string::npos) {
        out = eq.substr(arrow + 2);
    } else {
        // ONNX's implicit output: the labels used once, in alphabetical order (as op::einsum).
        std::map<char, int> uses;
        for (char c : a + b) ++uses[c];
        for (auto [c, n] : uses)
            if (n == 1) out += c;
    }
    if (!plain_term(a) || !plain_term(b) || !plain_term(out)) return std::nullopt;
    std::string batch, m, k, n;
    for (char c : out) {
        if (has(a, c) && has(b, c)) batch += c;
        else if (!has(a, c) && !has(b, c)) return std::nullopt;  // invalid: op::einsum says so
    }
    for (char c : a) {
        if (has(b, c) && !has(out, c)) k += c;
        else if (!has(b, c) && has(out, c)) m += c;
        else if (!has(b, c)) return std::nullopt;  // summed over A alone
    }
    for (char c : b)
        if (!has(a, c)) {
            if (!has(out, c)) return std::nullopt;  // summed over B alone
            n += c;
        }
    if (k.empty()) return std::nullopt;  // an outer product: no GEMM to gain
    einsum_product p;
    p.batch = batch.size();
    p.m = m.size();
    p.k = k.size();
    p.n = n.size();
    p.perm_a = positions(a, batch + m + k);
    p.perm_b = positions(b, batch + k + n);
    p.perm_out = positions(batch + m + n, out);
    return p;
}

}  // namespace kiln::onnx_frontend
