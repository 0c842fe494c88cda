// Loading .kiln bytes that are truncated, flipped, foreign, too new or crafted gives a
// kiln::error (parse or io; unsupported for an unknown op or target), never a crash,
// a hang or an allocation the file does not justify.
#include "serialize/payload.hpp"
#include "serialize_helpers.hpp"
#include "serialize_test_ops.hpp"

#include <kiln/serialize.hpp>

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

namespace kiln::test {
namespace {

using codes = std::vector<error_code>;

// Loads `bytes`; expects a kiln::error with one of `allowed` codes whose message
// contains `needle`. Returns the message.
std::string expect_load_error(const std::string& bytes, const codes& allowed = {error_code::parse},
                              const std::string& needle = "") {
    try {
        load_buffer(bytes.data(), bytes.size());
    } catch (const error& e) {
        EXPECT_NE(std::find(allowed.begin(), allowed.end(), e.code()), allowed.end())
            << "code " << error_code_name(e.code()) << ": " << e.what();
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        return e.what();
    } catch (const std::exception& e) {
        ADD_FAILURE() << "not a kiln::error: " << e.what();
        return {};
    }
    ADD_FAILURE() << "loaded without an error (expected '" << needle << "')";
    return {};
}

std::string compiled_rich_bytes() {
    auto p = make_rich_program();
    p.compile(*get_target("ref"));
    return save_buffer(p);
}

std::string payload_of(const std::string& file) { return file.substr(kiln_file::header_size); }
std::uint32_t flags_of(const std::string& file) { return static_cast<unsigned char>(file[8]); }

TEST(serialize_corrupt, truncated_files) {
    temp_dir dir;
    for (const auto& bytes : {save_buffer(make_rich_program()), compiled_rich_bytes()}) {
        for (std::size_t k = 0; k < 16; ++k) {
            std::size_t cut = bytes.size() * k / 16;
            auto msg = expect_load_error(bytes.substr(0, cut));
            const char* expected = k == 0 ? "empty" : cut < kiln_file::header_size ? "" : "truncated";
            EXPECT_NE(msg.find(expected), std::string::npos) << msg;
        }
        // Through a file too.
        write_bytes(dir.file("cut.kiln"), bytes.substr(0, bytes.size() / 2));
        EXPECT_THROW(load(dir.file("cut.kiln")), error);
    }
}

// With the checksum recomputed, the msgpack reader itself must catch every cut.
TEST(serialize_corrupt, truncated_payloads_with_valid_checksums) {
    auto file = compiled_rich_bytes();
    auto payload = payload_of(file);
    for (std::size_t cut = 0; cut < payload.size(); ++cut)
        expect_load_error(kiln_file::bytes_to_file(payload.substr(0, cut), kiln_format_version, flags_of(file)));
}

TEST(serialize_corrupt, random_byte_flips) {
    auto file = compiled_rich_bytes();
    std::mt19937 gen(20240601);
    for (int attempt = 0; attempt < 1000; ++attempt) {
        auto bytes = file;
        int flips = 1 + static_cast<int>(gen() % 4);
        for (int f = 0; f < flips; ++f) bytes[gen() % bytes.size()] ^= static_cast<char>(1 + gen() % 255);
        if (bytes == file) continue;
        expect_load_error(bytes);
    }
}

// Flips behind a recomputed checksum reach the decoder and the semantic checks: a
// load may succeed (a changed weight) or fail with a kiln::error, never crash.
TEST(serialize_corrupt, random_byte_flips_past_the_checksum) {
    auto file = compiled_rich_bytes();
    auto payload = payload_of(file);
    std::mt19937 gen(77);
    int loaded = 0, failed = 0;
    for (int attempt = 0; attempt < 1000; ++attempt) {
        auto bytes = payload;
        int flips = 1 + static_cast<int>(gen() % 4);
        for (int f = 0; f < flips; ++f) bytes[gen() % bytes.size()] ^= static_cast<char>(1 + gen() % 255);
        auto mutated = kiln_file::bytes_to_file(bytes, kiln_format_version, flags_of(file));
        try {
            auto p = load_buffer(mutated.data(), mutated.size());
            ++loaded;
            try {
                p.eval(rich_inputs(static_cast<unsigned>(attempt)));
            } catch (const error&) {
            }
        } catch (const error& e) {
            ++failed;
            ASSERT_TRUE(e.code() == error_code::parse || e.code() == error_code::unsupported) << e.what();
        }
    }
    EXPECT_GT(failed, 0);
    std::cout << "flips past the checksum: " << loaded << " loaded, " << failed << " refused\n";
}

TEST(serialize_corrupt, other_formats) {
    temp_dir dir;
    expect_load_error("", {error_code::parse}, "empty");
    // An ONNX ModelProto starts with field 1 (ir_version).
    expect_load_error(std::string("\x08\x07\x12\x04kiln\x3a\x02\x0a\x00", 12), {error_code::parse}, "ONNX");
    for (const std::string& onnx : {std::string(KILN_SHARED_DIR) + "/onnx-backend-tests/node/test_abs/model.onnx",
                                   std::string(KILN_SHARED_DIR) + "/models/mobilenet_v2/model.onnx"}) {
        if (!std::filesystem::exists(onnx)) continue;
        try {
            load(onnx);
            ADD_FAILURE() << "loaded an ONNX file";
        } catch (const error& e) {
            EXPECT_EQ(e.code(), error_code::parse);
            EXPECT_NE(std::string(e.what()).find("not a .kiln file"), std::string::npos) << e.what();
        }
    }
    std::mt19937 gen(5);
    std::string noise(4096, '\0');
    for (auto& c : noise) c = static_cast<char>(gen());
    expect_load_error(noise, {error_code::parse}, "not a .kiln file");
    expect_load_error("KILN" + noise, {error_code::parse}, "header");
    expect_load_error("KILN", {error_code::parse}, "truncated");
    expect_load_error("hello, world\n", {error_code::parse}, "not a .kiln file");
    expect_load_error(kiln_file::bytes_to_file("", kiln_format_version, 0), {error_code::parse}, "truncated");

    auto expect_io = [](const std::string& path) {
        try {
            load(path);
            ADD_FAILURE() << "loaded " << path;
        } catch (const error& e) {
            EXPECT_EQ(e.code(), error_code::io) << e.what();
        }
    };
    expect_io(dir.file("missing.kiln"));
    expect_io(dir.path.string());
    // A FIFO must be refused, not waited on.
    ASSERT_EQ(::mkfifo(dir.file("fifo").c_str(), 0600), 0);
    expect_io(dir.file("fifo"));
    write_bytes(dir.file("empty.kiln"), "");
    EXPECT_THROW(load(dir.file("empty.kiln")), error);
}

TEST(serialize_corrupt, newer_format_version) {
    auto file = save_buffer(make_rich_program());
    auto msg = expect_load_error(kiln_file::bytes_to_file(payload_of(file), kiln_format_version + 1, 0),
                                 {error_code::parse}, "newer");
    EXPECT_NE(msg.find("version " + std::to_string(kiln_format_version + 1)), std::string::npos) << msg;
    // Decided from the header alone, whatever follows.
    expect_load_error(kiln_file::bytes_to_file("\xc1garbage", 1000, 0xffff), {error_code::parse}, "newer");
    expect_load_error(kiln_file::bytes_to_file(payload_of(file), 0, 0), {error_code::parse}, "version 0");
}

TEST(serialize_corrupt, header_fields) {
    auto file = compiled_rich_bytes();
    auto payload = payload_of(file);
    expect_load_error(kiln_file::bytes_to_file(payload, kiln_format_version, 0), {error_code::parse}, "compiled");
    expect_load_error(kiln_file::bytes_to_file(payload, kiln_format_version, 1u << 5), {error_code::parse}, "flags");
    expect_load_error(file + "x", {error_code::parse}, "after the payload");
    auto bad_crc = file;
    bad_crc[24] ^= 1;  // the payload checksum field; the header checksum catches it
    expect_load_error(bad_crc, {error_code::parse}, "header");
}

// Crafted payloads: valid msgpack with a valid checksum, wrong in meaning.
value payload_value(const program& p) {
    auto bytes = save_buffer(p);
    return kiln_file::file_to_value(bytes.data(), bytes.size());
}

value& module_at(value& payload, std::size_t i) { return payload["modules"].get_array().at(i); }

value& instruction_named(value& payload, const std::string& op, std::size_t module = 0) {
    for (auto& ins : module_at(payload, module)["instructions"].get_array())
        if (ins["op"].get_string() == op) return ins;
    throw std::runtime_error("no " + op);
}

std::size_t index_of(value& payload, const std::string& op) {
    auto& list = module_at(payload, 0)["instructions"].get_array();
    for (std::size_t i = 0; i < list.size(); ++i)
        if (list[i]["op"].get_string() == op) return i;
    throw std::runtime_error("no " + op);
}

void expect_crafted_error(const program& p, const std::function<void(value&)>& edit, const codes& allowed,
                          const std::string& needle) {
    auto v = payload_value(p);
    edit(v);
    expect_load_error(kiln_file::value_to_file(v), allowed, needle);
}

TEST(serialize_corrupt, crafted_instructions) {
    const auto p = make_rich_program();
    const codes parse{error_code::parse};
    // A valid payload re-encoded through values loads (the helpers do not break it).
    EXPECT_EQ(load_buffer(kiln_file::value_to_file(payload_value(p)).data(),
                          kiln_file::value_to_file(payload_value(p)).size()),
              p);

    expect_crafted_error(p, [](value& v) { instruction_named(v, "test_scale")["op"] = "no_such_op"; },
                         {error_code::unsupported}, "no_such_op");
    expect_crafted_error(p, [](value& v) {
        auto i = index_of(v, "test_scale");
        instruction_named(v, "test_scale")["inputs"] = value{i};
    }, parse, "does not come before");
    expect_crafted_error(p, [](value& v) { instruction_named(v, "test_scale")["inputs"] = value{std::int64_t{1} << 40}; },
                         parse, "does not come before");
    expect_crafted_error(p, [](value& v) { instruction_named(v, "test_scale")["inputs"] = value{-1}; }, parse,
                         "unsigned integer");
    expect_crafted_error(p, [](value& v) { instruction_named(v, "test_scale")["inputs"] = "zero"; }, parse,
                         "expected array");
    expect_crafted_error(p, [](value& v) { instruction_named(v, "test_scale")["shape"] = "float32[3, 2]"; }, parse,
                         "differs from computed");
    expect_crafted_error(p, [](value& v) { instruction_named(v, "test_scale")["shape"] = "float32[2, "; }, parse,
                         "malformed shape");
    expect_crafted_error(p, [](value& v) { instruction_named(v, "test_scale")["attributes"] = 3; }, parse, "map");
    expect_crafted_error(p, [](value& v) { instruction_named(v, "test_scale")["attributes"]["factor"] = "big"; },
                         parse, "test_scale");
    expect_crafted_error(p, [](value& v) { instruction_named(v, "test_scale")["modules"] = value{"nowhere"}; }, parse,
                         "nowhere");
    expect_crafted_error(p, [](value& v) { instruction_named(v, "@literal")["inputs"] = value{0}; }, parse,
                         "no inputs");
    // Two parameters named x.
    expect_crafted_error(p, [](value& v) {
        module_at(v, 0)["instructions"].get_array()[1]["attributes"]["name"] = "x";
    }, parse, "duplicate parameter");
    // An instruction after @return.
    expect_crafted_error(p, [](value& v) {
        auto& list = module_at(v, 0)["instructions"].get_array();
        list.push_back(list[index_of(v, "test_scale")]);
    }, parse, "@return is not the last");
}

TEST(serialize_corrupt, crafted_literals) {
    const auto p = make_rich_program();
    const codes parse{error_code::parse};
    auto first_literal = [](value& v) -> value& { return instruction_named(v, "@literal")["literal"]; };
    expect_crafted_error(p, [&](value& v) { first_literal(v)["data"] = value::binary{"12345"}; }, parse,
                         "needs 24 bytes");
    expect_crafted_error(p, [&](value& v) { first_literal(v)["data"] = "text"; }, parse, "binary");
    expect_crafted_error(p, [&](value& v) { first_literal(v)["shape"] = "float32[6]"; }, parse, "differs");
    // Huge claimed shapes are compared with the data, never allocated.
    expect_crafted_error(p, [&](value& v) { first_literal(v)["shape"] = "float32[100000000000000]"; }, parse,
                         "needs");
    expect_crafted_error(p, [&](value& v) { first_literal(v)["shape"] = "float32[100000000, 100000000]"; }, parse,
                         "2^48");
    expect_crafted_error(p, [&](value& v) { first_literal(v)["shape"] = "float32[{1:4}, 3]"; }, parse, "static");
    expect_crafted_error(p, [&](value& v) {
        for (auto& ins : module_at(v, 0)["instructions"].get_array())
            if (ins["shape"].get_string() == "bool[2, 2]") ins["literal"]["data"] = value::binary{std::string("\1\0\2\1", 4)};
    }, parse, "neither 0 nor 1");
    expect_crafted_error(p, [](value& v) {
        v["parameter_defaults"] = value{value{{"name", "y"}, {"literal", value{{"shape", "float32[3]"},
                                                                              {"data", value::binary{std::string(12, '\0')}}}}}};
    }, parse, "does not fit");
    expect_crafted_error(p, [](value& v) {
        v["parameter_defaults"] = value{value{{"name", "nobody"}, {"literal", value{{"shape", "float32[3]"},
                                                                                   {"data", value::binary{std::string(12, '\0')}}}}}};
    }, parse, "no such parameter");
}

TEST(serialize_corrupt, crafted_program_structure) {
    const codes parse{error_code::parse};
    auto p = make_rich_program();
    expect_crafted_error(p, [](value& v) {
        value::object o;
        for (auto& [k, x] : v.get_object())
            if (k != "modules") o.emplace_back(k, x);
        v = value(std::move(o));
    }, parse, "missing key 'modules'");
    expect_crafted_error(p, [](value& v) { v["modules"] = value::make_array(); }, parse, "no modules");
    expect_crafted_error(p, [](value& v) { module_at(v, 0)["name"] = "other"; }, parse, "main");
    expect_crafted_error(p, [](value& v) { v["format_version"] = 7; }, parse, "differs from the header");
    expect_crafted_error(p, [](value& v) { v["output_names"] = value{1, 2}; }, parse, "string");
    // Control flow: a module that contains itself, directly or through main.
    auto cf = make_control_flow_program();
    expect_crafted_error(cf, [](value& v) { instruction_named(v, "test_scale", 1)["modules"] = value{"then"}; }, parse,
                         "contains itself");
    expect_crafted_error(cf, [](value& v) { instruction_named(v, "test_scale", 1)["modules"] = value{"main"}; }, parse,
                         "contains itself");
    expect_crafted_error(cf, [](value& v) { module_at(v, 2)["name"] = "then"; }, parse, "two modules");
    // Compiled state.
    p.compile(*get_target("ref"));
    expect_crafted_error(p, [](value& v) { v["compiled"]["target"] = "tpu"; }, {error_code::unsupported}, "tpu");
    expect_crafted_error(p, [](value& v) { v["compiled"]["dynamic"] = true; }, parse, "dynamic");
    expect_crafted_error(p, [](value& v) { v["compiled"]["options"]["threads"] = -2; }, parse, "threads");
    expect_crafted_error(p, [](value& v) { v["compiled"] = "yes"; }, parse, "compiled");
}

// Raw msgpack payloads that lie about sizes, nest without end or use what the
// format does not: refused by the structure check before anything is allocated.
std::vector<std::string> hostile_payloads() {
    std::vector<std::string> out;
    out.push_back(std::string(100000, '\x91') + "\xc0");  // arrays nested 100000 deep
    out.push_back(std::string("\xdd\xff\xff\xff\xff", 5) + "\xc0\xc0");
    out.push_back(std::string("\xdf\xff\xff\xff\xff", 5) + "\xc0\xc0");
    out.push_back(std::string("\xc6\xff\xff\xff\xff", 5) + "abc");
    out.push_back(std::string("\xdb\xff\xff\xff\xff", 5) + "abc");
    out.push_back(std::string("\x81\xa1k\xc7\x01\x05x", 7));  // ext
    out.push_back("\xc1");
    out.push_back(std::string("\x80\x80", 2));  // trailing object
    out.push_back(std::string("\xc0", 1));      // not a map
    // 8 MB that claim 8M - 1 array items: within msgpack-cxx's own limits (the
    // payload size), so only the remaining-bytes check stops a ~200 MB allocation.
    std::string big(8u << 20, '\xc0');
    const std::uint32_t claim = static_cast<std::uint32_t>(big.size() - 1);
    big[0] = '\xdd';
    for (int i = 0; i < 4; ++i) big[1 + i] = static_cast<char>((claim >> (24 - 8 * i)) & 0xff);
    out.push_back(big);
    return out;
}

TEST(serialize_corrupt, hostile_msgpack) {
    for (auto& payload : hostile_payloads())
        expect_load_error(kiln_file::bytes_to_file(payload, kiln_format_version, 0), {error_code::parse}, "payload");
}

// The same loads under an address-space limit: any allocation far beyond the file
// size fails there, and the child reports it.
TEST(serialize_corrupt, hostile_msgpack_allocates_little) {
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "an address-space limit does not work with the address sanitizer";
#else
    std::vector<std::string> files;
    for (auto& payload : hostile_payloads()) files.push_back(kiln_file::bytes_to_file(payload, kiln_format_version, 0));
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        long pages = 0;
        if (FILE* f = std::fopen("/proc/self/statm", "r")) {
            if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
            std::fclose(f);
        }
        if (pages == 0) ::_exit(3);
        rlimit lim{};
        lim.rlim_cur = lim.rlim_max = static_cast<rlim_t>(pages) * 4096 + (64u << 20);
        if (::setrlimit(RLIMIT_AS, &lim) != 0) ::_exit(3);
        for (auto& f : files) {
            try {
                load_buffer(f.data(), f.size());
                ::_exit(4);
            } catch (const error&) {
            } catch (...) {
                ::_exit(2);  // std::bad_alloc: something tried to allocate far too much
            }
        }
        ::_exit(0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "2: an allocation failed, 4: a hostile file loaded";
#endif
}

}  // namespace
}  // namespace kiln::test
