#include "core/exec_plan.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/errors.hpp>
#include <kiln/program.hpp>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <unordered_map>

namespace kiln {

namespace {
bool has_range(const shape& s) {
    if (s.is_tuple()) {
        for (auto& e : s.sub_shapes())
            if (has_range(e)) return true;
        return false;
    }
    return s.is_tensor() && s.dynamic();
}
}  // namespace

exec_plan::exec_plan(const module& m) : module_name_(m.name()) {
    std::unordered_map<const instruction*, std::uint32_t> slot;
    for (auto& ins : m) {
        step s{};
        s.ins = &ins;
        if (ins.is_param()) s.kind = step_kind::param;
        else if (ins.is_literal()) s.kind = step_kind::literal;
        else if (ins.is_return()) s.kind = step_kind::ret;
        else s.kind = step_kind::op;
        for (auto a : ins.inputs()) s.inputs.push_back(slot.at(&*a));
        // An instruction of a generic program: its shape, or one of its inputs', is a range.
        // It gets its real shape at run time from its arguments, which also checks them as
        // a static program's compile did (an op trusts the shapes it is given).
        s.dynamic = has_range(ins.get_shape());
        for (auto a : ins.inputs()) s.dynamic = s.dynamic || has_range(a->get_shape());
        slot.emplace(&ins, static_cast<std::uint32_t>(steps_.size()));
        steps_.push_back(std::move(s));
    }
    slots_ = steps_.size();
    mark_output_allocations();
    // Free each result after its last use, except the returned ones.
    std::vector<std::int64_t> last_use(slots_, -1);
    for (std::size_t i = 0; i < steps_.size(); ++i)
        for (auto in : steps_[i].inputs) last_use[in] = static_cast<std::int64_t>(i);
    for (std::size_t i = 0; i < steps_.size(); ++i) {
        auto lu = last_use[i];
        if (lu >= 0 && steps_[lu].kind == step_kind::op) steps_[lu].release.push_back(static_cast<std::uint32_t>(i));
    }
}

// Output i's buffer is an `allocate` when, following each instruction's output_alias back from
// the returned value, the chain ends at one; the returned value must be a standard tensor of the
// allocation's bytes (then it covers the buffer from offset 0, in the layout callers expect).
void exec_plan::mark_output_allocations() {
    if (steps_.empty() || steps_.back().kind != step_kind::ret) return;
    std::unordered_map<const instruction*, std::size_t> index;
    for (std::size_t i = 0; i < steps_.size(); ++i) index.emplace(steps_[i].ins, i);
    const auto& ret = *steps_.back().ins;
    for (std::size_t out = 0; out < ret.inputs().size(); ++out) {
        const shape& returned = ret.inputs()[out]->get_shape();
        if (!returned.is_tensor() || returned.dynamic() || !returned.standard()) continue;
        const instruction* cur = &*ret.inputs()[out];
        for (int hops = 0; hops < 64 && cur != nullptr; ++hops) {
            if (cur->name() == "allocate") break;
            if (cur->is_param() || cur->is_literal() || !cur->module_inputs().empty()) {
                cur = nullptr;
                break;
            }
            std::vector<shape> in;
            for (auto a : cur->inputs()) in.push_back(a->get_shape());
            auto alias = cur->get_operator().output_alias(in);
            cur = alias >= 0 && static_cast<std::size_t>(alias) < cur->inputs().size() ? &*cur->inputs()[alias] : nullptr;
        }
        if (cur == nullptr || cur->name() != "allocate") continue;
        auto& st = steps_[index.at(cur)];
        if (st.dynamic || st.output >= 0 || cur->get_shape().bytes() != returned.bytes()) continue;
        st.output = static_cast<std::int32_t>(out);
    }
}

argument exec_plan::destination_for(const step& s, const std::vector<argument>& destinations) const {
    if (s.output < 0 || static_cast<std::size_t>(s.output) >= destinations.size()) return {};
    const argument& d = destinations[s.output];
    const shape& returned = steps_.back().ins->inputs()[s.output]->get_shape();
    const shape& ds = d.get_shape();
    const bool fits = ds.is_tensor() && !ds.dynamic() && ds.standard() && d.data() != nullptr &&
                      d.location() == memory_location::host && ds.get_type() == returned.get_type() &&
                      ds.lens() == returned.lens() && reinterpret_cast<std::uintptr_t>(d.data()) % 64 == 0;
    if (!fits) return {};
    // Kiln's own buffers start zeroed (argument's constructor); so does this one.
    std::memset(d.data(), 0, ds.bytes());
    return argument(s.ins->get_shape(), std::shared_ptr<char>(d.buffer(), d.data()));
}

bool exec_plan::has_dynamic_steps() const {
    for (auto& s : steps_)
        if (s.dynamic) return true;
    return false;
}

namespace {
instruction_profile& profile_entry(std::vector<instruction_profile>& profile, const std::string& module_name,
                                   std::size_t index, const instruction& ins, const context& ctx) {
    for (auto& p : profile)
        if (p.index == index && p.module == module_name) return p;
    instruction_profile p;
    p.module = module_name;
    p.index = index;
    // Wrapper kernels (ref::kernel{op=...}) are named after what they wrap too.
    p.op_name = ins.name();
    auto v = ins.get_operator().to_value();
    if (const auto* inner = v.find("op"); inner && inner->is_object() && inner->contains("name"))
        p.op_name += "(" + inner->at("name").get_string() + ")";
    p.op_text = ins.get_operator().to_string();
    p.shape = ins.get_shape().to_string();
    // The kernel it runs, then what the target says of it (the tuner's choice).
    p.note = ins.get_operator().kernel_info();
    if (auto n = ctx.instruction_note(&ins); !n.empty()) p.note += (p.note.empty() ? "" : "; ") + n;
    profile.push_back(std::move(p));
    return profile.back();
}
}  // namespace

std::vector<argument> exec_plan::run(context& ctx, const param_map& params,
                                     const std::function<const exec_plan&(const module*)>& get_plan,
                                     std::vector<instruction_profile>* profile,
                                     const std::vector<argument>* destinations) const {
    std::vector<argument> values(slots_);
    std::vector<argument> args;
    std::vector<shape> arg_shapes;
    run_module_fn run_sub = [&](module_ref m, const param_map& p) { return get_plan(m).run(ctx, p, get_plan, profile); };
    for (std::size_t i = 0; i < steps_.size(); ++i) {
        const step& s = steps_[i];
        const instruction& ins = *s.ins;
        switch (s.kind) {
            case step_kind::param: {
                auto it = params.find(ins.param_name());
                if (it == params.end() && ins.param_name() == builtin::scratch_parameter) {
                    // A planned sub-module run by an op that passes only its own inputs:
                    // give it a fresh arena for this run.
                    values[i] = argument(ins.get_shape());
                    break;
                }
                if (it == params.end())
                    throw_error(error_code::invalid_argument,
                                "module " + module_name_ + ": no value given for parameter '" + ins.param_name() + "'");
                values[i] = it->second;
                break;
            }
            case step_kind::literal: values[i] = ins.get_literal().get_argument(); break;
            case step_kind::ret: {
                std::vector<argument> out;
                out.reserve(s.inputs.size());
                for (auto in : s.inputs) out.push_back(values[in]);
                return out;
            }
            case step_kind::op: {
                args.clear();
                for (auto in : s.inputs) args.push_back(values[in]);
                const auto& op = ins.get_operator();
                auto start = profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
                try {
                    argument given = destinations && s.output >= 0 ? destination_for(s, *destinations) : argument{};
                    if (!given.empty()) {
                        values[i] = std::move(given);  // the caller's buffer stands in for the allocation
                    } else if (s.dynamic) {
                        arg_shapes.clear();
                        for (auto& a : args) arg_shapes.push_back(a.get_shape());
                        shape out = op.compute_run_shape(arg_shapes, ins.module_inputs());
                        values[i] = op.compute(ctx, out, args, ins.module_inputs(), run_sub);
                    } else {
                        values[i] = op.compute(ctx, ins.get_shape(), args, ins.module_inputs(), run_sub);
                    }
                } catch (const error& e) {
                    throw error(e.code(), e.message() +
                                              " (in module " + module_name_ + ", instruction @" + std::to_string(i) +
                                              " " + op.name() + ")");
                } catch (const std::exception& e) {
                    throw_error(error_code::runtime, std::string(e.what()) + " (in module " + module_name_ +
                                                         ", instruction @" + std::to_string(i) + " " + op.name() + ")");
                }
                if (profile) {
                    ctx.finish();
                    // Stamp before the bookkeeping: a new entry prints the op's text.
                    auto end = std::chrono::steady_clock::now();
                    auto& e = profile_entry(*profile, module_name_, i, ins, ctx);
                    e.total_ms += std::chrono::duration<double, std::milli>(end - start).count();
                    ++e.calls;
                }
                for (auto r : s.release) values[r] = argument{};
                break;
            }
        }
    }
    // A module without @return yields its last value.
    if (steps_.empty()) return {};
    return {values.back()};
}

std::vector<argument> eval_module(const module& m, context& ctx, const param_map& params) {
    std::unordered_map<const module*, std::unique_ptr<exec_plan>> plans;
    std::function<const exec_plan&(const module*)> get_plan = [&](const module* mod) -> const exec_plan& {
        auto& p = plans[mod];
        if (!p) p = std::make_unique<exec_plan>(*mod);
        return *p;
    };
    return get_plan(&m).run(ctx, params, get_plan);
}

}  // namespace kiln

