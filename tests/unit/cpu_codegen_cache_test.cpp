// The life of a kernel library: the on-disk cache (hits, corrupt entries), the machine
// code embedded in saved programs (loading without a compiler), and loading on a CPU of
// another ISA level (regenerate, reuse older code, or interpret; never run code the CPU
// lacks). Each test uses its own cache folder.
#include "cpu_codegen_util.hpp"

#include "targets/cpu/codegen/isa.hpp"

#include <kiln/onnx.hpp>
#include <kiln/serialize.hpp>

#include <fstream>

using namespace kiln;
using namespace kiln::test;
namespace cg = kiln::cpu::codegen;

namespace {

bool have_compiler() { return cg::find_compiler(cpu::read_cpu_options({})).has_value(); }

struct model {
    program p;
    param_map in;
    std::vector<argument> want;
};

// A small transformer-ish block: layer norm, softmax, GELU.
model make_model() {
    model md;
    auto* m = md.p.get_main_module();
    const shape xs(type::float32, {2, 6, 24});
    auto x = m->add_parameter("x", xs);
    auto g = m->add_literal(literal(shape(type::float32, {24}), random_arg(shape(type::float32, {24}), 2).to_vector<float>()));
    auto y = layer_norm(*m, x, g, scalar(*m, 0.125f));
    m->add_return({gelu(*m, softmax(*m, y))});
    md.in = {{"x", random_arg(xs, 1)}};
    md.want = compiled(md.p, "ref", false).eval(md.in);
    return md;
}

void expect_runs(const program& c, const model& md, const std::string& mode) {
    for (auto& k : kernel_modes(c)) EXPECT_EQ(k, mode);
    EXPECT_FALSE(kernel_modes(c).empty());
    expect_close(c.eval(md.in)[0], md.want[0], 2e-5, 1e-3);
}

std::size_t count(std::atomic<std::size_t>& c) { return c.load(); }

}  // namespace

TEST(cpu_codegen_cache, second_compile_hits_the_cache) {
    if (!have_compiler()) GTEST_SKIP() << "no C++ compiler";
    scratch_cache cache;
    auto md = make_model();
    const auto compiles = count(cg::stats().compiles);
    { expect_runs(compiled(md.p, "cpu", true), md, "compiled"); }
    EXPECT_EQ(count(cg::stats().compiles), compiles + 1);
    EXPECT_EQ(cache.files(".so").size(), 1u);
    EXPECT_EQ(cache.files(".sum").size(), 1u);
    // The first program is gone (its library unloaded): the second compile reads the cache.
    const auto hits = count(cg::stats().cache_hits);
    { expect_runs(compiled(md.p, "cpu", true), md, "compiled"); }
    EXPECT_EQ(count(cg::stats().compiles), compiles + 1);
    EXPECT_EQ(count(cg::stats().cache_hits), hits + 1);
    // fast_math changes the source and the flags: another entry.
    { expect_runs(compiled(md.p, "cpu", false), md, "compiled"); }
    EXPECT_EQ(count(cg::stats().compiles), compiles + 2);
    EXPECT_EQ(cache.files(".so").size(), 2u);
}

TEST(cpu_codegen_cache, corrupt_entries_are_ignored_and_rebuilt) {
    if (!have_compiler()) GTEST_SKIP() << "no C++ compiler";
    scratch_cache cache;
    auto md = make_model();
    { expect_runs(compiled(md.p, "cpu", true), md, "compiled"); }
    auto so = cache.files(".so").at(0);
    // Damage the object (as a crash mid-write on another tool's part, or a bad disk would).
    {
        std::fstream f(so, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(200);
        f.write("\xde\xad\xbe\xef garbage", 12);
    }
    const auto rejects = count(cg::stats().cache_rejects);
    const auto compiles = count(cg::stats().compiles);
    { expect_runs(compiled(md.p, "cpu", true), md, "compiled"); }
    EXPECT_EQ(count(cg::stats().cache_rejects), rejects + 1);
    EXPECT_EQ(count(cg::stats().compiles), compiles + 1);
    // A truncated object, and a missing sum, are rejected the same way.
    std::filesystem::resize_file(so, 100);
    { expect_runs(compiled(md.p, "cpu", true), md, "compiled"); }
    std::filesystem::remove(cache.files(".sum").at(0));
    { expect_runs(compiled(md.p, "cpu", true), md, "compiled"); }
    EXPECT_EQ(count(cg::stats().cache_rejects), rejects + 3);
    EXPECT_EQ(count(cg::stats().compiles), compiles + 3);
    // What is in the cache now is whole again.
    const auto hits = count(cg::stats().cache_hits);
    { expect_runs(compiled(md.p, "cpu", true), md, "compiled"); }
    EXPECT_EQ(count(cg::stats().cache_hits), hits + 1);
}

TEST(cpu_codegen_cache, saved_program_runs_where_no_compiler_is) {
    if (!have_compiler()) GTEST_SKIP() << "no C++ compiler";
    auto md = make_model();
    std::string bytes;
    {
        scratch_cache cache;
        auto c = compiled(md.p, "cpu", true);
        bytes = save_buffer(c);
    }
    // Another machine of the same kind: empty cache, no compiler.
    scratch_cache cache;
    env_override no_cxx("KILN_CXX", "/nonexistent/kiln-test-cxx");
    const auto loads = count(cg::stats().embedded_loads);
    const auto compiles = count(cg::stats().compiles);
    auto loaded = load_buffer(bytes.data(), bytes.size());
    expect_runs(loaded, md, "compiled");
    EXPECT_EQ(count(cg::stats().embedded_loads), loads + 1);
    EXPECT_EQ(count(cg::stats().compiles), compiles);
    // It went through the cache folder, so the next load finds it there.
    EXPECT_EQ(cache.files(".so").size(), 1u);
    // It still carries its code, for saving again.
    std::size_t carriers = 0;
    for (auto& ins : *loaded.get_main_module())
        if (ins.name() == "cpu::fused_kernel")
            carriers += ins.get_operator().get<cpu::fused_kernel>().object.is_binary() ? 1 : 0;
    EXPECT_EQ(carriers, 1u);
}

TEST(cpu_codegen_cache, compiled_without_compiler_then_loaded_with_one) {
    if (!have_compiler()) GTEST_SKIP() << "no C++ compiler";
    auto md = make_model();
    std::string bytes;
    {
        scratch_cache cache;
        env_override no_cxx("KILN_CXX", "/nonexistent/kiln-test-cxx");
        auto c = compiled(md.p, "cpu", true);
        expect_runs(c, md, "interpreted");
        bytes = save_buffer(c);
    }
    scratch_cache cache;
    const auto compiles = count(cg::stats().compiles);
    auto loaded = load_buffer(bytes.data(), bytes.size());
    expect_runs(loaded, md, "compiled");
    EXPECT_EQ(count(cg::stats().compiles), compiles + 1);
}

TEST(cpu_codegen_cache, other_isa_levels_regenerate_reuse_or_interpret) {
#if !defined(__x86_64__)
    GTEST_SKIP() << "ISA levels are x86-64 only";
#endif
    if (!have_compiler()) GTEST_SKIP() << "no C++ compiler";
    auto md = make_model();
    // Compiled on an older machine (x86-64-v2 runs on every x86-64-v2+ CPU).
    std::string old_bytes;
    {
        scratch_cache cache;
        env_override isa("KILN_CPU_ISA", "x86-64-v2");
        auto c = compiled(md.p, "cpu", true);
        expect_runs(c, md, "compiled");
        old_bytes = save_buffer(c);
    }
    if (cg::host_isa() != "x86-64-v2") {
        // Here, with a compiler: compiled again for this CPU's level.
        {
            scratch_cache cache;
            const auto compiles = count(cg::stats().compiles);
            auto loaded = load_buffer(old_bytes.data(), old_bytes.size());
            expect_runs(loaded, md, "compiled");
            EXPECT_EQ(count(cg::stats().compiles), compiles + 1);
        }
        // Without one: the older code still runs here.
        {
            scratch_cache cache;
            env_override no_cxx("KILN_CXX", "/nonexistent/kiln-test-cxx");
            const auto loads = count(cg::stats().embedded_loads);
            auto loaded = load_buffer(old_bytes.data(), old_bytes.size());
            expect_runs(loaded, md, "compiled");
            EXPECT_EQ(count(cg::stats().embedded_loads), loads + 1);
        }
    }
    if (cg::can_run("x86-64-v4")) return;  // this CPU runs everything Kiln generates
    // Compiled for a newer machine (AVX-512): this CPU never runs that code.
    std::string new_bytes;
    {
        scratch_cache cache;
        env_override isa("KILN_CPU_ISA", "x86-64-v4");
        auto c = compiled(md.p, "cpu", true);
        expect_runs(c, md, "interpreted");
        new_bytes = save_buffer(c);
        bool carries_v4 = false;
        for (auto& ins : *c.get_main_module())
            if (ins.name() == "cpu::fused_kernel")
                carries_v4 = carries_v4 || ins.get_operator().get<cpu::fused_kernel>().object_isa == "x86-64-v4";
        EXPECT_TRUE(carries_v4);
    }
    {
        scratch_cache cache;
        env_override no_cxx("KILN_CXX", "/nonexistent/kiln-test-cxx");
        auto loaded = load_buffer(new_bytes.data(), new_bytes.size());
        expect_runs(loaded, md, "interpreted");
    }
    {
        scratch_cache cache;
        auto loaded = load_buffer(new_bytes.data(), new_bytes.size());
        expect_runs(loaded, md, "compiled");
    }
}

TEST(cpu_codegen_cache, isa_detection_is_consistent) {
    const auto& host = cg::host_isa();
    EXPECT_TRUE(cg::known_isa(host)) << host;
    EXPECT_TRUE(cg::can_run(host));
    EXPECT_FALSE(cg::can_run("x86-64-v9"));
    {
        env_override isa("KILN_CPU_ISA", "not-an-isa");
        EXPECT_EQ(cg::target_isa(cpu::read_cpu_options({})), host);
    }
    for (const auto& f : cg::compile_flags(host, true)) EXPECT_NE(f, "-march=native");
}

// A Loop whose body has elementwise work (Range spelled out by its ONNX function): the
// body's kernels join the main module's in one compiler run, and a saved program loads
// them all without a compiler.
TEST(cpu_codegen_cache, sub_modules_share_the_programs_one_compiler_run) {
    if (!have_compiler()) GTEST_SKIP() << "no C++ compiler";
    const std::string path = std::string(KILN_SHARED_DIR) +
                             "/onnx-backend-tests/node/test_range_float_type_positive_delta_expanded/model.onnx";
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path;
    auto all_modes = [](const program& p) {
        std::vector<std::string> modes;
        std::size_t in_sub_modules = 0;
        for (auto* m : p.get_modules_postorder())
            for (auto& ins : *m)
                if (ins.name() == "cpu::fused_kernel") {
                    modes.push_back(cpu::kernel_mode(ins.get_operator()));
                    in_sub_modules += m != p.get_main_module() ? 1 : 0;
                }
        EXPECT_GT(in_sub_modules, 0u);
        return modes;
    };
    auto source = parse_onnx(path);
    const std::string data = std::filesystem::path(path).parent_path().string() + "/test_data_set_0/input_";
    param_map in;
    for (const char* name : {"start", "limit", "delta"})
        in[name] = read_tensor_proto(data + std::to_string(in.size()) + ".pb");
    const auto want = compiled(source, "ref", false).eval(in);
    std::string bytes;
    {
        scratch_cache cache;
        const auto compiles = count(cg::stats().compiles);
        auto c = compiled(source, "cpu", true);
        EXPECT_EQ(count(cg::stats().compiles), compiles + 1);
        for (auto& mode : all_modes(c)) EXPECT_EQ(mode, "compiled");
        expect_close(c.eval(in)[0], want[0], 1e-6);
        bytes = save_buffer(c);
    }
    scratch_cache cache;
    env_override no_cxx("KILN_CXX", "/nonexistent/kiln-test-cxx");
    auto loaded = load_buffer(bytes.data(), bytes.size());
    for (auto& mode : all_modes(loaded)) EXPECT_EQ(mode, "compiled");
    expect_close(loaded.eval(in)[0], want[0], 1e-6);
}
