// Ops for the .kiln tests (registered in serialize_test.cpp): attributes of every
// kind, a multi-output op, control flow with sub-modules, and an op that cannot be
// saved.
#pragma once
#include "test_ops.hpp"

#include <kiln/literal.hpp>
#include <kiln/module.hpp>
#include <kiln/operation.hpp>
#include <kiln/program.hpp>

#include <optional>

namespace kiln::test {

// out = x * alpha (+ 1 when flag); the other attributes only have to survive saving.
struct ser_attrs {
    std::int64_t axis = 0;
    std::vector<std::int64_t> perm;
    std::string mode = "none";
    bool flag = false;
    double alpha = 1.0;
    std::uint8_t small = 0;
    shape target{type::int8, {2}};
    std::optional<std::int32_t> maybe;
    std::vector<std::vector<float>> nested;
    literal bias{shape(type::float32, {2}), std::vector<float>{0.5f, -0.5f}};
    operation inner = test_scale{1.0f};
    value extra;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.axis, "axis");
        f(self.perm, "perm");
        f(self.mode, "mode");
        f(self.flag, "flag");
        f(self.alpha, "alpha");
        f(self.small, "small");
        f(self.target, "target");
        f(self.maybe, "maybe");
        f(self.nested, "nested");
        f(self.bias, "bias");
        f(self.inner, "inner");
        f(self.extra, "extra");
    }
    std::string name() const { return "ser_attrs"; }
    shape compute_shape(const std::vector<shape>& in) const {
        if (in.size() != 1) throw_error(error_code::shape, "ser_attrs: one input");
        return in[0].as_standard();
    }
    argument compute(const shape& out, const std::vector<argument>& args) const {
        argument r(out);
        auto a = args[0].to_vector<float>();
        for (std::size_t i = 0; i < a.size(); ++i)
            r.data_as<float>()[i] = a[i] * static_cast<float>(alpha) + (flag ? 1.0f : 0.0f);
        return r;
    }
};

// Two outputs: the input and its negation.
struct ser_split {
    std::string name() const { return "ser_split"; }
    shape compute_shape(const std::vector<shape>& in) const {
        if (in.size() != 1) throw_error(error_code::shape, "ser_split: one input");
        return shape::tuple({in[0].as_standard(), in[0].as_standard()});
    }
    argument compute(const shape&, const std::vector<argument>& args) const {
        auto pos = args[0].copy();
        auto neg = args[0].copy();
        for (std::size_t i = 0; i < neg.get_shape().elements(); ++i) neg.data_as<float>()[i] *= -1.0f;
        return argument::make_tuple({pos, neg});
    }
};

// if (cond) then-module(x) else else-module(x); the sub-modules take parameter "x".
struct ser_if {
    std::string name() const { return "ser_if"; }
    shape compute_shape(const std::vector<shape>& in, const std::vector<module_ref>& mods) const {
        if (in.size() != 2 || mods.size() != 2) throw_error(error_code::shape, "ser_if: (cond, x) and two modules");
        auto a = mods[0]->get_output_shapes();
        auto b = mods[1]->get_output_shapes();
        if (a.size() != 1 || a != b) throw_error(error_code::shape, "ser_if: branches differ");
        return a[0];
    }
    argument compute(const shape&, const std::vector<argument>& args, const std::vector<module_ref>& mods,
                     const run_module_fn& run) const {
        bool cond = args[0].get_int64(0) != 0;
        return run(mods[cond ? 0 : 1], {{"x", args[1]}}).at(0);
    }
};

// Its attributes cannot be read (to_value throws): saving a program with it fails.
struct ser_unsaveable {
    int x = 0;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        if constexpr (std::is_const_v<Self>) throw_error(error_code::runtime, "ser_unsaveable cannot be saved");
        f(self.x, "x");
    }
    std::string name() const { return "ser_unsaveable"; }
    shape compute_shape(const std::vector<shape>& in) const { return in.at(0); }
};

// Defined in serialize_test.cpp: a program using every kind of instruction, literal
// and attribute the tests know, and random inputs for it.
program make_rich_program();
param_map rich_inputs(unsigned seed);
program make_control_flow_program();

}  // namespace kiln::test
