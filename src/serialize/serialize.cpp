// The public save/load entry points: header, checksum and file handling around the
// payload writer and reader.
#include "serialize/crc32c.hpp"
#include "serialize/file_io.hpp"
#include "serialize/msgpack_codec.hpp"
#include "serialize/payload.hpp"

#include <kiln/errors.hpp>
#include <kiln/serialize.hpp>

#include <algorithm>

namespace kiln {

namespace {

kiln_file::file_header make_header(const program& p, const kiln_file::payload_stream& s) {
    kiln_file::file_header h;
    h.version = kiln_format_version;
    h.flags = p.is_compiled() ? kiln_file::flag_compiled : 0;
    h.payload_size = s.offset();
    h.payload_crc = s.crc();
    return h;
}

[[noreturn]] void rethrow_with(const std::string& prefix, const error& e) {
    throw_error(e.code(), prefix + e.message());
}

}  // namespace

void save(const program& p, const std::string& path) {
    kiln_file::atomic_file file(path);
    const std::string placeholder(kiln_file::header_size, '\0');
    file.write(placeholder.data(), placeholder.size());
    kiln_file::payload_stream out(&file);
    kiln_file::write_payload(p, out);
    auto header = kiln_file::encode_header(make_header(p, out));
    file.write_at(0, header.data(), header.size());
    file.commit();
}

std::string save_buffer(const program& p) {
    // A counting pass first, so the buffer is allocated once (no regrowth copies of
    // the weights).
    kiln_file::payload_stream counter(nullptr);
    kiln_file::write_payload(p, counter);
    std::string bytes;
    bytes.reserve(kiln_file::header_size + counter.offset());
    bytes.resize(kiln_file::header_size);
    kiln_file::string_sink sink(bytes);
    kiln_file::payload_stream out(&sink);
    kiln_file::write_payload(p, out);
    auto header = kiln_file::encode_header(make_header(p, out));
    std::copy(header.begin(), header.end(), bytes.begin());
    return bytes;
}

program load(const std::string& path, const load_options& opts) {
    try {
        kiln_file::input_file file(path);
        char head[kiln_file::header_size];
        const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(file.size(), kiln_file::header_size));
        file.read(head, n);
        auto h = kiln_file::decode_header(head, n, file.size());
        // The header has been checked against the file's real size: this allocation
        // is what the file holds, never what corrupt bytes claim.
        auto buffer = kiln_file::allocate_aligned(h.payload_size);
        file.read(buffer.get(), h.payload_size);
        kiln_file::check_payload(h, buffer.get());
        return kiln_file::read_payload(buffer.get(), h.payload_size, h, buffer, opts);
    } catch (const error& e) {
        if (e.code() == error_code::io) throw;  // already names the file
        rethrow_with("cannot load '" + path + "': ", e);
    }
}

program load_buffer(const char* data, std::size_t size, const load_options& opts) {
    try {
        if (data == nullptr && size > 0) throw_error(error_code::invalid_argument, "null data with a non-zero size");
        auto h = kiln_file::decode_header(data, std::min(size, kiln_file::header_size), size);
        const char* payload = data + kiln_file::header_size;
        kiln_file::check_payload(h, payload);
        return kiln_file::read_payload(payload, h.payload_size, h, nullptr, opts);
    } catch (const error& e) {
        rethrow_with("cannot load a .kiln buffer: ", e);
    }
}

namespace kiln_file {

value file_to_value(const char* data, std::size_t size) {
    auto h = decode_header(data, std::min(size, header_size), size);
    check_payload(h, data + header_size);
    auto handle = unpack_checked(data + header_size, h.payload_size);
    return to_value(handle.get(), max_payload_depth);
}

std::string bytes_to_file(std::string_view payload, std::uint32_t version, std::uint32_t flags) {
    file_header h;
    h.version = version;
    h.flags = flags;
    h.payload_size = payload.size();
    h.payload_crc = crc32c(0, payload.data(), payload.size());
    return encode_header(h) + std::string(payload);
}

std::string value_to_file(const value& payload, std::uint32_t version) {
    std::string bytes;
    string_sink sink(bytes);
    payload_stream out(&sink);
    packer pk(out);
    pack_value(pk, payload, max_payload_depth);
    const auto* compiled = payload.find("compiled");
    std::uint32_t flags = compiled != nullptr && !compiled->is_null() ? flag_compiled : 0;
    return bytes_to_file(bytes, version, flags);
}

}  // namespace kiln_file

}  // namespace kiln
