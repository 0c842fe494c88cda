// One family of exceptions with stable codes. Every error Kiln raises on bad input
// is a kiln::error; nothing aborts the process.
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>

namespace kiln {

// Stable: the numbers are part of the C API and the Python exception mapping.
enum class error_code : int {
    parse = 1,        // the model or file cannot be read (corrupt, truncated, invalid)
    unsupported = 2,  // a valid model uses something Kiln does not implement
    shape = 3,        // shapes disagree (an op's inputs, a caller's input)
    type = 4,         // element types disagree
    io = 5,           // a file cannot be opened, read or written
    runtime = 6,      // failure while running (kernel, device, bad state)
    out_of_memory = 7,
    invalid_argument = 8,  // API misuse: unknown input name, bad option value
};

std::string_view error_code_name(error_code c);

class error : public std::runtime_error {
public:
    error(error_code code, const std::string& message);
    error_code code() const { return code_; }
    // The message without the "<code>: " prefix that what() carries.
    const std::string& message() const { return message_; }

private:
    error_code code_;
    std::string message_;
};

[[noreturn]] void throw_error(error_code code, const std::string& message);

// Checks an invariant on input data; throws `code` with the message when false.
#define KILN_CHECK(cond, code, msg)                                  \
    do {                                                             \
        if (!(cond)) ::kiln::throw_error(::kiln::error_code::code, msg); \
    } while (false)

}  // namespace kiln
