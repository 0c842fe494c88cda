// Corrupt and hostile ONNX models (tests/data/bad_models, written by
// tests/data/make_bad_models.py) give a kiln::error with the expected code and a message
// naming what is wrong; never a crash, a hang, or an allocation the file does not justify.
#include "../../fuzz/onnx_fuzz_driver.hpp"
#include "tensor_test_util.hpp"

#include <kiln/errors.hpp>
#include <kiln/onnx.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <sstream>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace kiln::test {
namespace {

namespace fs = std::filesystem;

const fs::path corpus_dir = fs::path(KILN_SOURCE_DIR) / "tests" / "data" / "bad_models";

struct bad_case {
    std::string file;
    std::string outcome;  // an error code name, "any" or "ok"
    std::vector<std::string> needles;
};

std::vector<bad_case> read_cases() {
    std::ifstream f(corpus_dir / "expected.tsv");
    std::vector<bad_case> out;
    std::string line;
    while (std::getline(f, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream ss(line);
        bad_case c;
        std::string needles;
        std::getline(ss, c.file, '\t');
        std::getline(ss, c.outcome, '\t');
        std::getline(ss, needles);
        std::istringstream ns(needles);
        for (std::string n; std::getline(ns, n, '|');)
            if (!n.empty()) c.needles.push_back(n);
        out.push_back(c);
    }
    return out;
}

std::string read_bytes(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::optional<error_code> code_named(const std::string& name) {
    static const std::pair<const char*, error_code> names[] = {
        {"parse", error_code::parse},   {"unsupported", error_code::unsupported},
        {"shape", error_code::shape},   {"type", error_code::type},
        {"io", error_code::io},         {"runtime", error_code::runtime},
        {"out_of_memory", error_code::out_of_memory}, {"invalid_argument", error_code::invalid_argument}};
    for (auto& [n, c] : names)
        if (name == n) return c;
    return std::nullopt;
}

TEST(onnx_bad_models, corpus_lists_every_file) {
    auto cases = read_cases();
    ASSERT_GE(cases.size(), 70u) << "run tests/data/make_bad_models.py";
    std::set<std::string> listed;
    for (auto& c : cases) {
        listed.insert(c.file);
        EXPECT_TRUE(fs::exists(corpus_dir / c.file)) << c.file;
        EXPECT_TRUE(c.outcome == "any" || c.outcome == "ok" || code_named(c.outcome)) << c.file << ": " << c.outcome;
        if (code_named(c.outcome)) {
            EXPECT_FALSE(c.needles.empty()) << c.file;
        }
    }
    std::uintmax_t bytes = 0;
    for (auto& e : fs::directory_iterator(corpus_dir)) {
        bytes += e.file_size();
        auto name = e.path().filename().string();
        if (e.path().extension() == ".onnx") {
            EXPECT_TRUE(listed.count(name)) << name << " is not in expected.tsv";
        }
    }
    EXPECT_LT(bytes, 256u * 1024) << "keep the corpus small";
}

// Each file through parse_onnx (external data resolves next to it): the expected code,
// every needle in the message, and quickly.
TEST(onnx_bad_models, each_file_gives_its_error) {
    for (auto& c : read_cases()) {
        SCOPED_TRACE(c.file);
        auto start = std::chrono::steady_clock::now();
        try {
            auto p = parse_onnx((corpus_dir / c.file).string());
            EXPECT_TRUE(c.outcome == "ok" || c.outcome == "any") << "parsed, expected " << c.outcome;
        } catch (const error& e) {
            EXPECT_NE(c.outcome, "ok") << e.what();
            if (auto code = code_named(c.outcome)) {
                EXPECT_EQ(error_code_name(e.code()), error_code_name(*code)) << e.what();
            }
            for (auto& n : c.needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << n << " in " << e.what();
            EXPECT_NE(std::string(e.what()).find(c.file), std::string::npos) << "the message names the file";
        } catch (const std::exception& e) {
            ADD_FAILURE() << "not a kiln::error: " << e.what();
        }
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        EXPECT_LT(s, 10.0) << "parsing took " << s << " s";
    }
}

// From memory the same codes, except where external data needs the model's folder.
TEST(onnx_bad_models, buffers_give_the_same_errors) {
    for (auto& c : read_cases()) {
        if (c.file.rfind("external_", 0) == 0) continue;
        SCOPED_TRACE(c.file);
        auto bytes = read_bytes(corpus_dir / c.file);
        try {
            parse_onnx_buffer(bytes.data(), bytes.size());
            EXPECT_TRUE(c.outcome == "ok" || c.outcome == "any");
        } catch (const error& e) {
            if (auto code = code_named(c.outcome)) {
                EXPECT_EQ(e.code(), *code) << e.what();
            }
            for (auto& n : c.needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
        }
    }
}

// The model the truncations and flips start from runs and computes
// y = softmax((cond ? relu(x + w) : -(x + w)) * k, axis 1).
TEST(onnx_bad_models, base_model_computes) {
    auto p = parse_onnx((corpus_dir / "valid_base.onnx").string());
    p.compile(*get_target("ref"));
    const std::vector<double> w{0.5, -1.0, 2.0, 0.25, 3.0, -0.75}, k{1.0, 2.0, 3.0};
    auto x = random_arg(type::float32, {2, 3}, 901);
    auto xv = values(x);
    for (bool cond : {true, false}) {
        auto r = p.eval({{"x", x}, {"cond", literal(shape(type::bool_), std::vector<int>{cond ? 1 : 0}).get_argument()}});
        std::vector<double> expected(6);
        for (int row = 0; row < 2; ++row) {
            double v[3], sum = 0;
            for (int j = 0; j < 3; ++j) {
                double s = xv[row * 3 + j] + w[row * 3 + j];
                v[j] = (cond ? std::max(s, 0.0) : -s) * k[j];
            }
            double mx = std::max({v[0], v[1], v[2]});
            for (double& e : v) sum += (e = std::exp(e - mx));
            for (int j = 0; j < 3; ++j) expected[row * 3 + j] = v[j] / sum;
        }
        expect_values(r.at(0), {2, 3}, expected, 1e-6);
    }
}

// A declared 2^40-element input is only a claim: parsing and compiling allocate
// nothing for it, and a run with another shape is refused, naming the input.
TEST(onnx_bad_models, huge_input_is_declared_not_allocated) {
    auto p = parse_onnx((corpus_dir / "huge_input.onnx").string());
    EXPECT_EQ(p.get_parameter_shapes().at("x").elements(), std::size_t{1} << 40);
    p.compile(*get_target("ref"));
    try {
        p.eval({{"x", random_arg(type::float32, {2, 3}, 902)}});
        ADD_FAILURE() << "ran with a 2x3 input";
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("'x'"), std::string::npos) << e.what();
    }
}

// Cut at every byte: a kiln::error, or (on a field boundary) a model that parses.
TEST(onnx_bad_models, every_truncation_of_the_base_model) {
    auto base = read_bytes(corpus_dir / "valid_base.onnx");
    int refused = 0;
    for (std::size_t cut = 0; cut < base.size(); ++cut) {
        auto out = fuzz::run_onnx_bytes(base.data(), cut);
        refused += out.parsed ? 0 : 1;
    }
    EXPECT_GT(refused, static_cast<int>(base.size()) * 3 / 4);
}

TEST(onnx_bad_models, random_byte_flips_of_the_base_model) {
    auto base = read_bytes(corpus_dir / "valid_base.onnx");
    std::mt19937 gen(4242);
    int parsed = 0, ran = 0;
    for (int attempt = 0; attempt < 3000; ++attempt) {
        auto bytes = base;
        int flips = 1 + static_cast<int>(gen() % 4);
        for (int f = 0; f < flips; ++f) bytes[gen() % bytes.size()] ^= static_cast<char>(1 + gen() % 255);
        auto out = fuzz::run_onnx_bytes(bytes.data(), bytes.size());
        parsed += out.parsed;
        ran += out.ran;
    }
    EXPECT_GT(parsed, 0);
    EXPECT_LT(parsed, 3000);
    std::cout << "byte flips: " << parsed << " of 3000 parsed, " << ran << " ran\n";
}

// A chain of 50,000 nodes: no recursion in the parser (or in folding) as deep as the graph.
TEST(onnx_bad_models, long_chain_of_nodes) {
    onnx_model m;
    m.opset = 13;
    m.input("x", onnx_float, {2, 3});
    const int n = 50000;
    for (int i = 0; i < n; ++i)
        m.node("Neg", {i == 0 ? "x" : "t" + std::to_string(i - 1)}, {i == n - 1 ? "y" : "t" + std::to_string(i)});
    m.output("y", onnx_float);
    auto p = m.parse();
    p.compile(*get_target("ref"));
    auto x = random_arg(type::float32, {2, 3}, 903);
    expect_values(p.eval({{"x", x}}).at(0), {2, 3}, values(x));  // an even number of negations
}

// Runs `body` in a child process with a wall-clock alarm and, when `limit_memory`, an
// address-space limit of what the process already maps plus 256 MB. The child's exit
// status: 0 ok, 2 a non-kiln exception, 3 setup failed, 5 out-of-memory kiln error.
int run_in_child(const std::function<int()>& body, bool limit_memory, unsigned seconds) {
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        ::alarm(seconds);
        if (limit_memory) {
            long pages = 0;
            if (FILE* f = std::fopen("/proc/self/statm", "r")) {
                if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
                std::fclose(f);
            }
            if (pages == 0) ::_exit(3);
            rlimit lim{};
            lim.rlim_cur = lim.rlim_max = static_cast<rlim_t>(pages) * 4096 + (256u << 20);
            if (::setrlimit(RLIMIT_AS, &lim) != 0) ::_exit(3);
        }
        int rc = 0;
        try {
            rc = body();
        } catch (...) {
            rc = 2;
        }
        std::fflush(nullptr);
        ::_exit(rc);
    }
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid) return -1;
    if (WIFSIGNALED(status)) return 100 + WTERMSIG(status);  // 114: SIGALRM, a hang
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Every corpus file, truncation and flip again, under the address-space limit: an
// allocation far beyond the file fails there (std::bad_alloc, or an out-of-memory
// kiln::error), and the child reports it.
TEST(onnx_bad_models, allocations_stay_within_what_the_file_holds) {
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "an address-space limit does not work with the address sanitizer";
#else
    auto cases = read_cases();
    auto base = read_bytes(corpus_dir / "valid_base.onnx");
    int rc = run_in_child([&] {
        // The driver's own cap on each buffer (kiln::allocation_limit) refusing a big but
        // valid tensor is not a failure to allocate: it is the bound this test checks for.
        auto check = [](const fuzz::outcome& o, const std::string& what) {
            if (o.error.find(std::string(error_code_name(error_code::out_of_memory))) == 0 &&
                o.error.find("allocation limit") == std::string::npos) {
                std::fprintf(stderr, "%s: %s\n", what.c_str(), o.error.c_str());
                ::_exit(5);
            }
        };
        for (auto& c : cases) {
            fuzz::outcome o;
            try {
                auto p = parse_onnx((corpus_dir / c.file).string(), fuzz::fuzz_options());
                o.parsed = true;
                fuzz::compile_and_run(p, o);
            } catch (const error& e) {
                o.error = e.what();
            } catch (const std::bad_alloc&) {
                std::fprintf(stderr, "%s: std::bad_alloc\n", c.file.c_str());
                return 2;
            }
            check(o, c.file);
        }
        for (std::size_t cut = 0; cut < base.size(); ++cut)
            check(fuzz::run_onnx_bytes(base.data(), cut), "cut at " + std::to_string(cut));
        std::mt19937 gen(99);
        for (int attempt = 0; attempt < 500; ++attempt) {
            auto bytes = base;
            for (int f = 0; f < 3; ++f) bytes[gen() % bytes.size()] ^= static_cast<char>(1 + gen() % 255);
            check(fuzz::run_onnx_bytes(bytes.data(), bytes.size()), "flip attempt " + std::to_string(attempt));
        }
        return 0;
    }, true, 600);
    EXPECT_EQ(rc, 0) << "2: a non-kiln exception (std::bad_alloc), 5: an out-of-memory error, 114: timed out";
#endif
}

// External data named after a FIFO: refused as not a regular file, without blocking
// in open() (the child's alarm catches a hang).
TEST(onnx_bad_models, external_data_fifo_does_not_block) {
    auto dir = fs::temp_directory_path() / ("kiln_bad_models_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    fs::copy_file(corpus_dir / "external_fifo.onnx", dir / "model.onnx", fs::copy_options::overwrite_existing);
    ASSERT_EQ(::mkfifo((dir / "weights.fifo").c_str(), 0600), 0);
    int rc = run_in_child([&] {
        try {
            parse_onnx((dir / "model.onnx").string());
        } catch (const error& e) {
            bool ok = e.code() == error_code::io && std::string(e.what()).find("not a regular file") != std::string::npos;
            if (!ok) std::fprintf(stderr, "%s\n", e.what());
            return ok ? 0 : 4;
        }
        return 4;
    }, false, 60);
    EXPECT_EQ(rc, 0) << "4: wrong or no error, 114: blocked on the FIFO";
    // The model itself a FIFO or a folder, or missing.
    ASSERT_EQ(::mkfifo((dir / "model.fifo").c_str(), 0600), 0);
    for (const auto& path : {dir / "model.fifo", dir, dir / "missing.onnx"}) {
        rc = run_in_child([&] {
            try {
                parse_onnx(path.string());
            } catch (const error& e) {
                return e.code() == error_code::io && std::string(e.what()).find(path.string()) != std::string::npos ? 0 : 4;
            }
            return 4;
        }, false, 60);
        EXPECT_EQ(rc, 0) << path;
    }
    fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::test
