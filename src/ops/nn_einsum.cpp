#include "ops/nn_einsum.hpp"

#include <kiln/register_op.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

namespace kiln::op {

namespace {

// One term of the equation: its letters, with '.' standing for the whole "..." group.
struct term {
    std::string labels;
    bool has_ellipsis() const { return labels.find('.') != std::string::npos; }
    std::size_t letters() const { return labels.size() - (has_ellipsis() ? 1 : 0); }
};

term parse_term(const std::string& eq, const std::string& text) {
    term t;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '.') {
            if (text.compare(i, 3, "...") != 0 || t.has_ellipsis())
                throw_error(error_code::shape, "einsum: bad ellipsis in term '" + text + "' of '" + eq + "'");
            t.labels += '.';
            i += 2;
        } else if (std::isalpha(static_cast<unsigned char>(c))) {
            t.labels += c;
        } else {
            throw_error(error_code::shape, "einsum: unexpected character '" + std::string(1, c) + "' in '" + eq + "'");
        }
    }
    return t;
}

// The equation's terms; without "->", the implicit output: "..." (when any input has
// it) followed by the letters used exactly once, in alphabetical order.
struct equation_terms {
    std::vector<term> inputs;
    term output;
};

equation_terms parse_equation(const std::string& equation, std::size_t num_inputs) {
    std::string eq;
    for (char c : equation)
        if (!std::isspace(static_cast<unsigned char>(c))) eq += c;
    const auto arrow = eq.find("->");
    const std::string lhs = eq.substr(0, arrow);
    equation_terms e;
    for (std::size_t start = 0;;) {
        const auto comma = lhs.find(',', start);
        e.inputs.push_back(parse_term(eq, lhs.substr(start, comma - start)));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    if (e.inputs.size() != num_inputs)
        throw_error(error_code::shape, "einsum: '" + equation + "' has " + std::to_string(e.inputs.size()) +
                                           " input terms but the op has " + std::to_string(num_inputs) + " inputs");
    if (arrow != std::string::npos) {
        e.output = parse_term(eq, eq.substr(arrow + 2));
    } else {
        std::map<char, int> count;
        for (auto& t : e.inputs)
            for (char c : t.labels)
                if (c != '.') ++count[c];
        if (std::any_of(e.inputs.begin(), e.inputs.end(), [](const term& t) { return t.has_ellipsis(); }))
            e.output.labels += '.';
        for (auto& [c, n] : count)
            if (n == 1) e.output.labels += c;
    }
    for (char c : e.output.labels) {
        if (c == '.') continue;
        if (std::none_of(e.inputs.begin(), e.inputs.end(), [&](const term& t) { return t.labels.find(c) != std::string::npos; }))
            throw_error(error_code::shape, "einsum: output label '" + std::string(1, c) + "' is not in any input of '" +
                                               equation + "'");
        if (std::count(e.output.labels.begin(), e.output.labels.end(), c) > 1)
            throw_error(error_code::shape, "einsum: output label '" + std::string(1, c) + "' repeats in '" + equation + "'");
    }
    return e;
}

void check_rank_fits(const term& t, std::size_t i, std::size_t rank) {
    if (t.letters() > rank || (!t.has_ellipsis() && t.letters() != rank))
        throw_error(error_code::shape, "einsum: term '" + t.labels + "' does not fit input " + std::to_string(i) +
                                           " of rank " + std::to_string(rank));
}

}  // namespace

einsum::plan einsum::make_plan(const std::vector<std::vector<std::size_t>>& lens) const {
    const auto e = parse_equation(equation, lens.size());
    const auto& inputs = e.inputs;
    // Sizes of the letters and of the broadcast "..." dims.
    std::map<char, std::size_t> letter_size;
    std::vector<std::vector<std::size_t>> ellipsis_lens(inputs.size());
    std::vector<std::size_t> ellipsis;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        const auto& t = inputs[i];
        check_rank_fits(t, i, lens[i].size());
        const std::size_t ne = lens[i].size() - t.letters();
        std::size_t dim = 0;
        for (char c : t.labels) {
            if (c == '.') {
                ellipsis_lens[i].assign(lens[i].begin() + static_cast<std::ptrdiff_t>(dim),
                                        lens[i].begin() + static_cast<std::ptrdiff_t>(dim + ne));
                dim += ne;
                continue;
            }
            const std::size_t n = lens[i][dim++];
            auto [it, fresh] = letter_size.emplace(c, n);
            if (!fresh && it->second != n) {
                if (it->second == 1) it->second = n;
                else if (n != 1)
                    throw_error(error_code::shape, "einsum: label '" + std::string(1, c) + "' has sizes " +
                                                       std::to_string(it->second) + " and " + std::to_string(n));
            }
        }
    }
    ellipsis = broadcast_lens(ellipsis_lens, "einsum");
    // Variables: the "..." dims first, then the letters.
    plan p;
    p.sizes = ellipsis;
    std::map<char, std::size_t> var_of;
    for (auto& [c, n] : letter_size) {
        var_of[c] = p.sizes.size();
        p.sizes.push_back(n);
    }
    for (char c : e.output.labels) {
        if (c == '.') {
            for (std::size_t v = 0; v < ellipsis.size(); ++v) p.output_vars.push_back(v);
        } else {
            p.output_vars.push_back(var_of.at(c));
        }
    }
    for (auto v : p.output_vars) p.output_lens.push_back(p.sizes[v]);
    // Element strides of each input per variable; a repeated letter adds its strides
    // (a diagonal), a broadcast dim of size 1 gets 0.
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        std::vector<std::size_t> st(p.sizes.size(), 0);
        const auto row = shape::standard_strides(lens[i]);
        const std::size_t ne = lens[i].size() - inputs[i].letters();
        std::size_t dim = 0;
        for (char c : inputs[i].labels) {
            if (c == '.') {
                for (std::size_t e = 0; e < ne; ++e, ++dim) {
                    const std::size_t var = ellipsis.size() - ne + e;
                    if (lens[i][dim] != 1) st[var] += row[dim];
                }
                continue;
            }
            if (lens[i][dim] != 1) st[var_of[c]] += row[dim];
            ++dim;
        }
        p.strides.push_back(st);
    }
    return p;
}

shape einsum::compute_shape(const std::vector<shape>& inputs) const {
    if (inputs.empty()) throw_error(error_code::shape, name() + ": needs at least one input");
    check_same_type(name(), inputs);
    const type t = inputs[0].get_type();
    if (!is_float_compute_type(t) && !is_integer(t))
        throw_error(error_code::type, name() + ": element type " + std::string(type_name(t)) + " is not supported");
    if (any_dynamic(inputs)) {
        // Letters shared by inputs must agree, which sampling dims independently cannot
        // respect: combine the dynamic dims label by label instead.
        const auto e = parse_equation(equation, inputs.size());
        std::map<char, dynamic_dimension> letter;
        std::vector<dynamic_dimension> ellipsis;
        for (std::size_t i = 0; i < inputs.size(); ++i) {
            const auto dims = inputs[i].to_dynamic_dims();
            check_rank_fits(e.inputs[i], i, dims.size());
            const std::size_t ne = dims.size() - e.inputs[i].letters();
            std::size_t d = 0;
            for (char c : e.inputs[i].labels) {
                if (c != '.') {
                    auto it = letter.find(c);
                    letter[c] = it == letter.end() ? dims[d] : broadcast_dim(it->second, dims[d], name());
                    ++d;
                    continue;
                }
                // Right-align this input's "..." dims with the others.
                if (ne > ellipsis.size()) ellipsis.insert(ellipsis.begin(), ne - ellipsis.size(), dynamic_dimension{1, 1, {}});
                for (std::size_t k = 0; k < ne; ++k, ++d) {
                    auto& slot = ellipsis[ellipsis.size() - ne + k];
                    slot = broadcast_dim(slot, dims[d], name());
                }
            }
        }
        std::vector<dynamic_dimension> out;
        for (char c : e.output.labels) {
            if (c == '.') out.insert(out.end(), ellipsis.begin(), ellipsis.end());
            else out.push_back(letter.at(c));
        }
        return shape::make_dynamic(t, out);
    }
    std::vector<std::vector<std::size_t>> lens;
    for (auto& s : inputs) lens.push_back(s.lens());
    return shape(t, make_plan(lens).output_lens);
}

argument einsum::compute(const shape& out, const std::vector<argument>& args) const {
    std::vector<std::vector<std::size_t>> lens;
    for (auto& a : args) lens.push_back(a.get_shape().lens());
    const auto p = make_plan(lens);
    auto run = [&](auto tag) {
        using A = typename decltype(tag)::type;
        std::vector<compute_buffer<A>> in;
        for (auto& a : args) in.push_back(read_as<A>(a));
        // Loop order: output variables (outer), then the summed ones.
        std::vector<std::size_t> order = p.output_vars;
        for (std::size_t v = 0; v < p.sizes.size(); ++v)
            if (std::find(order.begin(), order.end(), v) == order.end()) order.push_back(v);
        std::vector<std::size_t> loop_lens;
        for (auto v : order) loop_lens.push_back(p.sizes[v]);
        std::size_t summed = 1;
        for (std::size_t i = p.output_vars.size(); i < order.size(); ++i) summed *= loop_lens[i];
        return produce<A>(out, [&](A* y) {
            const std::size_t n = out.elements();
            if (n == 0) return;
            std::vector<std::size_t> idx(order.size(), 0);
            for (std::size_t o = 0; o < n; ++o) {
                A acc = 0;
                for (std::size_t s = 0; s < summed; ++s) {
                    A prod = 1;
                    for (std::size_t i = 0; i < in.size(); ++i) {
                        std::size_t off = 0;
                        for (std::size_t k = 0; k < order.size(); ++k) off += idx[k] * p.strides[i][order[k]];
                        prod *= in[i][off];
                    }
                    acc += prod;
                    next_index(idx, loop_lens);
                }
                if (summed == 0) next_index(idx, loop_lens);  // nothing summed: advance the output index
                y[o] = acc;
            }
        });
    };
    if (is_integer(out.get_type())) return run(std::type_identity<std::uint64_t>{});
    return run(std::type_identity<double>{});
}

shape det::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 1);
    check_rank(name(), inputs[0], 2, 64, "input");
    const auto& l = inputs[0].lens();
    if (l[l.size() - 1] != l[l.size() - 2])
        throw_error(error_code::shape, name() + ": input " + inputs[0].to_string() + " is not square in its last two dims");
    if (!is_float_compute_type(inputs[0].get_type()))
        throw_error(error_code::type, name() + ": element type " + std::string(type_name(inputs[0].get_type())) +
                                          " is not supported (floating-point only)");
    return shape(inputs[0].get_type(), std::vector<std::size_t>(l.begin(), l.end() - 2));
}

// LU decomposition with partial pivoting, in double: det = sign * prod(diagonal).
argument det::compute(const shape& out, const std::vector<argument>& args) const {
    const auto& l = args[0].get_shape().lens();
    const std::size_t n = l.back(), count = out.elements();
    auto x = read_as<double>(args[0]);
    return produce<double>(out, [&](double* y) {
        std::vector<double> m(n * n);
        for (std::size_t b = 0; b < count; ++b) {
            std::copy(x.data() + b * n * n, x.data() + (b + 1) * n * n, m.begin());
            double d = 1.0;
            for (std::size_t c = 0; c < n && d != 0.0; ++c) {
                std::size_t piv = c;
                for (std::size_t r = c + 1; r < n; ++r)
                    if (std::fabs(m[r * n + c]) > std::fabs(m[piv * n + c])) piv = r;
                if (m[piv * n + c] == 0.0) {
                    d = 0.0;
                    break;
                }
                if (piv != c) {
                    for (std::size_t k = 0; k < n; ++k) std::swap(m[c * n + k], m[piv * n + k]);
                    d = -d;
                }
                d *= m[c * n + c];
                for (std::size_t r = c + 1; r < n; ++r) {
                    const double f = m[r * n + c] / m[c * n + c];
                    for (std::size_t k = c; k < n; ++k) m[r * n + k] -= f * m[c * n + k];
                }
            }
            y[b] = d;
        }
    });
}

KILN_REGISTER_OP(einsum)
KILN_REGISTER_OP(det)

}  // namespace kiln::op
