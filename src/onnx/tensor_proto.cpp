#include "onnx/tensor_proto.hpp"

#include "onnx/onnx_node.hpp"

#include <kiln/errors.hpp>
#include <kiln/onnx.hpp>

#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

namespace kiln::onnx_frontend {

namespace {

// ONNX TensorProto.DataType numbers.
enum onnx_dt : int {
    DT_FLOAT = 1, DT_UINT8 = 2, DT_INT8 = 3, DT_UINT16 = 4, DT_INT16 = 5, DT_INT32 = 6, DT_INT64 = 7,
    DT_STRING = 8, DT_BOOL = 9, DT_FLOAT16 = 10, DT_DOUBLE = 11, DT_UINT32 = 12, DT_UINT64 = 13,
    DT_COMPLEX64 = 14, DT_COMPLEX128 = 15, DT_BFLOAT16 = 16, DT_FLOAT8E4M3FN = 17, DT_FLOAT8E4M3FNUZ = 18,
    DT_FLOAT8E5M2 = 19, DT_FLOAT8E5M2FNUZ = 20, DT_UINT4 = 21, DT_INT4 = 22, DT_FLOAT4E2M1 = 23,
    DT_FLOAT8E8M0 = 24, DT_UINT2 = 25, DT_INT2 = 26,
};

// Elements per byte in the packed ONNX form (1 for whole-byte types).
std::size_t per_byte(type t) {
    switch (t) {
        case type::int4:
        case type::uint4:
        case type::float4e2m1: return 2;
        case type::int2:
        case type::uint2: return 4;
        default: return 1;
    }
}

std::size_t bits_of(type t) { return 8 / per_byte(t); }

// Unpacks sub-byte elements (first element in the lowest bits) to one per byte,
// sign-extending the signed integer types.
void unpack_small(type t, const unsigned char* src, std::size_t n, unsigned char* dst) {
    const auto k = per_byte(t);
    const auto b = bits_of(t);
    const unsigned mask = (1u << b) - 1;
    const bool sign = t == type::int4 || t == type::int2;
    for (std::size_t i = 0; i < n; ++i) {
        unsigned v = (src[i / k] >> ((i % k) * b)) & mask;
        if (sign && (v >> (b - 1))) v |= ~mask & 0xFFu;
        dst[i] = static_cast<unsigned char>(v);
    }
}

void pack_small(type t, const unsigned char* src, std::size_t n, std::string& out) {
    const auto k = per_byte(t);
    const auto b = bits_of(t);
    const unsigned mask = (1u << b) - 1;
    out.assign((n + k - 1) / k, '\0');
    for (std::size_t i = 0; i < n; ++i)
        out[i / k] = static_cast<char>(static_cast<unsigned char>(out[i / k]) | ((src[i] & mask) << ((i % k) * b)));
}

// external_data values are strings; std::stoll would throw std::invalid_argument
// (no kiln::error) on text and overflow silently on nothing.
long long external_number(const std::string& key, const std::string& text, const std::string& what) {
    long long v = 0;
    bool ok = !text.empty() && text.size() <= 19;
    for (char c : text) ok = ok && c >= '0' && c <= '9';
    if (ok) v = std::stoll(text);
    if (!ok)
        throw_error(error_code::parse, what + ": external data " + key + " '" + text.substr(0, 40) +
                                           "' is not a non-negative integer");
    return v;
}

std::string read_external(const onnx::TensorProto& t, const std::string& what, const std::string& base_dir,
                          std::size_t expected) {
    std::string location;
    long long offset = 0, length = -1;
    for (auto& kv : t.external_data()) {
        if (kv.key() == "location") location = kv.value();
        else if (kv.key() == "offset") offset = external_number("offset", kv.value(), what);
        else if (kv.key() == "length") length = external_number("length", kv.value(), what);
    }
    if (location.empty()) throw_error(error_code::parse, what + ": external data without a location");
    std::filesystem::path rel(location);
    if (rel.is_absolute() || rel.lexically_normal().string().rfind("..", 0) == 0)
        throw_error(error_code::parse, what + ": external data location '" + location +
                                           "' must be a relative path inside the model's folder");
    auto path = std::filesystem::path(base_dir.empty() ? "." : base_dir) / rel;
    // A directory opens as a stream of nothing and a FIFO blocks the open: only regular files.
    std::error_code ec;
    auto status = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(status))
        throw_error(error_code::io, what + ": cannot open external data file '" + path.string() + "'");
    if (!std::filesystem::is_regular_file(status))
        throw_error(error_code::io, what + ": external data location '" + path.string() + "' is not a regular file");
    std::ifstream f(path, std::ios::binary);
    if (!f) throw_error(error_code::io, what + ": cannot open external data file '" + path.string() + "'");
    f.seekg(0, std::ios::end);
    auto file_size = static_cast<long long>(f.tellg());
    if (length < 0) length = expected > static_cast<std::size_t>(std::numeric_limits<long long>::max())
                                 ? std::numeric_limits<long long>::max()
                                 : static_cast<long long>(expected);
    // Compared without computing offset + length, which may overflow.
    if (file_size < 0 || offset > file_size || length > file_size - offset)
        throw_error(error_code::parse, what + ": external data range of " + std::to_string(length) +
                                           " bytes at offset " + std::to_string(offset) + " is outside '" +
                                           path.string() + "' (" + std::to_string(file_size) + " bytes)");
    // Checked before reading, so a length the tensor cannot use is never allocated.
    if (static_cast<std::size_t>(length) != expected)
        throw_error(error_code::parse, what + ": external data holds " + std::to_string(length) +
                                           " bytes, the tensor needs " + std::to_string(expected));
    std::string data(static_cast<std::size_t>(length), '\0');
    f.seekg(offset);
    f.read(data.data(), length);
    if (!f) throw_error(error_code::io, what + ": cannot read external data from '" + path.string() + "'");
    return data;
}

// Element count of `dims` from an untrusted tensor, refused above 2^48 before a shape
// (or any buffer) is made.
std::vector<std::size_t> checked_dims(const onnx::TensorProto& t, const std::string& what, std::size_t& elements) {
    constexpr std::size_t limit = std::size_t{1} << 48;
    std::vector<std::size_t> lens;
    elements = 1;
    bool too_big = false;
    for (auto d : t.dims()) {
        if (d < 0) throw_error(error_code::parse, what + ": negative dimension " + std::to_string(d));
        auto u = static_cast<std::size_t>(d);
        lens.push_back(u);
        if (u == 0) elements = 0;
        else if (!too_big && elements != 0 && (u > limit || elements > limit / u)) too_big = true;
        else if (!too_big) elements *= u;
    }
    if (too_big && elements != 0) {
        std::string s;
        for (auto d : lens) s += (s.empty() ? "" : ", ") + std::to_string(d);
        throw_error(error_code::parse, what + ": dims [" + s + "] claim more than 2^48 elements");
    }
    if (too_big) elements = 0;
    return lens;
}

}  // namespace

type from_onnx_type(int dt, const std::string& context) {
    switch (dt) {
        case DT_FLOAT: return type::float32;
        case DT_UINT8: return type::uint8;
        case DT_INT8: return type::int8;
        case DT_UINT16: return type::uint16;
        case DT_INT16: return type::int16;
        case DT_INT32: return type::int32;
        case DT_INT64: return type::int64;
        case DT_STRING: return type::string;
        case DT_BOOL: return type::bool_;
        case DT_FLOAT16: return type::float16;
        case DT_DOUBLE: return type::float64;
        case DT_UINT32: return type::uint32;
        case DT_UINT64: return type::uint64;
        case DT_BFLOAT16: return type::bfloat16;
        case DT_FLOAT8E4M3FN: return type::float8e4m3fn;
        case DT_FLOAT8E4M3FNUZ: return type::float8e4m3fnuz;
        case DT_FLOAT8E5M2: return type::float8e5m2;
        case DT_FLOAT8E5M2FNUZ: return type::float8e5m2fnuz;
        case DT_UINT4: return type::uint4;
        case DT_INT4: return type::int4;
        case DT_FLOAT4E2M1: return type::float4e2m1;
        case DT_FLOAT8E8M0: return type::float8e8m0;
        case DT_UINT2: return type::uint2;
        case DT_INT2: return type::int2;
        case DT_COMPLEX64:
        case DT_COMPLEX128:
            throw_error(error_code::unsupported, context + ": complex element types are not supported");
        default:
            throw_error(error_code::parse, context + ": unknown ONNX element type " + std::to_string(dt));
    }
}

int to_onnx_type(type t) {
    switch (t) {
        case type::float32: return DT_FLOAT;
        case type::uint8: return DT_UINT8;
        case type::int8: return DT_INT8;
        case type::uint16: return DT_UINT16;
        case type::int16: return DT_INT16;
        case type::int32: return DT_INT32;
        case type::int64: return DT_INT64;
        case type::string: return DT_STRING;
        case type::bool_: return DT_BOOL;
        case type::float16: return DT_FLOAT16;
        case type::float64: return DT_DOUBLE;
        case type::uint32: return DT_UINT32;
        case type::uint64: return DT_UINT64;
        case type::bfloat16: return DT_BFLOAT16;
        case type::float8e4m3fn: return DT_FLOAT8E4M3FN;
        case type::float8e4m3fnuz: return DT_FLOAT8E4M3FNUZ;
        case type::float8e5m2: return DT_FLOAT8E5M2;
        case type::float8e5m2fnuz: return DT_FLOAT8E5M2FNUZ;
        case type::uint4: return DT_UINT4;
        case type::int4: return DT_INT4;
        case type::float4e2m1: return DT_FLOAT4E2M1;
        case type::float8e8m0: return DT_FLOAT8E8M0;
        case type::uint2: return DT_UINT2;
        case type::int2: return DT_INT2;
    }
    return 0;
}

literal tensor_to_literal(const onnx::TensorProto& t, const std::string& what, const std::string& base_dir) {
    if (t.has_segment()) throw_error(error_code::unsupported, what + ": segmented tensors are not supported");
    type et = from_onnx_type(t.data_type(), what);
    std::size_t n = 0;
    auto lens = checked_dims(t, what, n);
    shape s(et, lens);
    auto described = [&] { return what + ": shape " + s.to_string() + " (" + std::to_string(n) + " elements) needs "; };
    auto mismatch = [&](std::size_t have, const char* field) {
        throw_error(error_code::parse, described() + std::to_string(n) + " values, but " + field + " holds " +
                                           std::to_string(have));
    };
    auto count_of = [](int size) { return static_cast<std::size_t>(size); };
    // Every size is checked against the data the file holds before the buffer is
    // allocated: a tensor may claim any shape, and only its data justifies memory.

    if (et == type::string) {
        if (count_of(t.string_data_size()) != n) mismatch(count_of(t.string_data_size()), "string_data");
        argument a(s);
        auto* sd = a.data_as<std::string>();
        for (std::size_t i = 0; i < n; ++i) sd[i] = t.string_data(static_cast<int>(i));
        return literal(a);
    }

    const std::size_t k = per_byte(et);
    const std::size_t width = type_size(et);
    const std::size_t packed_bytes = k > 1 ? (n + k - 1) / k : n * width;

    const std::string* raw = nullptr;
    std::string external;
    if (t.data_location() == onnx::TensorProto::EXTERNAL) {
        external = read_external(t, what, base_dir, packed_bytes);
        raw = &external;
    } else if (t.has_raw_data()) {
        raw = &t.raw_data();
    }
    if (raw != nullptr) {
        if (raw->size() != packed_bytes)
            throw_error(error_code::parse, described() + std::to_string(packed_bytes) + " bytes of raw data, got " +
                                               std::to_string(raw->size()));
        argument a(s);
        auto* dst = reinterpret_cast<unsigned char*>(a.data());
        if (k > 1) unpack_small(et, reinterpret_cast<const unsigned char*>(raw->data()), n, dst);
        else if (n > 0) std::memcpy(dst, raw->data(), packed_bytes);
        return literal(a);
    }

    // Typed fields.
    const std::size_t words = k > 1 ? (n + k - 1) / k : n;
    switch (et) {
        case type::float32:
            if (count_of(t.float_data_size()) != n) mismatch(count_of(t.float_data_size()), "float_data");
            break;
        case type::float64:
            if (count_of(t.double_data_size()) != n) mismatch(count_of(t.double_data_size()), "double_data");
            break;
        case type::int64:
            if (count_of(t.int64_data_size()) != n) mismatch(count_of(t.int64_data_size()), "int64_data");
            break;
        case type::uint32:
        case type::uint64:
            if (count_of(t.uint64_data_size()) != n) mismatch(count_of(t.uint64_data_size()), "uint64_data");
            break;
        default:
            // int32_data holds int32 values, or 8/16-bit elements as bit patterns, or
            // packed sub-byte elements (one packed byte per int32).
            if (count_of(t.int32_data_size()) != words) {
                if (k == 1) mismatch(count_of(t.int32_data_size()), "int32_data");
                throw_error(error_code::parse, described() + std::to_string(words) + " packed int32_data words, got " +
                                                   std::to_string(t.int32_data_size()));
            }
    }
    argument a(s);  // zero-filled
    auto* dst = reinterpret_cast<unsigned char*>(a.data());
    switch (et) {
        case type::float32:
            if (n > 0) std::memcpy(dst, t.float_data().data(), n * 4);
            break;
        case type::float64:
            if (n > 0) std::memcpy(dst, t.double_data().data(), n * 8);
            break;
        case type::int64:
            if (n > 0) std::memcpy(dst, t.int64_data().data(), n * 8);
            break;
        case type::uint32:
        case type::uint64:
            for (std::size_t i = 0; i < n; ++i) {
                auto v = t.uint64_data(static_cast<int>(i));
                if (et == type::uint32) a.data_as<std::uint32_t>()[i] = static_cast<std::uint32_t>(v);
                else a.data_as<std::uint64_t>()[i] = v;
            }
            break;
        default:
            if (k > 1) {
                std::string bytes(words, '\0');
                for (std::size_t i = 0; i < words; ++i) bytes[i] = static_cast<char>(t.int32_data(static_cast<int>(i)) & 0xFF);
                unpack_small(et, reinterpret_cast<const unsigned char*>(bytes.data()), n, dst);
            } else {
                for (std::size_t i = 0; i < n; ++i) {
                    auto v = static_cast<std::uint32_t>(t.int32_data(static_cast<int>(i)));
                    std::memcpy(dst + i * width, &v, width);  // little-endian low bytes
                }
            }
    }
    return literal(a);
}

void argument_to_tensor(const argument& arg, const std::string& name, onnx::TensorProto& t) {
    const auto& s = arg.get_shape();
    if (!s.is_tensor() || s.dynamic())
        throw_error(error_code::invalid_argument, "cannot write " + s.to_string() + " as a TensorProto");
    auto a = arg.contiguous();
    t.set_name(name);
    t.set_data_type(to_onnx_type(s.get_type()));
    for (auto d : s.lens()) t.add_dims(static_cast<std::int64_t>(d));
    const std::size_t n = s.elements();
    if (s.get_type() == type::string) {
        for (std::size_t i = 0; i < n; ++i) t.add_string_data(a.data_as<std::string>()[i]);
        return;
    }
    if (per_byte(s.get_type()) > 1) {
        std::string packed;
        pack_small(s.get_type(), reinterpret_cast<const unsigned char*>(a.data()), n, packed);
        t.set_raw_data(packed);
        return;
    }
    t.set_raw_data(std::string(a.data(), n * s.type_size()));
}

}  // namespace kiln::onnx_frontend

namespace kiln {

namespace {
std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw_error(error_code::io, "cannot open '" + path + "'");
    std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    return data;
}
}  // namespace

argument parse_tensor_proto(const void* data, std::size_t size) {
    onnx::TensorProto t;
    if (size > static_cast<std::size_t>(INT32_MAX) || !t.ParseFromArray(data, static_cast<int>(size)))
        throw_error(error_code::parse, "not a valid TensorProto");
    return onnx_frontend::tensor_to_literal(t, "tensor '" + t.name() + "'", ".").get_argument();
}

argument read_tensor_proto(const std::string& path) {
    auto bytes = read_file(path);
    try {
        return parse_tensor_proto(bytes.data(), bytes.size());
    } catch (const error& e) {
        throw error(e.code(), path + ": " + e.message());
    }
}

namespace {
argument sequence_from_proto(const onnx::SequenceProto& sp, const shape& declared, const std::string& what);

argument optional_from_proto(const onnx::OptionalProto& op, const shape& declared, const std::string& what) {
    const shape& elem = declared.sub_shapes().at(0);
    switch (op.elem_type()) {
        case onnx::OptionalProto::TENSOR:
            return argument::make_optional(
                elem, onnx_frontend::tensor_to_literal(op.tensor_value(), what, ".").get_argument());
        case onnx::OptionalProto::SEQUENCE:
            return argument::make_optional(elem, sequence_from_proto(op.sequence_value(), elem, what));
        case onnx::OptionalProto::UNDEFINED: return argument::make_optional(elem, std::nullopt);
        default: throw_error(error_code::unsupported, what + ": optional of this element kind is not supported");
    }
}

argument sequence_from_proto(const onnx::SequenceProto& sp, const shape& declared, const std::string& what) {
    shape elem = declared.is_sequence() ? declared.sub_shapes().at(0) : declared;
    std::vector<argument> items;
    for (auto& t : sp.tensor_values()) items.push_back(onnx_frontend::tensor_to_literal(t, what, ".").get_argument());
    if (sp.sequence_values_size() > 0)
        throw_error(error_code::unsupported, what + ": sequences of sequences are not supported");
    return argument::make_sequence(elem, std::move(items));
}
}  // namespace

argument read_value_proto(const std::string& path, const shape& declared) {
    if (declared.is_tensor()) return read_tensor_proto(path);
    auto bytes = read_file(path);
    if (declared.is_sequence()) {
        onnx::SequenceProto sp;
        if (!sp.ParseFromString(bytes)) throw_error(error_code::parse, path + ": not a valid SequenceProto");
        return sequence_from_proto(sp, declared, path);
    }
    if (declared.is_optional()) {
        onnx::OptionalProto op;
        if (!op.ParseFromString(bytes)) throw_error(error_code::parse, path + ": not a valid OptionalProto");
        return optional_from_proto(op, declared, path);
    }
    throw_error(error_code::unsupported, path + ": cannot read a value of shape " + declared.to_string());
}

namespace {
// Writes beside the target, then renames: a reader never sees a half-written file.
void write_atomically(const std::string& bytes, const std::string& path) {
    auto tmp = path + ".tmp";
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        if (!f) throw_error(error_code::io, "cannot write '" + tmp + "'");
        f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        if (!f) throw_error(error_code::io, "cannot write '" + tmp + "'");
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) throw_error(error_code::io, "cannot write '" + path + "': " + ec.message());
}

void sequence_to_proto(const argument& value, const std::string& name, onnx::SequenceProto& sp) {
    sp.set_name(name);
    sp.set_elem_type(onnx::SequenceProto::TENSOR);
    for (const auto& item : value.elements()) {
        if (!item.get_shape().is_tensor())
            throw_error(error_code::unsupported, "cannot write " + value.get_shape().to_string() +
                                                     " as a SequenceProto: only sequences of tensors are supported");
        onnx_frontend::argument_to_tensor(item, "", *sp.add_tensor_values());
    }
}

void optional_to_proto(const argument& value, const std::string& name, onnx::OptionalProto& op) {
    op.set_name(name);
    if (value.elements().empty()) {
        op.set_elem_type(onnx::OptionalProto::UNDEFINED);  // an empty optional, as the backend tests store it
        return;
    }
    const argument& item = value.elements().front();
    if (item.get_shape().is_sequence()) {
        op.set_elem_type(onnx::OptionalProto::SEQUENCE);
        sequence_to_proto(item, "", *op.mutable_sequence_value());
    } else if (item.get_shape().is_tensor()) {
        op.set_elem_type(onnx::OptionalProto::TENSOR);
        onnx_frontend::argument_to_tensor(item, "", *op.mutable_tensor_value());
    } else {
        throw_error(error_code::unsupported,
                    "cannot write " + value.get_shape().to_string() + " as an OptionalProto");
    }
}
}  // namespace

void write_tensor_proto(const argument& value, const std::string& name, const std::string& path) {
    onnx::TensorProto t;
    onnx_frontend::argument_to_tensor(value, name, t);
    std::string bytes;
    if (!t.SerializeToString(&bytes)) throw_error(error_code::io, "cannot serialize tensor '" + name + "'");
    write_atomically(bytes, path);
}

void write_value_proto(const argument& value, const std::string& name, const std::string& path) {
    const auto& s = value.get_shape();
    if (s.is_tensor()) return write_tensor_proto(value, name, path);
    std::string bytes;
    if (s.is_sequence()) {
        onnx::SequenceProto sp;
        sequence_to_proto(value, name, sp);
        if (!sp.SerializeToString(&bytes)) throw_error(error_code::io, "cannot serialize sequence '" + name + "'");
    } else if (s.is_optional()) {
        onnx::OptionalProto op;
        optional_to_proto(value, name, op);
        if (!op.SerializeToString(&bytes)) throw_error(error_code::io, "cannot serialize optional '" + name + "'");
    } else {
        throw_error(error_code::unsupported, "cannot write " + s.to_string() +
                                                 " as a .pb file: only tensors, sequences and optionals have one");
    }
    write_atomically(bytes, path);
}

}  // namespace kiln
