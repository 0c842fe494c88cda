// What the ONNX fuzzer does with one input, shared with the unit tests that replay
// its findings: parse the bytes as a model; when that succeeds, compile the program
// for `ref` and run it on small seeded inputs, so shape inference, constant folding,
// lowering and the reference kernels see the parsed program too.
//
// A kiln::error at any stage is the expected outcome for bad input and is swallowed.
// Anything else (another exception, a crash, a sanitizer report, an allocation far
// beyond the input) is a finding: exceptions are left to propagate.
#pragma once
#include <kiln/allocation_limit.hpp>
#include <kiln/errors.hpp>
#include <kiln/literal.hpp>
#include <kiln/onnx.hpp>
#include <kiln/program.hpp>
#include <kiln/target.hpp>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace kiln::fuzz {

struct outcome {
    bool parsed = false;
    bool compiled = false;
    bool ran = false;
    std::string error;  // the kiln::error that ended it, if any
};

// Limits that keep one run short: a model may legitimately describe a huge tensor
// or a long loop; the fuzzer looks for crashes, not for valid but slow models.
struct run_limits {
    std::size_t max_input_bytes = std::size_t{1} << 20;
    std::size_t max_program_bytes = std::size_t{64} << 20;  // arena + literals + outputs
    std::size_t max_loop_iterations = 16;
};

inline onnx_options fuzz_options(const run_limits& limits = {}) {
    onnx_options o;
    o.max_loop_iterations = limits.max_loop_iterations;
    o.limit_max_iterations = true;
    return o;
}

// Small values: integer inputs often feed shapes, indices and repeat counts, where
// large values only ask for huge (valid) results.
inline argument fuzz_input(const shape& s, std::mt19937& gen) {
    if (s.is_sequence()) return argument::make_sequence(s.sub_shapes().at(0), {});
    if (s.is_optional()) return argument::make_optional(s.sub_shapes().at(0), std::nullopt);
    if (s.is_tuple()) throw_error(error_code::unsupported, "tuple parameter");
    std::vector<std::size_t> lens;
    for (auto& d : s.to_dynamic_dims()) lens.push_back(d.min);
    shape st(s.get_type(), lens);
    const std::size_t n = st.elements();
    if (s.get_type() == type::string) {
        std::vector<std::string> v(n);
        for (auto& x : v) x = std::string(1 + gen() % 3, static_cast<char>('a' + gen() % 4));
        return literal(st, v).get_argument();
    }
    std::vector<double> v(n);
    const bool integral = is_integer(s.get_type()) || s.get_type() == type::bool_;
    for (auto& x : v)
        x = integral ? static_cast<double>(static_cast<int>(gen() % 6) - 2)
                     : std::uniform_real_distribution<double>(-2.0, 2.0)(gen);
    if (s.get_type() == type::bool_)
        for (auto& x : v) x = x > 0 ? 1.0 : 0.0;
    return literal(st, v).get_argument();
}

// Compiles `p` for ref and runs it once when its inputs and memory are small.
inline void compile_and_run(program& p, outcome& out, const run_limits& limits = {}) {
    try {
        std::mt19937 gen(12345);
        param_map params;
        std::size_t input_bytes = 0;
        for (auto& [name, s] : p.get_parameter_shapes()) {
            if (p.get_parameter_default(name) != nullptr) continue;
            if (s.is_tensor()) {
                std::size_t n = 1;
                for (auto& d : s.to_dynamic_dims()) {
                    if (d.min > limits.max_input_bytes) return;
                    n *= d.min == 0 ? 0 : d.min;
                    if (n > limits.max_input_bytes) return;
                }
                input_bytes += n * type_size(s.get_type());
                if (input_bytes > limits.max_input_bytes) return;
            }
            params.emplace(name, fuzz_input(s, gen));
        }
        p.compile(*get_target("ref"));
        out.compiled = true;
        auto mem = p.get_memory_usage();
        if (mem.arena_bytes + mem.literal_bytes + mem.output_bytes > limits.max_program_bytes) return;
        // Shapes computed while running (a Loop doubling a value every iteration) are
        // bounded here: such a model is valid, only too big to run in a fuzzer.
        allocation_limit cap(limits.max_program_bytes);
        p.eval(params);
        out.ran = true;
    } catch (const error& e) {
        out.error = e.what();
    }
}

// The same with the model's symbolic dims left dynamic (named, 0..8): shape inference
// over named dims and shape values at parse time, then a specialization for the
// smallest sizes (0 where allowed: zero-sized tensors) at run time.
inline onnx_options fuzz_dynamic_options(const run_limits& limits = {}) {
    auto o = fuzz_options(limits);
    o.default_dyn_dim_value = {0, 8, {}};
    return o;
}

inline outcome run_onnx_bytes_with(const void* data, std::size_t size, const onnx_options& options,
                                   const run_limits& limits) {
    outcome out;
    program p;
    try {
        p = parse_onnx_buffer(data, size, options);
        out.parsed = true;
    } catch (const error& e) {
        out.error = e.what();
        return out;
    }
    compile_and_run(p, out, limits);
    return out;
}

// Static dims first (the outcome returned), then dynamic ones.
inline outcome run_onnx_bytes(const void* data, std::size_t size, const run_limits& limits = {}) {
    auto out = run_onnx_bytes_with(data, size, fuzz_options(limits), limits);
    run_onnx_bytes_with(data, size, fuzz_dynamic_options(limits), limits);
    return out;
}

}  // namespace kiln::fuzz
