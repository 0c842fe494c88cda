// The row loop of a reduction kernel (emit.hpp describes the schedule). The passes, row
// nodes and finishing expressions mirror the cpu generator (src/targets/cpu/codegen/
// emit.cpp) so both targets compute a group the same way; only the loops differ: each
// thread of a row's warp or block takes every nthr-th element, and the partial results
// meet in a butterfly.
#include "codegen/expr.hpp"
#include "targets/gpu/codegen/emit.hpp"
#include "targets/gpu/codegen/emit_text.hpp"

namespace kiln::gpu::codegen::text {

using namespace kiln::codegen;

namespace {

struct rows_writer {
    const plan& p;
    std::ostringstream& o;
    bool warp = warp_per_row(p);
    std::string nthr = warp ? "32" : std::to_string(block_size);

    // Nodes evaluated per element to produce `targets`, in order (row nodes, constants and
    // invariant inputs are variables already).
    std::vector<std::size_t> needed(const std::vector<std::size_t>& targets) const {
        std::vector<char> need(p.nodes.size(), 0);
        std::vector<std::size_t> stack(targets);
        while (!stack.empty()) {
            const auto k = stack.back();
            stack.pop_back();
            const auto& n = p.nodes[k];
            if (need[k] || n.kind == node_kind::constant || n.row) continue;
            need[k] = 1;
            for (auto a : n.args) stack.push_back(a);
        }
        std::vector<std::size_t> out;
        for (std::size_t k = 0; k < p.nodes.size(); ++k)
            if (need[k]) out.push_back(k);
        return out;
    }

    // A strided loop over the row's inner space; `body` writes its statements given the
    // inner index variables.
    template <class Body>
    void inner_loop(Body body) {
        o << "    for (long long j_ = t_; j_ < " << num(p.inner_size()) << "; j_ += " << nthr << ") {\n";
        body(split_index(o, "      ", "j_", "q", p.inner_lens));
        o << "    }\n";
    }

    void element_statements(const std::vector<std::size_t>& nodes, const std::vector<std::string>& iidx) {
        for (auto k : nodes) {
            const auto& n = p.nodes[k];
            if (n.kind == node_kind::input)
                o << "      " << node_decl(n, k, load(n.t, "p" + std::to_string(n.input) + "[" +
                                                         offset(iidx, p.inputs[n.input].inner) + "]"));
            else if (n.kind == node_kind::op)
                o << "      " << node_decl(n, k, rounded(n.t, node_expression(p, k)));
        }
    }

    void row_nodes(std::size_t pass) {
        for (std::size_t k = 0; k < p.nodes.size(); ++k) {
            const auto& n = p.nodes[k];
            if (!n.row || n.pass != pass || n.kind == node_kind::constant || n.kind == node_kind::reduce) continue;
            if (n.kind == node_kind::input) {
                if (!p.inputs[n.input].invariant())
                    o << "    " << node_decl(n, k, load(n.t, "p" + std::to_string(n.input) + "[0]"));
            } else {
                o << "    " << node_decl(n, k, rounded(n.t, node_expression(p, k)));
            }
        }
    }

    static bool is_extremum(const std::string& kind) { return kind == "max" || kind == "min"; }

    // One pass: accumulate, combine across the row's threads, finish.
    void pass(std::size_t pass_no) {
        std::vector<std::size_t> reds, ins;
        for (std::size_t k = 0; k < p.nodes.size(); ++k)
            if (p.nodes[k].kind == node_kind::reduce && p.nodes[k].pass == pass_no) {
                reds.push_back(k);
                ins.push_back(p.nodes[k].args[0]);
            }
        for (auto k : reds) {
            const auto kind = reduction_kind(p.nodes[k].name);
            const auto a = "a" + std::to_string(k);
            if (is_extremum(kind))
                o << "    float " << a << " = " << (kind == "max" ? "-" : "") << "__builtin_inff();\n    int n" << k
                  << " = 0;\n";
            else
                o << "    double " << a << " = " << (kind == "prod" ? "1.0" : "0.0") << ";\n";
        }
        inner_loop([&](const std::vector<std::string>& iidx) {
            element_statements(needed(ins), iidx);
            for (std::size_t r = 0; r < reds.size(); ++r) {
                const auto kind = reduction_kind(p.nodes[reds[r]].name);
                const auto a = "a" + std::to_string(reds[r]);
                const auto x = v(ins[r]);
                const std::string ind = "      ";
                if (is_extremum(kind))
                    o << ind << a << " = " << a << (kind == "max" ? " > " : " < ") << x << " ? " << a << " : " << x
                      << ";\n"
                      << ind << "n" << reds[r] << " |= " << x << " != " << x << ";\n";
                else if (kind == "prod")
                    o << ind << a << " *= (double)" << x << ";\n";
                else if (kind == "l1")
                    o << ind << a << " += (double)__builtin_fabsf(" << x << ");\n";
                else if (kind == "l2" || kind == "sum_square")
                    o << ind << a << " += (double)" << x << " * (double)" << x << ";\n";
                else
                    o << ind << a << " += (double)" << x << ";\n";
            }
        });
        // Every variable combined across the row's threads, with its warp combiner.
        std::vector<std::pair<std::string, std::string>> parts;
        for (auto k : reds) {
            const auto kind = reduction_kind(p.nodes[k].name);
            const auto a = "a" + std::to_string(k);
            if (is_extremum(kind)) {
                parts.emplace_back(a, "kiln_warp_" + kind);
                parts.emplace_back("n" + std::to_string(k), "kiln_warp_or");
            } else {
                parts.emplace_back(a, kind == "prod" ? "kiln_warp_prod" : "kiln_warp_sum");
            }
        }
        for (const auto& [x, fn] : parts) o << "    " << x << " = " << fn << "(" << x << ");\n";
        if (!warp) block_combine(parts);
        for (auto k : reds) {
            const auto kind = reduction_kind(p.nodes[k].name);
            const auto a = "a" + std::to_string(k);
            std::string e = "(float)" + a;
            if (is_extremum(kind))
                e = "n" + std::to_string(k) + " ? __builtin_nanf(\"\") : " + a;
            else if (kind == "mean")
                e = "(float)(" + a + " / " + std::to_string(p.reduce_count) + ".0)";
            else if (kind == "l2")
                e = "(float)__builtin_sqrt(" + a + ")";
            else if (kind == "log_sum")
                e = "(float)__builtin_log(" + a + ")";
            o << "    const float " << v(k) << " = " << e << ";\n";
        }
        row_nodes(pass_no);
    }

    // The warps' results through shared memory: lane 0 of each warp posts, then every
    // thread combines the slots in warp order (so all hold the same value); the second
    // barrier keeps the next pass or row from overwriting slots still being read.
    void block_combine(const std::vector<std::pair<std::string, std::string>>& parts) {
        const std::size_t n = parts.size(), warps = block_size / 32;
        o << "    if ((threadIdx.x & 31) == 0) {\n";
        for (std::size_t c = 0; c < n; ++c)
            o << "      s_[(threadIdx.x >> 5) * " << n << " + " << c << "] = " << parts[c].first << ";\n";
        o << "    }\n    __syncthreads();\n";
        for (std::size_t c = 0; c < n; ++c) {
            const auto& [x, fn] = parts[c];
            const auto slot = [&](std::size_t w) { return "s_[" + std::to_string(w * n + c) + "]"; };
            std::string type = fn == "kiln_warp_max" || fn == "kiln_warp_min" ? "float"
                               : fn == "kiln_warp_or"                         ? "int"
                                                                              : "double";
            o << "    " << x << " = (" << type << ")" << slot(0) << ";\n";
            for (std::size_t w = 1; w < warps; ++w) {
                const auto y = "(" + type + ")" + slot(w);
                if (fn == "kiln_warp_sum")
                    o << "    " << x << " += " << y << ";\n";
                else if (fn == "kiln_warp_prod")
                    o << "    " << x << " *= " << y << ";\n";
                else if (fn == "kiln_warp_or")
                    o << "    " << x << " |= " << y << ";\n";
                else
                    o << "    " << x << " = " << x << (fn == "kiln_warp_max" ? " > " : " < ") << y << " ? " << x
                      << " : " << y << ";\n";
            }
        }
        o << "    __syncthreads();\n";
    }

    std::size_t max_parts() const {
        std::size_t most = 0;
        for (std::size_t pass = 1; pass <= p.passes; ++pass) {
            std::size_t n = 0;
            for (const auto& nd : p.nodes)
                if (nd.kind == node_kind::reduce && nd.pass == pass) n += is_extremum(reduction_kind(nd.name)) ? 2 : 1;
            most = std::max(most, n);
        }
        return most;
    }

    void write() {
        const auto rows = num(p.outer_size());
        if (warp) {
            o << "  const int t_ = threadIdx.x & 31;\n";
            o << "  for (long long o_ = (long long)blockIdx.x * " << warp_rows << " + (threadIdx.x >> 5); o_ < " << rows
              << "; o_ += (long long)gridDim.x * " << warp_rows << ") {\n";
        } else {
            o << "  __shared__ double s_[" << (block_size / 32) * std::max<std::size_t>(max_parts(), 1) << "];\n";
            o << "  const int t_ = threadIdx.x;\n";
            o << "  for (long long o_ = blockIdx.x; o_ < " << rows << "; o_ += gridDim.x) {\n";
        }
        const auto oidx = split_index(o, "    ", "o_", "d", p.outer_lens);
        for (std::size_t i = 0; i < p.inputs.size(); ++i)
            if (!p.inputs[i].invariant()) {
                const auto t = c_type(p.inputs[i].t);
                o << "    const " << t << "* __restrict__ p" << i << " = in" << i << " + "
                  << offset(oidx, p.inputs[i].outer) << ";\n";
            }
        o << "    " << c_type(p.output.t) << "* __restrict__ po = out + " << offset(oidx, p.output.outer) << ";\n";
        row_nodes(0);
        for (std::size_t pass_no = 1; pass_no <= p.passes; ++pass_no) pass(pass_no);
        if (p.row_output()) {
            o << "    if (t_ == 0) po[0] = " << store(p.output.t, v(p.root)) << ";\n";
        } else {
            inner_loop([&](const std::vector<std::string>& iidx) {
                element_statements(needed({p.root}), iidx);
                o << "      po[" << offset(iidx, p.output.inner) << "] = " << store(p.output.t, v(p.root)) << ";\n";
            });
        }
        o << "  }\n";
    }
};

}  // namespace

void reduction_rows(std::ostringstream& o, const plan& p) { rows_writer{p, o}.write(); }

}  // namespace kiln::gpu::codegen::text
