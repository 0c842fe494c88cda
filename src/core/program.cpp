#include "core/buffer_recycler.hpp"
#include "core/dynamic_program.hpp"
#include "core/exec_plan.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/dim_expr.hpp>
#include <kiln/errors.hpp>
#include <kiln/pipeline.hpp>
#include <kiln/program.hpp>

#include <algorithm>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <ostream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace kiln {

namespace {

// Buffers for the planned arena. Each concurrent eval takes its own, so two threads
// can run one compiled program at once; buffers are reused across evals. A dynamic
// program's specializations share one pool (their arenas differ in size): a buffer
// serves any arena that fits in it, and one too small for the arena asked for is freed
// when a larger one is made, so the pool holds about one largest arena per concurrent
// eval however many shapes ran (ResNet-50 at batch 1..8 kept one arena per batch size).
class arena_pool {
public:
    argument acquire(const shape& s, const target& t, context& ctx) {
        std::vector<argument> too_small;  // freed outside the lock
        {
            std::lock_guard<std::mutex> lock(mutex_);
            for (auto it = free_.begin(); it != free_.end(); ++it)
                if (it->get_shape().bytes() >= s.bytes()) {
                    auto whole = std::move(*it);
                    free_.erase(it);
                    auto a = whole.view(s);
                    in_use_.emplace(a.data(), std::move(whole));
                    return a;
                }
            too_small = std::move(free_);
            free_.clear();
        }
        too_small.clear();
        auto whole = t.allocate(s, ctx);
        std::lock_guard<std::mutex> lock(mutex_);
        in_use_.emplace(whole.data(), whole);
        return whole;
    }
    void release(const argument& a) {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = in_use_.find(a.data());
        if (it == in_use_.end()) return;
        free_.push_back(std::move(it->second));
        in_use_.erase(it);
    }

private:
    std::mutex mutex_;
    std::vector<argument> free_;
    std::unordered_map<const char*, argument> in_use_;  // by the view's data: its whole buffer
};

bool has_dynamic_parameters(const module& m) {
    for (auto& ins : m)
        if (ins.is_param() && ins.get_shape().is_tensor() && ins.get_shape().dynamic()) return true;
    return false;
}

bool is_internal_parameter(const std::string& name) { return !name.empty() && name[0] == '#'; }

}  // namespace

std::shared_ptr<const parameter_info> describe_parameters(const module& m) {
    auto info = std::make_shared<parameter_info>();
    for (auto& ins : m) {
        if (!ins.is_param() || is_internal_parameter(ins.param_name())) continue;
        info->params.push_back(&ins);
        if (!ins.get_shape().is_tensor() || !ins.get_shape().dynamic()) continue;
        const auto& dd = ins.get_shape().dyn_dims();
        for (std::size_t i = 0; i < dd.size(); ++i) {
            if (dd[i].symbol.empty()) continue;
            if (auto e = dim_expr::parse(dd[i].symbol))
                info->named.push_back({ins.param_name(), i, dd[i].symbol, *e});
        }
    }
    return info;
}

struct program::impl {
    std::list<std::unique_ptr<module>> modules;
    std::vector<std::string> output_names;
    std::map<std::string, literal> defaults;
    value metadata = value::make_object();

    // Compiled state.
    bool compiled = false;
    std::shared_ptr<const target> tgt;
    std::shared_ptr<context> ctx;
    compile_options options;
    std::shared_ptr<arena_pool> arenas;
    shape scratch_shape;  // the planned arena's
    std::shared_ptr<std::map<const module*, std::unique_ptr<exec_plan>>> plans;
    std::shared_ptr<std::mutex> plans_mutex = std::make_shared<std::mutex>();

    std::shared_ptr<const parameter_info> params;  // of a compiled program (else worked out per eval)
    // A generic program's: the buffers its dynamic steps allocate, kept for the next eval.
    std::shared_ptr<detail::recycler_pool> recyclers;

    // Dynamic programs: the parsed program and its compiled specializations.
    std::shared_ptr<const program> source;
    std::shared_ptr<specialization_cache> specializations;
};

program::program() : impl_(std::make_unique<impl>()) { impl_->modules.push_back(std::make_unique<module>("main")); }

program::~program() = default;
program::program(program&&) noexcept = default;
program& program::operator=(program&&) noexcept = default;

program::program(const program& other) : impl_(std::make_unique<impl>()) { *this = other; }

program& program::operator=(const program& other) {
    if (this == &other) return *this;
    auto fresh = std::make_unique<impl>();
    std::unordered_map<const module*, module_ref> mod_map;
    for (auto& m : other.impl_->modules) {
        fresh->modules.push_back(std::make_unique<module>(m->name()));
        mod_map.emplace(m.get(), fresh->modules.back().get());
    }
    auto dst = fresh->modules.begin();
    for (auto& m : other.impl_->modules) {
        m->copy_into(**dst, &mod_map);
        ++dst;
    }
    fresh->output_names = other.impl_->output_names;
    fresh->defaults = other.impl_->defaults;
    fresh->metadata = other.impl_->metadata;
    fresh->compiled = other.impl_->compiled;
    fresh->tgt = other.impl_->tgt;
    fresh->ctx = other.impl_->ctx;
    fresh->options = other.impl_->options;
    fresh->arenas = other.impl_->arenas;
    fresh->scratch_shape = other.impl_->scratch_shape;
    fresh->recyclers = other.impl_->recyclers;
    fresh->source = other.impl_->source;
    fresh->specializations = other.impl_->specializations;
    if (fresh->compiled) fresh->params = describe_parameters(*fresh->modules.front());
    impl_ = std::move(fresh);
    return *this;
}

module_ref program::get_main_module() const { return impl_->modules.front().get(); }

module_ref program::create_module(const std::string& name) {
    if (has_module(name)) throw_error(error_code::invalid_argument, "program already has a module named '" + name + "'");
    impl_->modules.push_back(std::make_unique<module>(name));
    return impl_->modules.back().get();
}

module_ref program::get_module(const std::string& name) const {
    for (auto& m : impl_->modules)
        if (m->name() == name) return m.get();
    throw_error(error_code::invalid_argument, "program has no module named '" + name + "'");
}

bool program::has_module(const std::string& name) const {
    return std::any_of(impl_->modules.begin(), impl_->modules.end(), [&](auto& m) { return m->name() == name; });
}

std::vector<module_ref> program::get_modules() const {
    std::vector<module_ref> out;
    for (auto& m : impl_->modules) out.push_back(m.get());
    return out;
}

std::vector<module_ref> program::get_modules_postorder() const {
    std::vector<module_ref> out;
    std::unordered_set<module_ref> done;
    std::function<void(module_ref)> visit = [&](module_ref m) {
        if (!done.insert(m).second) return;
        for (auto& ins : *m)
            for (auto sub : ins.module_inputs()) visit(sub);
        out.push_back(m);
    };
    // Unreferenced modules first, then main's tree with main last.
    for (auto& m : impl_->modules)
        if (m.get() != get_main_module()) {
            bool used = false;
            for (auto& other : impl_->modules)
                for (auto& ins : *other)
                    for (auto sub : ins.module_inputs()) used = used || sub == m.get();
            if (!used) visit(m.get());
        }
    visit(get_main_module());
    return out;
}

void program::remove_module(const std::string& name) {
    if (name == get_main_module()->name()) throw_error(error_code::invalid_argument, "cannot remove the main module");
    // Instructions refer to modules by pointer: removing one in use would leave them dangling.
    for (auto& m : impl_->modules)
        for (auto& ins : *m)
            for (auto sub : ins.module_inputs())
                if (sub->name() == name)
                    throw_error(error_code::invalid_argument, "cannot remove module '" + name + "': " + ins.name() +
                                                                  " in module " + m->name() + " uses it");
    impl_->modules.remove_if([&](auto& m) { return m->name() == name; });
}

bool program::is_compiled() const { return impl_->compiled; }
std::string program::target_name() const { return impl_->tgt ? impl_->tgt->name() : std::string(); }
const compile_options& program::get_compile_options() const { return impl_->options; }
std::shared_ptr<const target> program::get_target() const { return impl_->tgt; }
const program* program::dynamic_source() const { return impl_->source.get(); }

context& program::get_context() const {
    static host_context uncompiled;
    return impl_->ctx ? *impl_->ctx : uncompiled;
}

void program::compile(const target& t, const compile_options& options) { compile(t, options, nullptr); }

void program::compile(const target& t, const compile_options& options, std::shared_ptr<context> ctx) {
    if (impl_->compiled) throw_error(error_code::invalid_argument, "program is already compiled for " + target_name());
    if (auto why = t.compile_unavailable_reason(); !why.empty())
        throw_error(error_code::unsupported, "target " + t.name() + " is not available: " + why);
    impl_->tgt = kiln::get_target(t.name());
    impl_->options = options;
    if (has_dynamic_parameters(*get_main_module())) return compile_dynamic(t, options, std::nullopt, std::move(ctx));
    compile_pipeline(t, options, std::move(ctx));
}

void program::restore_dynamic(const target& t, const compile_options& options, std::vector<program> ahead) {
    if (impl_->compiled) throw_error(error_code::invalid_argument, "program is already compiled for " + target_name());
    if (!has_dynamic_parameters(*get_main_module()))
        throw_error(error_code::invalid_argument, "restore_dynamic: the program has no dynamic inputs");
    impl_->tgt = kiln::get_target(t.name());
    impl_->options = options;
    compile_dynamic(t, options, std::move(ahead));
}

void program::compile_dynamic(const target& t, const compile_options& options,
                              std::optional<std::vector<program>> ahead, std::shared_ptr<context> ctx) {
    auto source = std::make_shared<program>(*this);
    // Its copies, the generic program and the specializations, share one pool of
    // arenas (see arena_pool), and compile with contexts derived from this one.
    source->impl_->arenas = std::make_shared<arena_pool>();
    impl_->ctx = ctx ? std::move(ctx) : t.make_context(options);
    auto parent = impl_->ctx;
    impl_->specializations = make_specialization_cache(
        source, t, options,
        [&](program& generic) { generic.compile_pipeline(t, options, t.derive_context(*parent, options)); },
        parent, std::move(ahead));
    impl_->source = std::move(source);
    impl_->params = describe_parameters(*get_main_module());
    impl_->compiled = true;
}

void program::release_kept_buffers() const {
    if (impl_->recyclers) impl_->recyclers->clear();
}

std::vector<std::shared_ptr<const program>> program::compiled_ahead() const {
    if (!impl_->specializations) return {};
    return kiln::compiled_ahead(*impl_->specializations);
}

void program::compile_pipeline(const target& t, const compile_options& options, std::shared_ptr<context> ctx) {
    if (!ctx) ctx = t.make_context(options);
    run_passes(*this, target_independent_passes(options));
    run_passes(*this, t.get_passes(*ctx, options));
    impl_->ctx = ctx;
    restore_compiled(t, options);
}

void program::restore_compiled(const target& t, const compile_options& options) {
    impl_->tgt = kiln::get_target(t.name());
    impl_->options = options;
    if (!impl_->ctx) impl_->ctx = t.make_context(options);
    for (auto m : get_modules()) m->finalize_ops(*impl_->ctx);
    auto scratch = get_main_module()->get_parameter(builtin::scratch_parameter);
    // A specialization keeps the pool its dynamic source handed down (see arena_pool).
    if (scratch != get_main_module()->end() && !impl_->arenas) impl_->arenas = std::make_shared<arena_pool>();
    impl_->scratch_shape = scratch != get_main_module()->end() ? scratch->get_shape() : shape();
    impl_->plans = std::make_shared<std::map<const module*, std::unique_ptr<exec_plan>>>();
    for (auto m : get_modules()) impl_->plans->emplace(m, std::make_unique<exec_plan>(*m));
    impl_->recyclers.reset();
    for (auto& [m, plan] : *impl_->plans)
        if (plan->has_dynamic_steps()) impl_->recyclers = std::make_shared<detail::recycler_pool>();
    impl_->params = describe_parameters(*get_main_module());
    impl_->compiled = true;
}

namespace {

std::string describe(const shape& s) { return s.to_string(); }

bool fits(const shape& declared, const shape& actual) {
    if (declared.get_kind() != actual.get_kind()) return false;
    if (!declared.is_tensor()) return true;
    if (declared.get_type() != actual.get_type()) return false;
    if (actual.dynamic()) return false;
    if (!declared.dynamic()) return declared.lens() == actual.lens();
    const auto& dd = declared.dyn_dims();
    const auto& al = actual.lens();
    if (dd.size() != al.size()) return false;
    for (std::size_t i = 0; i < dd.size(); ++i)
        if (!dd[i].contains(al[i])) return false;
    return true;
}

// Where an input's dim is outside its declared range: which dim, and how to widen it (the
// default range 0:4096 is a quarter second of 16 kHz audio).
std::string range_hint(const shape& declared, const shape& actual) {
    if (!declared.is_tensor() || !actual.is_tensor() || !declared.dynamic() || actual.dynamic() ||
        declared.dyn_dims().size() != actual.lens().size())
        return "";
    const auto& dd = declared.dyn_dims();
    for (std::size_t i = 0; i < dd.size(); ++i) {
        if (dd[i].contains(actual.lens()[i]) || dd[i].is_fixed()) continue;
        return " (dim " + std::to_string(i) + (dd[i].symbol.empty() ? "" : " '" + dd[i].symbol + "'") + " is " +
               std::to_string(actual.lens()[i]) + ", outside its range " + std::to_string(dd[i].min) + ":" +
               std::to_string(dd[i].max) +
               "; give it a wider range when parsing: default_dyn_dim_value or map_dyn_input_dims, kiln "
               "--default-dyn-dim or --dyn-input-dim)";
    }
    return "";
}

// Inputs whose dims share a name ("batch", "past") must agree on its size, and a dim
// spelled as an expression ("past + sequence") must equal it: shape inference relied on
// that, and a clear error here beats a shape error deep inside the specialized program.
void check_named_dims(const parameter_info& info, const param_map& args) {
    struct seen_at {
        std::int64_t size;
        const std::string* input;
        std::size_t dim;
    };
    std::map<std::string, seen_at> sizes;
    std::vector<std::pair<const parameter_info::named_dim*, std::int64_t>> expressions;
    for (auto& nd : info.named) {
        auto a = args.find(nd.input);
        if (a == args.end() || !a->second.get_shape().is_tensor() || a->second.get_shape().dynamic()) continue;
        const auto& lens = a->second.get_shape().lens();
        if (nd.axis >= lens.size()) continue;
        auto size = static_cast<std::int64_t>(lens[nd.axis]);
        if (!nd.expr.is_symbol()) {
            expressions.emplace_back(&nd, size);
            continue;
        }
        auto [it, fresh] = sizes.try_emplace(nd.symbol, seen_at{size, &nd.input, nd.axis});
        if (!fresh && it->second.size != size)
            throw_error(error_code::shape, "input '" + nd.input + "': dim " + std::to_string(nd.axis) + " is '" +
                                               nd.symbol + "', which input '" + *it->second.input + "' (dim " +
                                               std::to_string(it->second.dim) + ") gives as " +
                                               std::to_string(it->second.size) + ", but it is " +
                                               std::to_string(size) + " here (" + a->second.get_shape().to_string() +
                                               ")");
    }
    if (expressions.empty()) return;
    std::map<std::string, std::int64_t> values;
    for (auto& [name, at] : sizes) values[name] = at.size;
    for (auto& [nd, size] : expressions) {
        auto v = nd->expr.evaluate(values);
        if (v && *v != size)
            throw_error(error_code::shape, "input '" + nd->input + "': dim " + std::to_string(nd->axis) + " is '" +
                                               nd->expr.to_string() + "' = " + std::to_string(*v) +
                                               " by the other inputs, but it is " + std::to_string(size) + " here");
    }
}

void check_parameters(const parameter_info& info, const param_map& given,
                      const std::map<std::string, literal>& defaults, param_map& out) {
    for (const instruction* p : info.params) {
        const auto& name = p->param_name();
        auto it = given.find(name);
        if (it == given.end()) {
            auto d = defaults.find(name);
            if (d == defaults.end())
                throw_error(error_code::invalid_argument,
                            "missing input '" + name + "': expected " + describe(p->get_shape()));
            out[name] = d->second.get_argument();
            continue;
        }
        const auto& actual = it->second.get_shape();
        const auto& declared = p->get_shape();
        if (declared.is_tensor() && actual.is_tensor() && declared.get_type() != actual.get_type())
            throw_error(error_code::type, "input '" + name + "': expected element type " +
                                              std::string(type_name(declared.get_type())) + " (" + describe(declared) +
                                              "), got " + std::string(type_name(actual.get_type())));
        if (!fits(declared, actual)) {
            // Users coming from MIGraphX's guide fix the batch with map_input_dims, then run a
            // smaller one: say how to keep the dimension open instead.
            const bool fixed_dims = declared.is_tensor() && actual.is_tensor() && !declared.dynamic() &&
                                    declared.lens().size() == actual.lens().size();
            throw_error(error_code::shape,
                        "input '" + name + "': expected " + describe(declared) + ", got " + describe(actual) +
                            (fixed_dims ? " (this program's input dims are fixed; for one program that runs several "
                                          "sizes, give the dim a range when parsing: map_dyn_input_dims, "
                                          "kiln --dyn-input-dim)"
                                        : range_hint(declared, actual)));
        }
        out[name] = it->second;
    }
    check_named_dims(info, out);
    for (auto& [name, arg] : given) {
        if (is_internal_parameter(name)) continue;
        // Every parameter of the module is in `out` now (given or defaulted).
        if (out.find(name) == out.end()) {
            std::string names;
            for (const instruction* p : info.params) names += (names.empty() ? "" : ", ") + p->param_name();
            throw_error(error_code::invalid_argument, "unknown input '" + name + "' (the inputs are: " + names + ")");
        }
    }
}

}  // namespace

std::vector<argument> program::eval(const param_map& params) const { return eval_impl(params, nullptr); }

std::vector<argument> program::eval(const param_map& params, std::vector<instruction_profile>& profile) const {
    return eval_impl(params, &profile);
}

std::vector<argument> program::eval_impl(const param_map& params, std::vector<instruction_profile>* profile) const {
    const auto& I = *impl_;
    param_map checked;
    check_parameters(I.params ? *I.params : *describe_parameters(*get_main_module()), params, I.defaults, checked);
    return run_checked(std::move(checked), profile);
}

std::size_t program::eval_into(const param_map& params, const std::vector<argument>& outputs) const {
    const auto& I = *impl_;
    param_map checked;
    check_parameters(I.params ? *I.params : *describe_parameters(*get_main_module()), params, I.defaults, checked);
    auto results = run_checked(std::move(checked), nullptr, &outputs);
    if (results.size() != outputs.size())
        throw_error(error_code::invalid_argument, std::to_string(outputs.size()) + " output buffers given, the run gave " +
                                                      std::to_string(results.size()) + " outputs");
    std::size_t in_place = 0;
    const auto names = get_output_names();
    for (std::size_t i = 0; i < results.size(); ++i) {
        const auto &got = results[i].get_shape(), &want = outputs[i].get_shape();
        const auto what = "output " + std::to_string(i) + " ('" + names.at(i) + "')";
        if (!got.is_tensor() || !want.is_tensor())
            throw_error(error_code::unsupported, what + " is " + got.to_string() + ", not a tensor (buffer " +
                                                     want.to_string() + ")");
        if (got.get_type() != want.get_type())
            throw_error(error_code::type, what + ": the run gave " + got.to_string() + ", the buffer is " + want.to_string());
        if (got.lens() != want.lens())
            throw_error(error_code::shape, what + ": the run gave " + got.to_string() + ", the buffer is " + want.to_string());
        if (results[i].data() == outputs[i].data() && got.standard()) ++in_place;
        else results[i].copy_to(outputs[i]);
    }
    return in_place;
}

namespace {

// What an eval reads and writes, by address and shape (context::run_eval's key).
std::string eval_key(const param_map& params) {
    std::vector<std::pair<std::string, const argument*>> sorted;
    for (const auto& [name, arg] : params) sorted.emplace_back(name, &arg);
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::ostringstream key;
    for (const auto& [name, arg] : sorted)
        key << name << '@' << static_cast<const void*>(arg->data()) << ':' << arg->get_shape().to_string() << ';';
    return key.str();
}

}  // namespace

std::vector<argument> program::run_checked(param_map checked, std::vector<instruction_profile>* profile,
                                           const std::vector<argument>* destinations) const {
    const auto& I = *impl_;
    if (I.source) {
        // Checked against the ranges here; the program chosen takes them as they are.
        if (auto padded = pad_to_buckets(*I.specializations, checked)) {
            // Padded outputs are cut afterwards: they are copied into destinations, never computed there.
            auto spec = specialization_for(*I.specializations, *I.params, padded->inputs);
            return cut_outputs(spec->prog.run_checked(std::move(padded->inputs), profile), *padded);
        }
        auto spec = specialization_for(*I.specializations, *I.params, checked);  // held until this eval ends, even if evicted meanwhile
        auto results = spec->prog.run_checked(std::move(checked), profile, destinations);
        // A generic program's kernels may leave a result in their own layout (the cpu
        // target's run-time-sized convolutions write channels-last); callers get row-major
        // values, as from a static program, whose lowering plans that copy.
        for (auto& r : results)
            if (r.get_shape().is_tensor() && !r.get_shape().standard()) r = r.contiguous();
        return results;
    }

    context& ctx = get_context();
    const bool device = I.compiled && I.tgt && I.tgt->location() != memory_location::host;
    const bool offload = device && I.options.offload_copy;
    // Caller memory is host memory: only a host target computes into it.
    if (I.tgt && I.tgt->location() != memory_location::host) destinations = nullptr;

    // First: a target that cannot run here says why before any copy is tried.
    auto run_token = ctx.begin_run();
    argument arena;
    if (I.arenas) arena = I.arenas->acquire(I.scratch_shape, *I.tgt, ctx);
    std::vector<argument> results;
    try {
        if (offload)
            for (auto& [k, v] : checked) v = I.tgt->copy_input_to_target(k, v, arena, ctx);
        if (I.arenas) checked[builtin::scratch_parameter] = arena;
        if (I.compiled && I.plans && !I.recyclers && !profile && ctx.records_evals()) {
            // A target that replays recorded evals (CUDA graphs) sees the same key only when
            // the arena, the inputs and their shapes are the same.
            results = ctx.run_eval(eval_key(checked), [&] {
                return I.plans->at(get_main_module())->run(
                    ctx, checked, [&](const module* m) -> const exec_plan& { return *I.plans->at(m); }, nullptr, nullptr);
            });
        } else if (I.compiled && I.plans) {
            std::function<const exec_plan&(const module*)> get_plan = [&](const module* m) -> const exec_plan& {
                return *I.plans->at(m);
            };
            // A generic program's steps allocate their results as they run: from the buffers
            // of its last eval (see buffer_recycler).
            std::unique_ptr<detail::buffer_recycler> recycler;
            if (I.recyclers) recycler = I.recyclers->acquire();
            try {
                detail::recycling_scope scope(recycler.get());
                // The target may run the eval on another thread: it allocates as this one would.
                detail::eval_thread_state here;
                ctx.run_host(*get_main_module(), [&] {
                    detail::eval_thread_state::scope there(here);
                    results = get_plan(get_main_module()).run(ctx, checked, get_plan, profile, destinations);
                });
                here.settle();
            } catch (...) {
                if (I.recyclers) I.recyclers->release(std::move(recycler));
                throw;
            }
            if (I.recyclers) I.recyclers->release(std::move(recycler));
        } else {
            exec_plan plan(*get_main_module());
            std::unordered_map<const module*, std::unique_ptr<exec_plan>> plans;
            std::function<const exec_plan&(const module*)> get_plan = [&](const module* m) -> const exec_plan& {
                if (m == get_main_module()) return plan;
                auto& p = plans[m];
                if (!p) p = std::make_unique<exec_plan>(*m);
                return *p;
            };
            results = plan.run(ctx, checked, get_plan, profile, destinations);
        }
        ctx.finish();
        // A device target's results come back before its arena goes to the next eval:
        // copied to host memory (offload_copy), or else out of the arena into device
        // buffers of their own (the caller's device memory).
        if (offload) {
            for (auto& r : results) r = I.tgt->copy_to_host(r, ctx);
        } else if (device && I.arenas) {
            for (auto& r : results) {
                auto* p = r.data();
                auto* base = arena.data();
                if (p && base && p >= base && p < base + arena.get_shape().bytes()) r = I.tgt->copy_to_target(r, ctx);
            }
            ctx.finish();  // the caller reads them on streams of its own
        }
    } catch (...) {
        if (I.arenas) I.arenas->release(arena);
        throw;
    }
    if (I.arenas) {
        // Results must not alias the arena the next eval will overwrite.
        for (auto& r : results) {
            auto* p = r.data();
            auto* base = arena.data();
            if (p && base && p >= base && p < base + arena.get_shape().bytes()) r = r.copy();
        }
        I.arenas->release(arena);
    }
    // Nor may they alias a literal: the caller owns its results and may write into them,
    // which must not change the program's constants.
    for (auto& r : results) {
        auto* p = r.data();
        if (!p) continue;
        bool aliases = false;
        for (auto m : get_modules()) {
            for (auto& ins : *m) {
                if (!ins.is_literal()) continue;
                const char* base = ins.get_literal().data();
                const auto& ls = ins.get_literal().get_shape();
                std::size_t n = ls.is_tensor() && !ls.dynamic() ? ls.bytes() : 0;
                if (base && p >= base && p < base + std::max<std::size_t>(n, 1)) aliases = true;
            }
            if (aliases) break;
        }
        if (aliases) r = r.copy();
    }
    return results;
}

std::vector<std::string> program::get_parameter_names() const {
    std::vector<std::string> names;
    for (auto& n : get_main_module()->get_parameter_names())
        if (!is_internal_parameter(n)) names.push_back(n);
    return names;
}

std::unordered_map<std::string, shape> program::get_parameter_shapes() const {
    auto all = get_main_module()->get_parameter_shapes();
    std::unordered_map<std::string, shape> out;
    for (auto& [k, v] : all)
        if (!is_internal_parameter(k)) out.emplace(k, v);
    return out;
}

std::vector<shape> program::get_output_shapes() const { return get_main_module()->get_output_shapes(); }

std::vector<std::string> program::get_output_names() const {
    auto n = get_output_shapes().size();
    std::vector<std::string> names = impl_->output_names;
    names.resize(std::max(names.size(), n));
    for (std::size_t i = 0; i < names.size(); ++i)
        if (names[i].empty()) names[i] = "output_" + std::to_string(i);
    names.resize(n);
    return names;
}

void program::set_output_names(std::vector<std::string> names) { impl_->output_names = std::move(names); }

void program::set_parameter_default(const std::string& name, literal value) {
    impl_->defaults[name] = std::move(value);
}

const literal* program::get_parameter_default(const std::string& name) const {
    auto it = impl_->defaults.find(name);
    return it == impl_->defaults.end() ? nullptr : &it->second;
}

void program::finish_specializations() const {
    if (impl_->specializations) wait_for_background_compiles(*impl_->specializations);
}

specialization_stats program::get_specialization_stats() const {
    return impl_->specializations ? stats_of(*impl_->specializations) : specialization_stats{};
}

const value& program::get_metadata() const { return impl_->metadata; }
void program::set_metadata(const value& v) { impl_->metadata = v; }

std::string program::run_note() const {
    if (impl_->specializations) {
        const auto last = last_ran(*impl_->specializations);
        return last ? last->prog.run_note() : std::string();
    }
    return impl_->compiled ? get_context().run_note() : std::string();
}

bool program::warming_up() const {
    // A dynamic program before its first eval: its own context says whether there is
    // anything to try.
    if (impl_->specializations)
        if (const auto last = last_ran(*impl_->specializations)) return last->prog.warming_up();
    return impl_->compiled && get_context().warming_up();
}

memory_usage program::get_memory_usage() const {
    if (impl_->specializations)
        if (auto u = last_usage(*impl_->specializations)) return *u;
    memory_usage u;
    auto safe_bytes = [](const shape& s) -> std::size_t {
        return s.is_tensor() && !s.dynamic() ? s.bytes() : 0;
    };
    for (auto m : get_modules())
        for (auto& ins : *m)
            if (ins.is_literal()) u.literal_bytes += safe_bytes(ins.get_shape());
    for (auto& ins : *get_main_module()) {
        if (!ins.is_param()) continue;
        if (ins.param_name() == builtin::scratch_parameter) u.arena_bytes = safe_bytes(ins.get_shape());
        else if (!is_internal_parameter(ins.param_name())) u.parameter_bytes += safe_bytes(ins.get_shape());
    }
    for (auto& s : get_output_shapes()) u.output_bytes += safe_bytes(s);
    return u;
}

void program::print(std::ostream& os) const {
    bool first = true;
    for (auto m : get_modules()) {
        if (!first) os << "\n";
        m->print(os);
        first = false;
    }
}

std::string program::to_string() const {
    std::ostringstream ss;
    print(ss);
    return ss.str();
}

std::ostream& operator<<(std::ostream& os, const program& p) {
    p.print(os);
    return os;
}

}  // namespace kiln
