// Reads the text form of a shape (shape::to_string, and the exact form op attributes
// store): "float32[2, 3]", "int64[2]<batch, 4>", "float32[{batch=1:64:[8]}, 3]",
// "float32[2, 3]{1, 2}", "tuple(float32[2], int64[])". Malformed text is a kiln parse error.
#pragma once
#include <kiln/shape.hpp>

#include <cstddef>
#include <string_view>

namespace kiln::detail {

// The whole of `text` is one shape (spaces around it allowed).
shape parse_shape(std::string_view text);

// A shape at the start of `text`, which may go on with other text; `used` gets the
// number of characters read. Strides must follow the ']' (or the values' '>') with no
// space between, as shape::to_string writes them: in `@literal{float32[2] {1, 2}}` the
// braces after the space are the literal's values, not strides.
shape parse_shape_prefix(std::string_view text, std::size_t& used);

}  // namespace kiln::detail
