#include <kiln/errors.hpp>

namespace kiln {

std::string_view error_code_name(error_code c) {
    switch (c) {
        case error_code::parse: return "parse error";
        case error_code::unsupported: return "unsupported";
        case error_code::shape: return "shape error";
        case error_code::type: return "type error";
        case error_code::io: return "io error";
        case error_code::runtime: return "runtime error";
        case error_code::out_of_memory: return "out of memory";
        case error_code::invalid_argument: return "invalid argument";
    }
    return "error";
}

error::error(error_code code, const std::string& message)
    : std::runtime_error(std::string(error_code_name(code)) + ": " + message), code_(code), message_(message) {}

void throw_error(error_code code, const std::string& message) { throw error(code, message); }

}  // namespace kiln
