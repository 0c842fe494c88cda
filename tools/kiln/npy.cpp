// NumPy .npy files (format versions 1-3): the arrays Python users hand around.
#include "model_io.hpp"

#include <kiln/errors.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

namespace kiln::cli {

namespace {

struct descr_entry {
    const char* code;
    type t;
};
// bfloat16 and the fp8 types have no NumPy dtype: they are written as raw unsigned ints.
constexpr descr_entry descrs[] = {
    {"b1", type::bool_},   {"i1", type::int8},     {"u1", type::uint8},   {"i2", type::int16},
    {"u2", type::uint16},  {"i4", type::int32},    {"u4", type::uint32},  {"i8", type::int64},
    {"u8", type::uint64},  {"f2", type::float16},  {"f4", type::float32}, {"f8", type::float64},
};

std::string descr_of(type t) {
    switch (t) {
        case type::bfloat16: return "<u2";
        case type::float8e4m3fn:
        case type::float8e5m2:
        case type::float8e4m3fnuz:
        case type::float8e5m2fnuz:
        case type::float8e8m0:
        case type::float4e2m1:
        case type::uint4:
        case type::uint2: return "|u1";
        case type::int4:
        case type::int2: return "|i1";
        default: break;
    }
    for (auto& d : descrs)
        if (d.t == t) return std::string(type_size(t) == 1 ? "|" : "<") + d.code;
    throw_error(error_code::unsupported, "element type " + std::string(type_name(t)) + " cannot be written as .npy");
}

}  // namespace

argument read_npy(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw_error(error_code::io, "cannot open '" + path + "'");
    char magic[8] = {};
    f.read(magic, 8);
    if (f.gcount() != 8 || std::memcmp(magic, "\x93NUMPY", 6) != 0)
        throw_error(error_code::parse, "'" + path + "' is not a .npy file");
    std::uint32_t header_len = 0;
    if (magic[6] == 1) {
        unsigned char b[2];
        f.read(reinterpret_cast<char*>(b), 2);
        header_len = b[0] | (b[1] << 8);
    } else {
        unsigned char b[4];
        f.read(reinterpret_cast<char*>(b), 4);
        header_len = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<std::uint32_t>(b[3]) << 24);
    }
    if (header_len > 65536) throw_error(error_code::parse, "'" + path + "': .npy header too long");
    std::string header(header_len, '\0');
    f.read(header.data(), header_len);
    if (!f) throw_error(error_code::parse, "'" + path + "': truncated .npy header");
    std::smatch m;
    if (!std::regex_search(header, m, std::regex("'descr'\\s*:\\s*'([<>|=])([a-z]\\d+)'")))
        throw_error(error_code::parse, "'" + path + "': no dtype in the .npy header");
    std::string order = m[1], code = m[2];
    bool fortran = std::regex_search(header, std::regex("'fortran_order'\\s*:\\s*True"));
    if (!std::regex_search(header, m, std::regex("'shape'\\s*:\\s*\\(([^)]*)\\)")))
        throw_error(error_code::parse, "'" + path + "': no shape in the .npy header");
    std::vector<std::size_t> lens;
    std::string dims = m[1];
    std::regex num("\\d+");
    for (auto it = std::sregex_iterator(dims.begin(), dims.end(), num); it != std::sregex_iterator(); ++it)
        lens.push_back(std::stoull(it->str()));
    const descr_entry* entry = nullptr;
    for (auto& d : descrs)
        if (code == d.code) entry = &d;
    if (!entry) throw_error(error_code::unsupported, "'" + path + "': NumPy dtype '" + code + "' is not supported");
    shape s(entry->t, lens);
    if (fortran) {
        std::vector<std::size_t> rev(lens.rbegin(), lens.rend());
        auto st = shape::standard_strides(rev);
        std::reverse(st.begin(), st.end());
        s = shape(entry->t, lens, st);
    }
    argument a(s);
    const auto bytes = s.bytes();
    auto pos = f.tellg();
    f.seekg(0, std::ios::end);
    auto remaining = static_cast<std::size_t>(f.tellg() - pos);
    f.seekg(pos);
    if (remaining < bytes)
        throw_error(error_code::parse, "'" + path + "': shape " + s.to_string() + " needs " + std::to_string(bytes) +
                                           " bytes of data, the file has " + std::to_string(remaining));
    f.read(a.data(), static_cast<std::streamsize>(bytes));
    if (order == ">" && type_size(entry->t) > 1) {
        auto w = type_size(entry->t);
        for (std::size_t i = 0; i < bytes; i += w) std::reverse(a.data() + i, a.data() + i + w);
    }
    return a.contiguous();
}

void write_npy(const argument& arg, const std::string& path) {
    auto a = arg.contiguous();
    const auto& s = a.get_shape();
    if (!s.is_tensor()) throw_error(error_code::unsupported, "cannot write " + s.to_string() + " as .npy");
    std::string shape_text = "(";
    for (std::size_t i = 0; i < s.lens().size(); ++i) shape_text += std::to_string(s.lens()[i]) + ", ";
    if (s.lens().size() > 1) shape_text.resize(shape_text.size() - 2);
    else if (s.lens().size() == 1) shape_text.resize(shape_text.size() - 1);
    shape_text += ")";
    std::string header = "{'descr': '" + descr_of(s.get_type()) + "', 'fortran_order': False, 'shape': " + shape_text + ", }";
    std::size_t total = 10 + header.size() + 1;
    header += std::string((64 - total % 64) % 64, ' ') + "\n";
    std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        if (!f) throw_error(error_code::io, "cannot write '" + tmp + "'");
        f.write("\x93NUMPY\x01\x00", 8);
        unsigned char len[2] = {static_cast<unsigned char>(header.size() & 0xFF),
                                static_cast<unsigned char>(header.size() >> 8)};
        f.write(reinterpret_cast<char*>(len), 2);
        f.write(header.data(), static_cast<std::streamsize>(header.size()));
        f.write(a.data(), static_cast<std::streamsize>(s.elements() * s.type_size()));
        if (!f) throw_error(error_code::io, "cannot write '" + tmp + "'");
    }
    std::filesystem::rename(tmp, path);
}

}  // namespace kiln::cli
