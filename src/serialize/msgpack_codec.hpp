// The msgpack layer of the .kiln format: kiln::value <-> msgpack, a checksummed
// output stream, and a reader that checks the bytes before msgpack-cxx allocates.
//
// msgpack-cxx allocates an array's elements as soon as it reads the array's count, so
// on untrusted bytes every count and length is first checked against the bytes that
// remain (check_structure); unpacking then allocates at most a small multiple of the
// payload size and copies no string or binary data (they point into the buffer).
#pragma once
#include "serialize/file_io.hpp"

#include <kiln/value.hpp>

#include <msgpack.hpp>

#include <cstdint>
#include <string_view>

namespace kiln::kiln_file {

// How deeply msgpack containers may nest in a payload, and kiln::values inside it
// (metadata, op attributes); deeper input is refused, not recursed into.
inline constexpr std::size_t max_payload_depth = 128;
inline constexpr std::size_t max_value_depth = 100;

// Counts bytes and checksums them on their way to a sink (no sink: only counts).
class payload_stream {
public:
    explicit payload_stream(output_sink* sink) : sink_(sink) {}
    void write(const char* data, std::size_t size);
    std::uint64_t offset() const { return offset_; }
    std::uint32_t crc() const { return crc_; }

private:
    output_sink* sink_;
    std::uint64_t offset_ = 0;
    std::uint32_t crc_ = 0;
};

class packer : public msgpack::packer<payload_stream> {
public:
    explicit packer(payload_stream& out) : msgpack::packer<payload_stream>(out), out_(out) {}
    payload_stream& stream() { return out_; }
    // Always a msgpack float64: msgpack-cxx's pack_double writes integral doubles as
    // integers, which loses -0.0 and turns a float value into an integer one.
    void pack_float64(double d);

private:
    payload_stream& out_;
};

void pack_string(packer& pk, std::string_view s);
// Throws invalid_argument when `v` nests deeper than max_depth or holds a string
// or binary of 4 GiB or more (msgpack's limit).
void pack_value(packer& pk, const value& v, std::size_t max_depth = max_value_depth);

// Checks that [data, data + size) is exactly one msgpack object, nested at most
// max_payload_depth deep, without extension types, whose every count and length
// fits in the bytes that follow it. Throws a parse error naming the byte offset.
void check_structure(const char* data, std::size_t size);
// check_structure, then msgpack-cxx unpacking with limits from `size`. Strings and
// binaries of the result point into `data`, which must outlive it.
msgpack::object_handle unpack_checked(const char* data, std::size_t size);

// A copy of a msgpack object as a kiln::value (map keys must be strings).
value to_value(const msgpack::object& o, std::size_t max_depth = max_value_depth);

// Typed access for the payload reader; errors name `what` and the kinds involved.
const msgpack::object* find_key(const msgpack::object& map, std::string_view key);
const msgpack::object& get_key(const msgpack::object& map, std::string_view key, std::string_view what);
void expect_map(const msgpack::object& o, std::string_view what);
const msgpack::object_array& as_array(const msgpack::object& o, std::string_view what);
std::string_view as_string(const msgpack::object& o, std::string_view what);
std::uint64_t as_uint(const msgpack::object& o, std::string_view what);
bool as_bool(const msgpack::object& o, std::string_view what);
const msgpack::object_bin& as_binary(const msgpack::object& o, std::string_view what);

}  // namespace kiln::kiln_file
