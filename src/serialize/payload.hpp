// The payload of a .kiln file: a msgpack map describing the program
// (docs/kiln-format.md). Internal to the library; the tests use the value helpers
// at the end to craft files.
#pragma once
#include "serialize/header.hpp"

#include <kiln/compile_options.hpp>
#include <kiln/program.hpp>
#include <kiln/serialize.hpp>

#include <memory>
#include <string>
#include <string_view>

namespace kiln::kiln_file {

class payload_stream;

// Literal data starts at a multiple of this in the payload (and so in the file and
// in a 64-byte aligned load buffer), which lets loaded literals use the file's bytes
// in place.
inline constexpr std::size_t literal_alignment = 64;
// How deeply control-flow modules may nest (their evaluation recurses).
inline constexpr std::size_t max_module_nesting = 256;

void write_payload(const program& p, payload_stream& out);

// Builds a program from payload bytes whose checksum matched. When `keep_alive`
// owns the buffer holding `data`, large aligned literals share it instead of copying.
program read_payload(const char* data, std::size_t size, const file_header& h, const std::shared_ptr<char>& keep_alive,
                     const load_options& opts);

// compile_options fields under their saved names (both directions use this list).
template <class Options, class F>
void for_each_option(Options& o, F f) {
    f(o.offload_copy, "offload_copy");
    f(o.device_id, "device_id");
    f(o.fast_math, "fast_math");
    f(o.exhaustive_tune, "exhaustive_tune");
    f(o.memory_planning, "memory_planning");
    f(o.threads, "threads");
    // Files from before this option load with its default.
    f(o.max_specializations, "max_specializations");
    f(o.specialize_after, "specialize_after");
    f(o.dynamic_buckets, "dynamic_buckets");
    f(o.gpu_arch, "gpu_arch");
    f(o.tf32, "tf32");
}

// For tests and tools: the payload of a .kiln file as a value (after the header and
// checksum checks), and a .kiln file around a payload (flags: the compiled bit when
// the payload's "compiled" is not null).
value file_to_value(const char* data, std::size_t size);
std::string value_to_file(const value& payload, std::uint32_t version = kiln_format_version);
std::string bytes_to_file(std::string_view payload, std::uint32_t version, std::uint32_t flags);

}  // namespace kiln::kiln_file
