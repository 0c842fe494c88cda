// Cross-check of kiln's conversions against the ONNX backend conformance data: every
// test_cast_* / test_castlike_* folder's input_0.pb is converted element by element
// with the node's saturate / round_mode attributes and compared bit-exactly with
// output_0.pb. A tiny protobuf wire-format reader keeps the test self-contained.
#include <kiln/types.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace fs = std::filesystem;

// Protobuf wire format: a key varint (field << 3 | wire type), then a varint (0),
// 8 bytes (1), a length-prefixed run (2) or 4 bytes (5).
struct wire_reader {
    std::string_view s;
    std::size_t at = 0;

    bool done() const { return at >= s.size(); }
    std::uint64_t varint() {
        std::uint64_t v = 0;
        for (int shift = 0; at < s.size() && shift < 64; shift += 7) {
            const auto c = static_cast<std::uint8_t>(s[at++]);
            v |= static_cast<std::uint64_t>(c & 0x7F) << shift;
            if ((c & 0x80) == 0) return v;
        }
        throw std::runtime_error("truncated varint");
    }
    std::string_view take(std::size_t n) {
        if (n > s.size() - at) throw std::runtime_error("truncated field");
        auto r = s.substr(at, n);
        at += n;
        return r;
    }
    // Reads one field; returns its number, sets the payload (varint value or bytes).
    int field(int& wire, std::uint64_t& value, std::string_view& bytes) {
        const std::uint64_t key = varint();
        wire = static_cast<int>(key & 7);
        switch (wire) {
        case 0: value = varint(); break;
        case 1: bytes = take(8); break;
        case 2: bytes = take(static_cast<std::size_t>(varint())); break;
        case 5: bytes = take(4); break;
        default: throw std::runtime_error("unsupported wire type");
        }
        return static_cast<int>(key >> 3);
    }
};

// TensorProto fields used by the conformance data: 1 dims, 2 data_type, 4 float_data,
// 5 int32_data, 9 raw_data (onnx.proto numbering).
struct tensor {
    std::vector<std::int64_t> dims;
    int data_type = 0;
    std::string raw;
    std::vector<float> float_data;
    std::vector<std::int32_t> int32_data;
    std::size_t count() const {
        std::size_t n = 1;
        for (auto d : dims) n *= static_cast<std::size_t>(d);
        return n;
    }
};

std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

tensor parse_tensor(std::string_view bytes) {
    tensor t;
    wire_reader r{bytes};
    while (!r.done()) {
        int wire = 0;
        std::uint64_t v = 0;
        std::string_view b;
        const int f = r.field(wire, v, b);
        if (f == 1 && wire == 0) t.dims.push_back(static_cast<std::int64_t>(v));
        if (f == 1 && wire == 2) {
            for (wire_reader p{b}; !p.done();) t.dims.push_back(static_cast<std::int64_t>(p.varint()));
        }
        if (f == 2) t.data_type = static_cast<int>(v);
        if (f == 4 && (wire == 2 || wire == 5)) {
            for (std::size_t i = 0; i + 4 <= b.size(); i += 4) {
                float x;
                std::memcpy(&x, b.data() + i, 4);
                t.float_data.push_back(x);
            }
        }
        if (f == 5 && wire == 0) t.int32_data.push_back(static_cast<std::int32_t>(v));
        if (f == 5 && wire == 2) {
            for (wire_reader p{b}; !p.done();) t.int32_data.push_back(static_cast<std::int32_t>(p.varint()));
        }
        if (f == 9) t.raw = std::string(b);
    }
    return t;
}

struct cast_attrs {
    bool saturate = true;
    kiln::e8m0_round round_mode = kiln::e8m0_round::up;
};

// ModelProto.graph (7) -> GraphProto.node (1) -> NodeProto.op_type (4), .attribute (5)
// -> AttributeProto.name (1), .i (3), .s (4).
cast_attrs parse_cast_attrs(std::string_view model) {
    cast_attrs a;
    auto fields = [](std::string_view msg, auto&& on_field) {
        wire_reader r{msg};
        while (!r.done()) {
            int wire = 0;
            std::uint64_t v = 0;
            std::string_view b;
            const int f = r.field(wire, v, b);
            on_field(f, v, b);
        }
    };
    fields(model, [&](int f, std::uint64_t, std::string_view graph) {
        if (f != 7) return;
        fields(graph, [&](int gf, std::uint64_t, std::string_view node) {
            if (gf != 1) return;
            std::string op;
            std::vector<std::string_view> attrs;
            fields(node, [&](int nf, std::uint64_t, std::string_view b) {
                if (nf == 4) op = std::string(b);
                if (nf == 5) attrs.push_back(b);
            });
            if (op != "Cast" && op != "CastLike") return;
            for (auto attr : attrs) {
                std::string name, s;
                std::int64_t i = 0;
                fields(attr, [&](int af, std::uint64_t v, std::string_view b) {
                    if (af == 1) name = std::string(b);
                    if (af == 3) i = static_cast<std::int64_t>(v);
                    if (af == 4) s = std::string(b);
                });
                if (name == "saturate") a.saturate = i != 0;
                if (name == "round_mode") {
                    a.round_mode = s == "down" ? kiln::e8m0_round::down
                                   : s == "nearest" ? kiln::e8m0_round::nearest : kiln::e8m0_round::up;
                }
            }
        });
    });
    return a;
}

std::optional<kiln::type> kiln_type(int onnx_type) {
    using kiln::type;
    switch (onnx_type) {
    case 1: return type::float32;
    case 2: return type::uint8;
    case 3: return type::int8;
    case 4: return type::uint16;
    case 5: return type::int16;
    case 6: return type::int32;
    case 7: return type::int64;
    case 9: return type::bool_;
    case 10: return type::float16;
    case 11: return type::float64;
    case 12: return type::uint32;
    case 13: return type::uint64;
    case 16: return type::bfloat16;
    case 17: return type::float8e4m3fn;
    case 18: return type::float8e4m3fnuz;
    case 19: return type::float8e5m2;
    case 20: return type::float8e5m2fnuz;
    case 21: return type::uint4;
    case 22: return type::int4;
    case 23: return type::float4e2m1;
    case 24: return type::float8e8m0;
    case 25: return type::uint2;
    case 26: return type::int2;
    default: return std::nullopt;
    }
}

int bit_width(kiln::type t) {
    using kiln::type;
    if (t == type::int4 || t == type::uint4 || t == type::float4e2m1) return 4;
    if (t == type::int2 || t == type::uint2) return 2;
    return static_cast<int>(kiln::type_size(t)) * 8;
}

// Element bit patterns, sub-byte types unpacked low bits first as ONNX packs them.
std::vector<std::uint64_t> element_bits(const tensor& t, kiln::type k) {
    const int w = bit_width(k);
    const std::size_t n = t.count();
    std::vector<std::uint64_t> out(n);
    if (t.raw.empty()) {  // typed fields: only the ones the conformance data could use
        for (std::size_t i = 0; i < n; ++i) {
            if (!t.float_data.empty()) {
                std::uint32_t u;
                std::memcpy(&u, &t.float_data.at(i), 4);
                out[i] = u;
            } else {
                // int32_data holds one element per entry for types up to 16 bits and
                // packed pairs/quads for the sub-byte types.
                const std::size_t per = w < 8 ? static_cast<std::size_t>(8 / w) : 1;
                const auto word = static_cast<std::uint32_t>(t.int32_data.at(i / per));
                out[i] = w < 8 ? (word >> (w * static_cast<int>(i % per))) & ((1u << w) - 1)
                               : word & (w >= 32 ? 0xFFFF'FFFFu : (1u << w) - 1);
            }
        }
        return out;
    }
    for (std::size_t i = 0; i < n; ++i) {
        if (w < 8) {
            const std::size_t bit = i * static_cast<std::size_t>(w);
            const auto byte = static_cast<std::uint8_t>(t.raw.at(bit / 8));
            out[i] = (byte >> (bit % 8)) & ((1u << w) - 1);
        } else {
            std::uint64_t v = 0;
            std::memcpy(&v, t.raw.data() + i * static_cast<std::size_t>(w / 8), static_cast<std::size_t>(w / 8));
            out[i] = v;
        }
    }
    return out;
}

template <class C>
C from_bits(std::uint64_t b) {
    if constexpr (requires { C::from_bits(0); }) {
        return C::from_bits(static_cast<decltype(C{}.bits)>(b));
    } else if constexpr (requires { C::is_signed; }) {  // sub-byte ints
        return C(static_cast<long long>(b));
    } else {
        C c;
        std::memcpy(&c, &b, sizeof(C));
        return c;
    }
}

template <class C>
std::uint64_t to_bits(C c) {
    if constexpr (requires { C::is_signed; }) {  // sub-byte ints (their `bits` is the width)
        return static_cast<std::uint64_t>(static_cast<int>(c)) & ((1u << C::bits) - 1);
    } else if constexpr (requires { c.bits; }) {
        return c.bits;
    } else {
        std::uint64_t b = 0;
        std::memcpy(&b, &c, sizeof(C));
        return b;
    }
}

// One element through Cast semantics: convert<>, except the attribute-driven targets.
template <class To, class From>
std::uint64_t cast_one(std::uint64_t in, const cast_attrs& a) {
    const From x = from_bits<From>(in);
    if constexpr (std::is_same_v<To, kiln::fp8e8m0>) {
        return kiln::to_fp8e8m0(kiln::convert<double>(x), a.saturate, a.round_mode).bits;
    } else if constexpr (std::is_constructible_v<To, double, bool> && !std::is_same_v<To, From>) {
        return To(kiln::convert<double>(x), a.saturate).bits;  // exact widening, one rounding
    } else {
        return to_bits(kiln::convert<To>(x));
    }
}

TEST(float_types_onnx, cast_conformance_data_matches_bit_exactly) {
    const fs::path root = fs::path(KILN_SHARED_DIR) / "onnx-backend-tests" / "node";
    if (!fs::is_directory(root)) GTEST_SKIP() << "no conformance data at " << root;
    int matched = 0, total = 0, elements = 0;
    std::vector<std::string> failed;
    for (const auto& entry : fs::directory_iterator(root)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind("test_cast", 0) != 0) continue;  // test_cast_* and test_castlike_*
        const fs::path in = entry.path() / "test_data_set_0" / "input_0.pb";
        const fs::path out = entry.path() / "test_data_set_0" / "output_0.pb";
        if (!fs::exists(in) || !fs::exists(out)) continue;
        const tensor ti = parse_tensor(read_file(in)), to = parse_tensor(read_file(out));
        const auto from_t = kiln_type(ti.data_type), to_t = kiln_type(to.data_type);
        ++total;
        if (!from_t || !to_t) {
            failed.push_back(name + " (unsupported data type)");
            continue;
        }
        const cast_attrs attrs = parse_cast_attrs(read_file(entry.path() / "model.onnx"));
        const auto xs = element_bits(ti, *from_t), want = element_bits(to, *to_t);
        ASSERT_EQ(xs.size(), want.size()) << name;
        std::vector<std::uint64_t> got(xs.size());
        kiln::visit_numeric(*from_t, [&](auto ft) {
            kiln::visit_numeric(*to_t, [&](auto tt) {
                for (std::size_t i = 0; i < xs.size(); ++i)
                    got[i] = cast_one<typename decltype(tt)::type, typename decltype(ft)::type>(xs[i], attrs);
            });
        });
        int bad = 0;
        for (std::size_t i = 0; i < xs.size(); ++i) {
            ++elements;
            if (got[i] != want[i]) {
                ++bad;
                ADD_FAILURE() << name << " element " << i << ": input bits 0x" << std::hex << xs[i]
                              << " expected 0x" << want[i] << " got 0x" << got[i] << std::dec;
            }
        }
        if (bad == 0) ++matched;
        else failed.push_back(name);
    }
    std::cout << "[ onnx cast ] " << matched << " of " << total << " cast/castlike conformance tests match ("
              << elements << " elements)\n";
    for (const auto& f : failed) std::cout << "[ onnx cast ] mismatch: " << f << "\n";
    EXPECT_GT(total, 0);
    EXPECT_EQ(matched, total);
}

}  // namespace
