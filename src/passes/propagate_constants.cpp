#include "passes/propagate_constants.hpp"

#include "ops/control_flow.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/context.hpp>

#include <optional>
#include <unordered_map>

namespace kiln {

namespace {
constexpr std::size_t growth_allowance = 64 * 1024;  // bytes a fold may add beyond its inputs

bool foldable(const instruction& ins) {
    if (ins.is_param() || ins.is_literal() || ins.is_return() || ins.inputs().empty()) return false;
    if (!ins.module_inputs().empty()) return false;
    const auto& op = ins.get_operator();
    auto t = op.traits();
    if (t.nondeterministic || t.side_effects || t.builtin || !op.has_compute()) return false;
    const auto& s = ins.get_shape();
    if (!s.is_tensor() || s.dynamic()) return false;
    std::size_t in_bytes = 0;
    for (auto in : ins.inputs()) {
        if (!in->is_literal()) return false;
        in_bytes += in->get_shape().bytes();
    }
    return s.bytes() <= 2 * in_bytes + growth_allowance;
}

// The value of a one-element literal input, else nullopt.
std::optional<double> literal_scalar(instruction_ref in) {
    if (!in->is_literal() || !in->get_shape().is_tensor() || in->get_shape().elements() != 1) return std::nullopt;
    return in->get_literal().get_argument().get_double(0);
}

// Whether the tuple-shaped control-flow instruction `ins` is read only through
// get_tuple_elem, so unpack_into can replace it by one value per element.
bool can_unpack(instruction_ref ins) {
    for (auto u : ins->outputs())
        if (u->get_operator().any_cast<builtin::get_tuple_elem>() == nullptr) return false;
    return true;
}

// Replaces `ins` by `results`, one per tuple element: its get_tuple_elem users and
// `ins` itself go. Returns the instruction that followed `ins`.
instruction_ref unpack_into(module& m, instruction_ref ins, const std::vector<instruction_ref>& results) {
    auto users = ins->outputs();
    for (auto u : users) {
        auto k = u->get_operator().get<builtin::get_tuple_elem>().index;
        m.replace_instruction(u, results.at(k));
        m.remove_instruction(u);
    }
    return m.remove_instruction(ins);
}

// An If whose condition is a literal (shape arithmetic that folds once the input shapes
// are known) becomes its taken branch, copied into this module before it: the other
// branch is never lowered nor run (the pass manager drops its module, which nothing
// refers to any more), and it is never checked against shapes it would not see.
// Returns where to go on: the first copied instruction (it may fold further), or nullopt
// when nothing changed.
std::optional<instruction_ref> inline_taken_branch(module& m, instruction_ref ins) {
    const auto* op = ins->get_operator().any_cast<op::if_op>();
    if (op == nullptr || ins->module_inputs().size() != 2 || !can_unpack(ins)) return std::nullopt;
    auto c = literal_scalar(ins->inputs().at(0));
    if (!c) return std::nullopt;
    const bool taken = *c != 0.0;
    module_ref branch = ins->module_inputs()[taken ? 0 : 1];
    const auto& names = taken ? op->then_captured : op->else_captured;
    const std::size_t offset = taken ? 1 : 1 + op->then_captured.size();
    std::unordered_map<std::string, instruction_ref> captured;
    for (std::size_t i = 0; i < names.size(); ++i) captured.emplace(names[i], ins->inputs().at(offset + i));
    for (auto& b : *branch)
        if (b.is_param() && !captured.count(b.param_name())) return std::nullopt;  // not the frontend's form
    std::unordered_map<const instruction*, instruction_ref> map;
    std::vector<instruction_ref> results;
    std::optional<instruction_ref> first;
    for (auto& b : *branch) {
        if (b.is_return()) {
            for (auto a : b.inputs()) results.push_back(map.at(&*a));
            continue;
        }
        instruction_ref copy;
        if (b.is_param()) {
            copy = captured.at(b.param_name());
        } else {
            if (b.is_literal()) {
                copy = m.insert_literal(ins, b.get_literal());
            } else {
                std::vector<instruction_ref> args;
                for (auto a : b.inputs()) args.push_back(map.at(&*a));
                // Shapes from the real inputs, which may be more static than the branch's.
                copy = m.insert_instruction(ins, b.get_operator(), args, b.module_inputs());
            }
            if (!first) first = copy;
        }
        map.emplace(&b, copy);
    }
    auto next = unpack_into(m, ins, results);
    return first ? *first : next;
}

// A Loop that runs zero times (a literal trip count <= 0 or initial condition false) is
// its initial values and empty scan outputs: its body is never lowered nor run.
// Returns the instruction after it, or nullopt when nothing changed.
std::optional<instruction_ref> drop_empty_loop(module& m, instruction_ref ins) {
    const auto* op = ins->get_operator().any_cast<op::loop>();
    if (op == nullptr || ins->module_inputs().size() != 1 || !can_unpack(ins)) return std::nullopt;
    std::size_t idx = 0;
    bool never = op->max_iterations == 0;
    if (op->has_trip_count) {
        auto n = literal_scalar(ins->inputs().at(idx++));
        never = never || (n && *n <= 0);
    }
    if (op->has_cond) {
        auto c = literal_scalar(ins->inputs().at(idx++));
        never = never || (c && *c == 0.0);
    }
    if (!never) return std::nullopt;
    std::vector<instruction_ref> results;
    for (std::size_t j = 0; j < op->num_carried; ++j) results.push_back(ins->inputs().at(idx + j));
    auto outs = ins->module_inputs()[0]->get_output_shapes();
    for (std::size_t k = 1 + op->num_carried; k < outs.size(); ++k)
        results.push_back(m.insert_literal(ins, literal(argument(op::empty_scan_output(outs[k])))));
    return unpack_into(m, ins, results);
}
}  // namespace

void propagate_constants::apply(module& m) const {
    host_context ctx;
    auto ins = m.begin();
    while (ins != m.end()) {
        if (auto next = inline_taken_branch(m, ins)) {
            ins = *next;
            continue;
        }
        if (auto next = drop_empty_loop(m, ins)) {
            ins = *next;
            continue;
        }
        if (foldable(*ins)) {
            std::vector<argument> args;
            for (auto in : ins->inputs()) args.push_back(in->get_literal().get_argument());
            argument r = ins->get_operator().compute(ctx, ins->get_shape(), args);
            if (r.get_shape().same_lens_and_type(ins->get_shape())) {  // else (defensive) keep the op
                auto lit = m.insert_literal(ins, literal(r));
                m.replace_instruction(ins, lit);
            }
        }
        ++ins;
    }
}

}  // namespace kiln
