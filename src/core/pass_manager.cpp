#include <kiln/errors.hpp>
#include <kiln/pass.hpp>
#include <kiln/program.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>

namespace kiln {

namespace {
bool env_flag(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && std::strcmp(v, "") != 0 && std::strcmp(v, "0") != 0;
}


void run_one(module& m, const pass& p, const pass_options& opts) {
    auto start = std::chrono::steady_clock::now();
    try {
        p.apply(m);
    } catch (const error& e) {
        throw error(e.code(), "pass " + p.name() + " on module " + m.name() + ": " + e.message());
    }
    if (opts.validate) {
        try {
            m.validate();
        } catch (const error& e) {
            throw error(e.code(), "after pass " + p.name() + ": " + e.message());
        }
    }
    if (opts.time) {
        auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
        std::cerr << "[kiln] pass " << p.name() << " on " << m.name() << ": " << us / 1000.0 << " ms\n";
    }
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
    for (auto& p : passes) {
        run_one(m, p, opts);
        if (opts.trace) std::cerr << "[kiln] after " << p.name() << ":\n" << m << "\n";
    }
}

void run_passes(program& prog, const std::vector<pass>& passes, const pass_options& opts) {
    for (auto& p : passes) {
        for (auto m : prog.get_modules_postorder()) run_one(*m, p, opts);
        if (opts.trace) std::cerr << "[kiln] after " << p.name() << ":\n" << prog << "\n";
    }
}

}  // namespace kiln
