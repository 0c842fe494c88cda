// A 64-bit FNV-1a hash, printed as 16 hex digits: names kernels and cache entries by
// their content (not a security boundary: the cache folder belongs to the user).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::codegen {

inline std::uint64_t fnv1a(std::string_view s, std::uint64_t h = 1469598103934665603ull) {
    for (unsigned char c : s) {
        h ^= c;
        h *= 1099511628211ull;
    }
    return h;
}

inline std::string hex64(std::uint64_t v) {
    static const char* digits = "0123456789abcdef";
    std::string out(16, '0');
    for (int i = 15; i >= 0; --i, v >>= 4) out[static_cast<std::size_t>(i)] = digits[v & 15];
    return out;
}

// Two FNV passes with different seeds: 128 bits, so that unrelated sources never share a name.
inline std::string content_hash(std::string_view s) {
    return hex64(fnv1a(s)) + hex64(fnv1a(s, 0x9e3779b97f4a7c15ull));
}

}  // namespace kiln::codegen
