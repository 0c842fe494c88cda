// Helpers for .kiln round-trip tests, shared by the unit tests and (later) the
// model tests: save/load a program both ways and compare everything observable.
#pragma once
#include <kiln/program.hpp>
#include <kiln/serialize.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <unistd.h>

namespace kiln::test {

// A fresh directory removed (with its contents) at the end of the test.
struct temp_dir {
    std::filesystem::path path;
    temp_dir() {
        static int counter = 0;
        path = std::filesystem::temp_directory_path() /
               ("kiln_serialize_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
        std::filesystem::remove_all(path);
        std::filesystem::create_directories(path);
    }
    ~temp_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    std::string file(const std::string& name) const { return (path / name).string(); }
    // Names of the entries in the directory (temporary files would show here).
    std::vector<std::string> entries() const {
        std::vector<std::string> out;
        for (auto& e : std::filesystem::directory_iterator(path)) out.push_back(e.path().filename().string());
        std::sort(out.begin(), out.end());
        return out;
    }
};

inline std::string read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Everything a caller can see of a program without running it.
inline void expect_same_program(const program& a, const program& b) {
    EXPECT_EQ(a.to_string(), b.to_string());
    EXPECT_EQ(a.is_compiled(), b.is_compiled());
    EXPECT_EQ(a.target_name(), b.target_name());
    EXPECT_EQ(a.dynamic_source() != nullptr, b.dynamic_source() != nullptr);
    if (a.dynamic_source() && b.dynamic_source()) {
        EXPECT_EQ(a.dynamic_source()->to_string(), b.dynamic_source()->to_string());
    }
    const auto& oa = a.get_compile_options();
    const auto& ob = b.get_compile_options();
    EXPECT_EQ(oa.offload_copy, ob.offload_copy);
    EXPECT_EQ(oa.device_id, ob.device_id);
    EXPECT_EQ(oa.fast_math, ob.fast_math);
    EXPECT_EQ(oa.tf32, ob.tf32);
    EXPECT_EQ(oa.exhaustive_tune, ob.exhaustive_tune);
    EXPECT_EQ(oa.memory_planning, ob.memory_planning);
    EXPECT_EQ(oa.threads, ob.threads);
    EXPECT_EQ(a.get_metadata(), b.get_metadata());
    EXPECT_EQ(a.get_parameter_names(), b.get_parameter_names());
    EXPECT_EQ(a.get_parameter_shapes(), b.get_parameter_shapes());
    EXPECT_EQ(a.get_output_shapes(), b.get_output_shapes());
    EXPECT_EQ(a.get_output_names(), b.get_output_names());
    for (auto& name : a.get_main_module()->get_parameter_names()) {
        const auto* da = a.get_parameter_default(name);
        const auto* db = b.get_parameter_default(name);
        ASSERT_EQ(da == nullptr, db == nullptr) << name;
        if (da) {
            EXPECT_EQ(*da, *db) << name;
        }
    }
    auto ua = a.get_memory_usage();
    auto ub = b.get_memory_usage();
    EXPECT_EQ(ua.arena_bytes, ub.arena_bytes);
    EXPECT_EQ(ua.literal_bytes, ub.literal_bytes);
}

// Saves `p` to a file and to a buffer (the same bytes), loads both, checks they
// match `p`, and returns the copy loaded from the file.
inline program round_trip(const program& p, const temp_dir& dir, const std::string& name = "p.kiln") {
    const auto path = dir.file(name);
    save(p, path);
    auto bytes = save_buffer(p);
    EXPECT_EQ(read_bytes(path), bytes) << "save and save_buffer disagree";
    EXPECT_EQ(save_buffer(p), bytes) << "saving is not deterministic";
    program from_buffer = load_buffer(bytes.data(), bytes.size());
    program from_file = load(path);
    expect_same_program(p, from_buffer);
    expect_same_program(p, from_file);
    // Saving the loaded program gives the same file again.
    EXPECT_EQ(save_buffer(from_file), bytes);
    return from_file;
}

// The same through a temporary directory of its own.
inline program round_trip(const program& p) {
    temp_dir dir;
    return round_trip(p, dir);
}

// Bit-identical outputs (shapes, types and every element's bits).
inline void expect_same_outputs(const program& a, const program& b, const param_map& inputs) {
    auto ra = a.eval(inputs);
    auto rb = b.eval(inputs);
    ASSERT_EQ(ra.size(), rb.size());
    for (std::size_t i = 0; i < ra.size(); ++i) {
        EXPECT_EQ(ra[i].get_shape(), rb[i].get_shape()) << "output " << i;
        EXPECT_TRUE(ra[i] == rb[i]) << "output " << i << ": " << ra[i].to_string() << " vs " << rb[i].to_string();
    }
}

// Random non-zero float32 data of shape s.
inline argument random_float(const shape& s, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> mag(0.25f, 4.0f);
    std::vector<float> v(s.elements());
    for (auto& x : v) x = (gen() % 2 ? 1.0f : -1.0f) * mag(gen);
    return literal(s, v).get_argument();
}

}  // namespace kiln::test
