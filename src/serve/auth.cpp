#include "serve/auth.hpp"

#include <cctype>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace kiln::serve {

namespace {

// Compares every byte of the token whatever was given: the time depends on the token's
// length only, not on how much of it a guess got right.
bool same(std::string_view given, std::string_view token) {
    std::size_t diff = given.size() ^ token.size();
    for (std::size_t i = 0; i < token.size(); ++i)
        diff |= static_cast<unsigned char>(token[i]) ^ static_cast<unsigned char>(i < given.size() ? given[i] : 0);
    return diff == 0 && !token.empty();
}

std::string_view bearer(std::string_view header) {
    constexpr std::string_view scheme = "bearer ";
    if (header.size() < scheme.size()) return {};
    for (std::size_t i = 0; i < scheme.size(); ++i)
        if (static_cast<char>(std::tolower(static_cast<unsigned char>(header[i]))) != scheme[i]) return {};
    header.remove_prefix(scheme.size());
    while (!header.empty() && header.front() == ' ') header.remove_prefix(1);
    return header;
}

}  // namespace

bool access_control::allows(std::string_view authorization, std::string_view api_key) const {
    if (!enabled()) return true;
    auto b = bearer(authorization);
    return (!b.empty() && same(b, token_)) || (!api_key.empty() && same(api_key, token_));
}

void access_control::check(std::string_view authorization, std::string_view api_key) const {
    if (allows(authorization, api_key)) return;
    fail(error_kind::unauthorized, authorization.empty() && api_key.empty()
                                       ? "this server needs a token: 'Authorization: Bearer TOKEN' or 'X-API-Key: TOKEN'"
                                       : "the token is not valid");
}

std::string read_token(const std::string& env_var, const char* env_value, const std::string& file) {
    std::string token;
    if (!env_var.empty()) {
        const char* v = env_value;
        if (!v) throw std::runtime_error("--auth-token-env: the environment variable " + env_var + " is not set");
        token = v;
    } else {
        std::ifstream f(file, std::ios::binary);
        if (!f) throw std::runtime_error("--auth-token-file: cannot read '" + file + "'");
        std::ostringstream s;
        s << f.rdbuf();
        token = s.str();
    }
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ' || token.back() == '\t'))
        token.pop_back();
    if (token.empty())
        throw std::runtime_error(env_var.empty() ? "--auth-token-file '" + file + "' holds no token"
                                                 : "--auth-token-env: " + env_var + " is empty");
    for (char c : token)
        if (static_cast<unsigned char>(c) < 0x21 || static_cast<unsigned char>(c) > 0x7e)
            throw std::runtime_error("the token must be printable ASCII without spaces (it travels in a header)");
    return token;
}

}  // namespace kiln::serve
