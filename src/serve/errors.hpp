// The server's typed errors. Each carries the HTTP status the REST front end answers with;
// the gRPC front end maps the same kinds to INVALID_ARGUMENT, UNAUTHENTICATED, NOT_FOUND,
// UNAVAILABLE and INTERNAL. 500 is for Kiln's own bugs only: a request the model cannot take is a 400.
#pragma once
#include <stdexcept>
#include <string>

namespace kiln::serve {

enum class error_kind { bad_request = 400, unauthorized = 401, not_found = 404, unavailable = 503, internal = 500 };

class serve_error : public std::runtime_error {
public:
    serve_error(error_kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
    error_kind kind() const { return kind_; }
    int http_status() const { return static_cast<int>(kind_); }

private:
    error_kind kind_;
};

[[noreturn]] inline void fail(error_kind kind, const std::string& message) { throw serve_error(kind, message); }

}  // namespace kiln::serve
