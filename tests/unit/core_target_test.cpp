// Unit tests of the target interface: registry, ref and cpu, allocation and host <->
// target copies, offload_copy on and off (include/kiln/target.hpp, program.hpp), and
// compile options.
#include "test_ops.hpp"

#include <kiln/program.hpp>
#include <kiln/target.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

using namespace kiln;

namespace {

const shape s23(type::float32, {2, 3});

// A pretend device target: its memory is host memory tagged as device memory, and it
// counts the copies the program asks for.
struct counting_context final : context {
    compile_options opts;
    std::string target_name() const override { return "core_test_device"; }
};

struct device_target final : target {
    static inline std::atomic<int> to_target{0}, to_host{0}, allocations{0};
    static inline int last_device_id = -1;
    std::string name() const override { return "core_test_device"; }
    std::shared_ptr<context> make_context(const compile_options& opts) const override {
        auto c = std::make_shared<counting_context>();
        c->opts = opts;
        last_device_id = opts.device_id;
        return c;
    }
    std::vector<pass> get_passes(context&, const compile_options&) const override { return {}; }
    memory_location location() const override { return memory_location::device; }
    argument allocate(const shape& s, context&) const override {
        ++allocations;
        return argument(s);
    }
    argument copy_to_target(const argument& host, context&) const override {
        EXPECT_EQ(host.location(), memory_location::host);
        ++to_target;
        return host.copy();
    }
    argument copy_to_host(const argument& data, context&) const override {
        ++to_host;
        return data.copy();
    }
};

struct missing_target final : target {
    std::string name() const override { return "core_test_missing"; }
    std::string unavailable_reason() const override { return "no such device here"; }
    std::shared_ptr<context> make_context(const compile_options&) const override {
        return std::make_shared<host_context>();
    }
    std::vector<pass> get_passes(context&, const compile_options&) const override { return {}; }
};

const bool registered = [] {
    register_target(std::make_shared<device_target>());
    register_target(std::make_shared<missing_target>());
    return true;
}();

program make_prog() {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", s23);
    auto y = m->add_parameter("y", s23);
    auto a = m->add_instruction(test::test_add{}, {x, y});
    m->add_return({m->add_instruction(test::test_scale{2.0f}, {a}), a});
    return p;
}

param_map inputs() {
    argument x(s23), y(s23);
    for (int i = 0; i < 6; ++i) {
        x.data_as<float>()[i] = 0.5f + static_cast<float>(i);
        y.data_as<float>()[i] = -0.25f * static_cast<float>(i + 1);
    }
    return {{"x", x}, {"y", y}};
}

std::vector<float> expected_sum() {
    std::vector<float> v;
    for (int i = 0; i < 6; ++i) v.push_back(0.5f + static_cast<float>(i) - 0.25f * static_cast<float>(i + 1));
    return v;
}

}  // namespace

TEST(core_target, registry) {
    ASSERT_TRUE(registered);
    auto names = get_target_names();
    for (auto n : {"ref", "cpu", "core_test_device"})
        EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
    EXPECT_EQ(get_target("ref")->name(), "ref");
    EXPECT_EQ(get_target("cpu")->name(), "cpu");
    try {
        (void)get_target("no_such_target");
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::invalid_argument);
        EXPECT_NE(e.message().find("'no_such_target'"), std::string::npos);
        EXPECT_NE(e.message().find("ref"), std::string::npos);  // lists the known ones
    }
}

TEST(core_target, host_targets_use_host_memory) {
    for (auto name : {"ref", "cpu"}) {
        auto t = get_target(name);
        EXPECT_EQ(t->location(), memory_location::host) << name;
        EXPECT_EQ(t->unavailable_reason(), "") << name;
        auto ctx = t->make_context({});
        ASSERT_NE(ctx, nullptr);
        EXPECT_EQ(ctx->target_name(), name);
        auto a = t->allocate(s23, *ctx);
        EXPECT_EQ(a.get_shape(), s23);
        EXPECT_EQ(a.location(), memory_location::host);
        EXPECT_EQ(a.to_vector<float>(), std::vector<float>(6, 0.0f));
        auto in = inputs().at("x");
        // Host targets hand the same memory through (no copy needed).
        auto there = t->copy_to_target(in, *ctx);
        EXPECT_EQ(there, in);
        auto back = t->copy_to_host(there, *ctx);
        EXPECT_EQ(back, in);
        EXPECT_FALSE(t->get_passes(*ctx, {}).empty()) << name;  // lowering at least
    }
}

TEST(core_target, ref_and_cpu_agree_with_uncompiled) {
    auto reference = make_prog().eval(inputs());
    ASSERT_EQ(reference.size(), 2u);
    EXPECT_EQ(reference[1].to_vector<float>(), expected_sum());
    for (auto name : {"ref", "cpu"}) {
        auto p = make_prog();
        EXPECT_FALSE(p.is_compiled());
        EXPECT_EQ(p.target_name(), "");
        p.compile(*get_target(name));
        EXPECT_TRUE(p.is_compiled());
        EXPECT_EQ(p.target_name(), name);
        EXPECT_EQ(p.get_target()->name(), name);
        EXPECT_EQ(p.get_context().target_name(), name);
        auto r = p.eval(inputs());
        ASSERT_EQ(r.size(), 2u) << name;
        EXPECT_EQ(r[0], reference[0]) << name;
        EXPECT_EQ(r[1], reference[1]) << name;
        EXPECT_THROW(p.compile(*get_target(name)), error);  // compiled once
    }
}

TEST(core_target, compile_options_are_accepted) {
    for (auto name : {"ref", "cpu"}) {
        for (int variant = 0; variant < 4; ++variant) {
            compile_options o;
            o.device_id = variant;
            o.fast_math = variant % 2 == 0;
            o.exhaustive_tune = variant >= 2;
            o.offload_copy = variant != 1;
            auto p = make_prog();
            p.compile(*get_target(name), o);
            EXPECT_EQ(p.get_compile_options().device_id, variant);
            EXPECT_EQ(p.get_compile_options().fast_math, variant % 2 == 0);
            EXPECT_EQ(p.get_compile_options().exhaustive_tune, variant >= 2);
            auto r = p.eval(inputs());
            EXPECT_EQ(r[1].to_vector<float>(), expected_sum()) << name << " variant " << variant;
            // On a host target offload_copy changes nothing: results are host memory.
            EXPECT_EQ(r[0].location(), memory_location::host);
        }
    }
}

TEST(core_target, offload_copy_on_copies_inputs_and_outputs) {
    auto p = make_prog();
    compile_options o;
    o.offload_copy = true;
    o.device_id = 3;
    p.compile(*get_target("core_test_device"), o);
    EXPECT_EQ(device_target::last_device_id, 3);
    int t0 = device_target::to_target, h0 = device_target::to_host;
    auto r = p.eval(inputs());
    EXPECT_EQ(device_target::to_target - t0, 2);  // x and y
    EXPECT_EQ(device_target::to_host - h0, 2);    // both outputs
    EXPECT_EQ(r[1].to_vector<float>(), expected_sum());
}

TEST(core_target, offload_copy_off_passes_target_buffers_through) {
    auto p = make_prog();
    compile_options o;
    o.offload_copy = false;
    p.compile(*get_target("core_test_device"), o);
    int t0 = device_target::to_target, h0 = device_target::to_host;
    auto in = inputs();
    auto r = p.eval(in);
    EXPECT_EQ(device_target::to_target - t0, 0);
    EXPECT_EQ(device_target::to_host - h0, 0);
    EXPECT_EQ(r[1].to_vector<float>(), expected_sum());
}

TEST(core_target, unavailable_target_is_refused_with_its_reason) {
    auto p = make_prog();
    try {
        p.compile(*get_target("core_test_missing"));
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::unsupported);
        EXPECT_NE(e.message().find("core_test_missing"), std::string::npos);
        EXPECT_NE(e.message().find("no such device here"), std::string::npos);
    }
    EXPECT_FALSE(p.is_compiled());
}

TEST(core_target, memory_planning_off_has_no_arena) {
    auto p = make_prog();
    compile_options o;
    o.memory_planning = false;
    p.compile(*get_target("ref"), o);
    EXPECT_EQ(p.get_memory_usage().arena_bytes, 0u);
    auto names = p.get_parameter_names();
    EXPECT_EQ(names, (std::vector<std::string>{"x", "y"}));
    EXPECT_EQ(p.eval(inputs())[1].to_vector<float>(), expected_sum());
}

// A target module (src/core/target.cpp) that cannot be loaded: the name is known before, and
// the first get_target, from many threads at once, gives the same stand-in that says why.
TEST(core_target, a_module_that_does_not_load_becomes_a_target_that_says_why) {
    register_target_module("core_test_module", "libkiln_core_test_no_such_module.so");
    auto names = get_target_names();
    EXPECT_NE(std::find(names.begin(), names.end(), "core_test_module"), names.end());
    std::vector<std::shared_ptr<const target>> got(8);
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < got.size(); ++i) threads.emplace_back([&, i] { got[i] = get_target("core_test_module"); });
    for (auto& t : threads) t.join();
    for (const auto& t : got) EXPECT_EQ(t, got[0]);
    const auto why = got[0]->unavailable_reason();
    EXPECT_EQ(got[0]->name(), "core_test_module");
    EXPECT_NE(why.find("cannot load its module libkiln_core_test_no_such_module.so: "), std::string::npos) << why;
    EXPECT_EQ(got[0]->compile_unavailable_reason(), why);
    auto p = make_prog();
    try {
        p.compile(*got[0]);
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::unsupported);
        EXPECT_NE(e.message().find("cannot load its module"), std::string::npos) << e.message();
    }
}

// `gpu` is a known name in every build: the module when built with CUDA, else a target that
// says "built without CUDA". Naming it loads nothing until it is asked for.
TEST(core_target, gpu_is_always_a_known_name) {
    auto names = get_target_names();
    EXPECT_NE(std::find(names.begin(), names.end(), "gpu"), names.end());
}
