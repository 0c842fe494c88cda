// Shape bookkeeping shared by the control-flow, sequence and optional ops.
//
// Sequence and optional shapes describe their element with one shape that every item
// must fit. Parse-time element shapes are over-approximations: a dimension that may
// differ between items (or between loop iterations) is dynamic. An element that
// nothing is known about yet (the items of SequenceEmpty, or items whose ranks
// disagree) is the "unknown element" of a type: merging it with any shape gives that
// shape, so a sequence that starts empty takes the shape of what is inserted into it.
#pragma once
#include <kiln/argument.hpp>
#include <kiln/operation.hpp>

#include <string>
#include <vector>

namespace kiln::op {

// The unknown element of type t (an internal marker: rank 1, dynamic, a sentinel optimal).
// merge_shapes also makes a tensor of unknown rank (another marker) from two ranks that
// disagree; is_unknown_element is true of both: neither says what rank a value has.
shape unknown_element(type t);
bool is_unknown_element(const shape& s);

// The least shape that both a and b fit: equal dims stay, differing dims become
// dynamic, an unknown element yields the other side, differing ranks (or a side of
// unknown rank) give a tensor of unknown rank. Sequences and optionals merge
// their elements; an optional merged with its element kind stays optional. Throws a
// shape error naming `what` when the kinds or element types cannot be reconciled.
shape merge_shapes(const shape& a, const shape& b, const std::string& what);

// The shape an element of this runtime value has (tensor: its own shape as standard;
// sequence/optional: the merge of the items, or the declared element when empty).
shape runtime_shape(const argument& a);

// A sequence argument whose element shape is the merge of its items' shapes (the
// declared `fallback` element when there are none).
argument make_sequence_of(std::vector<argument> items, const shape& fallback);

// True when a value of shape `actual` may flow where `declared` is expected.
bool fits_shape(const shape& declared, const shape& actual);

// `result` with every tensor that shares memory with one of `inputs` replaced by a
// copy. Control flow returns body values that may be its own inputs (a body that
// passes a captured value through); memory planning must not see those as aliases.
argument detach(const argument& result, const std::vector<argument>& inputs);

// Runs a sub-module with `params`, adding the arena a planned body needs.
std::vector<argument> run_body(const run_module_fn& run, module_ref body, param_map params);

// A scalar argument.
argument scalar_int64(std::int64_t v);
argument scalar_bool(bool v);
// Reads a scalar (or one-element) bool / integer argument.
bool read_bool(const argument& a, const std::string& what);
std::int64_t read_int64(const argument& a, const std::string& what);

}  // namespace kiln::op
