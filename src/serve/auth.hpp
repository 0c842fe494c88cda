// Access control for `kiln serve`: one secret (a bearer token or API key) read from an
// environment variable or a file at start, never from the command line, never logged.
// REST sends it as `Authorization: Bearer T` or `X-API-Key: T`, gRPC as the same metadata
// (`authorization`, `x-api-key`); health endpoints are exempt.
#pragma once
#include "serve/errors.hpp"

#include <string>
#include <string_view>

namespace kiln::serve {

class access_control {
public:
    access_control() = default;
    explicit access_control(std::string token) : token_(std::move(token)) {}
    bool enabled() const { return !token_.empty(); }
    // Throws serve_error(unauthorized) unless one of the two carries the token
    // (`authorization` as "Bearer T", case-insensitive scheme).
    void check(std::string_view authorization, std::string_view api_key) const;
    bool allows(std::string_view authorization, std::string_view api_key) const;

private:
    std::string token_;
};

// The token from environment variable `env_var` (its value as the caller read it, null when
// unset: the kiln tool reads the environment, src/ does not) or from FILE (one of the two
// names non-empty; trailing whitespace and newlines dropped). Throws std::runtime_error
// naming the variable or file, never the value.
std::string read_token(const std::string& env_var, const char* env_value, const std::string& file);

}  // namespace kiln::serve
