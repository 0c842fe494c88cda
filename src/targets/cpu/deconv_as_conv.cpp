#include "targets/cpu/deconv_as_conv.hpp"

#include "ops/nn_conv.hpp"
#include "ops/pointwise_unary.hpp"
#include "ops/tensor_layout.hpp"
#include "passes/rewrite_utils.hpp"

#include <algorithm>

namespace kiln::cpu {

namespace {

bool all_are(const std::vector<std::int64_t>& v, std::int64_t x) {
    return std::all_of(v.begin(), v.end(), [&](std::int64_t e) { return e == x; });
}

// The kernel size k when `ins` is a float32 deconvolution with constant weights whose k x k
// kernel tiles its output; 0 otherwise.
std::int64_t tiling_kernel(instruction_ref ins) {
    const auto* d = ins->get_operator().any_cast<op::deconvolution>();
    if (d == nullptr) return 0;
    const auto& in = ins->inputs();
    const shape& x = in[0]->get_shape();
    if (x.get_type() != type::float32 || x.ndim() != 4 || !rewrite::is_constant(in[1]) ||
        (in.size() == 3 && !rewrite::is_constant(in[2])))
        return 0;
    const auto& wl = in[1]->get_shape().lens();
    const auto k = static_cast<std::int64_t>(wl[2]);
    if (wl[3] != wl[2] || d->group != 1 || !d->output_size.empty() || !all_are(d->output_padding, 0) ||
        !all_are(d->dilation, 1) || d->stride.size() != 2 || !all_are(d->stride, k))
        return 0;
    // With stride == kernel the same_* modes pad nothing either.
    if (d->padding_mode == op::pad_mode::explicit_pads && !all_are(d->padding, 0)) return 0;
    return k;
}

}  // namespace

void deconvolution_as_convolution::apply(module& m) const {
    for (auto ins = m.begin(); ins != m.end(); ++ins) {
        const std::int64_t k = tiling_kernel(ins);
        if (k == 0) continue;
        const auto& in = ins->inputs();
        const auto w = rewrite::values_of(*rewrite::constant_of(in[1]));
        const auto& wl = in[1]->get_shape().lens();
        const std::size_t cin = wl[0], cout = wl[1], kk = static_cast<std::size_t>(k * k);
        // w'[(co * k + i) * k + j, ci] = w[ci, co, i, j]; the bias repeated per (i, j).
        std::vector<double> w1(cout * kk * cin);
        for (std::size_t ci = 0; ci < cin; ++ci)
            for (std::size_t o = 0; o < cout * kk; ++o) w1[o * cin + ci] = w[ci * cout * kk + o];
        std::vector<instruction_ref> args{in[0], m.insert_literal(ins, rewrite::make_literal(
                                                                         shape(type::float32, {cout * kk, cin, 1, 1}), w1))};
        if (in.size() == 3) {
            const auto b = rewrite::values_of(*rewrite::constant_of(in[2]));
            std::vector<double> b1(cout * kk);
            for (std::size_t o = 0; o < cout * kk; ++o) b1[o] = b[o / kk];
            args.push_back(m.insert_literal(ins, rewrite::make_literal(shape(type::float32, {cout * kk}), b1)));
        }
        auto conv = m.insert_instruction(ins, op::convolution{}, args);
        const op::depth_to_space place{k, "CRD"};
        // A relu that only reads the deconvolution commutes with the placement.
        if (ins->outputs().size() == 1 && rewrite::is<op::relu_op>(ins->outputs()[0]) &&
            rewrite::only_used_by(m, ins, ins->outputs()[0])) {
            auto relu = ins->outputs()[0];
            auto moved = m.insert_instruction(ins, relu->get_operator(), {conv});
            m.replace_instruction(relu, place, {moved});
        } else {
            m.replace_instruction(ins, place, {conv});
        }
    }
}

}  // namespace kiln::cpu
