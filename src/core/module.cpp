#include <kiln/builtin_ops.hpp>
#include <kiln/errors.hpp>
#include <kiln/module.hpp>

#include <algorithm>
#include <ostream>
#include <sstream>
#include <unordered_set>

namespace kiln {

namespace {
// Values of shape arithmetic are not part of shape equality, but a change of them must
// still reach the users (a Reshape whose target became known).
bool same_shape_and_values(const shape& a, const shape& b) { return a == b && a.values() == b.values(); }
}  // namespace

module::module(std::string name) : name_(std::move(name)) {}

instruction_ref module::insert(instruction_ref pos, instruction ins) {
    auto it = instructions_.insert(pos, std::move(ins));
    for (auto arg : it->inputs_) arg->add_output(it);
    return it;
}

instruction_ref module::add_parameter(const std::string& name, const shape& s) {
    return insert_parameter(end(), name, s);
}

instruction_ref module::insert_parameter(instruction_ref pos, const std::string& name, const shape& s) {
    if (get_parameter(name) != end())
        throw_error(error_code::invalid_argument, "module " + name_ + " already has a parameter named '" + name + "'");
    return insert(pos, instruction(builtin::param{name, s}, s, {}, {}));
}

instruction_ref module::add_literal(literal l) { return insert_literal(end(), std::move(l)); }

instruction_ref module::insert_literal(instruction_ref pos, literal l) { return insert(pos, instruction(std::move(l))); }

instruction_ref module::add_instruction(const operation& op, std::vector<instruction_ref> args,
                                        std::vector<module_ref> mods) {
    return insert_instruction(end(), op, std::move(args), std::move(mods));
}

instruction_ref module::insert_instruction(instruction_ref pos, const operation& op, std::vector<instruction_ref> args,
                                           std::vector<module_ref> mods) {
    shape s = op.compute_shape(to_shapes(args), mods);
    return insert(pos, instruction(op, std::move(s), std::move(args), std::move(mods)));
}

instruction_ref module::insert_instruction_with_shape(instruction_ref pos, const operation& op, shape s,
                                                      std::vector<instruction_ref> args, std::vector<module_ref> mods) {
    return insert(pos, instruction(op, std::move(s), std::move(args), std::move(mods)));
}

instruction_ref module::add_return(std::vector<instruction_ref> args) {
    if (get_return() != end()) throw_error(error_code::runtime, "module " + name_ + " already has a @return");
    return add_instruction(builtin::return_op{}, std::move(args));
}

void module::recompute_users(instruction_ref ins) {
    // Users whose shape changes, in program order (a user comes after what it reads), so
    // each is recomputed once all its changed inputs are: a walk that met a Concat between
    // the updates of two of its inputs saw them disagree, failed, and left the other input's
    // shape stale (Mask R-CNN's anchors, once the image size was known). Stops where shapes
    // settle.
    std::unordered_set<const instruction*> dirty;
    auto mark_users = [&](instruction_ref i) {
        for (auto u : i->outputs_)
            if (!u->is_param() && !u->is_literal()) dirty.insert(&*u);
    };
    mark_users(ins);
    for (auto it = std::next(ins); it != instructions_.end() && !dirty.empty(); ++it) {
        if (dirty.erase(&*it) == 0) continue;
        shape s = it->recompute_shape();
        if (same_shape_and_values(s, it->shape_)) continue;
        it->shape_ = std::move(s);
        mark_users(it);
    }
    // Users placed before `ins` (a program still being rewired): in any order, as they come.
    std::vector<instruction_ref> work;
    for (auto it = instructions_.begin(); it != instructions_.end() && !dirty.empty(); ++it)
        if (dirty.erase(&*it) > 0) work.push_back(it);
    while (!work.empty()) {
        auto u = work.back();
        work.pop_back();
        if (u->is_param() || u->is_literal()) continue;
        shape s = u->recompute_shape();
        if (same_shape_and_values(s, u->shape_)) continue;
        u->shape_ = std::move(s);
        work.insert(work.end(), u->outputs_.begin(), u->outputs_.end());
    }
}

instruction_ref module::replace_instruction(instruction_ref ins, const operation& op, std::vector<instruction_ref> args,
                                            std::vector<module_ref> mods) {
    shape s = op.compute_shape(to_shapes(args), mods);
    for (auto a : ins->inputs_) a->remove_output(ins);
    ins->op_ = op;
    ins->inputs_ = std::move(args);
    ins->mods_ = std::move(mods);
    for (auto a : ins->inputs_) a->add_output(ins);
    bool changed = !same_shape_and_values(s, ins->shape_);
    ins->shape_ = std::move(s);
    if (changed) recompute_users(ins);
    return ins;
}

instruction_ref module::replace_instruction(instruction_ref ins, instruction_ref rep) {
    if (ins == rep) return rep;
    auto users = ins->outputs_;
    for (auto u : users) {
        if (u == rep) continue;  // rep may use ins (e.g. a wrapping op)
        for (auto& a : u->inputs_)
            if (a == ins) a = rep;
        rep->add_output(u);
        ins->remove_output(u);
    }
    if (ins->get_shape() != rep->get_shape()) recompute_users(rep);
    return rep;
}

void module::replace_argument(instruction_ref ins, instruction_ref old_arg, instruction_ref new_arg) {
    // Otherwise new_arg would list a user that does not use it.
    if (std::find(ins->inputs_.begin(), ins->inputs_.end(), old_arg) == ins->inputs_.end())
        throw_error(error_code::invalid_argument, "replace_argument: " + instruction_name(&*old_arg) +
                                                      " is not an input of " + instruction_name(&*ins) + " (" +
                                                      ins->name() + ")");
    for (auto& a : ins->inputs_)
        if (a == old_arg) a = new_arg;
    if (std::find(ins->inputs_.begin(), ins->inputs_.end(), old_arg) == ins->inputs_.end()) old_arg->remove_output(ins);
    new_arg->add_output(ins);
    shape s = ins->recompute_shape();
    if (!same_shape_and_values(s, ins->shape_)) {
        ins->shape_ = std::move(s);
        recompute_users(ins);
    }
}

instruction_ref module::remove_instruction(instruction_ref ins) {
    if (!ins->outputs_.empty())
        throw_error(error_code::runtime, "cannot remove " + instruction_name(&*ins) + " (" + ins->name() +
                                             "): it still has users");
    for (auto a : ins->inputs_) a->remove_output(ins);
    return instructions_.erase(ins);
}

instruction_ref module::move_instruction(instruction_ref src, instruction_ref dst) {
    instructions_.splice(dst, instructions_, src);
    return src;
}

void module::set_parameter_shape(const std::string& name, const shape& s) {
    auto p = get_parameter(name);
    if (p == end()) throw_error(error_code::invalid_argument, "module " + name_ + " has no parameter '" + name + "'");
    p->op_ = builtin::param{name, s};
    p->shape_ = s;
    recompute_users(p);
}

void module::set_parameter_shapes(const std::unordered_map<std::string, shape>& shapes) {
    for (auto& [name, s] : shapes) {
        auto p = get_parameter(name);
        if (p == end()) throw_error(error_code::invalid_argument, "module " + name_ + " has no parameter '" + name + "'");
        p->op_ = builtin::param{name, s};
        p->shape_ = s;
    }
    // Instructions come after their inputs.
    for (auto& ins : instructions_)
        if (!ins.is_param() && !ins.is_literal()) ins.shape_ = ins.recompute_shape();
}

void module::finalize_ops(context& ctx) {
    for (auto& ins : instructions_) {
        if (ins.is_param() || ins.is_literal() || ins.is_return()) continue;
        std::vector<argument> constants;
        constants.reserve(ins.inputs_.size());
        for (auto in : ins.inputs_) constants.push_back(in->is_literal() ? in->get_literal().get_argument() : argument{});
        ins.op_.finalize(ctx, ins.shape_, to_shapes(ins.inputs_), constants);
    }
}

bool module::has_instruction(instruction_ref ins) const {
    for (auto it = instructions_.begin(); it != instructions_.end(); ++it)
        if (&*it == &*ins) return true;
    return false;
}

std::size_t module::index_of(instruction_ref ins) const {
    std::size_t i = 0;
    for (auto it = instructions_.begin(); it != instructions_.end(); ++it, ++i)
        if (&*it == &*ins) return i;
    return i;
}

instruction_ref module::get_parameter(const std::string& name) {
    for (auto it = begin(); it != end(); ++it)
        if (it->is_param() && it->param_name() == name) return it;
    return end();
}

std::vector<std::string> module::get_parameter_names() const {
    std::vector<std::string> names;
    for (auto& ins : instructions_)
        if (ins.is_param()) names.push_back(ins.param_name());
    return names;
}

std::unordered_map<std::string, shape> module::get_parameter_shapes() const {
    std::unordered_map<std::string, shape> m;
    for (auto& ins : instructions_)
        if (ins.is_param()) m.emplace(ins.param_name(), ins.get_shape());
    return m;
}

instruction_ref module::get_return() {
    for (auto it = instructions_.rbegin(); it != instructions_.rend(); ++it)
        if (it->is_return()) return std::prev(it.base());
    return end();
}

std::vector<shape> module::get_output_shapes() const {
    for (auto it = instructions_.rbegin(); it != instructions_.rend(); ++it)
        if (it->is_return()) return to_shapes(it->inputs());
    if (instructions_.empty()) return {};
    return {instructions_.back().get_shape()};
}

void module::validate() const {
    std::unordered_set<const instruction*> seen;
    std::unordered_set<std::string> params;
    int returns = 0;
    auto fail = [&](const instruction& ins, const std::string& what) {
        throw_error(error_code::runtime, "invalid module " + name_ + " at " + instruction_name(&ins) + " (" +
                                             ins.name() + "): " + what);
    };
    for (auto& ins : instructions_) {
        for (auto a : ins.inputs()) {
            if (seen.count(&*a) == 0) fail(ins, "uses an instruction that is not defined before it");
            auto& outs = a->outputs();
            if (std::none_of(outs.begin(), outs.end(), [&](auto o) { return &*o == &ins; }))
                fail(ins, "missing from the users of its input " + instruction_name(&*a));
        }
        for (auto o : ins.outputs()) {
            auto& in = o->inputs();
            if (std::none_of(in.begin(), in.end(), [&](auto i) { return &*i == &ins; }))
                fail(ins, "lists a user that does not use it");
        }
        if (ins.is_param() && !params.insert(ins.param_name()).second) fail(ins, "duplicate parameter name");
        if (ins.is_return()) {
            ++returns;
            if (&ins != &instructions_.back()) fail(ins, "@return is not the last instruction");
        }
        if (!ins.is_param() && !ins.is_literal() && !ins.is_return()) {
            shape s;
            try {
                s = ins.recompute_shape();
            } catch (const error& e) {
                fail(ins, std::string("shape no longer valid: ") + e.what());
            } catch (const std::exception& e) {
                // An op's shape function failing another way (e.g. .at() on a changed
                // sub-module) is still a broken module, reported as promised.
                fail(ins, std::string("shape no longer valid: ") + e.what());
            }
            if (s != ins.get_shape())
                fail(ins, "stored shape " + ins.get_shape().to_string() + " differs from computed " + s.to_string());
        }
        seen.insert(&ins);
    }
    if (returns > 1) throw_error(error_code::runtime, "invalid module " + name_ + ": more than one @return");
}

std::unordered_map<const instruction*, instruction_ref> module::copy_into(
    module& dst, const std::unordered_map<const module*, module_ref>* mod_map) const {
    std::unordered_map<const instruction*, instruction_ref> map;
    for (auto& ins : instructions_) {
        std::vector<instruction_ref> args;
        for (auto a : ins.inputs()) args.push_back(map.at(&*a));
        std::vector<module_ref> mods;
        for (auto m : ins.module_inputs()) mods.push_back(mod_map ? mod_map->at(m) : m);
        instruction_ref copy;
        if (ins.is_literal()) {
            copy = dst.insert(dst.end(), instruction(ins.get_literal()));
        } else {
            // Keep the stored shape: a lowered program's shapes are already final.
            copy = dst.insert(dst.end(), instruction(ins.get_operator(), ins.get_shape(), std::move(args), std::move(mods)));
        }
        map.emplace(&ins, copy);
    }
    return map;
}

std::string module::instruction_name(const instruction* ins) const {
    if (ins->is_param()) return ins->param_name();
    std::size_t i = 0;
    for (auto& x : instructions_) {
        if (&x == ins) return "@" + std::to_string(i);
        ++i;
    }
    return "@?";
}

void module::print(std::ostream& os) const {
    std::unordered_map<const instruction*, std::string> names;
    std::size_t i = 0;
    os << "module " << name_ << "\n";
    for (auto& ins : instructions_) {
        std::string n = ins.is_param() ? ins.param_name() : "@" + std::to_string(i);
        names.emplace(&ins, n);
        ++i;
        os << "  ";
        if (!ins.is_return()) os << n << " = ";
        if (ins.is_param()) {
            os << "@param";
        } else if (ins.is_literal()) {
            os << "@literal{" << ins.get_literal().to_string(6) << "}";
        } else {
            os << ins.get_operator();
        }
        if (!ins.inputs().empty()) {
            os << "(";
            bool first = true;
            for (auto a : ins.inputs()) {
                os << (first ? "" : ", ") << names.at(&*a);
                first = false;
            }
            os << ")";
        }
        if (!ins.module_inputs().empty()) {
            os << " [";
            bool first = true;
            for (auto m : ins.module_inputs()) {
                os << (first ? "" : ", ") << m->name();
                first = false;
            }
            os << "]";
        }
        if (!ins.is_return()) os << " -> " << ins.get_shape();
        os << "\n";
    }
}

std::string module::to_string() const {
    std::ostringstream ss;
    print(ss);
    return ss.str();
}

std::ostream& operator<<(std::ostream& os, const module& m) {
    m.print(os);
    return os;
}

}  // namespace kiln
