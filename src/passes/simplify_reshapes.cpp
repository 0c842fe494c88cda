#include "passes/simplify_reshapes.hpp"

#include "passes/rewrite_utils.hpp"

#include "ops/tensor_gather.hpp"
#include "ops/tensor_slice.hpp"
#include "ops/tensor_views.hpp"

#include <algorithm>
#include <numeric>

namespace kiln {

namespace {

bool static_tensor(instruction_ref ins) { return ins->get_shape().is_tensor() && !ins->get_shape().dynamic(); }

// Ops whose result is the input's elements in the same row-major order, under new lens.
bool reshape_like(instruction_ref ins) {
    return ins->get_operator().traits().reshape_like && ins->inputs().size() == 1 && static_tensor(ins) &&
           static_tensor(ins->inputs().front());
}

operation reshape_to(const std::vector<std::size_t>& lens) {
    op::reshape r;
    r.dims.assign(lens.begin(), lens.end());
    // 0 in dims means "copy the input's dimension" unless allowzero: a zero-sized
    // target dimension needs allowzero.
    r.allowzero = std::find(lens.begin(), lens.end(), 0u) != lens.end();
    return r;
}

// Replaces `ins` by op(x) when that computes exactly ins's shape (else leaves it).
bool replace_if_same_shape(module& m, instruction_ref ins, const operation& op, instruction_ref x) {
    shape s;
    try {
        s = op.compute_shape({x->get_shape()});
    } catch (const error&) {
        return false;
    }
    if (s != ins->get_shape()) return false;
    m.replace_instruction(ins, op, {x});
    return true;
}

bool collapse_reshape_chain(module& m, instruction_ref ins) {
    if (!reshape_like(ins)) return false;
    auto base = ins->inputs().front();
    std::size_t length = 1;
    while (reshape_like(base)) {
        base = base->inputs().front();
        ++length;
    }
    if (base->get_shape() == ins->get_shape()) {
        if (ins->outputs().empty()) return false;  // the implicit result of a module without @return
        m.replace_instruction(ins, base);
        return true;
    }
    // One reshape of a row-major input is a view, like the chain it replaces.
    if (length < 2 || !base->get_shape().standard()) return false;
    return replace_if_same_shape(m, ins, reshape_to(ins->get_shape().lens()), base);
}

std::vector<std::size_t> permutation(const op::transpose& t, std::size_t rank) {
    std::vector<std::size_t> p(rank);
    if (t.perm.empty()) {
        for (std::size_t i = 0; i < rank; ++i) p[i] = rank - 1 - i;  // empty perm reverses
        return p;
    }
    for (std::size_t i = 0; i < rank; ++i) {
        auto a = t.perm[i];
        p[i] = static_cast<std::size_t>(a < 0 ? a + static_cast<std::int64_t>(rank) : a);
    }
    return p;
}

bool is_identity(const std::vector<std::size_t>& p) {
    for (std::size_t i = 0; i < p.size(); ++i)
        if (p[i] != i) return false;
    return true;
}

bool compose_transposes(module& m, instruction_ref ins) {
    auto* outer = ins->get_operator().any_cast<op::transpose>();
    if (outer == nullptr || !static_tensor(ins)) return false;
    auto mid = ins->inputs().front();
    auto* inner = mid->get_operator().any_cast<op::transpose>();
    if (inner == nullptr || !static_tensor(mid)) return false;
    auto x = mid->inputs().front();
    const std::size_t rank = ins->get_shape().ndim();
    auto p1 = permutation(*inner, rank), p2 = permutation(*outer, rank);
    // out[i] = mid[p2[i]] = x[p1[p2[i]]]
    std::vector<std::size_t> q(rank);
    for (std::size_t i = 0; i < rank; ++i) q[i] = p1[p2[i]];
    if (is_identity(q) && x->get_shape() == ins->get_shape() && !ins->outputs().empty()) {
        m.replace_instruction(ins, x);
        return true;
    }
    op::transpose t;
    t.perm.assign(q.begin(), q.end());
    return replace_if_same_shape(m, ins, t, x);
}

// transpose of a row-major x that keeps the order of its dimensions longer than 1: the
// elements stay in the same order, so it is a reshape (a view with row-major strides).
bool transpose_to_reshape(module& m, instruction_ref ins) {
    auto* t = ins->get_operator().any_cast<op::transpose>();
    if (t == nullptr || !static_tensor(ins)) return false;
    auto x = ins->inputs().front();
    if (!static_tensor(x) || !x->get_shape().standard()) return false;
    const auto& lens = x->get_shape().lens();
    auto p = permutation(*t, lens.size());
    if (is_identity(p)) return false;  // simplify_algebra removes it
    std::size_t last = 0;
    bool first = true;
    for (auto a : p) {
        if (lens[a] == 1) continue;
        if (!first && a < last) return false;
        last = a;
        first = false;
    }
    auto r = reshape_to(ins->get_shape().lens());
    m.replace_instruction(ins, r, {x});
    return true;
}

// gather at one constant index selects a window of the data: a slice (a view) and, for a
// scalar index, a squeeze of the axis (a view too). Nothing is copied: a consumer that
// reads strided memory (a oneDNN matmul reading the q, k and v of a packed projection)
// reads the window in place. Module outputs keep their own row-major buffer. Also in a
// generic program when the gathered axis has one length (Swin's q, k, v = qkv[0], qkv[1],
// qkv[2] over [3, windows, heads, tokens, dim]: 36 copies of 0.1 ms each in swin_t's
// generic call; the generated kernels copy such views into their walk when they must).
bool gather_constant_to_slice(module& m, instruction_ref ins) {
    auto* g = ins->get_operator().any_cast<op::gather>();
    if (g == nullptr || ins->inputs().size() != 2 || !ins->get_shape().is_tensor()) return false;
    auto data = ins->inputs()[0], idx = ins->inputs()[1];
    const auto& ds = data->get_shape();
    if (!ds.is_tensor() || !idx->is_literal() || rewrite::is_output(m, ins)) return false;
    const auto& is = idx->get_shape();
    if (is.elements() != 1 || is.ndim() > 1) return false;
    const auto rank = static_cast<std::int64_t>(ds.ndim());
    auto axis = g->axis;
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return false;
    const auto a = static_cast<std::size_t>(axis);
    if (ds.dynamic() && !ds.dyn_dims()[a].is_fixed()) return false;  // a length known when it runs
    const auto len = static_cast<std::int64_t>(ds.dynamic() ? ds.dyn_dims()[a].min : ds.lens()[a]);
    auto i = idx->get_literal().get_argument().get_int64(0);
    if (i < 0) i += len;
    if (i < 0 || i >= len) return false;  // out of range: the gather reports it at run time
    op::slice sl;
    sl.axes = {axis};
    sl.starts = {i};
    sl.ends = {i + 1};
    auto window = m.insert_instruction(ins, sl, {data});
    if (is.ndim() == 1) {
        m.replace_instruction(ins, window);
        return true;
    }
    op::squeeze sq;
    sq.axes = {axis};
    m.replace_instruction(ins, sq, {window});
    return true;
}

}  // namespace

void simplify_reshapes::apply(module& m) const {
    for (int sweep = 0; sweep < 16; ++sweep) {
        bool changed = false;
        for (auto ins = m.begin(); ins != m.end(); ++ins) {
            if (ins->is_param() || ins->is_literal() || ins->is_return()) continue;
            if (rewrite::unused(ins) && !rewrite::is_output(m, ins)) continue;
            bool hit = compose_transposes(m, ins) || transpose_to_reshape(m, ins) || collapse_reshape_chain(m, ins) ||
                       gather_constant_to_slice(m, ins);
            changed = changed || hit;
        }
        if (!changed) return;
    }
}

}  // namespace kiln
