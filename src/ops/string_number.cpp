#include "ops/string_number.hpp"

#include <kiln/errors.hpp>
#include <kiln/float_types.hpp>
#include <kiln/types.hpp>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace kiln::op {

namespace {

std::string trimmed(std::string_view text) {
    auto b = text.find_first_not_of(" \t\n\r\f\v");
    if (b == std::string_view::npos) return {};
    auto e = text.find_last_not_of(" \t\n\r\f\v");
    return std::string(text.substr(b, e - b + 1));
}

[[noreturn]] void not_a_number(std::string_view text, const char* what) {
    throw_error(error_code::runtime, "Cast: string '" + std::string(text) + "' is not " + what);
}

// Digits and decimal exponent of `v` with `p` significant digits: "12345", 2 for 123.45.
void decimal_digits(double v, int p, std::string& digits, int& exponent) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*e", p - 1, v);
    std::string s(buf);
    if (!s.empty() && s[0] == '-') s.erase(0, 1);
    auto e = s.find('e');
    exponent = std::atoi(s.c_str() + e + 1);
    digits.clear();
    for (std::size_t i = 0; i < e; ++i)
        if (s[i] != '.') digits += s[i];
    while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
}

// Shortest digits (up to max_digits) whose value reads back as `v` under `same`.
template <class Same>
std::string format_shortest(double v, int max_digits, Same same) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
    std::string sign = std::signbit(v) ? "-" : "";
    if (v == 0) return sign + "0.0";
    std::string digits;
    int exponent = 0;
    for (int p = 1; p <= max_digits; ++p) {
        decimal_digits(v, p, digits, exponent);
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.*e", p - 1, v);
        if (same(std::strtod(buf, nullptr), v)) break;
    }
    std::string out = sign;
    if (exponent >= -4 && exponent < 16) {
        if (exponent >= 0) {
            const auto int_len = static_cast<std::size_t>(exponent) + 1;
            std::string padded = digits;
            if (padded.size() < int_len) padded.append(int_len - padded.size(), '0');
            out += padded.substr(0, int_len) + ".";
            out += padded.size() > int_len ? padded.substr(int_len) : "0";
        } else {
            out += "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
        }
    } else {
        out += digits.substr(0, 1);
        if (digits.size() > 1) out += "." + digits.substr(1);
        char buf[16];
        std::snprintf(buf, sizeof buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
        out += buf;
    }
    return out;
}

}  // namespace

double parse_double(std::string_view text) {
    std::string t = trimmed(text);
    if (t.empty()) not_a_number(text, "a number");
    // strtod already reads inf/infinity/nan in any case, with an optional sign.
    errno = 0;
    char* end = nullptr;
    double v = std::strtod(t.c_str(), &end);
    if (end != t.c_str() + t.size()) not_a_number(text, "a number");
    return v;  // out of range: +-inf (or 0 for underflow), as a float cast gives
}

std::int64_t parse_int64(std::string_view text) {
    std::string t = trimmed(text);
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(t.c_str(), &end, 10);
    if (!t.empty() && end == t.c_str() + t.size() && errno == 0) return v;
    return convert<std::int64_t>(parse_double(text));
}

std::uint64_t parse_uint64(std::string_view text) {
    std::string t = trimmed(text);
    errno = 0;
    char* end = nullptr;
    if (!t.empty() && t[0] != '-') {
        unsigned long long v = std::strtoull(t.c_str(), &end, 10);
        if (end == t.c_str() + t.size() && errno == 0) return v;
    }
    return convert<std::uint64_t>(parse_double(text));
}

bool parse_bool(std::string_view text) {
    std::string t = trimmed(text);
    std::string lower;
    for (char c : t) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    if (lower == "true") return true;
    if (lower == "false") return false;
    return parse_double(text) != 0;
}

std::string format_double(double value) {
    return format_shortest(value, 17, [](double parsed, double v) { return parsed == v; });
}

std::string format_float32(float value) {
    return format_shortest(value, 9, [](double parsed, double v) {
        return static_cast<float>(parsed) == static_cast<float>(v);
    });
}

std::string format_half(float value) {
    return format_shortest(value, 5, [](double parsed, double v) { return half(parsed).bits == half(v).bits; });
}

std::string format_bfloat16(float value) {
    return format_shortest(value, 4, [](double parsed, double v) {
        return bfloat16(parsed).bits == bfloat16(v).bits;
    });
}

}  // namespace kiln::op
