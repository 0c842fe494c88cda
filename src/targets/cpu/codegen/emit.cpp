#include "targets/cpu/codegen/emit.hpp"

#include "codegen/fast_math.hpp"
#include "codegen/hash.hpp"
#include "targets/cpu/codegen/generic_layout.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace kiln::cpu::codegen {

namespace {

#define KILN_STRINGIFY_IMPL(...) #__VA_ARGS__
#define KILN_STRINGIFY(...) KILN_STRINGIFY_IMPL(__VA_ARGS__)

std::string v(std::size_t k) { return "v" + std::to_string(k); }
std::string num(std::int64_t x) { return std::to_string(x) + "L"; }

// Writes the kernel body pieces; `o` collects the text.
struct writer {
    const plan& p;
    std::ostringstream o;

    // Offset expression sum(idx[d] * strides[d]) over named indices.
    static std::string offset(const std::vector<std::string>& idx, const std::vector<std::int64_t>& strides) {
        std::string s;
        for (std::size_t d = 0; d < idx.size(); ++d) {
            if (strides[d] == 0) continue;
            if (!s.empty()) s += " + ";
            s += idx[d] + (strides[d] == 1 ? "" : " * " + num(strides[d]));
        }
        return s.empty() ? "0L" : s;
    }

    void pointers() {
        for (std::size_t i = 0; i < p.inputs.size(); ++i)
            o << "  const " << c_type(p.inputs[i].t) << "* __restrict in" << i << " = (const " << c_type(p.inputs[i].t)
              << "*)in_[" << i << "];\n";
        o << "  " << c_type(p.output.t) << "* __restrict out = (" << c_type(p.output.t) << "*)out_;\n";
    }

    // Invariant inputs and constants: once per call.
    void invariants() {
        for (std::size_t k = 0; k < p.nodes.size(); ++k) {
            const auto& n = p.nodes[k];
            if (n.kind == node_kind::constant)
                o << "  const " << value_type(n) << " " << v(k) << " = " << constant_literal(n) << ";\n";
            else if (n.kind == node_kind::input && p.inputs[n.input].invariant())
                o << "  const " << c_type(n.t) << " " << v(k) << " = in" << n.input << "[0];\n";
        }
    }

    // Nodes to evaluate in a loop producing `targets`: the element nodes they need, in order.
    std::vector<std::size_t> needed(const std::vector<std::size_t>& targets, bool element_only) const {
        std::vector<char> need(p.nodes.size(), 0);
        std::vector<std::size_t> stack(targets);
        while (!stack.empty()) {
            auto k = stack.back();
            stack.pop_back();
            const auto& n = p.nodes[k];
            if (need[k] || n.kind == node_kind::constant) continue;
            if (n.kind == node_kind::input && p.inputs[n.input].invariant()) continue;
            if (element_only && n.row) continue;
            need[k] = 1;
            if (n.kind != node_kind::reduce)
                for (auto a : n.args) stack.push_back(a);
        }
        std::vector<std::size_t> out;
        for (std::size_t k = 0; k < p.nodes.size(); ++k)
            if (need[k]) out.push_back(k);
        return out;
    }

    // Statements for `nodes`; `load(input)` is the expression reading an input element.
    template <class Load>
    void statements(const std::vector<std::size_t>& nodes, const std::string& indent, Load load) {
        for (auto k : nodes) {
            const auto& n = p.nodes[k];
            if (n.kind == node_kind::input)
                o << indent << "const " << c_type(n.t) << " " << v(k) << " = " << load(n.input) << ";\n";
            else if (n.kind == node_kind::op)
                o << indent << "const " << c_type(n.t) << " " << v(k) << " = " << node_expression(p, k) << ";\n";
        }
    }

    void elementwise() {
        const auto& L = p.outer_lens;
        const std::size_t m = L.size();
        const auto N = static_cast<std::int64_t>(L.back());
        o << "  for (long i_ = b_; i_ < e_;) {\n";
        if (m == 1) {
            o << "    const long j0_ = i_;\n    const long n_ = e_ - i_;\n";
        } else {
            o << "    long r_ = i_ / " << num(N) << ";\n    const long j0_ = i_ - r_ * " << num(N) << ";\n";
            o << "    long n_ = " << num(N) << " - j0_;\n    if (n_ > e_ - i_) n_ = e_ - i_;\n";
            for (std::size_t d = m - 1; d-- > 0;) {
                if (d == 0) o << "    const long d0_ = r_;\n";
                else o << "    const long d" << d << "_ = r_ % " << num(static_cast<std::int64_t>(L[d])) << "; r_ /= "
                       << num(static_cast<std::int64_t>(L[d])) << ";\n";
            }
        }
        std::vector<std::string> idx;
        for (std::size_t d = 0; d + 1 < m; ++d) idx.push_back("d" + std::to_string(d) + "_");
        idx.push_back("j0_");
        auto base = [&](const access& a) { return offset(idx, a.outer); };
        // Base pointers of this row segment; inner-most strides inside the loop.
        auto at = [&](std::size_t i) {
            const auto s = p.inputs[i].outer.back();
            std::string off = base(p.inputs[i]);
            return "in" + std::to_string(i) + "[" + off + (s == 0 ? "" : s == 1 ? " + j" : " + j * " + num(s)) + "]";
        };
        o << "    #pragma omp simd\n    for (long j = 0; j < n_; ++j) {\n";
        statements(needed({p.root}, false), "      ", at);
        const auto so = p.output.outer.back();
        o << "      out[" << base(p.output) << (so == 1 ? " + j" : " + j * " + num(so)) << "] = " << v(p.root)
          << ";\n    }\n    i_ += n_;\n  }\n";
    }

    // A generic kernel's row r_: its outer indices d<k>_ over the layout's outer groups
    // (lengths g_[1 + k]), then the pointers p<i> and po at the row's start, `inner` (when
    // given) added for the tensors read along the inner group.
    void generic_row_pointers(const generic_layout& l, const std::string& inner) {
        const std::size_t outer = static_cast<std::size_t>(l.groups) - 1, nin = l.inputs();
        for (std::size_t k = outer; k-- > 0;) {
            if (k == 0) o << "    const long d0_ = r_;\n";
            else o << "    const long d" << k << "_ = r_ % g_[" << 1 + k << "]; r_ /= g_[" << 1 + k << "];\n";
        }
        auto base = [&](std::size_t tensor) {  // tensor nin: the output
            std::string b;
            for (std::size_t k = 0; k < outer; ++k)
                if (l.reads_along(tensor, k))
                    b += (b.empty() ? "d" : " + d") + std::to_string(k) + "_ * g_[" +
                         std::to_string(1 + outer * (1 + tensor) + k) + "]";
            if (!inner.empty() && l.reads_along(tensor, outer)) b += (b.empty() ? "" : " + ") + inner;
            return b.empty() ? std::string("0L") : b;
        };
        for (std::size_t i = 0; i < nin; ++i)
            if (!p.inputs[i].invariant())
                o << "    const " << c_type(p.inputs[i].t) << "* __restrict p" << i << " = in" << i << " + " << base(i)
                  << ";\n";
        o << "    " << c_type(p.output.t) << "* __restrict po = out + " << base(nin) << ";\n";
    }

    // A generic program's elementwise group: lengths and strides from the geometry array
    // g_ (generic_layout.hpp), the inner loop over the layout's last group.
    void generic_elementwise(const generic_layout& l) {
        const std::size_t outer = static_cast<std::size_t>(l.groups) - 1;
        o << "  const long N_ = g_[0];\n";
        o << "  for (long i_ = b_; i_ < e_;) {\n";
        if (outer == 0) {
            o << "    const long j0_ = i_;\n    const long n_ = e_ - i_;\n";
        } else {
            o << "    long r_ = i_ / N_;\n    const long j0_ = i_ - r_ * N_;\n";
            o << "    long n_ = N_ - j0_;\n    if (n_ > e_ - i_) n_ = e_ - i_;\n";
        }
        generic_row_pointers(l, "j0_");
        auto at = [&](std::size_t i) { return "p" + std::to_string(i) + (l.reads_along(i, outer) ? "[j]" : "[0]"); };
        o << "    #pragma omp simd\n    for (long j = 0; j < n_; ++j) {\n";
        statements(needed({p.root}, false), "      ", at);
        o << "      po[j] = " << v(p.root) << ";\n    }\n    i_ += n_;\n  }\n";
    }

    // A generic program's reduction group: a row per outer index (g_'s outer groups), the
    // reduced elements of the row (the last group, g_[0] of them) in one loop.
    void generic_reduction(const generic_layout& l) {
        const std::size_t outer = static_cast<std::size_t>(l.groups) - 1;
        o << "  const long Q_ = g_[0];\n";
        o << "  for (long o_ = b_; o_ < e_; ++o_) {\n    long r_ = o_;\n";
        generic_row_pointers(l, "");
        auto loops = [&](const std::string& clauses, auto&& body) {
            o << "    #pragma omp simd" << clauses << "\n    for (long j = 0; j < Q_; ++j) {\n";
            body("      ");
            o << "    }\n";
        };
        auto at = [&](std::size_t i) { return std::string(l.reads_along(i, outer) ? "j" : "0"); };
        reduction_passes(loops, at, "(double)Q_", "j");
        o << "  }\n";
    }

    // The passes of a reduction group's row and its result, inside the row loop whose
    // header set p<i> and po: `loops(clauses, body)` writes a loop nest over the reduced
    // elements, `at(i)` input i's offset in it, `count` the elements reduced (a double
    // expression), `out_at` the result's offset.
    template <class Loops, class At>
    void reduction_passes(Loops loops, At at, const std::string& count, const std::string& out_at) {
        auto row_nodes = [&](std::size_t pass) {
            for (std::size_t k = 0; k < p.nodes.size(); ++k) {
                const auto& n = p.nodes[k];
                if (!n.row || n.pass != pass || n.kind == node_kind::constant || n.kind == node_kind::reduce) continue;
                if (n.kind == node_kind::input) {
                    if (!p.inputs[n.input].invariant())
                        o << "    const " << c_type(n.t) << " " << v(k) << " = p" << n.input << "[0];\n";
                } else {
                    o << "    const " << c_type(n.t) << " " << v(k) << " = " << node_expression(p, k) << ";\n";
                }
            }
        };
        row_nodes(0);
        for (std::size_t pass = 1; pass <= p.passes; ++pass) {
            std::vector<std::size_t> reds, ins;
            for (std::size_t k = 0; k < p.nodes.size(); ++k)
                if (p.nodes[k].kind == node_kind::reduce && p.nodes[k].pass == pass) {
                    reds.push_back(k);
                    ins.push_back(p.nodes[k].args[0]);
                }
            std::string clauses;
            for (auto k : reds) {
                const auto kind = reduction_kind(p.nodes[k].name);
                const auto a = "a" + std::to_string(k);
                if (kind == "max" || kind == "min") {
                    o << "    float " << a << " = " << (kind == "max" ? "-" : "") << "__builtin_inff();\n";
                    o << "    int n" << k << " = 0;\n";
                    clauses += " reduction(" + kind + ":" + a + ") reduction(|:n" + std::to_string(k) + ")";
                } else {
                    o << "    double " << a << " = " << (kind == "prod" ? "1.0" : "0.0") << ";\n";
                    clauses += std::string(" reduction(") + (kind == "prod" ? "*" : "+") + ":" + a + ")";
                }
            }
            loops(clauses, [&](const std::string& ind) {
                statements(needed(ins, true), ind, [&](std::size_t i) { return "p" + std::to_string(i) + "[" + at(i) + "]"; });
                for (std::size_t r = 0; r < reds.size(); ++r) {
                    const auto kind = reduction_kind(p.nodes[reds[r]].name);
                    const auto a = "a" + std::to_string(reds[r]);
                    const auto x = v(ins[r]);
                    if (kind == "max" || kind == "min")
                        o << ind << a << " = " << a << (kind == "max" ? " > " : " < ") << x << " ? " << a << " : " << x
                          << ";\n"
                          << ind << "n" << reds[r] << " |= " << x << " != " << x << ";\n";
                    else if (kind == "prod") o << ind << a << " *= (double)" << x << ";\n";
                    else if (kind == "l1") o << ind << a << " += (double)__builtin_fabsf(" << x << ");\n";
                    else if (kind == "l2" || kind == "sum_square")
                        o << ind << a << " += (double)" << x << " * (double)" << x << ";\n";
                    else o << ind << a << " += (double)" << x << ";\n";
                }
            });
            for (auto k : reds) {
                const auto kind = reduction_kind(p.nodes[k].name);
                const auto a = "a" + std::to_string(k);
                std::string e = "(float)" + a;
                if (kind == "max" || kind == "min") e = "n" + std::to_string(k) + " ? __builtin_nanf(\"\") : " + a;
                else if (kind == "mean") e = "(float)(" + a + " / " + count + ")";
                else if (kind == "l2") e = "(float)__builtin_sqrt(" + a + ")";
                else if (kind == "log_sum") e = "(float)__builtin_log(" + a + ")";
                o << "    const float " << v(k) << " = " << e << ";\n";
            }
            row_nodes(pass);
        }
        if (p.row_output()) {
            o << "    po[0] = " << v(p.root) << ";\n";
        } else {
            loops("", [&](const std::string& ind) {
                statements(needed({p.root}, true), ind, [&](std::size_t i) { return "p" + std::to_string(i) + "[" + at(i) + "]"; });
                o << ind << "po[" << out_at << "] = " << v(p.root) << ";\n";
            });
        }
    }

    // A loop nest over the inner dims; `body` writes the innermost statements.
    template <class Body>
    void inner_loops(const std::string& simd_clauses, Body body) {
        const auto& I = p.inner_lens;
        std::string indent = "    ";
        for (std::size_t d = 0; d + 1 < I.size(); ++d) {
            o << indent << "for (long q" << d << "_ = 0; q" << d << "_ < " << num(static_cast<std::int64_t>(I[d]))
              << "; ++q" << d << "_) {\n";
            indent += "  ";
        }
        o << indent << "#pragma omp simd" << simd_clauses << "\n";
        o << indent << "for (long j = 0; j < " << num(static_cast<std::int64_t>(I.back())) << "; ++j) {\n";
        body(indent + "  ");
        o << indent << "}\n";
        for (std::size_t d = 0; d + 1 < I.size(); ++d) {
            indent.resize(indent.size() - 2);
            o << indent << "}\n";
        }
    }

    std::vector<std::string> inner_index() const {
        std::vector<std::string> idx;
        for (std::size_t d = 0; d + 1 < p.inner_lens.size(); ++d) idx.push_back("q" + std::to_string(d) + "_");
        idx.push_back("j");
        return idx;
    }

    void reduction() {
        const auto& L = p.outer_lens;
        o << "  for (long o_ = b_; o_ < e_; ++o_) {\n    long r_ = o_;\n";
        for (std::size_t d = L.size(); d-- > 0;) {
            if (d == 0) o << "    const long d0_ = r_;\n";
            else o << "    const long d" << d << "_ = r_ % " << num(static_cast<std::int64_t>(L[d])) << "; r_ /= "
                   << num(static_cast<std::int64_t>(L[d])) << ";\n";
        }
        std::vector<std::string> oidx;
        for (std::size_t d = 0; d < L.size(); ++d) oidx.push_back("d" + std::to_string(d) + "_");
        for (std::size_t i = 0; i < p.inputs.size(); ++i)
            if (!p.inputs[i].invariant())
                o << "    const " << c_type(p.inputs[i].t) << "* __restrict p" << i << " = in" << i << " + "
                  << offset(oidx, p.inputs[i].outer) << ";\n";
        o << "    " << c_type(p.output.t) << "* __restrict po = out + " << offset(oidx, p.output.outer) << ";\n";
        const auto iidx = inner_index();
        auto at = [&](std::size_t i) { return offset(iidx, p.inputs[i].inner); };
        auto loops = [&](const std::string& clauses, auto&& body) { inner_loops(clauses, body); };
        reduction_passes(loops, at, std::to_string(p.reduce_count) + ".0", offset(iidx, p.output.inner));
        o << "  }\n";
    }
};

}  // namespace

std::string emit_kernel(const plan& p, const std::string& name) {
    writer w{p, {}};
    w.o << "extern \"C\" __attribute__((visibility(\"default\"))) void " << name
        << "(const void* const* in_, void* out_, long b_, long e_) {\n";
    w.pointers();
    w.invariants();
    if (p.reduction) w.reduction();
    else w.elementwise();
    w.o << "}\n";
    return w.o.str();
}

std::string emit_generic_kernel(const plan& p, const generic_layout& l, const std::string& name) {
    writer w{p, {}};
    w.o << "extern \"C\" __attribute__((visibility(\"default\"))) void " << name
        << "(const void* const* in_, void* out_, long b_, long e_, const long* __restrict g_) {\n";
    w.pointers();
    w.invariants();
    if (l.reduced > 0) w.generic_reduction(l);
    else w.generic_elementwise(l);
    w.o << "}\n";
    return w.o.str();
}

std::string generic_kernel_symbol(const plan& p, const generic_layout& l) {
    return "kiln_g" + content_hash(emit_generic_kernel(p, l, "KERNEL")).substr(0, 24);
}

std::string kernel_symbol(const plan& p) { return "kiln_" + content_hash(emit_kernel(p, "KERNEL")).substr(0, 24); }

const char* helpers_source() {
    static const char* text = KILN_STRINGIFY(KILN_CODEGEN_HELPERS);
    return text;
}

std::string library_source(const std::vector<std::string>& kernels) {
    std::string s = "// Generated by Kiln (cpu fused kernels).\n";
    s += helpers_source();
    s += "\n";
    for (const auto& k : kernels) s += k;
    return s;
}

}  // namespace kiln::cpu::codegen
