#include "core/dynamic_program.hpp"
#include "core/dynamic_shape_sets.hpp"

#include <kiln/errors.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace kiln {

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
    std::weak_ptr<const specialization> last_ran;  // the program specialization_for gave last

    // What compiles start from.
    std::shared_ptr<const program> source;
    // The dynamic program's context: every compile's is derived from it (target::derive_context).
    std::shared_ptr<context> parent;
    std::shared_ptr<const target> tgt;
    compile_options options;
    spec_ptr generic;  // null where the target could not build it
    // Calls served in a row without the generic program. At `release_generic_after` its kept
    // buffers are freed: they would sit beside the specializations' own arenas (RetinaNet at
    // one image size: 1369 MiB resident with them). A workload that still needs the generic
    // program now and then pays one fresh allocation of them per that many calls at most.
    std::size_t calls_without_generic = 0;
    static constexpr std::size_t release_generic_after = 16;
    // Compiled ahead for the inputs' optimals: the dims with optimals fixed at one of them,
    // the others still ranges (a decoder's sequence at 1 with its past length free).
    struct partial {
        std::vector<std::tuple<std::string, std::size_t, std::size_t>> fixed;  // input, axis, size
        bool fully_static = false;
        bool mostly_static = false;  // at least half of the dynamic instructions static
        bool ahead = false;          // compiled for the optimals (saved with the program)
        spec_ptr compiled;
    };
    std::vector<partial> partials;
    std::vector<bucket_padding> padding;  // the buckets whose dims can be padded
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
shape_map parameter_shapes(module& main, const param_map& params) {
    shape_map shapes;
    for (auto& [name, arg] : params)
        if (main.get_parameter(name) != main.end()) shapes.emplace(name, arg.get_shape().as_standard());
    return shapes;
}

// Compiles `source` for the concrete `shapes` of its parameters.
std::shared_ptr<const specialization> compile_specialization(const program& source, const target& t,
                                                             const compile_options& options, const context& parent,
                                                             const shape_map& shapes) {
    auto s = new_specialization(source);
    s->prog.get_main_module()->set_parameter_shapes(shapes);
    s->prog.compile(t, options, t.derive_context(parent, options));
    s->usage = s->prog.get_memory_usage();
    return s;
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

// What a program compiled for `set` (some dims fixed, the others ranges; all fixed: a
// static program) serves: the dims it fixes, and whether most instructions are static.
specialization_cache::partial describe_partial(const specialization_cache& cache,
                                               const shape_map& set) {
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
    part.mostly_static = part.fully_static || static_fraction(*cache.source->get_main_module(), free_names(set)) >= 0.5;
    return part;
}

// A program for `set`, or nullopt when it fails to compile or its free dims have no
// generic program.
std::optional<specialization_cache::partial> compile_partial(const specialization_cache& cache, const target& t,
                                                             const shape_map& set) {
    try {
        auto part = describe_partial(cache, set);
        auto s = new_specialization(*cache.source);
        s->prog.get_main_module()->set_parameter_shapes(set);
        auto options = cache.options;
        options.specialize_after = 0;  // its free dims run on its own generic program
        s->prog.compile(t, options, t.derive_context(*cache.parent, options));
        if (!part.fully_static && !s->prog.get_specialization_stats().generic) return std::nullopt;
        s->usage = s->prog.get_memory_usage();
        part.compiled = std::move(s);
        return part;
    } catch (...) {
        return std::nullopt;  // this runs on the background worker too: nothing may escape
    }
}

// The input shapes `p` (a program compiled ahead, as saved) was compiled for: those of
// the source's dynamic inputs, each as `p`'s parameter of that name declares it (its
// parsed source's, when `p` is itself dynamic). Throws when they leave the source's ranges.
shape_map compiled_for(const specialization_cache& cache, const program& p) {
    const program& parsed = p.dynamic_source() != nullptr ? *p.dynamic_source() : p;
    auto& main = *parsed.get_main_module();
    shape_map set;
    for (auto& ins : *cache.source->get_main_module()) {
        if (!ins.is_param() || !ins.get_shape().is_tensor() || !ins.get_shape().dynamic()) continue;
        auto it = main.get_parameter(ins.param_name());
        if (it == main.end())
            throw_error(error_code::invalid_argument,
                        "a program compiled ahead has no input '" + ins.param_name() + "'");
        const auto& declared = ins.get_shape().dyn_dims();
        const auto dims = it->get_shape().to_dynamic_dims();
        bool fits = it->get_shape().get_type() == ins.get_shape().get_type() && dims.size() == declared.size();
        for (std::size_t i = 0; fits && i < dims.size(); ++i)
            fits = dims[i].min >= declared[i].min && dims[i].max <= declared[i].max;
        if (!fits)
            throw_error(error_code::invalid_argument, "a program compiled ahead takes input '" + ins.param_name() +
                                                          "' as " + it->get_shape().to_string() +
                                                          ", outside its range " + ins.get_shape().to_string());
        set.emplace(ins.param_name(), it->get_shape());
    }
    return set;
}

// Compiles the programs for the optimals (see optimal_shape_sets) into `cache`. One that
// fails to compile, or whose free dims the target cannot build a generic program for,
// is left out: the generic program serves those shapes. Without a generic program only
// the fully static sets are compiled (a CNN's default batch): each other shape is
// specialized on its first call anyway.
void compile_partials(specialization_cache& cache, const target& t) {
    // At most 4 combinations of optimals (and the cache's bound), then up to 16 of buckets
    // (the other dims free), each set once.
    const auto& main = *cache.source->get_main_module();
    const std::size_t limit = std::max<std::size_t>(1, std::min<std::size_t>(4, cache.max ? cache.max : 4));
    auto sets = optimal_shape_sets(main, limit);
    for (auto& set : bucket_shape_sets(main, cache.options.dynamic_buckets, 16))
        if (std::find(sets.begin(), sets.end(), set) == sets.end()) sets.push_back(std::move(set));
    for (auto& set : sets) {
        if (!cache.generic &&
            std::any_of(set.begin(), set.end(), [](const auto& kv) { return kv.second.dynamic(); }))
            continue;
        auto t0 = std::chrono::steady_clock::now();
        auto part = compile_partial(cache, t, set);
        cache.stats.compile_ms += ms_since(t0);
        if (!part) {
            ++cache.stats.failed_compiles;
            continue;
        }
        ++cache.stats.compiles;
        part->ahead = true;
        cache.partials.push_back(std::move(*part));
    }
}

// Puts the saved programs compiled ahead into `cache`, as compile_partials would have.
void restore_partials(specialization_cache& cache, std::vector<program> ahead) {
    for (auto& p : ahead) {
        if (!p.is_compiled() || p.target_name() != cache.tgt->name())
            throw_error(error_code::invalid_argument, "a program compiled ahead is not compiled for target '" +
                                                          cache.tgt->name() + "'");
        auto part = describe_partial(cache, compiled_for(cache, p));
        auto s = std::make_shared<specialization>(specialization{std::move(p), {}});
        s->usage = s->prog.get_memory_usage();
        part.compiled = std::move(s);
        part.ahead = true;
        cache.partials.push_back(std::move(part));
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
                   const shape_map& shapes, std::promise<specialization_cache::spec_ptr>& promise,
                   bool background) {
    auto t0 = std::chrono::steady_clock::now();
    try {
        auto spec = compile_specialization(*cache.source, *cache.tgt, cache.options, *cache.parent, shapes);
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

// Hands `j` to the background worker, starting it on the first job (lock held).
void push_job(specialization_cache& cache, specialization_cache::job j) {
    cache.jobs.push_back(std::move(j));
    if (!cache.worker.joinable()) cache.worker = std::thread([c = &cache] { run_background_compiles(*c); });
    cache.wake.notify_one();
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
    push_job(cache, std::move(j));
    auto dropped = evict_beyond_max(cache);
    for (auto& f : dropped) evicted.push_back(std::move(f));
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
    if (static_fraction(*cache.source->get_main_module(), changing) < 0.1) return;
    specialization_cache::job j;
    j.key = key;
    j.partial = true;
    j.shapes = fix_dims(*cache.source->get_main_module(), fixed);
    push_job(cache, std::move(j));
}

}  // namespace

// The compiled program for the shapes of `checked`: its specialization when one is
// ready; else the generic program (queueing a specialization when the shapes have come
// often enough); else, without a generic program, the specialization being compiled by
// another caller (waited for) or compiled here, outside the cache's lock.
std::shared_ptr<const specialization> specialization_for(specialization_cache& cache, const parameter_info& info,
                                                         const param_map& checked) {
    auto key = signature(info, checked);
    std::shared_future<specialization_cache::spec_ptr> ready;
    std::promise<specialization_cache::spec_ptr> promise;
    std::uint64_t id = 0;
    bool compile_here = false;
    std::vector<std::shared_future<specialization_cache::spec_ptr>> evicted;
    // The generic program whose kept buffers to free, once the cache's lock is released
    // (declared before the lock, so destroyed after it).
    struct release_after_unlock {
        specialization_cache::spec_ptr generic;
        ~release_after_unlock() {
            if (generic) generic->prog.release_kept_buffers();
        }
    } release;
    auto served_without_generic = [&] {
        if (cache.generic && ++cache.calls_without_generic == specialization_cache::release_generic_after)
            release.generic = cache.generic;
    };
    {
        std::lock_guard<std::mutex> lock(cache.mutex);
        auto it = cache.entries.find(key);
        if (it != cache.entries.end() && (!cache.generic || is_ready(it->second.ready))) {
            cache.order.splice(cache.order.begin(), cache.order, it->second.lru);
            ready = it->second.ready;
            ++cache.stats.hits;
            served_without_generic();
        } else if (cache.generic) {
            // Compiling in the background, or not specialized (yet): a program compiled for
            // the optimals that covers these shapes, else the generic program.
            const auto* part = matching_partial(cache, checked);
            const auto after = cache.options.specialize_after;
            // Shapes that a program for a range with most instructions static already serves
            // (a decode step's) are not compiled again for themselves, nor are shapes that
            // were compiled and evicted: a working set larger than the cache would compile
            // without end.
            if (it == cache.entries.end() && after != 0 && !(part && part->mostly_static) &&
                cache.failed.count(key) == 0 &&
                cache.evicted_keys.count(key) == 0) {
                if (cache.seen.size() > 4096) cache.seen.clear();
                auto& calls = cache.seen[key];
                ++calls;
                if (calls >= after) {
                    cache.seen.erase(key);
                    queue_background_compile(cache, key, checked, evicted);
                }
            }
            if (!part && after != 0) maybe_queue_partial(cache, info, checked);
            if (part) {
                ++cache.stats.hits;
                cache.last_usage = part->compiled->usage;
                cache.has_last = true;
                cache.last_ran = part->compiled;
                served_without_generic();
                return part->compiled;
            }
            ++cache.stats.generic_runs;
            cache.calls_without_generic = 0;
            // The generic program's own sizes are ranges: the inputs' are this call's.
            cache.last_usage = cache.generic->usage;
            cache.last_usage.parameter_bytes = 0;
            for (auto& [name, arg] : checked)
                if (arg.get_shape().is_tensor() && !arg.get_shape().dynamic())
                    cache.last_usage.parameter_bytes += arg.get_shape().bytes();
            cache.has_last = true;
            cache.last_ran = cache.generic;
            return cache.generic;
        } else if (const auto* part = matching_partial(cache, checked); part && part->fully_static) {
            ++cache.stats.hits;
            cache.last_usage = part->compiled->usage;
            cache.has_last = true;
            cache.last_ran = part->compiled;
            return part->compiled;
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
    cache.last_ran = spec;
    return spec;
}

std::shared_ptr<specialization_cache> make_specialization_cache(std::shared_ptr<const program> source,
                                                                const target& t, const compile_options& options,
                                                                const std::function<void(program&)>& compile_generic,
                                                                std::shared_ptr<context> parent,
                                                                std::optional<std::vector<program>> ahead) {
    auto cache = std::make_shared<specialization_cache>();
    cache->parent = std::move(parent);
    cache->max = options.max_specializations;
    cache->stats.max_specializations = options.max_specializations;
    cache->source = std::move(source);
    cache->tgt = get_target(t.name());
    cache->options = options;
    // The generic program: the passes and the target's lowering with the dims symbolic.
    // A target that cannot lower some instruction for a range of shapes says so here, and
    // the program falls back to a specialization per set of shapes.
    try {
        auto generic = new_specialization(*cache->source);
        compile_generic(generic->prog);
        generic->usage = generic->prog.get_memory_usage();
        cache->generic = std::move(generic);
        cache->stats.generic = true;
    } catch (const std::exception& e) {
        cache->stats.generic_unavailable = e.what();
    }
    cache->padding = paddable_buckets(*cache->source->get_main_module(), options.dynamic_buckets);
    // The shapes the inputs name as optimal (and the buckets), compiled ahead.
    if (ahead) restore_partials(*cache, std::move(*ahead));
    else if (options.specialize_after != 0) compile_partials(*cache, t);
    return cache;
}

std::vector<std::shared_ptr<const program>> compiled_ahead(specialization_cache& cache) {
    std::lock_guard<std::mutex> lock(cache.mutex);
    std::vector<std::shared_ptr<const program>> out;
    for (auto& p : cache.partials)
        if (p.ahead) out.push_back(std::shared_ptr<const program>(p.compiled, &p.compiled->prog));
    return out;
}

std::optional<padded_call> pad_to_buckets(specialization_cache& cache, const param_map& checked) {
    if (cache.padding.empty()) return std::nullopt;
    auto call = pad_call(cache.padding, checked);
    if (!call) return std::nullopt;
    // Only onto a bucket's program compiled ahead: the generic program runs any size as it is.
    std::lock_guard<std::mutex> lock(cache.mutex);
    if (!matching_partial(cache, call->inputs)) return std::nullopt;
    ++cache.stats.padded_runs;
    return call;
}

specialization_stats stats_of(specialization_cache& cache) {
    std::lock_guard<std::mutex> lock(cache.mutex);
    return cache.stats;
}

void wait_for_background_compiles(specialization_cache& cache) {
    std::unique_lock<std::mutex> lock(cache.mutex);
    cache.idle.wait(lock, [&] { return cache.jobs.empty() && !cache.busy; });
}

std::shared_ptr<const specialization> last_ran(specialization_cache& cache) {
    std::lock_guard<std::mutex> lock(cache.mutex);
    return cache.last_ran.lock();
}

std::optional<memory_usage> last_usage(specialization_cache& cache) {
    std::lock_guard<std::mutex> lock(cache.mutex);
    if (cache.has_last) return cache.last_usage;
    // Before the first call: the program for the default shapes (the first optimals).
    for (auto& p : cache.partials)
        if (p.ahead) return p.compiled->usage;
    return std::nullopt;
}

}  // namespace kiln
