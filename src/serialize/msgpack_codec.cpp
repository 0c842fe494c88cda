#include "serialize/msgpack_codec.hpp"

#include "serialize/crc32c.hpp"

#include <kiln/errors.hpp>

#include <cstring>
#include <limits>
#include <vector>

namespace kiln::kiln_file {

void payload_stream::write(const char* data, std::size_t size) {
    if (sink_ != nullptr) {
        crc_ = crc32c(crc_, data, size);
        sink_->write(data, size);
    }
    offset_ += size;
}

void packer::pack_float64(double d) {
    std::uint64_t bits;
    std::memcpy(&bits, &d, sizeof bits);
    char buf[9];
    buf[0] = static_cast<char>(0xcb);
    for (int i = 0; i < 8; ++i) buf[1 + i] = static_cast<char>((bits >> (56 - 8 * i)) & 0xffu);
    out_.write(buf, sizeof buf);
}

namespace {

std::uint32_t msgpack_length(std::size_t n, const char* what) {
    if (n > std::numeric_limits<std::uint32_t>::max())
        throw_error(error_code::invalid_argument,
                    std::string("cannot save a ") + what + " of " + std::to_string(n) + " bytes or items (limit 4 GiB)");
    return static_cast<std::uint32_t>(n);
}

void pack_value_at(packer& pk, const value& v, std::size_t depth, std::size_t max_depth) {
    if (depth > max_depth)
        throw_error(error_code::invalid_argument,
                    "cannot save a value nested more than " + std::to_string(max_depth) + " levels deep");
    switch (v.get_kind()) {
        case value::kind::null: pk.pack_nil(); break;
        case value::kind::boolean:
            if (v.get_bool()) pk.pack_true();
            else pk.pack_false();
            break;
        case value::kind::int64: pk.pack_int64(v.get_int64()); break;
        case value::kind::uint64: pk.pack_uint64(v.get_uint64()); break;
        case value::kind::float64: pk.pack_float64(v.get_double()); break;
        case value::kind::string: pack_string(pk, v.get_string()); break;
        case value::kind::binary: {
            const auto& b = v.get_binary().bytes;
            auto n = msgpack_length(b.size(), "binary value");
            pk.pack_bin(n);
            pk.pack_bin_body(b.data(), n);
            break;
        }
        case value::kind::array:
            pk.pack_array(msgpack_length(v.size(), "array"));
            for (const auto& x : v.get_array()) pack_value_at(pk, x, depth + 1, max_depth);
            break;
        case value::kind::object:
            pk.pack_map(msgpack_length(v.size(), "object"));
            for (const auto& [k, x] : v.get_object()) {
                pack_string(pk, k);
                pack_value_at(pk, x, depth + 1, max_depth);
            }
            break;
    }
}

[[noreturn]] void malformed(std::size_t offset, const std::string& what) {
    throw_error(error_code::parse, "malformed payload at byte " + std::to_string(offset) + ": " + what);
}

std::uint64_t read_be(const char* p, int bytes) {
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
    return v;
}

// Every msgpack referenced in place: no string or binary is copied while unpacking.
bool reference_all(msgpack::type::object_type, std::size_t, void*) { return true; }

std::string_view type_name(const msgpack::object& o) {
    switch (o.type) {
        case msgpack::type::NIL: return "nil";
        case msgpack::type::BOOLEAN: return "bool";
        case msgpack::type::POSITIVE_INTEGER: return "unsigned integer";
        case msgpack::type::NEGATIVE_INTEGER: return "negative integer";
        case msgpack::type::FLOAT32:
        case msgpack::type::FLOAT64: return "float";
        case msgpack::type::STR: return "string";
        case msgpack::type::BIN: return "binary";
        case msgpack::type::ARRAY: return "array";
        case msgpack::type::MAP: return "map";
        default: return "extension";
    }
}

[[noreturn]] void wrong_type(const msgpack::object& o, std::string_view what, std::string_view want) {
    throw_error(error_code::parse,
                std::string(what) + ": expected " + std::string(want) + ", got " + std::string(type_name(o)));
}

value to_value_at(const msgpack::object& o, std::size_t depth, std::size_t max_depth) {
    if (depth > max_depth)
        throw_error(error_code::parse, "a value is nested more than " + std::to_string(max_depth) + " levels deep");
    switch (o.type) {
        case msgpack::type::NIL: return value();
        case msgpack::type::BOOLEAN: return value(o.via.boolean);
        case msgpack::type::POSITIVE_INTEGER:
            if (o.via.u64 <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
                return value(static_cast<std::int64_t>(o.via.u64));
            return value(o.via.u64);
        case msgpack::type::NEGATIVE_INTEGER: return value(o.via.i64);
        case msgpack::type::FLOAT32:
        case msgpack::type::FLOAT64: return value(o.via.f64);
        case msgpack::type::STR: return value(std::string(o.via.str.ptr, o.via.str.size));
        case msgpack::type::BIN: return value(value::binary{std::string(o.via.bin.ptr, o.via.bin.size)});
        case msgpack::type::ARRAY: {
            value::array a;
            a.reserve(o.via.array.size);
            for (std::uint32_t i = 0; i < o.via.array.size; ++i) a.push_back(to_value_at(o.via.array.ptr[i], depth + 1, max_depth));
            return value(std::move(a));
        }
        case msgpack::type::MAP: {
            value::object m;
            m.reserve(o.via.map.size);
            for (std::uint32_t i = 0; i < o.via.map.size; ++i) {
                const auto& kv = o.via.map.ptr[i];
                if (kv.key.type != msgpack::type::STR) wrong_type(kv.key, "a map key", "string");
                m.emplace_back(std::string(kv.key.via.str.ptr, kv.key.via.str.size), to_value_at(kv.val, depth + 1, max_depth));
            }
            return value(std::move(m));
        }
        default: wrong_type(o, "a value", "no extension type");
    }
}

}  // namespace

void pack_string(packer& pk, std::string_view s) {
    auto n = msgpack_length(s.size(), "string");
    pk.pack_str(n);
    pk.pack_str_body(s.data(), n);
}

void pack_value(packer& pk, const value& v, std::size_t max_depth) { pack_value_at(pk, v, 0, max_depth); }

void check_structure(const char* data, std::size_t size) {
    // Items still to read in each open container; the bottom entry is the root.
    std::vector<std::uint64_t> open{1};
    std::size_t pos = 0;
    auto need = [&](std::uint64_t n, const char* what) {
        if (size - pos < n)
            malformed(pos, std::string(what) + " needs " + std::to_string(n) + " bytes, " + std::to_string(size - pos) +
                               " remain (truncated?)");
    };
    while (!open.empty()) {
        if (open.back() == 0) {
            open.pop_back();
            continue;
        }
        --open.back();
        need(1, "an object");
        const std::size_t start = pos;
        const auto b = static_cast<unsigned char>(data[pos++]);
        std::uint64_t skip = 0;   // bytes of payload after the header
        std::uint64_t items = 0;  // objects a container holds (2 per map entry)
        bool container = false;
        auto length = [&](int bytes) {
            need(static_cast<std::uint64_t>(bytes), "a length");
            auto v = read_be(data + pos, bytes);
            pos += static_cast<std::size_t>(bytes);
            return v;
        };
        if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
            // fixint, nil, bool
        } else if (b >= 0x80 && b <= 0x8f) {
            items = 2u * (b & 0x0fu);
            container = true;
        } else if (b >= 0x90 && b <= 0x9f) {
            items = b & 0x0fu;
            container = true;
        } else if (b >= 0xa0 && b <= 0xbf) {
            skip = b & 0x1fu;
        } else {
            switch (b) {
                case 0xc4: skip = length(1); break;
                case 0xc5: skip = length(2); break;
                case 0xc6: skip = length(4); break;
                case 0xca: skip = 4; break;
                case 0xcb: skip = 8; break;
                case 0xcc: case 0xd0: skip = 1; break;
                case 0xcd: case 0xd1: skip = 2; break;
                case 0xce: case 0xd2: skip = 4; break;
                case 0xcf: case 0xd3: skip = 8; break;
                case 0xd9: skip = length(1); break;
                case 0xda: skip = length(2); break;
                case 0xdb: skip = length(4); break;
                case 0xdc: items = length(2); break;
                case 0xdd: items = length(4); break;
                case 0xde: items = 2 * length(2); break;
                case 0xdf: items = 2 * length(4); break;
                case 0xc1: malformed(start, "byte 0xc1 is not valid msgpack");
                default: malformed(start, "msgpack extension types are not used in .kiln files");
            }
            container = b >= 0xdc;
        }
        if (container) {
            // Every item takes at least one byte, so a count larger than what remains
            // is a lie; refuse it before anything is allocated for it.
            if (items > size - pos)
                malformed(start, "a container claims " + std::to_string(items) + " items, only " +
                                     std::to_string(size - pos) + " bytes remain");
            if (items > 0) {
                if (open.size() >= max_payload_depth)
                    malformed(start, "containers nested more than " + std::to_string(max_payload_depth) + " deep");
                open.push_back(items);
            }
        } else {
            need(skip, "a value");
            pos += static_cast<std::size_t>(skip);
        }
    }
    if (pos != size) malformed(pos, std::to_string(size - pos) + " bytes after the end of the payload");
}

msgpack::object_handle unpack_checked(const char* data, std::size_t size) {
    check_structure(data, size);
    msgpack::unpack_limit limits(size, size / 2, size, size, 0, max_payload_depth + 1);
    try {
        std::size_t offset = 0;
        return msgpack::unpack(data, size, offset, reference_all, nullptr, limits);
    } catch (const std::bad_alloc&) {
        throw;
    } catch (const std::exception& e) {
        throw_error(error_code::parse, std::string("malformed payload: ") + e.what());
    }
}

value to_value(const msgpack::object& o, std::size_t max_depth) { return to_value_at(o, 0, max_depth); }

const msgpack::object* find_key(const msgpack::object& map, std::string_view key) {
    if (map.type != msgpack::type::MAP) return nullptr;
    for (std::uint32_t i = 0; i < map.via.map.size; ++i) {
        const auto& kv = map.via.map.ptr[i];
        if (kv.key.type == msgpack::type::STR && std::string_view(kv.key.via.str.ptr, kv.key.via.str.size) == key)
            return &kv.val;
    }
    return nullptr;
}

const msgpack::object& get_key(const msgpack::object& map, std::string_view key, std::string_view what) {
    expect_map(map, what);
    if (const auto* v = find_key(map, key)) return *v;
    throw_error(error_code::parse, std::string(what) + ": missing key '" + std::string(key) + "'");
}

void expect_map(const msgpack::object& o, std::string_view what) {
    if (o.type != msgpack::type::MAP) wrong_type(o, what, "map");
}

const msgpack::object_array& as_array(const msgpack::object& o, std::string_view what) {
    if (o.type != msgpack::type::ARRAY) wrong_type(o, what, "array");
    return o.via.array;
}

std::string_view as_string(const msgpack::object& o, std::string_view what) {
    if (o.type != msgpack::type::STR) wrong_type(o, what, "string");
    return {o.via.str.ptr, o.via.str.size};
}

std::uint64_t as_uint(const msgpack::object& o, std::string_view what) {
    if (o.type != msgpack::type::POSITIVE_INTEGER) wrong_type(o, what, "unsigned integer");
    return o.via.u64;
}

bool as_bool(const msgpack::object& o, std::string_view what) {
    if (o.type != msgpack::type::BOOLEAN) wrong_type(o, what, "bool");
    return o.via.boolean;
}

const msgpack::object_bin& as_binary(const msgpack::object& o, std::string_view what) {
    if (o.type != msgpack::type::BIN) wrong_type(o, what, "binary");
    return o.via.bin;
}

}  // namespace kiln::kiln_file
