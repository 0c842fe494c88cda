#include <kiln/errors.hpp>
#include <kiln/pass.hpp>
#include <kiln/program.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <unordered_set>

namespace kiln {

namespace {
bool env_flag(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && std::strcmp(v, "") != 0 && std::strcmp(v, "0") != 0;
}

using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point start) {
    return std::chrono::duration<double, std::milli>(clock_type::now() - start).count();
}

void validate_module(const module& m, const std::string& when) {
    try {
        m.validate();
    } catch (const error& e) {
        throw error(e.code(), when + ": " + e.message());
    }
}

void run_one(module& m, const pass& p, const pass_options& opts) {
    try {
        p.apply(m);
    } catch (const error& e) {
        throw error(e.code(), "pass " + p.name() + " on module " + m.name() + ": " + e.message());
    }
    if (opts.validate) validate_module(m, "after pass " + p.name());
}

std::unordered_set<const module*> referenced_modules(const program& prog) {
    std::unordered_set<const module*> out;
    for (auto m : prog.get_modules())
        for (auto& ins : *m)
            for (auto sub : ins.module_inputs()) out.insert(sub);
    return out;
}

// A pass that replaced a control-flow instruction (an If folded into its taken branch)
// leaves the bodies it referred to behind: they are removed, with what only they referred
// to, so they are never lowered, planned or run. Modules nothing referred to before the
// pass stay (a program may hold such modules on purpose).
void drop_released_modules(program& prog, const std::unordered_set<const module*>& before) {
    for (bool removed = true; removed;) {
        removed = false;
        auto now = referenced_modules(prog);
        for (auto m : prog.get_modules()) {
            if (m == prog.get_main_module() || !before.count(m) || now.count(m)) continue;
            prog.remove_module(m->name());
            removed = true;
            break;
        }
    }
}

void report_time(const pass& p, double ms, std::size_t modules) {
    std::cerr << "[kiln] pass " << p.name() << ": " << ms << " ms";
    if (modules > 1) std::cerr << " (" << modules << " modules)";
    std::cerr << "\n";
}
}  // namespace

pass_options pass_options_from_env() {
    pass_options o;
#ifndef NDEBUG
    o.validate = true;
#endif
    o.validate = o.validate || env_flag("KILN_VALIDATE");
    o.trace = env_flag("KILN_TRACE_PASSES");
    o.time = env_flag("KILN_TIME_PASSES");
    return o;
}

void run_passes(module& m, const std::vector<pass>& passes, const pass_options& opts) {
    // A module that is broken before any pass runs must not be blamed on the first pass.
    if (opts.validate) validate_module(m, "before the passes");
    auto total = clock_type::now();
    for (auto& p : passes) {
        auto start = clock_type::now();
        run_one(m, p, opts);
        if (opts.time) report_time(p, ms_since(start), 1);
        if (opts.trace) std::cerr << "[kiln] after " << p.name() << ":\n" << m << "\n";
    }
    if (opts.time) std::cerr << "[kiln] passes total: " << ms_since(total) << " ms\n";
}

void run_passes(program& prog, const std::vector<pass>& passes, const pass_options& opts) {
    if (opts.validate)
        for (auto m : prog.get_modules_postorder()) validate_module(*m, "before the passes");
    auto total = clock_type::now();
    for (auto& p : passes) {
        // Sub-modules first: a pass on a control-flow op may look at its bodies, which
        // should already be in the form this pass produces.
        auto start = clock_type::now();
        auto modules = prog.get_modules_postorder();
        const bool has_bodies = modules.size() > 1;
        std::unordered_set<const module*> before;
        if (has_bodies) before = referenced_modules(prog);
        for (auto m : modules) run_one(*m, p, opts);
        if (has_bodies) drop_released_modules(prog, before);
        if (opts.time) report_time(p, ms_since(start), modules.size());
        if (opts.trace) std::cerr << "[kiln] after " << p.name() << ":\n" << prog << "\n";
    }
    if (opts.time) std::cerr << "[kiln] passes total: " << ms_since(total) << " ms\n";
}

}  // namespace kiln
