// A fused kernel's compute allocates nothing: its output buffer is planned, its inputs are
// given, and the interpreter keeps its working memory per thread between calls. Counted
// with a replaced global operator new (this file's only job, so no other test sees it
// change behaviour: it counts only while `counting` is set).
// The replacement pair is malloc/free on purpose; GCC cannot see that through inlining.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include "cpu_codegen_util.hpp"

#include "targets/cpu/codegen/compiler.hpp"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<bool> counting{false};
std::atomic<std::size_t> allocations{0};
}  // namespace

void* operator new(std::size_t n) {
    if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

using namespace kiln;
using namespace kiln::test;

namespace {

// LayerNorm, softmax and a GELU over x [rows, 96]: three reduction / elementwise groups whose
// inputs are all parameters, so each kernel can be called on its own.
program make_program(std::size_t rows) {
    program p;
    auto* m = p.get_main_module();
    const shape xs(type::float32, {rows, 96});
    auto x = m->add_parameter("x", xs);
    auto g = m->add_parameter("g", shape(type::float32, {96}));
    auto b = m->add_parameter("b", shape(type::float32, {96}));
    m->add_return({layer_norm(*m, x, g, b), softmax(*m, x), gelu(*m, x)});
    return p;
}

// Calls every fused kernel of `c` directly (warm-up first) and returns the allocations
// counted over the measured calls.
std::size_t allocations_in_kernels(program& c, std::size_t rows, const std::string& want_mode) {
    const param_map in = {{"x", random_arg(shape(type::float32, {rows, 96}), 1)},
                          {"g", random_arg(shape(type::float32, {96}), 2)},
                          {"b", random_arg(shape(type::float32, {96}), 3)}};
    std::size_t kernels = 0, total = 0;
    for (auto& ins : *c.get_main_module()) {
        if (ins.name() != "cpu::fused_kernel") continue;
        ++kernels;
        EXPECT_EQ(cpu::kernel_mode(ins.get_operator()), want_mode);
        std::vector<argument> args;
        for (auto arg : ins.inputs()) {
            if (arg->is_param()) args.push_back(in.at(arg->param_name()));
            else args.emplace_back(arg->get_shape());  // the output buffer
        }
        EXPECT_EQ(args.size(), ins.inputs().size());
        const auto& op = ins.get_operator();
        for (int i = 0; i < 2; ++i) op.compute(c.get_context(), ins.get_shape(), args);
        allocations = 0;
        counting = true;
        for (int i = 0; i < 3; ++i) op.compute(c.get_context(), ins.get_shape(), args);
        counting = false;
        total += allocations.load();
    }
    EXPECT_EQ(kernels, 3u) << *c.get_main_module();
    return total;
}

void check(std::size_t rows, std::size_t threads, const std::string& mode) {
    auto p = make_program(rows);
    compile_options o;
    o.threads = threads;
    p.compile(*get_target("cpu"), o);
    EXPECT_EQ(allocations_in_kernels(p, rows, mode), 0u) << mode << ", " << rows << " rows, " << threads << " threads";
}

}  // namespace

TEST(cpu_codegen_alloc, the_counter_counts) {
    // A direct call of the allocation function (not a new-expression, which the compiler
    // may elide): the hook must see it, or the tests below prove nothing.
    static void* volatile sink = nullptr;
    allocations = 0;
    counting = true;
    sink = ::operator new(64);
    counting = false;
    ::operator delete(sink);
    EXPECT_EQ(allocations.load(), 1u);
}

TEST(cpu_codegen_alloc, compiled_kernels_allocate_nothing) {
    if (!cpu::codegen::find_compiler(cpu::read_cpu_options({}))) GTEST_SKIP() << "no C++ compiler";
    scratch_cache cache;
    check(8, 1, "compiled");
    check(1024, 2, "compiled");  // large enough to run in parallel chunks
}

TEST(cpu_codegen_alloc, interpreted_kernels_allocate_nothing) {
    scratch_cache cache;
    env_override no_cxx("KILN_CXX", "/nonexistent/kiln-test-cxx");
    check(8, 1, "interpreted");
    check(1024, 2, "interpreted");
}
