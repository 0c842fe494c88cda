// Control flow: If, Loop, Scan and SequenceMap. Each runs sub-modules (the ONNX
// sub-graphs) through the evaluator's run_module_fn. Values of enclosing graphs that a
// body reads are extra inputs of the instruction (after the ONNX inputs), passed to the
// body as the parameters named in `captured` (one list per body).
//
// Results are tuples (one element per ONNX output). Bodies may hand back values that
// alias the instruction's own inputs; those are copied, so memory planning can treat
// every control-flow result as a fresh value.
#pragma once
#include <algorithm>
#include <kiln/operation.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::op {

// Stands in for a value of a control-flow body that could not be built for the shapes
// the frontend gave it (an If branch that only fits other inputs, a Loop body that may
// never run). Building it must not fail the model: the body is checked when it runs, so
// running this raises the error that building it raised (`code`, `message`, which names
// the node). Side effects keep the passes from folding or dropping it.
struct deferred_error {
    std::string message;
    std::int64_t code = 3;  // error_code::shape
    shape output;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.message, "message");
        f(self.code, "code");
        f(self.output, "output");
    }
    std::string name() const { return "deferred_error"; }
    op_traits traits() const { return {.side_effects = true, .handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>&) const { return output; }
    argument compute(const shape&, const std::vector<argument>&) const;
};

// Inputs: cond, then-captured..., else-captured...  Modules: then, else.
struct if_op {
    std::vector<std::string> then_captured;
    std::vector<std::string> else_captured;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.then_captured, "then_captured");
        f(self.else_captured, "else_captured");
    }
    std::string name() const { return "if"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& inputs, const std::vector<module_ref>& mods) const;
    argument compute(const shape& out, const std::vector<argument>& args, const std::vector<module_ref>& mods,
                     const run_module_fn& run) const;
};

// A Loop scan output after zero iterations: `per_iteration` (one iteration's value) with
// a first dimension of 0 added; dims not known from it are 0 too (there are no elements).
shape empty_scan_output(const shape& per_iteration);

// Inputs: [trip count] [cond] carried... captured...  Module: body with parameters
// body_inputs = {iteration, cond, carried...} plus the captured names.
// Output: tuple(final carried..., stacked scan outputs...).
struct loop {
    bool has_trip_count = false;
    bool has_cond = false;
    std::size_t num_carried = 0;
    std::vector<std::string> body_inputs;
    std::vector<std::string> captured;
    // Stop after this many iterations even if the trip count and cond allow more
    // (onnx_options::limit_max_iterations); -1: no cap.
    std::int64_t max_iterations = -1;
    // The exact iteration count when the parser could prove it (constant trip count,
    // condition that stays true); gives the scan outputs a static first dimension.
    std::int64_t static_trip_count = -1;
    // Carried values the body appends to (passes/loop_append.hpp): for these the body returns
    // only the rows it adds along axis 0, and the loop concatenates the initial value and
    // every iteration's rows once at the end, where the body's Concat copied the whole value
    // every iteration.
    std::vector<std::size_t> appended;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.has_trip_count, "has_trip_count");
        f(self.has_cond, "has_cond");
        f(self.num_carried, "num_carried");
        f(self.body_inputs, "body_inputs");
        f(self.captured, "captured");
        f(self.max_iterations, "max_iterations");
        f(self.static_trip_count, "static_trip_count");
        f(self.appended, "appended");
    }
    bool is_appended(std::size_t j) const {
        return std::find(appended.begin(), appended.end(), j) != appended.end();
    }
    std::string name() const { return "loop"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& inputs, const std::vector<module_ref>& mods) const;
    argument compute(const shape& out, const std::vector<argument>& args, const std::vector<module_ref>& mods,
                     const run_module_fn& run) const;
};

// ONNX Scan. Inputs: [sequence_lens (batched form only)] states... scan inputs...
// captured...  Module: body with parameters body_inputs = {states..., slices...}.
// Output: tuple(final states..., scan outputs...). `batched` is the opset-8 form:
// axis 0 of every input is a batch that is scanned independently along axis 1.
struct scan {
    std::size_t num_states = 0;
    std::size_t num_scan_inputs = 0;
    bool batched = false;
    bool has_sequence_lens = false;
    std::vector<std::int64_t> input_axes;        // per scan input (default 0)
    std::vector<std::int64_t> input_directions;  // 0 forward, 1 reverse
    std::vector<std::int64_t> output_axes;       // per scan output
    std::vector<std::int64_t> output_directions;
    std::vector<std::string> body_inputs;
    std::vector<std::string> captured;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.num_states, "num_states");
        f(self.num_scan_inputs, "num_scan_inputs");
        f(self.batched, "batched");
        f(self.has_sequence_lens, "has_sequence_lens");
        f(self.input_axes, "input_axes");
        f(self.input_directions, "input_directions");
        f(self.output_axes, "output_axes");
        f(self.output_directions, "output_directions");
        f(self.body_inputs, "body_inputs");
        f(self.captured, "captured");
    }
    std::string name() const { return "scan"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& inputs, const std::vector<module_ref>& mods) const;
    argument compute(const shape& out, const std::vector<argument>& args, const std::vector<module_ref>& mods,
                     const run_module_fn& run) const;

    // The body's parameter shapes for these instruction input shapes.
    std::vector<shape> body_input_shapes(const std::vector<shape>& inputs) const;
    std::int64_t input_axis(std::size_t i, std::size_t rank) const;
};

// Inputs: sequence, more sequences or tensors..., captured...  The body runs once per
// item of the sequences (tensor inputs are passed whole); each body output is
// collected into a sequence. Output: tuple of sequences.
struct sequence_map {
    std::size_t num_inputs = 1;
    std::vector<std::string> body_inputs;
    std::vector<std::string> captured;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.num_inputs, "num_inputs");
        f(self.body_inputs, "body_inputs");
        f(self.captured, "captured");
    }
    std::string name() const { return "sequence_map"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& inputs, const std::vector<module_ref>& mods) const;
    argument compute(const shape& out, const std::vector<argument>& args, const std::vector<module_ref>& mods,
                     const run_module_fn& run) const;
};

}  // namespace kiln::op
