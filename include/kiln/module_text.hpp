// Reading the text form that module::print and program::print write, so tests can state
// a module as text and compare a pass's result with expected text:
//
//     module main
//       x = @param -> float32[2, 3]
//       @1 = @literal{float32[3] {1, 2, 3}} -> float32[3]
//       @2 = add(x, @1) -> float32[2, 3]
//       @return(@2)
//
// What the reader accepts beyond what print writes (so hand-written text stays short):
// any instruction names (`w = @literal{...}`, `y = relu(x)`: names are labels, print
// numbers them again), a missing `-> shape` (computed; a given one must match the op's
// shape function), blank lines and `//` comments (a line of its own, or after an
// instruction).
//
// Literals: print writes at most six values, then `...`. Such a literal's values come
// from a `literal_source` (below) that the caller passes: a test names its weights
// (`w = @literal{float32[64, 3, 7, 7] {...}}` with {"w", random weights}), and reading a
// program's own print back gives it the program's literals. That keeps texts short and
// the values exact, where printing every value in full would bury a test's structure
// under hundreds of numbers and need decimal text that round-trips every element type.
// A literal whose values are all written is built from them (print writes six
// significant digits, so a float read back that way may differ in its last bits; a
// source gives exact values, and a source that answers for every literal, as
// literals_of does, makes the read-back program the same as the printed one).
//
// Not read back: what the text does not hold (a program's output names, parameter
// defaults, metadata), binary attributes of more than 32 bytes (printed as `<N bytes>`),
// and names containing spaces or any of `,()[]{}=`. Bad text is a kiln error naming the line
// and what was expected there.
#pragma once
#include <kiln/literal.hpp>
#include <kiln/module.hpp>
#include <kiln/program.hpp>

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

// A literal the reader meets, for a literal_source to give its values.
struct literal_ref {
    std::string module;  // the module's name
    std::string name;    // the instruction's name in the text ("@5", "w")
    std::size_t index;   // its position in the module
    shape s;             // its shape as written
    bool elided;         // the text leaves its values out ("{1, 2, ...}")
};
// The literal to use instead of the text's values (its shape must be the written one),
// or nullopt to use the values written (an error when the text elides them).
using literal_source = std::function<std::optional<literal>(const literal_ref&)>;

struct text_parse_options {
    literal_source literals;
};

// One module: "module NAME" and its instructions. It may not refer to sub-modules.
std::unique_ptr<module> parse_module(std::string_view text, const text_parse_options& options = {});
// Every module of a program as program::print writes them: main first, then the others.
program parse_program(std::string_view text, const text_parse_options& options = {});

// Gives every literal of `p` by module and position, so parse_program(p.to_string(),
// {literals_of(p)}) reads back p with its exact weights. Copies handles, not data.
literal_source literals_of(const program& p);
// Gives the literals named in the text (any module) from `named`; others use their text.
literal_source literals_by_name(std::map<std::string, literal> named);

}  // namespace kiln
