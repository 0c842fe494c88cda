// program -> payload. Everything but literal data goes through msgpack-cxx's packer;
// literal bytes are streamed from the literal itself, never copied into a value.
#include "serialize/msgpack_codec.hpp"
#include "serialize/payload.hpp"

#include <kiln/errors.hpp>
#include <kiln/reflect.hpp>

#include <cstring>
#include <limits>
#include <unordered_map>

namespace kiln::kiln_file {

namespace {

void put_be32(char* p, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (24 - 8 * i)) & 0xffu);
}

void write_literal(packer& pk, const literal& l) {
    payload_stream& out = pk.stream();
    const shape& s = l.get_shape();
    if (l.empty()) {
        pk.pack_map(1);
        pack_string(pk, "shape");
        pack_string(pk, shape_to_value(s).get_string());
        return;
    }
    if (l.get_argument().location() != memory_location::host)
        throw_error(error_code::unsupported, "cannot save a literal held in device memory (" + s.to_string() + ")");
    if (s.get_type() == type::string) {
        // In memory order, like binary data, so strided layouts survive.
        const auto* strings = l.get_argument().data_as<std::string>();
        pk.pack_map(2);
        pack_string(pk, "shape");
        pack_string(pk, shape_to_value(s).get_string());
        pack_string(pk, "strings");
        pk.pack_array(static_cast<std::uint32_t>(s.element_space()));
        for (std::size_t i = 0; i < s.element_space(); ++i) pack_string(pk, strings[i]);
        return;
    }
    const std::size_t n = s.bytes();
    if (n > std::numeric_limits<std::uint32_t>::max())
        throw_error(error_code::unsupported, "cannot save literal " + s.to_string() + " of " + std::to_string(n) +
                                                 " bytes: format version 1 holds at most 4 GiB per literal");
    pk.pack_map(3);
    pack_string(pk, "shape");
    pack_string(pk, shape_to_value(s).get_string());
    // "pad" (a bin8 of zeros) then "data" (a bin32), laid out by hand so the data's
    // first byte falls on a literal_alignment boundary of the payload.
    constexpr std::size_t fixed = 4 + 2 + 5 + 5;  // "pad" key, bin8 header, "data" key, bin32 header
    const std::size_t pad = (literal_alignment - (out.offset() + fixed) % literal_alignment) % literal_alignment;
    char head[fixed + literal_alignment] = {};
    std::size_t k = 0;
    auto put = [&](const char* bytes, std::size_t count) {
        std::memcpy(head + k, bytes, count);
        k += count;
    };
    put("\xa3pad\xc4", 5);
    head[k++] = static_cast<char>(pad);
    k += pad;  // zeros
    put("\xa4" "data\xc6", 6);
    put_be32(head + k, static_cast<std::uint32_t>(n));
    k += 4;
    out.write(head, k);
    out.write(l.data(), n);
}

void write_module(packer& pk, const module& m) {
    pk.pack_map(2);
    pack_string(pk, "name");
    pack_string(pk, m.name());
    pack_string(pk, "instructions");
    pk.pack_array(static_cast<std::uint32_t>(m.size()));
    std::unordered_map<const instruction*, std::uint64_t> index;
    for (const auto& ins : m) {
        pk.pack_map(ins.is_literal() ? 6 : 5);
        pack_string(pk, "op");
        pack_string(pk, ins.name());
        pack_string(pk, "attributes");
        pack_value(pk, ins.get_operator().to_value());
        pack_string(pk, "inputs");
        pk.pack_array(static_cast<std::uint32_t>(ins.inputs().size()));
        for (auto a : ins.inputs()) pk.pack_uint64(index.at(&*a));
        pack_string(pk, "modules");
        pk.pack_array(static_cast<std::uint32_t>(ins.module_inputs().size()));
        for (auto sub : ins.module_inputs()) pack_string(pk, sub->name());
        pack_string(pk, "shape");
        pack_string(pk, shape_to_value(ins.get_shape()).get_string());
        if (ins.is_literal()) {
            pack_string(pk, "literal");
            write_literal(pk, ins.get_literal());
        }
        index.emplace(&ins, index.size());
    }
}

void write_program(packer& pk, const program& p);

void write_compiled(packer& pk, const program& p) {
    if (!p.is_compiled()) {
        pk.pack_nil();
        return;
    }
    const bool dynamic = p.dynamic_source() != nullptr;
    pk.pack_map(dynamic ? 4 : 3);
    pack_string(pk, "target");
    pack_string(pk, p.target_name());
    pack_string(pk, "dynamic");
    if (p.dynamic_source() != nullptr) pk.pack_true();
    else pk.pack_false();
    pack_string(pk, "options");
    value options = value::make_object();
    auto o = p.get_compile_options();
    for_each_option(o, [&](const auto& field, const char* name) { options[name] = kiln::to_value(field); });
    pack_value(pk, options);
    if (dynamic) {
        // The programs compiled for the optimals, so that loading does not compile them
        // again (a CNN's default batch: the whole compile).
        auto ahead = p.compiled_ahead();
        pack_string(pk, "ahead");
        pk.pack_array(static_cast<std::uint32_t>(ahead.size()));
        for (auto& a : ahead) write_program(pk, *a);
    }
}

void write_program(packer& pk, const program& p) {
    // A dynamic program's own modules are the parsed ones it specializes from; save
    // those, so loading gives back the same lazily specializing program.
    const program& src = p.dynamic_source() != nullptr ? *p.dynamic_source() : p;

    pk.pack_map(7);
    pack_string(pk, "kiln_version");
    pack_string(pk, KILN_VERSION);
    pack_string(pk, "format_version");
    pk.pack_uint32(kiln_format_version);
    pack_string(pk, "metadata");
    pack_value(pk, p.get_metadata());
    pack_string(pk, "output_names");
    auto names = p.get_output_names();
    pk.pack_array(static_cast<std::uint32_t>(names.size()));
    for (auto& n : names) pack_string(pk, n);

    std::vector<std::pair<std::string, const literal*>> defaults;
    for (auto& name : src.get_main_module()->get_parameter_names())
        if (const auto* d = p.get_parameter_default(name)) defaults.emplace_back(name, d);
    pack_string(pk, "parameter_defaults");
    pk.pack_array(static_cast<std::uint32_t>(defaults.size()));
    for (auto& [name, lit] : defaults) {
        pk.pack_map(2);
        pack_string(pk, "name");
        pack_string(pk, name);
        pack_string(pk, "literal");
        write_literal(pk, *lit);
    }

    pack_string(pk, "modules");
    auto modules = src.get_modules();
    pk.pack_array(static_cast<std::uint32_t>(modules.size()));
    for (auto m : modules) write_module(pk, *m);

    pack_string(pk, "compiled");
    write_compiled(pk, p);
}

}  // namespace

void write_payload(const program& p, payload_stream& out) {
    packer pk(out);
    write_program(pk, p);
}

}  // namespace kiln::kiln_file
