#include "serialize/header.hpp"

#include "serialize/crc32c.hpp"

#include <kiln/errors.hpp>
#include <kiln/serialize.hpp>

#include <algorithm>
#include <cstring>
#include <iomanip>
#include <sstream>

namespace kiln::kiln_file {

namespace {

// Field offsets. The 64 bytes keep this layout in every format version (newer
// versions may only give meaning to the reserved bytes), so any reader can check the
// header and then say "too new" rather than "corrupt".
constexpr std::size_t off_version = 4;
constexpr std::size_t off_flags = 8;
constexpr std::size_t off_header_size = 12;
constexpr std::size_t off_payload_size = 16;
constexpr std::size_t off_payload_crc = 24;
constexpr std::size_t off_header_crc = 28;
constexpr std::size_t off_reserved = 32;

// CRC-32C of the 64 header bytes with the checksum field taken as zero.
std::uint32_t header_crc(const char* data) {
    char copy[header_size];
    std::memcpy(copy, data, header_size);
    std::memset(copy + off_header_crc, 0, 4);
    return crc32c(0, copy, header_size);
}

void put32(std::string& s, std::size_t at, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) s[at + i] = static_cast<char>((v >> (8 * i)) & 0xffu);
}
void put64(std::string& s, std::size_t at, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) s[at + i] = static_cast<char>((v >> (8 * i)) & 0xffu);
}
std::uint32_t get32(const char* p) {
    std::uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
    return v;
}
std::uint64_t get64(const char* p) {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
    return v;
}

[[noreturn]] void fail(const std::string& what) { throw_error(error_code::parse, what); }

std::string first_bytes(const char* data, std::size_t n) {
    std::ostringstream ss;
    for (std::size_t i = 0; i < n && i < 4; ++i)
        ss << (i ? " " : "") << std::hex << std::setw(2) << std::setfill('0')
           << static_cast<int>(static_cast<unsigned char>(data[i]));
    return ss.str();
}

}  // namespace

std::string encode_header(const file_header& h) {
    std::string s(header_size, '\0');
    std::memcpy(s.data(), magic, 4);
    put32(s, off_version, h.version);
    put32(s, off_flags, h.flags);
    put32(s, off_header_size, static_cast<std::uint32_t>(header_size));
    put64(s, off_payload_size, h.payload_size);
    put32(s, off_payload_crc, h.payload_crc);
    put32(s, off_header_crc, header_crc(s.data()));
    return s;
}

file_header decode_header(const char* data, std::size_t available, std::uint64_t file_size) {
    if (file_size == 0) fail("the file is empty, not a .kiln file");
    if (available < 4 || std::memcmp(data, magic, 4) != 0) {
        std::string hint;
        // An ONNX ModelProto starts with field 1 (ir_version) as a varint: byte 0x08.
        if (available > 0 && data[0] == 0x08) hint = " (it looks like an ONNX model: parse it, do not load it)";
        fail("not a .kiln file: it does not start with \"KILN\" (first bytes " + first_bytes(data, available) + ")" +
             hint);
    }
    if (available < header_size)
        fail("truncated: " + std::to_string(file_size) + " bytes, shorter than the " + std::to_string(header_size) +
             "-byte header");
    if (get32(data + off_header_crc) != header_crc(data)) fail("corrupt header: checksum mismatch");
    file_header h;
    h.version = get32(data + off_version);
    if (h.version > kiln_format_version)
        fail("format version " + std::to_string(h.version) + " is newer than this build of kiln reads (up to " +
             std::to_string(kiln_format_version) + "); load it with a newer kiln");
    if (h.version == 0) fail("corrupt header: format version 0");
    if (get32(data + off_header_size) != header_size)
        fail("corrupt header: header size " + std::to_string(get32(data + off_header_size)) + ", expected " +
             std::to_string(header_size));
    if (std::any_of(data + off_reserved, data + header_size, [](char c) { return c != 0; }))
        fail("corrupt header: reserved bytes are not zero");
    h.flags = get32(data + off_flags);
    if ((h.flags & ~known_flags) != 0) fail("unknown header flags " + std::to_string(h.flags));
    h.payload_size = get64(data + off_payload_size);
    h.payload_crc = get32(data + off_payload_crc);
    const std::uint64_t have = file_size - header_size;
    if (have < h.payload_size)
        fail("truncated: the header announces " + std::to_string(h.payload_size) + " payload bytes, the file has " +
             std::to_string(have));
    if (have > h.payload_size)
        fail(std::to_string(have - h.payload_size) + " unexpected bytes after the payload");
    return h;
}

void check_payload(const file_header& h, const char* payload) {
    auto crc = crc32c(0, payload, h.payload_size);
    if (crc != h.payload_crc) fail("corrupt payload: checksum mismatch");
}

}  // namespace kiln::kiln_file
