#include "serialize/crc32c.hpp"

#include <array>
#include <bit>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <nmmintrin.h>
#define KILN_CRC32C_SSE42 1
#endif

namespace kiln::kiln_file {

namespace {

static_assert(std::endian::native == std::endian::little, "the slicing-by-8 CRC assumes little-endian words");

constexpr std::uint32_t polynomial = 0x82F63B78u;  // reflected Castagnoli

using tables_t = std::array<std::array<std::uint32_t, 256>, 8>;

// Slicing-by-8: table k gives the CRC contribution of a byte k positions before the
// end of an 8-byte word, so one word costs 8 lookups instead of 8 dependent steps.
constexpr tables_t make_tables() {
    tables_t t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1u) ? polynomial : 0u);
        t[0][i] = c;
    }
    for (std::size_t k = 1; k < 8; ++k)
        for (std::size_t i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xffu];
    return t;
}

constexpr tables_t tables = make_tables();

#ifdef KILN_CRC32C_SSE42
__attribute__((target("sse4.2"))) std::uint32_t crc32c_sse42(std::uint32_t crc, const void* data,
                                                             std::size_t size) {
    const auto* p = static_cast<const unsigned char*>(data);
    std::uint64_t c = ~crc;
    for (; size >= 8; p += 8, size -= 8) {
        std::uint64_t w;
        std::memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
    }
    auto c32 = static_cast<std::uint32_t>(c);
    for (; size > 0; ++p, --size) c32 = _mm_crc32_u8(c32, *p);
    return ~c32;
}
#endif

using crc_fn = std::uint32_t (*)(std::uint32_t, const void*, std::size_t);

crc_fn pick() {
#ifdef KILN_CRC32C_SSE42
    if (__builtin_cpu_supports("sse4.2")) return crc32c_sse42;
#endif
    return crc32c_portable;
}

}  // namespace

std::uint32_t crc32c_portable(std::uint32_t crc, const void* data, std::size_t size) {
    const auto* p = static_cast<const unsigned char*>(data);
    std::uint32_t c = ~crc;
    for (; size >= 8; p += 8, size -= 8) {
        std::uint64_t w;
        std::memcpy(&w, p, 8);
        w ^= c;
        c = tables[7][w & 0xff] ^ tables[6][(w >> 8) & 0xff] ^ tables[5][(w >> 16) & 0xff] ^
            tables[4][(w >> 24) & 0xff] ^ tables[3][(w >> 32) & 0xff] ^ tables[2][(w >> 40) & 0xff] ^
            tables[1][(w >> 48) & 0xff] ^ tables[0][w >> 56];
    }
    for (; size > 0; ++p, --size) c = tables[0][(c ^ *p) & 0xffu] ^ (c >> 8);
    return ~c;
}

std::uint32_t crc32c(std::uint32_t crc, const void* data, std::size_t size) {
    static const crc_fn fn = pick();
    return fn(crc, data, size);
}

}  // namespace kiln::kiln_file
