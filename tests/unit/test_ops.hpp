// Tiny ops used only by core tests, so the core is tested without the op library.
#pragma once
#include <kiln/argument.hpp>
#include <kiln/operation.hpp>

namespace kiln::test {

struct test_add {
    std::string name() const { return "test_add"; }
    op_traits traits() const { return {.pointwise = true, .commutative = true}; }
    shape compute_shape(const std::vector<shape>& in) const {
        if (in.size() != 2 || !in[0].same_lens_and_type(in[1]))
            throw_error(error_code::shape, "test_add: inputs differ");
        return in[0].as_standard();
    }
    argument compute(const shape& out, const std::vector<argument>& args) const {
        argument r(out);
        auto a = args[0].to_vector<float>();
        auto b = args[1].to_vector<float>();
        for (std::size_t i = 0; i < a.size(); ++i) r.data_as<float>()[i] = a[i] + b[i];
        return r;
    }
};

struct test_scale {
    float factor = 1.0f;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.factor, "factor"); }
    std::string name() const { return "test_scale"; }
    shape compute_shape(const std::vector<shape>& in) const {
        if (in.size() != 1) throw_error(error_code::shape, "test_scale: one input");
        return in[0].as_standard();
    }
    argument compute(const shape& out, const std::vector<argument>& args) const {
        argument r(out);
        auto a = args[0].to_vector<float>();
        for (std::size_t i = 0; i < a.size(); ++i) r.data_as<float>()[i] = a[i] * factor;
        return r;
    }
};

// A view: swaps the two dimensions of a 2-D tensor by swapping strides.
struct test_transpose {
    std::string name() const { return "test_transpose"; }
    shape compute_shape(const std::vector<shape>& in) const {
        const auto& l = in.at(0).lens();
        const auto& s = in.at(0).strides();
        return shape(in[0].get_type(), {l[1], l[0]}, {s[1], s[0]});
    }
    argument compute(const shape& out, const std::vector<argument>& args) const { return args[0].reshape(out); }
    std::ptrdiff_t output_alias(const std::vector<shape>&) const { return 0; }
};

}  // namespace kiln::test
