// CRC-32C (Castagnoli), the checksum of .kiln payloads. Castagnoli rather than the
// zlib polynomial because x86-64 (SSE4.2) and ARMv8 compute it in hardware; the
// portable table version gives the same results everywhere else.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kiln::kiln_file {

// Continues a running checksum: crc32c(crc32c(0, a), b) == crc32c(0, a + b).
std::uint32_t crc32c(std::uint32_t crc, const void* data, std::size_t size);
// The table-driven version (always available; the tests compare both).
std::uint32_t crc32c_portable(std::uint32_t crc, const void* data, std::size_t size);

}  // namespace kiln::kiln_file
