#include "core/exec_plan.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/dim_expr.hpp>
#include <kiln/errors.hpp>
#include <kiln/pipeline.hpp>
#include <kiln/program.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <list>
#include <map>
#include <mutex>
#include <ostream>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

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

// One compiled static program of a dynamic one, for one set of input shapes.
struct specialization {
    program prog;
    memory_usage usage;  // prog's, computed once rather than on every eval
};

// The compiled forms of a dynamic program, shared by its copies: the generic program
// (compiled once, runs every shape in range) and the specializations (one static program
// per set of input shapes). The mutex guards the maps, the queue and the counters, never
// a compile: a new set of shapes gets an entry holding a shared_future right away.
// With a generic program, the entry's compile runs on the background worker and the
// generic program serves its calls until it is ready; without one, the first caller
// compiles outside the lock and the callers of the same shapes wait on that future,
// while callers of other shapes go on. Entries are kept in least recently used order and
// dropped beyond `max`; a dropped specialization lives on while a running eval holds
// its shared_ptr.
struct specialization_cache {
    using spec_ptr = std::shared_ptr<const specialization>;
    using shape_map = std::unordered_map<std::string, shape>;
    struct entry {
        std::shared_future<spec_ptr> ready;
        std::list<std::string>::iterator lru;  // its key's place in `order`
        std::uint64_t id = 0;                  // tells a retried compile's entry from a failed one
    };
    struct job {
        std::string key;
        std::uint64_t id = 0;
        shape_map shapes;
        std::promise<spec_ptr> promise;
        bool partial = false;  // shapes with free dims: a program for a range (see `partials`)
    };
    std::mutex mutex;
    std::unordered_map<std::string, entry> entries;
    std::list<std::string> order;  // most recently used first
    std::uint64_t next_id = 0;
    std::size_t max = 0;
    specialization_stats stats;
    memory_usage last_usage;
    bool has_last = false;

    // What compiles start from.
    std::shared_ptr<const program> source;
    std::shared_ptr<const target> tgt;
    compile_options options;
    spec_ptr generic;  // null where the target could not build it
    // Compiled ahead for the inputs' optimals: the dims with optimals fixed at one of them,
    // the others still ranges (a decoder's sequence at 1 with its past length free).
    struct partial {
        std::vector<std::tuple<std::string, std::size_t, std::size_t>> fixed;  // input, axis, size
        bool fully_static = false;
        spec_ptr compiled;
    };
    std::vector<partial> partials;
    // The names of the inputs' dims (or "#input:axis" for unnamed ones): the value each had
    // in the last call and how many calls changed it. A name that keeps changing (a
    // decoder's past length) while the others stay (batch, sequence 1) is worth a program
    // with that name free and the others fixed, compiled in the background like those of
    // the optimals; `partial_keys` are the ones queued or judged not worth it.
    struct name_track {
        std::int64_t last = -1;
        std::size_t changes = 0;
    };
    std::map<std::string, name_track> names;
    std::unordered_set<std::string> partial_keys;
    // Calls per set of shapes not specialized yet (cleared when it grows large), and the
    // sets whose background compile failed (not tried again).
    std::unordered_map<std::string, std::size_t> seen;
    std::unordered_set<std::string> failed;
    std::unordered_set<std::string> evicted_keys;  // specialized once and dropped (cleared when large)
    // The background worker: started with the first job, stopped and joined here.
    std::deque<job> jobs;
    bool busy = false;
    bool stop = false;
    std::condition_variable wake;  // a job came, or stop
    std::condition_variable idle;  // no job queued or running
    std::thread worker;

    ~specialization_cache() {
        {
            std::lock_guard<std::mutex> lock(mutex);
            stop = true;
        }
        wake.notify_all();
        if (worker.joinable()) worker.join();
    }
};

// What eval checks its inputs against: the caller-visible parameters of the main module
// and their named dims (parsed once), computed when a program is compiled.
struct parameter_info {
    struct named_dim {
        std::string input;
        std::size_t axis;
        std::string symbol;
        dim_expr expr;
    };
    std::vector<const instruction*> params;
    std::vector<named_dim> named;
};

namespace {
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
}  // namespace

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

    // Dynamic programs: the parsed program and its compiled specializations.
    std::shared_ptr<const program> source;
    std::shared_ptr<specialization_cache> specializations;
};

namespace {

// Gives the freed pages of an evicted specialization back to the system: glibc keeps
// freed heap memory for reuse otherwise, and the point of evicting is a bounded RSS.
void return_freed_memory() {
#if defined(__GLIBC__)
    ::malloc_trim(0);
#endif
}

std::shared_ptr<specialization> new_specialization(const program& source) {
    return std::shared_ptr<specialization>(new specialization{source, {}}, [](specialization* q) {
        delete q;
        return_freed_memory();
    });
}

// The concrete shapes of the parameters of `main` in `params`.
specialization_cache::shape_map parameter_shapes(module& main, const param_map& params) {
    specialization_cache::shape_map shapes;
    for (auto& [name, arg] : params)
        if (main.get_parameter(name) != main.end()) shapes.emplace(name, arg.get_shape().as_standard());
    return shapes;
}

void compile_partials(specialization_cache& cache, const target& t);  // below

// Compiles `source` for the concrete `shapes` of its parameters.
std::shared_ptr<const specialization> compile_specialization(const program& source, const target& t,
                                                             const compile_options& options,
                                                             const specialization_cache::shape_map& shapes) {
    auto s = new_specialization(source);
    s->prog.get_main_module()->set_parameter_shapes(shapes);
    s->prog.compile(t, options);
    s->usage = s->prog.get_memory_usage();
    return s;
}

}  // namespace

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

void program::compile(const target& t, const compile_options& options) {
    if (impl_->compiled) throw_error(error_code::invalid_argument, "program is already compiled for " + target_name());
    if (auto why = t.unavailable_reason(); !why.empty())
        throw_error(error_code::unsupported, "target " + t.name() + " is not available: " + why);
    impl_->tgt = kiln::get_target(t.name());
    impl_->options = options;
    if (has_dynamic_parameters(*get_main_module())) {
        auto source = std::make_shared<program>(*this);
        // Its copies, the generic program and the specializations, share one pool of
        // arenas (see arena_pool).
        source->impl_->arenas = std::make_shared<arena_pool>();
        auto cache = std::make_shared<specialization_cache>();
        cache->max = options.max_specializations;
        cache->stats.max_specializations = options.max_specializations;
        cache->source = source;
        cache->tgt = impl_->tgt;
        cache->options = options;
        // The generic program: the passes and the target's lowering with the dims
        // symbolic. A target that cannot lower some instruction for a range of shapes
        // says so here, and the program falls back to a specialization per set of shapes.
        try {
            auto generic = new_specialization(*source);
            generic->prog.compile_pipeline(t, options);
            generic->usage = generic->prog.get_memory_usage();
            cache->generic = std::move(generic);
            cache->stats.generic = true;
        } catch (const std::exception& e) {
            cache->stats.generic_unavailable = e.what();
        }
        // The shapes the inputs name as optimal, compiled ahead (with a generic program to
        // fall back on; without one, every shape is specialized on its first call anyway).
        if (cache->generic && options.specialize_after != 0) compile_partials(*cache, t);
        impl_->source = std::move(source);
        impl_->specializations = std::move(cache);
        impl_->params = describe_parameters(*get_main_module());
        impl_->ctx = t.make_context(options);
        impl_->compiled = true;
        return;
    }
    compile_pipeline(t, options);
}

void program::compile_pipeline(const target& t, const compile_options& options) {
    auto ctx = t.make_context(options);
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
        if (!fits(declared, actual))
            throw_error(error_code::shape,
                        "input '" + name + "': expected " + describe(declared) + ", got " + describe(actual));
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

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The cache key of a set of input shapes: each input's name, element type and dims in
// the module's parameter order.
std::string signature(const parameter_info& info, const param_map& params) {
    std::string s;
    for (const instruction* p : info.params) {
        auto it = params.find(p->param_name());
        if (it == params.end()) continue;
        const auto& sh = it->second.get_shape();
        s += p->param_name();
        s += ':';
        if (!sh.is_tensor() || sh.dynamic()) {
            s += sh.to_string();
        } else {
            s += type_name(sh.get_type());
            for (auto d : sh.lens()) {
                s += ',';
                s += std::to_string(d);
            }
        }
        s += ';';
    }
    return s;
}

// The first program compiled for the optimals whose fixed dims these inputs have.
const specialization_cache::partial* matching_partial(const specialization_cache& cache, const param_map& args) {
    for (auto& p : cache.partials) {
        bool match = true;
        for (auto& [input, axis, size] : p.fixed) {
            auto a = args.find(input);
            match = a != args.end() && a->second.get_shape().is_tensor() && !a->second.get_shape().dynamic() &&
                    axis < a->second.get_shape().ndim() && a->second.get_shape().lens()[axis] == size;
            if (!match) break;
        }
        if (match) return &p;
    }
    return nullptr;
}

// The key of an input dim in `values` maps: its name, or "#input:axis" for an unnamed one;
// nullopt for a dim spelled as an expression of names.
std::optional<std::string> dim_key(const std::string& input, std::size_t axis, const dynamic_dimension& d) {
    if (d.symbol.empty()) return "#" + input + ":" + std::to_string(axis);
    auto e = dim_expr::parse(d.symbol);
    if (e && !e->is_symbol()) return std::nullopt;
    return d.symbol;
}

// The inputs' declared shapes with the dims named in `values` fixed at those sizes (a dim
// spelled as an expression too, when all its names are given); the others stay ranges.
specialization_cache::shape_map fix_dims(const module& main, const std::map<std::string, std::int64_t>& values) {
    specialization_cache::shape_map set;
    for (auto& ins : main) {
        if (!ins.is_param() || !ins.get_shape().is_tensor() || !ins.get_shape().dynamic()) continue;
        auto dims = ins.get_shape().dyn_dims();
        for (std::size_t i = 0; i < dims.size(); ++i) {
            if (dims[i].is_fixed()) continue;
            std::optional<std::int64_t> v;
            if (auto k = dim_key(ins.param_name(), i, dims[i])) {
                if (auto it = values.find(*k); it != values.end()) v = it->second;
            } else if (auto e = dim_expr::parse(dims[i].symbol)) {
                v = e->evaluate(values);
            }
            if (v && *v >= 0) dims[i] = dynamic_dimension{std::size_t(*v), std::size_t(*v), {}};
        }
        set.emplace(ins.param_name(), shape::make_dynamic(ins.get_shape().get_type(), dims));
    }
    return set;
}

// The input shapes of the programs worth compiling ahead: each combination of the
// optimals of the dims that have them (at most `limit`), with those dims fixed and the
// others left as ranges. Dims that share a name are fixed together; a dim spelled as an
// expression ("past + sequence") is fixed when all its names are.
std::vector<specialization_cache::shape_map> optimal_shape_sets(const module& main, std::size_t limit) {
    struct dim_at {
        std::string input;
        std::size_t axis;
    };
    std::map<std::string, std::vector<dim_at>> groups;  // name (or "#input:axis") -> its dims
    std::map<std::string, std::set<std::size_t>> optimals;
    std::vector<std::pair<dim_at, dim_expr>> expressions;
    std::map<std::string, shape> declared;
    for (auto& ins : main) {
        if (!ins.is_param() || !ins.get_shape().is_tensor() || !ins.get_shape().dynamic()) continue;
        declared.emplace(ins.param_name(), ins.get_shape());
        const auto& dd = ins.get_shape().dyn_dims();
        for (std::size_t i = 0; i < dd.size(); ++i) {
            if (dd[i].is_fixed()) continue;
            auto e = dd[i].symbol.empty() ? std::nullopt : dim_expr::parse(dd[i].symbol);
            if (e && !e->is_symbol()) {
                expressions.emplace_back(dim_at{ins.param_name(), i}, *e);
                continue;
            }
            auto name = e ? dd[i].symbol : "#" + ins.param_name() + ":" + std::to_string(i);
            groups[name].push_back({ins.param_name(), i});
            optimals[name].insert(dd[i].optimals.begin(), dd[i].optimals.end());
        }
    }
    std::vector<std::map<std::string, std::int64_t>> combos{{}};
    for (auto& [name, opts] : optimals) {
        if (opts.empty()) continue;
        std::vector<std::map<std::string, std::int64_t>> next;
        for (auto& c : combos)
            for (auto v : opts) {
                if (next.size() >= limit) break;
                auto d = c;
                d[name] = static_cast<std::int64_t>(v);
                next.push_back(std::move(d));
            }
        combos = std::move(next);
    }
    std::vector<specialization_cache::shape_map> sets;
    if (combos.size() == 1 && combos.front().empty()) return sets;  // no optimals at all
    for (auto& values : combos) sets.push_back(fix_dims(main, values));
    return sets;
}

// Compiles the programs for the optimals (see optimal_shape_sets) into `cache`. One that
// fails to compile, or whose free dims the target cannot build a generic program for,
// is left out: the generic program serves those shapes.
// A program for `set` (some dims fixed, the others ranges; all fixed: a static program),
// or nullopt when it fails to compile or its free dims have no generic program.
std::optional<specialization_cache::partial> compile_partial(const specialization_cache& cache, const target& t,
                                                             const specialization_cache::shape_map& set) {
    specialization_cache::partial part;
    part.fully_static = true;
    for (auto& [input, s] : set) {
        part.fully_static = part.fully_static && !s.dynamic();
        if (!s.dynamic()) {
            for (std::size_t i = 0; i < s.ndim(); ++i) part.fixed.emplace_back(input, i, s.lens()[i]);
            continue;
        }
        const auto& dd = s.dyn_dims();
        for (std::size_t i = 0; i < dd.size(); ++i)
            if (dd[i].is_fixed()) part.fixed.emplace_back(input, i, dd[i].min);
    }
    try {
        auto s = new_specialization(*cache.source);
        s->prog.get_main_module()->set_parameter_shapes(set);
        auto options = cache.options;
        options.specialize_after = 0;  // its free dims run on its own generic program
        s->prog.compile(t, options);
        if (!part.fully_static && !s->prog.get_specialization_stats().generic) return std::nullopt;
        s->usage = s->prog.get_memory_usage();
        part.compiled = std::move(s);
        return part;
    } catch (...) {
        return std::nullopt;  // this runs on the background worker too: nothing may escape
    }
}

void compile_partials(specialization_cache& cache, const target& t) {
    const std::size_t limit = std::max<std::size_t>(1, std::min<std::size_t>(4, cache.max ? cache.max : 4));
    for (auto& set : optimal_shape_sets(*cache.source->get_main_module(), limit)) {
        auto t0 = std::chrono::steady_clock::now();
        auto part = compile_partial(cache, t, set);
        cache.stats.compile_ms += ms_since(t0);
        if (!part) {
            ++cache.stats.failed_compiles;
            continue;
        }
        ++cache.stats.compiles;
        cache.partials.push_back(std::move(*part));
    }
}

bool is_ready(const std::shared_future<specialization_cache::spec_ptr>& f) {
    return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

// Drops least recently used entries beyond the bound; returns their futures, to be
// destroyed outside the lock. An entry still compiling may go too: its callers hold the
// future and get their result, it is just not kept.
std::vector<std::shared_future<specialization_cache::spec_ptr>> evict_beyond_max(specialization_cache& cache) {
    std::vector<std::shared_future<specialization_cache::spec_ptr>> evicted;
    while (cache.max != 0 && cache.entries.size() > cache.max) {
        auto victim = cache.entries.find(cache.order.back());
        if (cache.evicted_keys.size() > 4096) cache.evicted_keys.clear();
        cache.evicted_keys.insert(victim->first);
        evicted.push_back(std::move(victim->second.ready));
        cache.entries.erase(victim);
        cache.order.pop_back();
        ++cache.stats.evictions;
    }
    cache.stats.cached = cache.entries.size();
    return evicted;
}

// Compiles the entry `key` (made with `id`) outside the lock and hands the result to its
// future. A failed compile is not cached: the callers already waiting get its error.
void compile_entry(specialization_cache& cache, const std::string& key, std::uint64_t id,
                   const specialization_cache::shape_map& shapes, std::promise<specialization_cache::spec_ptr>& promise,
                   bool background) {
    auto t0 = std::chrono::steady_clock::now();
    try {
        auto spec = compile_specialization(*cache.source, *cache.tgt, cache.options, shapes);
        {
            std::lock_guard<std::mutex> lock(cache.mutex);
            ++cache.stats.compiles;
            if (background) ++cache.stats.background_compiles;
            cache.stats.compile_ms += ms_since(t0);
        }
        promise.set_value(std::move(spec));
    } catch (...) {
        // A call that comes after compiles again when there is no generic program (the
        // failure may have been transient, e.g. memory); with one, the generic program
        // goes on serving these shapes. The entry goes first, so no later call picks up
        // a stale error.
        {
            std::lock_guard<std::mutex> lock(cache.mutex);
            ++cache.stats.failed_compiles;
            cache.stats.compile_ms += ms_since(t0);
            if (background) cache.failed.insert(key);
            if (auto it = cache.entries.find(key); it != cache.entries.end() && it->second.id == id) {
                cache.order.erase(it->second.lru);
                cache.entries.erase(it);
                cache.stats.cached = cache.entries.size();
            }
        }
        promise.set_exception(std::current_exception());
    }
}

// The background worker: compiles queued specializations one at a time, so that they
// take one core from the callers, not all.
void run_background_compiles(specialization_cache& cache) {
    std::unique_lock<std::mutex> lock(cache.mutex);
    for (;;) {
        cache.wake.wait(lock, [&] { return cache.stop || !cache.jobs.empty(); });
        if (cache.stop) return;
        auto j = std::move(cache.jobs.front());
        cache.jobs.pop_front();
        cache.busy = true;
        lock.unlock();
        if (j.partial) {
            auto t0 = std::chrono::steady_clock::now();
            auto part = compile_partial(cache, *cache.tgt, j.shapes);
            lock.lock();
            cache.stats.compile_ms += ms_since(t0);
            if (part) {
                ++cache.stats.compiles;
                ++cache.stats.background_compiles;
                cache.partials.push_back(std::move(*part));
            } else {
                ++cache.stats.failed_compiles;
            }
            lock.unlock();
        } else {
            compile_entry(cache, j.key, j.id, j.shapes, j.promise, true);
        }
        lock.lock();
        cache.busy = false;
        if (cache.jobs.empty()) cache.idle.notify_all();
    }
}

// Queues a background compile of `checked`'s shapes (lock held).
void queue_background_compile(specialization_cache& cache, const std::string& key, const param_map& checked,
                              std::vector<std::shared_future<specialization_cache::spec_ptr>>& evicted) {
    specialization_cache::job j;
    j.key = key;
    j.id = ++cache.next_id;
    j.shapes = parameter_shapes(*cache.source->get_main_module(), checked);
    cache.order.push_front(key);
    cache.entries.emplace(key, specialization_cache::entry{j.promise.get_future().share(), cache.order.begin(), j.id});
    cache.jobs.push_back(std::move(j));
    auto dropped = evict_beyond_max(cache);
    for (auto& f : dropped) evicted.push_back(std::move(f));
    if (!cache.worker.joinable()) cache.worker = std::thread([c = &cache] { run_background_compiles(*c); });
    cache.wake.notify_one();
}

// Whether a program with the names `free` left as ranges and the others fixed makes at
// least a tenth of main's dynamic instructions static (a decoder's past length: most of it;
// an encoder's sequence: almost nothing, not worth a compile).
bool worth_fixing_others(const module& main, const std::set<std::string>& free) {
    std::size_t dynamic = 0, fixed = 0;
    for (auto& ins : main) {
        const auto& s = ins.get_shape();
        if (!s.is_tensor() || !s.dynamic()) continue;
        ++dynamic;
        bool depends = false;
        for (auto& d : s.dyn_dims()) {
            if (d.is_fixed()) continue;
            auto e = d.symbol.empty() ? std::nullopt : dim_expr::parse(d.symbol);
            if (!e) {
                depends = true;  // an unnamed range: it may follow from anything
                break;
            }
            for (auto& [name, k] : e->terms()) depends = depends || free.count(name) > 0;
            if (depends) break;
        }
        fixed += depends ? 0 : 1;
    }
    return dynamic > 0 && fixed * 10 >= dynamic;
}

// Tracks how the inputs' named dims change from call to call (lock held); when some keep
// changing and the others stay, queues (once per such set, after specialize_after calls
// of it) a background compile of a program with the changing names free and the others
// fixed at this call's sizes.
void maybe_queue_partial(specialization_cache& cache, const parameter_info& info, const param_map& checked) {
    std::map<std::string, std::int64_t> values;
    for (const instruction* p : info.params) {
        const auto& declared = p->get_shape();
        if (!declared.is_tensor() || !declared.dynamic()) continue;
        auto a = checked.find(p->param_name());
        if (a == checked.end() || !a->second.get_shape().is_tensor() || a->second.get_shape().dynamic()) continue;
        const auto& lens = a->second.get_shape().lens();
        const auto& dd = declared.dyn_dims();
        for (std::size_t i = 0; i < dd.size() && i < lens.size(); ++i)
            if (!dd[i].is_fixed())
                if (auto k = dim_key(p->param_name(), i, dd[i])) values[*k] = static_cast<std::int64_t>(lens[i]);
    }
    std::set<std::string> changing;
    for (auto& [name, v] : values) {
        auto& t = cache.names[name];
        if (t.last >= 0 && t.last != v) ++t.changes;
        t.last = v;
        if (t.changes >= 2) changing.insert(name);
    }
    if (changing.empty() || changing.size() == values.size() || cache.partials.size() >= 8) return;
    std::map<std::string, std::int64_t> fixed;
    std::string key = "partial:";
    for (auto& [name, v] : values)
        if (!changing.count(name)) {
            fixed[name] = v;
            key += name + "=" + std::to_string(v) + ";";
        }
    for (auto& name : changing) key += "|" + name;
    if (cache.partial_keys.count(key)) return;
    if (cache.seen.size() > 4096) cache.seen.clear();
    if (++cache.seen[key] < cache.options.specialize_after) return;
    cache.seen.erase(key);
    cache.partial_keys.insert(key);
    if (!worth_fixing_others(*cache.source->get_main_module(), changing)) return;
    specialization_cache::job j;
    j.key = key;
    j.partial = true;
    j.shapes = fix_dims(*cache.source->get_main_module(), fixed);
    cache.jobs.push_back(std::move(j));
    if (!cache.worker.joinable()) cache.worker = std::thread([c = &cache] { run_background_compiles(*c); });
    cache.wake.notify_one();
}

// The compiled program for the shapes of `checked`: its specialization when one is
// ready; else the generic program (queueing a specialization when the shapes have come
// often enough); else, without a generic program, the specialization being compiled by
// another caller (waited for) or compiled here, outside the cache's lock.
std::shared_ptr<const specialization> specialization_for(const program::impl& I, const param_map& checked) {
    auto& cache = *I.specializations;
    auto key = signature(*I.params, checked);
    std::shared_future<specialization_cache::spec_ptr> ready;
    std::promise<specialization_cache::spec_ptr> promise;
    std::uint64_t id = 0;
    bool compile_here = false;
    std::vector<std::shared_future<specialization_cache::spec_ptr>> evicted;
    {
        std::lock_guard<std::mutex> lock(cache.mutex);
        auto it = cache.entries.find(key);
        if (it != cache.entries.end() && (!cache.generic || is_ready(it->second.ready))) {
            cache.order.splice(cache.order.begin(), cache.order, it->second.lru);
            ready = it->second.ready;
            ++cache.stats.hits;
        } else if (cache.generic) {
            // Compiling in the background, or not specialized (yet): a program compiled for
            // the optimals that covers these shapes, else the generic program.
            const auto* part = matching_partial(cache, checked);
            const auto after = cache.options.specialize_after;
            // Shapes a program for a range already serves (the optimals', a decode step's)
            // are not compiled again for themselves, nor are shapes that were compiled and
            // evicted: a working set larger than the cache would compile without end.
            if (it == cache.entries.end() && after != 0 && !part && cache.failed.count(key) == 0 &&
                cache.evicted_keys.count(key) == 0) {
                if (cache.seen.size() > 4096) cache.seen.clear();
                auto& calls = cache.seen[key];
                ++calls;
                if (calls >= after) {
                    cache.seen.erase(key);
                    queue_background_compile(cache, key, checked, evicted);
                }
            }
            if (!part && after != 0) maybe_queue_partial(cache, *I.params, checked);
            if (part) {
                ++cache.stats.hits;
                cache.last_usage = part->compiled->usage;
                cache.has_last = true;
                return part->compiled;
            }
            ++cache.stats.generic_runs;
            // The generic program's own sizes are ranges: the inputs' are this call's.
            cache.last_usage = cache.generic->usage;
            cache.last_usage.parameter_bytes = 0;
            for (auto& [name, arg] : checked)
                if (arg.get_shape().is_tensor() && !arg.get_shape().dynamic())
                    cache.last_usage.parameter_bytes += arg.get_shape().bytes();
            cache.has_last = true;
            return cache.generic;
        } else {
            compile_here = true;
            ready = promise.get_future().share();
            cache.order.push_front(key);
            id = ++cache.next_id;
            cache.entries.emplace(key, specialization_cache::entry{ready, cache.order.begin(), id});
            evicted = evict_beyond_max(cache);
        }
    }
    // The evicted programs are destroyed here (when no eval holds them), not under the lock.
    evicted.clear();
    if (compile_here)
        compile_entry(cache, key, id, parameter_shapes(*cache.source->get_main_module(), checked), promise, false);
    auto spec = ready.get();  // rethrows the compile's error
    std::lock_guard<std::mutex> lock(cache.mutex);
    cache.last_usage = spec->usage;
    cache.has_last = true;
    return spec;
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

std::vector<argument> program::run_checked(param_map checked, std::vector<instruction_profile>* profile) const {
    const auto& I = *impl_;
    if (I.source) {
        // Checked against the ranges here; the program chosen takes them as they are.
        auto spec = specialization_for(I, checked);  // held until this eval ends, even if evicted meanwhile
        return spec->prog.run_checked(std::move(checked), profile);
    }

    context& ctx = get_context();
    const bool offload = I.compiled && I.tgt && I.tgt->location() != memory_location::host && I.options.offload_copy;
    if (offload)
        for (auto& [k, v] : checked) v = I.tgt->copy_to_target(v, ctx);

    auto run_token = ctx.begin_run();
    argument arena;
    if (I.arenas) {
        arena = I.arenas->acquire(I.scratch_shape, *I.tgt, ctx);
        checked[builtin::scratch_parameter] = arena;
    }
    std::vector<argument> results;
    try {
        if (I.compiled && I.plans) {
            std::function<const exec_plan&(const module*)> get_plan = [&](const module* m) -> const exec_plan& {
                return *I.plans->at(m);
            };
            results = get_plan(get_main_module()).run(ctx, checked, get_plan, profile);
        } else {
            exec_plan plan(*get_main_module());
            std::unordered_map<const module*, std::unique_ptr<exec_plan>> plans;
            std::function<const exec_plan&(const module*)> get_plan = [&](const module* m) -> const exec_plan& {
                if (m == get_main_module()) return plan;
                auto& p = plans[m];
                if (!p) p = std::make_unique<exec_plan>(*m);
                return *p;
            };
            results = plan.run(ctx, checked, get_plan, profile);
        }
        ctx.finish();
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
    if (offload)
        for (auto& r : results) r = I.tgt->copy_to_host(r, ctx);
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
    auto& cache = impl_->specializations;
    if (!cache) return;
    std::unique_lock<std::mutex> lock(cache->mutex);
    cache->idle.wait(lock, [&] { return cache->jobs.empty() && !cache->busy; });
}

specialization_stats program::get_specialization_stats() const {
    if (!impl_->specializations) return {};
    std::lock_guard<std::mutex> lock(impl_->specializations->mutex);
    return impl_->specializations->stats;
}

const value& program::get_metadata() const { return impl_->metadata; }
void program::set_metadata(const value& v) { impl_->metadata = v; }

memory_usage program::get_memory_usage() const {
    if (auto& cache = impl_->specializations) {
        std::lock_guard<std::mutex> lock(cache->mutex);
        if (cache->has_last) return cache->last_usage;
    }
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
