// The fixed 64-byte header in front of every .kiln payload (docs/kiln-format.md).
// It is read before anything else so that a foreign, truncated or too-new file is
// refused without reading (or allocating for) its body.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::kiln_file {

inline constexpr std::size_t header_size = 64;
inline constexpr char magic[4] = {'K', 'I', 'L', 'N'};

// Flag bits; a reader refuses bits it does not know.
inline constexpr std::uint32_t flag_compiled = 1u << 0;
inline constexpr std::uint32_t known_flags = flag_compiled;

struct file_header {
    std::uint32_t version = 0;
    std::uint32_t flags = 0;
    std::uint64_t payload_size = 0;
    std::uint32_t payload_crc = 0;
};

// The 64 header bytes (little-endian fields, the header's own CRC at bytes 28..31).
std::string encode_header(const file_header& h);
// Checks magic, version, the header checksum, flags and that the payload size agrees
// with `file_size` (the whole file, header included). `available` bytes of the file
// start are at `data` (fewer than 64 when the file is that short).
file_header decode_header(const char* data, std::size_t available, std::uint64_t file_size);
// Throws a parse error unless `payload` matches the header's checksum.
void check_payload(const file_header& h, const char* payload);

}  // namespace kiln::kiln_file
