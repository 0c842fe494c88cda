// Numbers to and from text, as ONNX Cast defines it for string tensors:
//  * string -> number: plain ("3.14", "1000") and scientific ("1e-5", "1E8") notation;
//    "INF", "+INF", "-INF" and "NaN" in any letter case; a fraction cast to an integer
//    type truncates ("100.5" -> 100). Anything else is not a number: a runtime error.
//  * number -> string: the shortest text that reads back as the same value, in plain
//    notation for magnitudes in [1e-4, 1e16) ("314.15926", "1.0", "0.001") and
//    scientific otherwise ("1e-05", "1.5e+16"); "inf", "-inf", "nan"; bools as
//    "True"/"False" and integers in decimal. This is what NumPy's astype(str) writes,
//    which the ONNX reference uses.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::op {

// Parse results; throw a kiln runtime error naming the text when it is not a number.
double parse_double(std::string_view text);
// Integers read exactly when the text is an integer literal (no double rounding of
// large int64 values); otherwise through parse_double, truncated toward zero.
std::int64_t parse_int64(std::string_view text);
std::uint64_t parse_uint64(std::string_view text);
bool parse_bool(std::string_view text);  // "true"/"false" (any case) or a number != 0

// The shortest text that reads back as the same value of the named type.
std::string format_double(double value);
std::string format_float32(float value);
std::string format_half(float value);  // value is exactly a half
std::string format_bfloat16(float value);

}  // namespace kiln::op
