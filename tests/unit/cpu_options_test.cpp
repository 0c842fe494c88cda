// cpu::cpu_options: each environment variable lands in its field, values a switch does not
// know leave the default, a context keeps what it read when it was made, and every field is
// listed in docs/options.md (the source tree is read at test time: KILN_SOURCE_DIR).
#include "env_override.hpp"
#include "targets/cpu/codegen/isa.hpp"
#include "targets/cpu/context.hpp"
#include "targets/cpu/cpu_features.hpp"
#include "targets/cpu/cpu_options.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

using namespace kiln;
using kiln::test::env_override;
namespace fs = std::filesystem;

namespace {

cpu::cpu_options read() { return cpu::read_cpu_options(compile_options{}); }

// An on/off switch: unset (and any other value) keeps it on; `off` turns it off.
struct flag_case {
    const char* var;
    const char* off;
    bool cpu::cpu_options::*field;
};

const std::vector<flag_case>& flags() {
    using o = cpu::cpu_options;
    static const std::vector<flag_case> t = {
        {"KILN_CPU_DNNL", "0", &o::dnnl},
        {"KILN_CPU_FUSION", "0", &o::fusion},
        {"KILN_CPU_DW_FUSION", "0", &o::dw_fusion},
        {"KILN_CPU_DW_BLOCKED", "0", &o::dw_blocked},
        {"KILN_CPU_SUM_POST_OP", "0", &o::sum_post_op},
        {"KILN_CPU_ATTENTION", "0", &o::attention},
        {"KILN_CPU_PACKED_GEMM_COPY_A", "0", &o::packed_gemm_copy_a},
        {"KILN_CPU_CONV_GEMM_STRIDED", "0", &o::conv_gemm_strided},
        {"KILN_CPU_CONV_GEMM_TINY", "0", &o::conv_gemm_tiny},
        {"KILN_CPU_CHANNEL_MUL", "dnnl", &o::channel_mul},
        {"KILN_CPU_GLOBAL_POOL", "dnnl", &o::global_pool},
        {"KILN_CPU_INPUT_REORDER", "dnnl", &o::input_reorder},
        {"KILN_CPU_SILU", "dnnl", &o::silu},
        {"KILN_CPU_SILU_MEANS", "0", &o::silu_means},
    };
    return t;
}

std::string file_text(const fs::path& p) {
    std::ifstream f(p);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

const fs::path source_dir = fs::path(KILN_SOURCE_DIR);

}  // namespace

TEST(cpu_options, on_off_switches_map_to_their_fields) {
    for (const auto& c : flags()) {
        SCOPED_TRACE(c.var);
        {
            env_override unset(c.var, nullptr);
            EXPECT_TRUE(read().*c.field);
        }
        {
            env_override off(c.var, c.off);
            EXPECT_FALSE(read().*c.field);
        }
        {
            env_override other(c.var, "1");  // anything else: the default, as before
            EXPECT_TRUE(read().*c.field);
        }
    }
}

TEST(cpu_options, choices_map_to_their_fields) {
    using namespace cpu;
    auto with = [](const char* var, const char* v) {
        env_override e(var, v);
        return read();
    };
    EXPECT_EQ(with("KILN_CPU_MAX_POOL", nullptr).max_pool, max_pool_choice::automatic);
    EXPECT_EQ(with("KILN_CPU_MAX_POOL", "dnnl").max_pool, max_pool_choice::dnnl);
    EXPECT_EQ(with("KILN_CPU_MAX_POOL", "all").max_pool, max_pool_choice::all);
    EXPECT_EQ(with("KILN_CPU_PACKED_GEMM", nullptr).packed_gemm, packed_gemm_choice::automatic);
    EXPECT_EQ(with("KILN_CPU_PACKED_GEMM", "0").packed_gemm, packed_gemm_choice::off);
    EXPECT_EQ(with("KILN_CPU_PACKED_GEMM", "all").packed_gemm, packed_gemm_choice::all);
    EXPECT_EQ(with("KILN_CPU_CONV_GEMM", nullptr).conv_gemm, conv_gemm_choice::automatic);
    EXPECT_EQ(with("KILN_CPU_CONV_GEMM", "0").conv_gemm, conv_gemm_choice::off);
    EXPECT_EQ(with("KILN_CPU_CONV_GEMM", "1x1").conv_gemm, conv_gemm_choice::pointwise);
    EXPECT_EQ(with("KILN_CPU_CONV_GEMM", "all").conv_gemm, conv_gemm_choice::all);
    EXPECT_EQ(with("KILN_CPU_CONV_GEMM", "tall").conv_gemm, conv_gemm_choice::tall);
    EXPECT_EQ(with("KILN_CPU_WINOGRAD", nullptr).winograd, winograd_choice::automatic);
    EXPECT_EQ(with("KILN_CPU_WINOGRAD", "0").winograd, winograd_choice::off);
    EXPECT_EQ(with("KILN_CPU_WINOGRAD", "2").winograd, winograd_choice::f2);
    EXPECT_EQ(with("KILN_CPU_WINOGRAD", "4").winograd, winograd_choice::f4);
    EXPECT_EQ(with("KILN_CPU_WINOGRAD", "all").winograd, winograd_choice::all);
    // Image by image: automatic is AVX-512 only (it cost ~10% on an AVX2 Zen 3); 0 and 1 decide.
    EXPECT_EQ(with("KILN_CPU_SPLIT_BATCH", nullptr).split_batch, has_avx512());
    EXPECT_EQ(with("KILN_CPU_SPLIT_BATCH", "auto").split_batch, has_avx512());
    EXPECT_FALSE(with("KILN_CPU_SPLIT_BATCH", "0").split_batch);
    EXPECT_TRUE(with("KILN_CPU_SPLIT_BATCH", "1").split_batch);
    EXPECT_EQ(with("KILN_CPU_LSTM", nullptr).lstm, lstm_choice::own);
    EXPECT_EQ(with("KILN_CPU_LSTM", "portable").lstm, lstm_choice::portable);
    EXPECT_EQ(with("KILN_CPU_LSTM", "dnnl").lstm, lstm_choice::dnnl);
    for (const char* var : {"KILN_CPU_PACKED_GEMM_ISA", "KILN_CPU_WINOGRAD_ISA", "KILN_CPU_MAX_ISA"}) {
        SCOPED_TRACE(var);
        auto cap = [&](const char* v) {
            auto o = with(var, v);
            return std::string(var) == "KILN_CPU_MAX_ISA" ? o.max_isa
                   : std::string(var) == "KILN_CPU_WINOGRAD_ISA" ? o.winograd_isa
                                                                 : o.packed_gemm_isa;
        };
        EXPECT_EQ(cap(nullptr), isa_cap::none);
        EXPECT_EQ(cap("avx2"), isa_cap::avx2);
        EXPECT_EQ(cap("generic"), isa_cap::generic);
        EXPECT_EQ(cap("avx512"), isa_cap::none);
    }
}

TEST(cpu_options, unknown_values_leave_the_default) {
    using namespace cpu;
    const cpu_options defaults;
    env_override a("KILN_CPU_WINOGRAD", "fast");
    env_override b("KILN_CPU_CONV_GEMM", "yes");
    env_override c("KILN_CPU_PACKED_GEMM", "none");
    env_override d("KILN_CPU_MAX_POOL", "0");
    env_override e("KILN_CPU_LSTM", "avx2");
    env_override f("KILN_CPU_ISA", "not-an-isa");
    const auto o = read();
    EXPECT_EQ(o.winograd, defaults.winograd);
    EXPECT_EQ(o.conv_gemm, defaults.conv_gemm);
    EXPECT_EQ(o.packed_gemm, defaults.packed_gemm);
    EXPECT_EQ(o.max_pool, defaults.max_pool);
    EXPECT_EQ(o.lstm, defaults.lstm);
    EXPECT_EQ(o.codegen_isa, "");
}

TEST(cpu_options, threads_and_fast_math) {
    env_override unset("KILN_NUM_THREADS", nullptr);
    const auto cores = read().threads;
    EXPECT_GE(cores, 1u);
    {
        env_override n("KILN_NUM_THREADS", "3");
        EXPECT_EQ(read().threads, 3u);
        compile_options opts;
        opts.threads = 5;  // the options win over the environment
        EXPECT_EQ(cpu::read_cpu_options(opts).threads, 5u);
    }
    for (const char* bad : {"0", "abc", "3x", ""}) {
        env_override n("KILN_NUM_THREADS", bad);
        EXPECT_EQ(read().threads, cores) << bad;
    }
    compile_options exact;
    exact.fast_math = false;
    EXPECT_FALSE(cpu::read_cpu_options(exact).fast_math);
    EXPECT_TRUE(read().fast_math);
}

TEST(cpu_options, code_generation_settings) {
    {
        env_override isa("KILN_CPU_ISA", "x86-64-v2");
        const std::string want = cpu::codegen::known_isa("x86-64-v2") ? "x86-64-v2" : "";  // not on other CPUs
        EXPECT_EQ(read().codegen_isa, want);
    }
    {
        env_override cxx("KILN_CXX", "/opt/cc/bin/g++-99");
        env_override path("PATH", "/a:/b");
        const auto o = read();
        EXPECT_EQ(o.cxx, "/opt/cc/bin/g++-99");
        EXPECT_EQ(o.search_path, "/a:/b");
    }
    {
        env_override cxx("KILN_CXX", nullptr);
        env_override path("PATH", nullptr);
        const auto o = read();
        EXPECT_EQ(o.cxx, "");
        EXPECT_EQ(o.search_path, "/usr/bin:/bin");
    }
    {
        env_override dir("KILN_CACHE_DIR", "/tmp/kiln-a");
        env_override xdg("XDG_CACHE_HOME", "/tmp/xdg");
        env_override home("HOME", "/tmp/home");
        EXPECT_EQ(read().cache_dir, "/tmp/kiln-a");
        env_override no_dir("KILN_CACHE_DIR", "");
        EXPECT_EQ(read().cache_dir, "/tmp/xdg/kiln");
        env_override no_xdg("XDG_CACHE_HOME", nullptr);
        EXPECT_EQ(read().cache_dir, "/tmp/home/.cache/kiln");
        env_override no_home("HOME", nullptr);
        EXPECT_EQ(read().cache_dir, "");
    }
    const std::vector<std::pair<const char*, bool>> verbosity = {
        {nullptr, false}, {"", false}, {"0", false}, {"1", true}, {"yes", true}};
    for (auto [v, on] : verbosity) {
        env_override verbose("KILN_CODEGEN_VERBOSE", v);
        EXPECT_EQ(read().codegen_verbose, on) << (v ? v : "unset");
    }
}

// A context reads the environment once, when it is made: what changes later does not
// reach the programs compiled with it.
TEST(cpu_options, a_context_keeps_what_it_read) {
    std::optional<cpu::cpu_context> ctx;
    {
        env_override off("KILN_CPU_WINOGRAD", "0");
        env_override lstm("KILN_CPU_LSTM", "portable");
        ctx.emplace(compile_options{});
    }
    env_override on("KILN_CPU_WINOGRAD", nullptr);
    env_override lstm("KILN_CPU_LSTM", nullptr);
    EXPECT_EQ(ctx->options().winograd, cpu::winograd_choice::off);
    EXPECT_EQ(ctx->options().lstm, cpu::lstm_choice::portable);
    EXPECT_EQ(cpu::cpu_context(compile_options{}).options().winograd, cpu::winograd_choice::automatic);
    // The process-wide options are read once.
    EXPECT_EQ(&cpu::process_cpu_options(), &cpu::process_cpu_options());
}

// Every field of cpu_options is listed in docs/options.md, and so is every variable the
// reader names.
TEST(cpu_options_docs, every_field_and_variable_is_listed) {
    const auto header = file_text(source_dir / "src/targets/cpu/cpu_options.hpp");
    const auto reader = file_text(source_dir / "src/targets/cpu/cpu_options.cpp");
    const auto docs = file_text(source_dir / "docs/options.md");
    ASSERT_FALSE(header.empty());
    ASSERT_FALSE(reader.empty());
    ASSERT_FALSE(docs.empty());
    const auto begin = header.find("struct cpu_options {");
    ASSERT_NE(begin, std::string::npos);
    const auto body = header.substr(begin, header.find("\n};", begin) - begin);
    // Members: "    type name = default;" or "    type name;", each after a comment line.
    const std::regex member(R"(\n(    //[^\n]*)\n    [A-Za-z_][\w:<>]*\s+([a-z_0-9]+)(\s*=[^;\n]*)?;)");
    std::size_t fields = 0;
    for (std::sregex_iterator it(body.begin(), body.end(), member), end; it != end; ++it) {
        ++fields;
        const std::string name = (*it)[2];
        EXPECT_NE(docs.find("| `" + name + "` |"), std::string::npos) << "docs/options.md does not list " << name;
    }
    // Every declaration line in the struct was matched (a field without a comment is not).
    std::size_t declarations = 0;
    const std::regex any_member(R"(\n    [A-Za-z_][\w:<>]*\s+[a-z_0-9]+(\s*=[^;\n]*)?;)");
    for (std::sregex_iterator it(body.begin(), body.end(), any_member), end; it != end; ++it) ++declarations;
    EXPECT_EQ(fields, declarations) << "a field of cpu_options has no comment";
    EXPECT_GE(fields, 25u);
    const std::regex variable(R"re("(KILN_[A-Z0-9_]+)")re");
    std::size_t variables = 0;
    for (std::sregex_iterator it(reader.begin(), reader.end(), variable), end; it != end; ++it) {
        ++variables;
        const std::string name = (*it)[1];
        EXPECT_NE(docs.find("| `" + name + "` |"), std::string::npos) << "docs/options.md does not list " << name;
    }
    EXPECT_GE(variables, 25u);
}

// Nothing in src/ reads the environment but cpu_options.cpp (the cpu target's one reader),
// gpu_options.cpp (the gpu target's) and the pass manager (core's, which must not depend on
// a target); the kernels' tests kept in src/ are not library code.
TEST(cpu_options_docs, only_the_options_read_the_environment) {
    const std::vector<std::string> allowed = {"src/targets/cpu/cpu_options.cpp", "src/targets/gpu/gpu_options.cpp",
                                              "src/core/pass_manager.cpp"};
    std::size_t files = 0;
    for (const auto& e : fs::recursive_directory_iterator(source_dir / "src")) {
        if (!e.is_regular_file()) continue;
        const auto ext = e.path().extension();
        if (ext != ".cpp" && ext != ".hpp" && ext != ".inl" && ext != ".h") continue;
        // Tests beside their kernels (kernels/<kind>/*_test.cpp) set switches for a scope.
        if (e.path().stem().string().ends_with("_test")) continue;
        ++files;
        const auto rel = fs::relative(e.path(), source_dir).generic_string();
        const auto text = file_text(e.path());
        if (text.find("getenv") == std::string::npos) continue;
        bool ok = false;
        for (const auto& a : allowed) ok = ok || rel == a;
        EXPECT_TRUE(ok) << rel << " reads the environment; add a field to cpu::cpu_options instead";
    }
    EXPECT_GT(files, 100u);
    const auto reader = file_text(source_dir / "src/targets/cpu/cpu_options.cpp");
    std::size_t calls = 0;
    for (auto at = reader.find("getenv"); at != std::string::npos; at = reader.find("getenv", at + 1)) ++calls;
    EXPECT_EQ(calls, 1u) << "cpu_options.cpp reads the environment through env() only";
}
