#include "passes/fuse_int4.hpp"

#include "ops/nn_matmul.hpp"
#include "ops/nn_matmul_int4.hpp"
#include "ops/quantize.hpp"
#include "passes/rewrite_utils.hpp"

#include <cmath>

namespace kiln {

namespace {

using rewrite::is;

// The DequantizeLinear `dq` as matmul_int4 operands (packed b, scales[, zero points]) and
// block size, or nothing when it is not an int4 weight matrix every reader multiplies by.
struct int4_form {
    std::vector<std::int8_t> q, z;  // signed int4 values; z empty: no zero point
    std::vector<float> scales;      // [blocks][n]
    std::size_t block = 0;
};

std::optional<int4_form> match(instruction_ref dq) {
    const auto& op = dq->get_operator().get<op::dequantize_linear_op>();
    const auto& in = dq->inputs();
    if (dq->get_shape().get_type() != type::float32 || !in[0]->is_literal() || !in[1]->is_literal()) return std::nullopt;
    const type t = in[0]->get_shape().get_type();
    if ((t != type::int4 && t != type::uint4) || in[0]->get_shape().ndim() != 2) return std::nullopt;
    if (in.size() > 2 && !in[2]->is_literal()) return std::nullopt;
    const auto& xl = in[0]->get_shape().lens();
    const std::size_t k = xl[0], n = xl[1];
    const std::size_t axis = op.axis < 0 ? static_cast<std::size_t>(op.axis + 2) : static_cast<std::size_t>(op.axis);
    const auto& sl = in[1]->get_shape().lens();
    int4_form f;
    auto s = rewrite::values_of(in[1]->get_literal());
    std::vector<double> z = in.size() > 2 ? rewrite::values_of(in[2]->get_literal()) : std::vector<double>{};
    if (s.size() == 1 && op.block_size == 0) {  // per tensor: one block, the value in every column
        f.block = k;
        s.assign(n, s[0]);
        if (!z.empty()) z.assign(n, z[0]);
    } else if (op.block_size == 0 && axis == 1 && sl.size() == 1 && sl[0] == n) {  // per column
        f.block = k;
    } else if (op.block_size > 0 && axis == 0 && sl.size() == 2 && sl[1] == n) {  // blocked along K
        f.block = static_cast<std::size_t>(op.block_size);
    } else {
        return std::nullopt;
    }
    for (auto u : dq->outputs())
        if (!is<op::matmul>(u) || u->inputs().size() != 2 || u->inputs()[1] != dq || u->inputs()[0] == dq ||
            u->inputs()[0]->get_shape().ndim() < 2 || u->get_shape().get_type() != type::float32)
            return std::nullopt;
    // uint4 u with zero point z is int4 u - 8 with zero point z - 8 (0 without one).
    const int shift = t == type::uint4 ? 8 : 0;
    if (shift && z.empty()) z.assign(s.size(), 0.0);
    for (double v : rewrite::values_of(in[0]->get_literal())) f.q.push_back(static_cast<std::int8_t>(v - shift));
    for (double v : z) f.z.push_back(static_cast<std::int8_t>(v - shift));
    for (double v : s) f.scales.push_back(static_cast<float>(v));
    return f;
}

}  // namespace

void fuse_int4_weights(module& m) {
    std::vector<instruction_ref> dqs;
    for (auto it = m.begin(); it != m.end(); ++it)
        if (is<op::dequantize_linear_op>(it)) dqs.push_back(it);
    for (auto dq : dqs) {
        auto f = match(dq);
        if (!f) continue;
        const std::size_t n = dq->get_shape().lens()[1];
        const std::size_t blocks = f->scales.size() / n;
        auto b = m.insert_literal(dq, literal(shape(type::uint8, {(f->q.size() + 1) / 2}), op::pack_int4(f->q)));
        auto s = m.insert_literal(dq, literal(shape(type::float32, {blocks, n}), f->scales));
        std::vector<instruction_ref> operands{b, s};
        if (!f->z.empty()) {
            const auto zp = op::pack_int4(f->z);
            operands.push_back(m.insert_literal(dq, literal(shape(type::uint8, {zp.size()}), zp)));
        }
        op::matmul_int4 mi;
        mi.block_size = static_cast<std::int64_t>(f->block);
        const auto users = dq->outputs();
        for (auto u : users) {
            std::vector<instruction_ref> args{u->inputs()[0]};
            args.insert(args.end(), operands.begin(), operands.end());
            m.replace_instruction(u, mi, args);
        }
    }
}

}  // namespace kiln
