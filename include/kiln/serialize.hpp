// The .kiln file format: a program saved as parsed or as compiled for a target, and
// loaded back ready to run (compiled programs rebuild their kernels at load, they are
// not compiled again). The layout is described in docs/kiln-format.md.
//
// Loading never trusts the file: a truncated, corrupted or foreign file raises a
// kiln::error (error_code::parse, or io when the file cannot be read), never a crash.
// A well-formed file that needs something this build lacks (an unknown operation or
// target) raises error_code::unsupported.
#pragma once
#include <kiln/program.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace kiln {

// The newest format version this build writes and reads.
inline constexpr std::uint32_t kiln_format_version = 1;

struct load_options {
    // Device a compiled program is restored on; empty keeps the one it was compiled for.
    std::optional<int> device_id;
};

// Writes `p` to `path` atomically: the bytes go to a temporary file in the same
// directory, which replaces `path` only after a complete, fsync-ed write. On failure
// `path` is untouched and no temporary file is left.
void save(const program& p, const std::string& path);
program load(const std::string& path, const load_options& opts = {});

// The same bytes as a file, in memory.
std::string save_buffer(const program& p);
program load_buffer(const char* data, std::size_t size, const load_options& opts = {});

}  // namespace kiln
