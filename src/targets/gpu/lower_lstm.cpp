// The LSTM candidate (selection.hpp): an ONNX LSTM the generated recurrence covers
// becomes its input projection on cuBLASLt and one gpu::lstm_steps kernel
// (codegen/emit_lstm.hpp); its outputs become views of the kernel's packed buffer.
#include "ops/control_rnn.hpp"
#include "ops/fused.hpp"
#include "ops/tensor_slice.hpp"
#include "ops/tensor_views.hpp"
#include "passes/rewrite_utils.hpp"
#include "targets/gpu/codegen/emit_lstm.hpp"
#include "targets/gpu/kernels/fused_kernel.hpp"
#include "targets/gpu/kernels/lstm_steps.hpp"
#include "targets/gpu/kernels/lt_matmul.hpp"
#include "targets/gpu/selection.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/errors.hpp>
#include <kiln/literal.hpp>

#include <algorithm>
#include <cctype>

namespace kiln::gpu {

namespace {

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}

// The defaults (sigmoid, tanh, tanh per direction), spelled out or not.
bool default_activations(const op::lstm& a) {
    if (!a.activation_alpha.empty() || !a.activation_beta.empty()) return false;
    const auto& n = a.activations;
    if (n.empty()) return true;
    if (n.size() != 3 && n.size() != 3 * a.num_directions()) return false;
    // ONNX activation names (f, g, h), not op names.
    static const std::string defaults[3] = {"sigmoid", "tanh", "tanh"};
    for (std::size_t i = 0; i < n.size(); ++i)
        if (lower(n[i]) != defaults[i % 3]) return false;
    return true;
}

bool static_f32(instruction_ref x) {
    const auto& s = x->get_shape();
    return s.is_tensor() && !s.dynamic() && s.get_type() == type::float32;
}

}  // namespace

bool lower_lstm(module& m, instruction_ref ins, const gpu_options& o) {
    const auto* a = ins->get_operator().any_cast<op::lstm>();
    if (!o.lstm || !a || a->layout != 0 || a->clip != 0 || a->has_sequence_lens || a->has_peephole || a->input_forget ||
        !default_activations(*a))
        return false;
    const auto& args = ins->inputs();
    for (auto x : args)
        if (!static_f32(x)) return false;
    const auto& xs = args[0]->get_shape();  // [T, B, I]
    if (xs.ndim() != 3 || !ins->get_shape().is_tuple()) return false;
    for (auto u : ins->outputs())
        if (!rewrite::is<builtin::get_tuple_elem>(u)) return false;
    const std::size_t D = a->num_directions(), T = xs.lens()[0], B = xs.lens()[1], I = xs.lens()[2];
    const std::size_t H = a->hidden_size;
    if (T == 0 || B == 0 || I == 0 || args[1]->get_shape().lens() != std::vector<std::size_t>{D, 4 * H, I} ||
        args[2]->get_shape().lens() != std::vector<std::size_t>{D, 4 * H, H})
        return false;

    lstm_steps steps;
    steps.direction = a->direction;
    steps.batch = B;
    steps.has_bias = a->has_bias;
    steps.has_initial_h = a->has_initial_h;
    steps.has_initial_c = a->has_initial_c;
    std::size_t next = 3;  // the optional inputs in ONNX order (no sequence_lens here)
    std::vector<instruction_ref> extra;
    for (bool present : {a->has_bias, a->has_initial_h, a->has_initial_c})
        if (present) extra.push_back(args[next++]);

    // The kernel's inputs: xw (the product's standard [D, T*B, 4H]), R^T [D, H, 4H], then
    // the optional ones; checked (with the product) before anything is inserted.
    op::transpose tr;
    tr.perm = {0, 2, 1};
    std::vector<shape> shapes = {shape(type::float32, {D, T * B, 4 * H}), tr.compute_shape({args[2]->get_shape()})};
    if (args[2]->is_literal()) shapes[1] = shapes[1].as_standard();
    for (auto x : extra) shapes.push_back(x->get_shape());
    op::fused body;
    op::fused_node node{steps, {}};
    for (std::size_t i = 0; i < shapes.size(); ++i) node.args.push_back(op::fused_input_arg(i));
    body.nodes.push_back(std::move(node));
    if (!codegen::lstm_problem(body, shapes).empty()) return false;
    // xw = X W^T for every time step and direction: [T*B, I] x [D, I, 4H] -> [D, T*B, 4H],
    // one cuBLASLt product (W^T as its op T, X shared by the directions: batch stride 0).
    op::reshape flat;
    flat.dims = {static_cast<std::int64_t>(T * B), static_cast<std::int64_t>(I)};
    try {
        (void)plan_lt(shape(type::float32, {T * B, I}), tr.compute_shape({args[1]->get_shape()}), shapes[0], false,
                      false);
    } catch (const error&) {
        return false;
    }

    // R^T: a literal R is transposed here, so the kernel reads it coalesced; any other R
    // through a transposed view (strided reads, still correct).
    instruction_ref rt;
    if (args[2]->is_literal()) {
        const auto& r = args[2]->get_literal().get_argument();
        rt = m.insert_literal(ins, literal(tr.compute(tr.compute_shape({r.get_shape()}), {r})));
    } else {
        rt = m.insert_instruction(ins, tr, {args[2]});
    }
    std::vector<instruction_ref> inputs = {instruction_ref{}, rt};
    inputs.insert(inputs.end(), extra.begin(), extra.end());
    auto x2 = m.insert_instruction(ins, flat, {args[0]});
    // A strided X (PyTorch's batch_first export transposes [B, T, I]) is copied row-major by
    // the reshape candidate's generated kernel; a row-major one stays a view.
    if (flat.output_alias({xs}) != 0) (void)lower_instruction(m, x2, o);
    auto wt = m.insert_instruction(ins, tr, {args[1]});
    const shape xw_shape = shapes[0];
    auto workspace = m.insert_instruction(ins, builtin::allocate{shape(type::uint8, {lt_workspace_bytes})}, {});
    auto xw_buf = m.insert_instruction(ins, builtin::allocate{xw_shape}, {});
    inputs[0] = m.insert_instruction(ins, lt_matmul{}, {x2, wt, workspace, xw_buf});

    fused_kernel k;
    k.fast_math = o.fast_math;
    k.symbol = codegen::lstm_symbol(body, shapes);
    k.grid = codegen::lstm_grid(body, shapes);
    k.body = std::move(body);
    const shape packed(type::float32, {T + 2, D, B, H});
    inputs.push_back(m.insert_instruction(ins, builtin::allocate{packed}, {}));
    auto kernel = m.insert_instruction(ins, k, inputs);

    // Y = rows [0, T), Y_h = row T, Y_c = row T + 1 of the packed buffer: views.
    for (auto u : std::vector<instruction_ref>(ins->outputs().begin(), ins->outputs().end())) {
        const auto i = static_cast<std::int64_t>(u->get_operator().get<builtin::get_tuple_elem>().index);
        const std::int64_t t = static_cast<std::int64_t>(T);
        op::slice s;
        s.axes = {0};
        s.starts = {i == 0 ? 0 : t + i - 1};
        s.ends = {i == 0 ? t : t + i};
        if (i == 0) {
            m.replace_instruction(u, s, {kernel});
        } else {
            op::squeeze sq;
            sq.axes = {0};
            m.replace_instruction(u, sq, {m.insert_instruction(u, s, {kernel})});
        }
    }
    m.remove_instruction(ins);
    return true;
}

}  // namespace kiln::gpu
