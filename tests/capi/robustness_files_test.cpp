// The C functions with bad files: missing, garbage, truncated and corrupted .kiln files,
// and the corpus of hostile ONNX models: a status and a message every time, never a crash.
#include <kiln/kiln.h>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "abi_list.hpp"
#include "robustness_fixture.hpp"

using namespace capi_test;

TEST_F(capi_robustness, bad_files) {
    kiln_program pr = nullptr;
    kiln_argument o = nullptr;
    auto tmp = fs::path(::testing::TempDir());
    auto missing = (tmp / "capi_no_such_file.onnx").string();
    expect_status(kiln_parse_onnx(missing.c_str(), nullptr, &pr), KILN_STATUS_IO, "kiln_parse_onnx");
    expect_status(kiln_load(missing.c_str(), nullptr, &pr), KILN_STATUS_IO, "kiln_load");
    expect_status(kiln_argument_read_tensor_proto(missing.c_str(), &o), KILN_STATUS_IO,
                  "kiln_argument_read_tensor_proto");
    auto garbage = (tmp / "capi_garbage.bin").string();
    std::ofstream(garbage, std::ios::binary) << "this is not a model, a program or a tensor";
    expect_status(kiln_load(garbage.c_str(), fopts, &pr), KILN_STATUS_PARSE, "kiln_load");
    expect_status(kiln_argument_read_tensor_proto(garbage.c_str(), &o), KILN_STATUS_PARSE,
                  "kiln_argument_read_tensor_proto");
    expect_status(kiln_parse_onnx_buffer("garbage", 7, nullptr, &pr), KILN_STATUS_PARSE, "kiln_parse_onnx_buffer");
    auto no_dir = (tmp / "capi_no_such_dir" / "x").string();
    expect_status(kiln_save(program, no_dir.c_str()), KILN_STATUS_IO, "kiln_save");
    expect_status(kiln_argument_write_tensor_proto(arg, "x", no_dir.c_str()), KILN_STATUS_IO,
                  "kiln_argument_write_tensor_proto");

    // A saved program cut short anywhere, or with a byte flipped: a status, never a crash.
    auto good = (tmp / "capi_good.kiln").string();
    ASSERT_EQ(kiln_save(program, good.c_str()), KILN_STATUS_SUCCESS) << kiln_last_error_message();
    auto bytes = read_bytes(good);
    ASSERT_GT(bytes.size(), 64u);
    auto cut = (tmp / "capi_cut.kiln").string();
    for (size_t len = 0; len < bytes.size(); len += bytes.size() / 23 + 1) {
        std::ofstream(cut, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(len));
        expect_status(kiln_load(cut.c_str(), nullptr, &pr), KILN_STATUS_PARSE, "kiln_load",
                      "(cut at " + std::to_string(len) + ")");
    }
    for (size_t at = 0; at < bytes.size(); at += bytes.size() / 31 + 1) {
        auto flipped = bytes;
        flipped[at] = static_cast<char>(flipped[at] ^ 0x5a);
        std::ofstream(cut, std::ios::binary | std::ios::trunc)
            .write(flipped.data(), static_cast<std::streamsize>(flipped.size()));
        auto st = kiln_load(cut.c_str(), nullptr, &pr);
        if (st == KILN_STATUS_SUCCESS) {
            kiln_program_destroy(pr), pr = nullptr;  // a flip in a weight is still a program
        } else {
            EXPECT_NE(std::string(kiln_last_error_message()).find("kiln_load"), std::string::npos);
        }
    }
    EXPECT_EQ(pr, nullptr);
    EXPECT_EQ(o, nullptr);
}

// tests/data/bad_models through kiln_parse_onnx and kiln_parse_onnx_buffer: the status
// expected.tsv names (the codes are the C statuses) and its words in the message.
TEST_F(capi_robustness, bad_models_corpus) {
    const fs::path dir = source_dir / "tests" / "data" / "bad_models";
    std::ifstream f(dir / "expected.tsv");
    ASSERT_TRUE(f) << dir;
    const std::pair<const char*, kiln_status> codes[] = {{"parse", KILN_STATUS_PARSE},
                                                         {"unsupported", KILN_STATUS_UNSUPPORTED},
                                                         {"shape", KILN_STATUS_SHAPE},
                                                         {"type", KILN_STATUS_TYPE},
                                                         {"io", KILN_STATUS_IO},
                                                         {"runtime", KILN_STATUS_RUNTIME},
                                                         {"out_of_memory", KILN_STATUS_OUT_OF_MEMORY},
                                                         {"invalid_argument", KILN_STATUS_INVALID_ARGUMENT},
                                                         {"ok", KILN_STATUS_SUCCESS}};
    int files = 0;
    for (std::string line; std::getline(f, line);) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream ss(line);
        std::string file, outcome, needles;
        std::getline(ss, file, '\t'), std::getline(ss, outcome, '\t'), std::getline(ss, needles);
        auto path = (dir / file).string();
        auto bytes = read_bytes(path);
        ++files;
        for (bool buffer : {false, true}) {
            kiln_program pr = nullptr;
            auto st = buffer ? kiln_parse_onnx_buffer(bytes.data(), bytes.size(), nullptr, &pr)
                             : kiln_parse_onnx(path.c_str(), nullptr, &pr);
            if (pr) kiln_program_destroy(pr);
            const char* function = buffer ? "kiln_parse_onnx_buffer" : "kiln_parse_onnx";
            // External data is found next to the file: from a buffer any status will do.
            if (outcome == "any" || (buffer && file.rfind("external", 0) == 0)) {
                if (st != KILN_STATUS_SUCCESS) {
                    EXPECT_NE(std::string(kiln_last_error_message()).find(function), std::string::npos);
                }
                continue;
            }
            for (auto& [name, code] : codes)
                if (outcome == name) expect_status(st, code, function, file);
            std::istringstream ns(needles);
            for (std::string n; st != KILN_STATUS_SUCCESS && std::getline(ns, n, '|');)
                EXPECT_NE(std::string(kiln_last_error_message()).find(n), std::string::npos) << file << ": " << n;
        }
    }
    EXPECT_GE(files, 70);
}

// Each symbol of the ABI list is called somewhere in this file.