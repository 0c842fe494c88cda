// Test helpers for the tensor-family ops: random non-zero data, running one op inside a
// program (uncompiled and compiled for ref), row-major index arithmetic for the
// independent reference computations, and a tiny ONNX model writer (raw protobuf
// encoding, so tests need no ONNX headers).
#pragma once
#include <kiln/builtin_ops.hpp>
#include <kiln/literal.hpp>
#include <kiln/onnx.hpp>
#include <kiln/program.hpp>
#include <kiln/target.hpp>

#include <gtest/gtest.h>

#include <concepts>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace kiln::test {

inline std::size_t count(const std::vector<std::size_t>& lens) {
    std::size_t n = 1;
    for (auto d : lens) n *= d;
    return n;
}

// Row-major multi-index <-> linear index.
inline std::vector<std::size_t> unravel(std::size_t i, const std::vector<std::size_t>& lens) {
    std::vector<std::size_t> idx(lens.size());
    for (std::size_t d = lens.size(); d-- > 0;) {
        idx[d] = lens[d] == 0 ? 0 : i % lens[d];
        i = lens[d] == 0 ? 0 : i / lens[d];
    }
    return idx;
}
inline std::size_t ravel(const std::vector<std::size_t>& idx, const std::vector<std::size_t>& lens) {
    std::size_t k = 0;
    for (std::size_t d = 0; d < lens.size(); ++d) k = k * lens[d] + idx[d];
    return k;
}

inline argument make_arg(type t, const std::vector<std::size_t>& lens, const std::vector<double>& v) {
    return literal(shape(t, lens), v).get_argument();
}
inline argument make_ints(const std::vector<std::int64_t>& v) {
    return literal(shape(type::int64, {v.size()}), v).get_argument();
}

// Random non-zero values (integers for integer types), distinct with high probability.
inline std::vector<double> random_values(std::size_t n, unsigned seed, bool integer = false) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<double> dist(-9.0, 9.0);
    std::vector<double> v(n);
    for (auto& x : v) {
        do {
            x = integer ? std::round(dist(gen) * 10) : std::round(dist(gen) * 1024) / 1024;
        } while (x == 0);
    }
    return v;
}
inline argument random_arg(type t, const std::vector<std::size_t>& lens, unsigned seed) {
    return make_arg(t, lens, random_values(count(lens), seed, is_integer(t)));
}

inline std::vector<double> values(const argument& a) { return a.to_vector<double>(); }

// Builds main = op(params...) and evaluates it; `prep` may wrap each parameter (e.g.
// to feed the op a transposed view). Tuple results come back element by element.
struct op_run {
    std::vector<argument> outputs;
    std::vector<shape> output_shapes;  // the instruction's compile-time shape(s)
};
template <class Prep>
    requires std::invocable<Prep, module&, instruction_ref, std::size_t>
op_run run_op(const operation& op, const std::vector<argument>& inputs, bool compile, Prep prep,
              std::size_t n_outputs = 1) {
    program p;
    auto* m = p.get_main_module();
    std::vector<instruction_ref> args;
    param_map params;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        auto name = "in" + std::to_string(i);
        args.push_back(prep(*m, m->add_parameter(name, inputs[i].get_shape()), i));
        params[name] = inputs[i];
    }
    auto r = m->add_instruction(op, args);
    op_run out;
    std::vector<instruction_ref> rets;
    if (r->get_shape().is_tuple()) {
        for (std::size_t i = 0; i < n_outputs; ++i) rets.push_back(m->add_instruction(builtin::get_tuple_elem{i}, {r}));
    } else {
        rets.push_back(r);
    }
    for (auto x : rets) out.output_shapes.push_back(x->get_shape());
    m->add_return(rets);
    if (compile) p.compile(*get_target("ref"));
    out.outputs = p.eval(params);
    return out;
}
inline op_run run_op(const operation& op, const std::vector<argument>& inputs, bool compile = true,
                     std::size_t n_outputs = 1) {
    return run_op(op, inputs, compile, [](module&, instruction_ref x, std::size_t) { return x; }, n_outputs);
}

// Expects `a` to hold exactly `expected` (row-major) with dims `lens`.
inline void expect_values(const argument& a, const std::vector<std::size_t>& lens, const std::vector<double>& expected,
                          double tol = 0) {
    ASSERT_FALSE(a.get_shape().dynamic());
    ASSERT_EQ(a.get_shape().lens(), lens);
    auto v = values(a);
    ASSERT_EQ(v.size(), expected.size());
    for (std::size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(v[i], expected[i], tol) << "element " << i;
}

// ---- a minimal ONNX writer

namespace pb {
inline std::string varint(std::uint64_t v) {
    std::string s;
    while (v >= 0x80) {
        s.push_back(static_cast<char>((v & 0x7f) | 0x80));
        v >>= 7;
    }
    s.push_back(static_cast<char>(v));
    return s;
}
inline std::string field_varint(int field, std::uint64_t v) { return varint(static_cast<std::uint64_t>(field) << 3) + varint(v); }
inline std::string field_bytes(int field, const std::string& b) {
    return varint((static_cast<std::uint64_t>(field) << 3) | 2) + varint(b.size()) + b;
}
inline std::string field_float(int field, float f) {
    std::string s = varint((static_cast<std::uint64_t>(field) << 3) | 5);
    s.append(reinterpret_cast<const char*>(&f), 4);
    return s;
}
}  // namespace pb

struct onnx_attr {
    std::string bytes;
    static onnx_attr i(const std::string& name, std::int64_t v) {
        return {pb::field_bytes(1, name) + pb::field_varint(3, static_cast<std::uint64_t>(v)) + pb::field_varint(20, 2)};
    }
    static onnx_attr f(const std::string& name, float v) {
        return {pb::field_bytes(1, name) + pb::field_float(2, v) + pb::field_varint(20, 1)};
    }
    static onnx_attr s(const std::string& name, const std::string& v) {
        return {pb::field_bytes(1, name) + pb::field_bytes(4, v) + pb::field_varint(20, 3)};
    }
    static onnx_attr ints(const std::string& name, const std::vector<std::int64_t>& v) {
        std::string b = pb::field_bytes(1, name);
        for (auto x : v) b += pb::field_varint(8, static_cast<std::uint64_t>(x));
        return {b + pb::field_varint(20, 7)};
    }
};

// ONNX element type codes used in tests.
inline constexpr int onnx_float = 1;
inline constexpr int onnx_int64 = 7;

struct onnx_model {
    int opset = 18;
    std::string graph;

    static std::string type_proto(int elem, const std::vector<std::int64_t>& dims, bool with_shape = true) {
        std::string shape_b;
        for (auto d : dims)
            shape_b += pb::field_bytes(1, d >= 0 ? pb::field_varint(1, static_cast<std::uint64_t>(d))
                                                 : pb::field_bytes(2, "dyn"));
        std::string tensor = pb::field_varint(1, static_cast<std::uint64_t>(elem));
        if (with_shape) tensor += pb::field_bytes(2, shape_b);
        return pb::field_bytes(1, tensor);
    }
    // dims < 0 are symbolic (dim_param).
    void input(const std::string& name, int elem, const std::vector<std::int64_t>& dims) {
        graph += pb::field_bytes(11, pb::field_bytes(1, name) + pb::field_bytes(2, type_proto(elem, dims)));
    }
    void output(const std::string& name, int elem) {
        graph += pb::field_bytes(12, pb::field_bytes(1, name) + pb::field_bytes(2, type_proto(elem, {}, false)));
    }
    void initializer(const std::string& name, const std::vector<std::int64_t>& dims, const std::vector<std::int64_t>& v) {
        std::string t;
        for (auto d : dims) t += pb::field_varint(1, static_cast<std::uint64_t>(d));
        t += pb::field_varint(2, onnx_int64);
        for (auto x : v) t += pb::field_varint(7, static_cast<std::uint64_t>(x));
        t += pb::field_bytes(8, name);
        graph += pb::field_bytes(5, t);
    }
    void node(const std::string& op, const std::vector<std::string>& in, const std::vector<std::string>& out,
              const std::vector<onnx_attr>& attrs = {}) {
        std::string n;
        for (auto& i : in) n += pb::field_bytes(1, i);
        for (auto& o : out) n += pb::field_bytes(2, o);
        n += pb::field_bytes(4, op);
        for (auto& a : attrs) n += pb::field_bytes(5, a.bytes);
        graph += pb::field_bytes(1, n);
    }
    std::string bytes() const {
        std::string opset_b = pb::field_bytes(1, "") + pb::field_varint(2, static_cast<std::uint64_t>(opset));
        return pb::field_varint(1, 8) + pb::field_bytes(8, opset_b) + pb::field_bytes(7, graph + pb::field_bytes(2, "g"));
    }
    program parse(const onnx_options& o = {}) const {
        auto b = bytes();
        return parse_onnx_buffer(b.data(), b.size(), o);
    }
};

// Names of the ops in a module, in order (parameters, literals and @return excluded).
inline std::vector<std::string> op_names(const module& m) {
    std::vector<std::string> names;
    for (auto& ins : m)
        if (!ins.is_param() && !ins.is_literal() && !ins.is_return()) names.push_back(ins.name());
    return names;
}

}  // namespace kiln::test
