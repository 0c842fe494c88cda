#include "targets/cpu/codegen/generic_layout.hpp"

#include "passes/fuse_pointwise.hpp"

#include <kiln/errors.hpp>

#include <algorithm>

namespace kiln::cpu::codegen {

namespace {

bool fixed_one(const dynamic_dimension& d) { return d.is_fixed() && d.min == 1; }

bool valid_order(const std::vector<std::int64_t>& order, std::size_t rank) {
    if (order.size() != rank) return false;
    std::vector<bool> seen(rank, false);
    for (auto d : order) {
        if (d < 0 || static_cast<std::size_t>(d) >= rank || seen[static_cast<std::size_t>(d)]) return false;
        seen[static_cast<std::size_t>(d)] = true;
    }
    return true;
}

// A tensor's lens and strides over the domain's rank (right-aligned, missing dims as
// length 1), in the layout's walk order; into `w`, whose storage a call reuses.
struct walked {
    std::vector<std::size_t> lens, strides;
};
void walk(const generic_layout& l, const shape& s, std::size_t rank, walked& w) {
    w.lens.assign(rank, 1);
    w.strides.assign(rank, 0);
    const std::size_t shift = rank - s.ndim();
    for (std::size_t q = 0; q < rank; ++q) {
        const std::size_t d = l.order.empty() ? q : static_cast<std::size_t>(l.order[q]);
        if (d < shift) continue;
        w.lens[q] = s.lens()[d - shift];
        w.strides[q] = s.strides()[d - shift];
    }
}

}  // namespace

bool generic_kernel_can_run(instruction_ref ins) {
    const auto& s = ins->get_shape();
    if (!s.is_tensor() || !s.dynamic() || !ins->module_inputs().empty()) return false;
    const auto& t = ins->get_operator().traits();
    if (t.reduction ? !is_fusible_dynamic_reduction(ins) : !t.pointwise) return false;
    return kernel_types_supported(ins);
}

generic_layout make_generic_layout(const std::vector<shape>& inputs, const shape& output, std::size_t reduced,
                                   const std::vector<std::int64_t>& order) {
    const auto out = output.to_dynamic_dims();
    const std::size_t rank = out.size(), nin = inputs.size();
    if (reduced > rank) throw_error(error_code::unsupported, "generic kernel: reduces more dims than it has");
    if (!order.empty() && (reduced > 0 || !valid_order(order, rank)))
        throw_error(error_code::unsupported, "generic kernel: a walk order needs an elementwise group and a permutation");
    // Per tensor (the inputs, then the output), per domain dim: read along it (1) or broadcast (0).
    std::vector<std::vector<std::int64_t>> reads(nin + 1, std::vector<std::int64_t>(rank, 0));
    std::vector<bool> unit(rank, true);  // the domain's dim is a fixed 1
    for (std::size_t i = 0; i <= nin; ++i) {
        const auto dims = i < nin ? inputs[i].to_dynamic_dims() : out;
        if (dims.size() > rank)
            throw_error(error_code::unsupported, "generic kernel: input " + std::to_string(i) + " " +
                                                     inputs[i].to_string() + " has more dims than the result " +
                                                     output.to_string());
        const std::size_t shift = rank - dims.size();
        for (std::size_t d = 0; d < dims.size(); ++d) {
            reads[i][d + shift] = fixed_one(dims[d]) ? 0 : 1;
            if (!fixed_one(dims[d])) unit[d + shift] = false;
        }
    }
    generic_layout l;
    l.reduced = static_cast<std::int64_t>(reduced);
    l.order = order;
    l.group_of.assign(rank, 0);
    // From here on, positions in the walk order.
    if (!order.empty()) {
        auto permuted = [&](const auto& v) {
            auto w = v;
            for (std::size_t q = 0; q < rank; ++q) w[q] = v[static_cast<std::size_t>(order[q])];
            return w;
        };
        for (auto& r : reads) r = permuted(r);
        unit = permuted(unit);
    }
    std::vector<std::vector<std::int64_t>> group_reads;  // per group, per tensor
    std::vector<std::size_t> pending;                    // fixed-1 dims waiting for the next group
    const std::size_t first_reduced = reduced > 0 ? rank - reduced : rank;
    const std::vector<std::int64_t> undecided(nin + 1, -1);
    auto column = [&](std::size_t d) {
        std::vector<std::int64_t> r(nin + 1);
        for (std::size_t i = 0; i <= nin; ++i) r[i] = reads[i][d];
        return r;
    };
    auto place = [&](std::size_t d) {
        const auto g = static_cast<std::int64_t>(group_reads.size() - 1);
        for (auto p : pending) l.group_of[p] = g;
        pending.clear();
        l.group_of[d] = g;
    };
    for (std::size_t d = 0; d < rank; ++d) {
        if (d >= first_reduced) {
            // The reduced dims: one group; a tensor reads all of them or none.
            if (d == first_reduced) group_reads.push_back(undecided);
            place(d);
            if (unit[d]) continue;
            if (group_reads.back() == undecided) group_reads.back() = column(d);
            else if (group_reads.back() != column(d))
                throw_error(error_code::unsupported, "generic kernel: a tensor reads some reduced dims, not all");
            continue;
        }
        if (unit[d]) {
            pending.push_back(d);
            continue;
        }
        if (group_reads.empty() || group_reads.back() != column(d)) group_reads.push_back(column(d));
        place(d);
    }
    if (group_reads.empty()) group_reads.push_back(std::vector<std::int64_t>(nin + 1, 0));  // every dim is a fixed 1
    for (auto p : pending) l.group_of[p] = static_cast<std::int64_t>(group_reads.size() - 1);
    for (auto& r : group_reads)
        for (auto& x : r) x = x < 0 ? 0 : x;  // reduced dims all fixed 1: nothing reads along them
    l.groups = static_cast<std::int64_t>(group_reads.size());
    for (std::size_t i = 0; i <= nin; ++i)
        for (auto& r : group_reads) l.along.push_back(r[i]);
    return l;
}

plan sample_plan(const op::fused& body, const std::vector<shape>& inputs, const shape& output, bool fast_math) {
    const std::size_t rank = output.ndim();
    // Each domain dim at a fixed size some tensor has there (other than 1), else 2 where
    // a tensor has it dynamic (never 1, so that no dim read along looks broadcast), else 1.
    std::vector<std::size_t> lens(rank, 1);
    std::vector<bool> dynamic(rank, false);
    auto visit = [&](const shape& s) {
        const auto dims = s.to_dynamic_dims();
        if (dims.size() > rank) return;
        const std::size_t shift = rank - dims.size();
        for (std::size_t d = 0; d < dims.size(); ++d) {
            if (!dims[d].is_fixed()) dynamic[d + shift] = true;
            else if (dims[d].min != 1) lens[d + shift] = dims[d].min;
        }
    };
    for (const auto& s : inputs) visit(s);
    visit(output);
    for (std::size_t d = 0; d < rank; ++d)
        if (lens[d] == 1 && dynamic[d]) lens[d] = 2;
    auto instance = [&](const shape& s) {
        const auto dims = s.to_dynamic_dims();
        std::vector<std::size_t> l(dims.size());
        for (std::size_t d = 0; d < dims.size(); ++d)
            l[d] = dims[d].is_fixed() ? dims[d].min : lens[d + rank - dims.size()];
        return shape{s.get_type(), l};
    };
    std::vector<shape> in;
    for (const auto& s : inputs) in.push_back(instance(s));
    return make_plan(body, in, instance(output), fast_math);
}

namespace {

// A broadcast's length so far and one more operand's: a length of 1 takes the other's, and an
// empty dim (0) stays empty (not the larger of the two: the result of a batch of 0 has no rows).
std::size_t broadcast_len(std::size_t so_far, std::size_t len) {
    if (len == 1) return so_far;
    return so_far == 1 || len == 0 ? len : so_far;
}

}  // namespace

shape generic_result_shape(const generic_layout& l, const std::vector<shape>& args, type t) {
    const std::size_t rank = l.group_of.size(), nin = l.inputs();
    std::vector<std::size_t> lens(rank, 1);
    for (const auto& a : args) {
        if (!a.is_tensor() || a.dynamic() || a.ndim() > rank) continue;
        const std::size_t shift = rank - a.ndim();
        for (std::size_t d = 0; d < a.ndim(); ++d) lens[d + shift] = broadcast_len(lens[d + shift], a.lens()[d]);
    }
    if (l.order.empty()) {
        for (std::size_t d = 0; d < rank; ++d)
            if (l.groups == 0 || !l.reads_along(nin, static_cast<std::size_t>(l.group_of[d]))) lens[d] = 1;
        return shape{t, lens};
    }
    // Laid out in the walk order: its last position's dim has stride 1.
    std::vector<std::size_t> strides(rank, 0);
    std::size_t step = 1;
    for (std::size_t q = rank; q-- > 0;) {
        const auto d = static_cast<std::size_t>(l.order[q]);
        if (!l.reads_along(nin, static_cast<std::size_t>(l.group_of[q]))) lens[d] = 1;
        strides[d] = step;
        step *= lens[d];
    }
    return shape{t, lens, strides};
}

bool generic_geometry(const generic_layout& l, const std::vector<shape>& args, const shape& out,
                      std::vector<long>& g) {
    const auto G = static_cast<std::size_t>(l.groups);
    const std::size_t nin = l.inputs(), rank = l.group_of.size();
    if (args.size() != nin || out.ndim() != rank || G == 0) return false;
    for (const auto& a : args)
        if (!a.is_tensor() || a.dynamic() || a.ndim() > rank) return false;
    // Every tensor in the walk order; the domain's lens: the longest each has per position
    // (the others must be 1 or equal).
    thread_local std::vector<walked> views;
    views.resize(nin + 1);
    for (std::size_t t = 0; t < nin; ++t) walk(l, args[t], rank, views[t]);
    walk(l, out, rank, views[nin]);
    std::vector<std::size_t> dom(rank, 1);
    for (const auto& v : views)
        for (std::size_t d = 0; d < rank; ++d) dom[d] = broadcast_len(dom[d], v.lens[d]);
    g.assign(l.geometry_size(), 0);
    // Lengths: the last group's is the inner loop (g[0]), the others g[1 .. G-1].
    std::vector<long> len(G, 1);
    for (std::size_t d = 0; d < rank; ++d) len[static_cast<std::size_t>(l.group_of[d])] *= static_cast<long>(dom[d]);
    g[0] = len[G - 1];
    for (std::size_t k = 0; k + 1 < G; ++k) g[1 + k] = len[k];
    // Strides of a tensor per group: each group's dims must merge into one (the stride of
    // a dim is its inner neighbour's stride times that neighbour's length, dims of length 1
    // aside); the inner group must have a unit stride when it is read along.
    auto strides_of = [&](std::size_t t, const walked& v, long* dest) {
        const auto& lens = v.lens;
        const auto& st = v.strides;
        for (std::size_t k = G; k-- > 0;) {
            const bool along = l.reads_along(t, k);
            long stride = 0;
            long expect = -1;
            for (std::size_t d = rank; d-- > 0;) {
                if (static_cast<std::size_t>(l.group_of[d]) != k) continue;
                const std::size_t n = lens[d];
                if (!along) {
                    if (n != 1) return false;
                    continue;
                }
                if (n != dom[d]) return false;
                if (n == 1) continue;
                const auto s = static_cast<long>(st[d]);
                if (expect < 0) stride = s;
                else if (s != expect) return false;
                expect = s * static_cast<long>(n);
            }
            if (k + 1 == G) {
                if (along && len[k] > 1 && stride != 1) return false;
            } else {
                dest[k] = along ? stride : 0;
            }
        }
        return true;
    };
    const std::size_t outer = G - 1;
    for (std::size_t t = 0; t <= nin; ++t)
        if (!strides_of(t, views[t], g.data() + 1 + outer * (1 + t))) return false;
    return true;
}

}  // namespace kiln::cpu::codegen
