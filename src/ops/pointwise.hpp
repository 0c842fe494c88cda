// Pointwise (elementwise) operators: one op struct template, `pointwise<Fn>`, over a small
// functor `Fn` per operator (pointwise_unary.hpp, pointwise_binary.hpp).
//
// How the fusion pass and a code generator read a pointwise op
// ------------------------------------------------------------
//   op.name()            Fn::name: "add", "relu", "leaky_relu", "where", ... (unique per op).
//   op.to_value()        the attributes, from Fn::reflect: e.g. leaky_relu {alpha: 0.01}.
//   op.traits()          pointwise = true, commutative where it holds (add, mul, max, ...).
//   Fn::arity            number of inputs (1, 2 or 3). Inputs are NumPy-broadcast to the output
//                        lens (unless Fn::broadcast is false: equal lens required, e.g. swiglu);
//                        the output is standard layout.
//   op.apply(x[, y[, z]]) the scalar function: one output element from one element of each
//                        input. Arguments come as compute_t<S> of their storage type S
//                        (half/bfloat16/fp8 as float, int4/int2 as int, others as themselves),
//                        and the result is converted to the output storage type with
//                        convert<>. The reference compute (`pointwise<Fn>::compute`) calls
//                        exactly this function for every element, so a generated kernel that
//                        calls it (or emits the same expression in the same compute type)
//                        agrees with `ref` by construction. (Fn::on_storage: apply
//                        takes and returns storage values instead; only `where`.) Use it as
//                          auto& p = op.get<op::pointwise<op::leaky_relu_fn>>();
//                          float y = p.apply(x);
//   Fn::types            the storage types T the op accepts (a type_list).
//   Input kinds          all inputs have type T, except those in the Fn::bool_inputs bitmask
//                        (must be bool: where's condition) and those in Fn::free_inputs (any
//                        type of Fn::free_types: pow's exponent). T is the type of the first
//                        input that is neither.
//   Output type          bool when Fn::predicate (equal, less, isnan, ...), else T.
//
// Casts (convert, bitcast) and quantization are separate structs (convert.hpp,
// quantize.hpp); dropout is in dropout.hpp.
#pragma once
#include "ops/common.hpp"
#include "ops/type_list.hpp"

#include <kiln/operation.hpp>

#include <array>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace kiln::op {

// Defaults every functor inherits (a functor overrides what differs).
template <std::size_t Arity>
struct fn_base {
    static constexpr std::size_t arity = Arity;
    static constexpr bool commutative = false;
    static constexpr bool predicate = false;  // output is bool
    static constexpr bool broadcast = true;   // false: all inputs must have equal lens
    static constexpr unsigned bool_inputs = 0;
    static constexpr unsigned free_inputs = 0;
    using free_types = type_list<>;
    // true: apply takes and returns storage values (a selection such as where copies
    // elements bit for bit, whatever their type).
    static constexpr bool on_storage = false;
    template <class Self, class F>
    static void reflect(Self&, F) {}
};

// One element of storage type S as the type kernels compute in.
template <class S>
compute_t<S> load_element(const S& x) {
    return static_cast<compute_t<S>>(x);
}
// A computed value back to storage type R.
template <class R, class V>
R store_element(const V& v) {
    if constexpr (std::is_same_v<R, V>) return v;
    else return convert<R>(v);
}

template <class Fn>
struct pointwise : Fn {
    static constexpr std::size_t arity = Fn::arity;

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        Fn::reflect(self, f);
    }
    std::string name() const { return Fn::name; }
    op_traits traits() const { return {.pointwise = true, .commutative = Fn::commutative}; }

    static constexpr bool is_bool_input(std::size_t i) { return ((Fn::bool_inputs >> i) & 1u) != 0; }
    static constexpr bool is_free_input(std::size_t i) { return ((Fn::free_inputs >> i) & 1u) != 0; }
    // The input whose type is T.
    static constexpr std::size_t type_input() {
        for (std::size_t i = 0; i < arity; ++i)
            if (!is_bool_input(i) && !is_free_input(i)) return i;
        return 0;
    }
    static constexpr std::size_t free_input() {
        for (std::size_t i = 0; i < arity; ++i)
            if (is_free_input(i)) return i;
        return arity;
    }

    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& output, const std::vector<argument>& args) const;

private:
    template <std::size_t I, class T, class U>
    using input_storage = std::conditional_t<is_bool_input(I), bool, std::conditional_t<is_free_input(I), U, T>>;

    template <class T, class U, std::size_t... I>
    void run(const argument& result, const std::vector<argument>& args, std::index_sequence<I...>) const;
};

// Member definitions are out of the class so that they are not inline: each header of
// functors declares `extern template struct pointwise<...>` and one .cpp instantiates
// them, so the kernels are compiled once, not in every file that builds an op.
template <class Fn>
shape pointwise<Fn>::compute_shape(const std::vector<shape>& inputs) const {
    const std::string n = name();
    check_num_inputs(n, inputs, arity);
    for (std::size_t i = 0; i < arity; ++i)
        if (!inputs[i].is_tensor())
            throw_error(error_code::shape, n + ": input " + std::to_string(i) + " must be a tensor, got " +
                                               inputs[i].to_string());
    const type t = inputs[type_input()].get_type();
    if (!list_contains(typename Fn::types{}, t))
        throw_error(error_code::type, n + ": input " + std::to_string(type_input()) + " has element type " +
                                          std::string(type_name(t)) + ", expected one of " +
                                          list_names(typename Fn::types{}));
    std::vector<std::vector<std::size_t>> lens;
    for (std::size_t i = 0; i < arity; ++i) {
        const type ti = inputs[i].get_type();
        bool ok = is_bool_input(i)   ? ti == type::bool_
                  : is_free_input(i) ? list_contains(typename Fn::free_types{}, ti)
                                     : ti == t;
        if (!ok)
            throw_error(error_code::type,
                        n + ": input " + std::to_string(i) + " has element type " + std::string(type_name(ti)) +
                            ", expected " +
                            (is_bool_input(i)   ? std::string("bool")
                             : is_free_input(i) ? "one of " + list_names(typename Fn::free_types{})
                                                : std::string(type_name(t)) + " like input " +
                                                      std::to_string(type_input())));
        lens.push_back(inputs[i].lens());
    }
    std::vector<std::size_t> out_lens;
    if constexpr (Fn::broadcast) {
        out_lens = broadcast_lens(lens, n);
    } else {
        for (std::size_t i = 1; i < arity; ++i)
            if (lens[i] != lens[0])
                throw_error(error_code::shape, n + ": inputs must have equal shapes (no broadcasting), got " +
                                                   inputs[0].to_string() + " and " + inputs[i].to_string());
        out_lens = lens[0];
    }
    return shape(Fn::predicate ? type::bool_ : t, out_lens);
}

template <class Fn>
argument pointwise<Fn>::compute(const shape& output, const std::vector<argument>& args) const {
    argument result(output);
    visit_list(typename Fn::types{}, args[type_input()].get_shape().get_type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (free_input() < arity) {
            visit_list(typename Fn::free_types{}, args[free_input()].get_shape().get_type(), [&](auto tag2) {
                using U = typename decltype(tag2)::type;
                this->template run<T, U>(result, args, std::make_index_sequence<arity>{});
            });
        } else {
            this->template run<T, T>(result, args, std::make_index_sequence<arity>{});
        }
    });
    return result;
}

template <class Fn>
template <class T, class U, std::size_t... I>
void pointwise<Fn>::run(const argument& result, const std::vector<argument>& args, std::index_sequence<I...>) const {
    using R = std::conditional_t<Fn::predicate, bool, T>;
    const auto& lens = result.get_shape().lens();
    std::array<std::vector<std::size_t>, arity> strides{broadcast_to(args[I].get_shape(), lens).strides()...};
    auto ptrs = std::make_tuple(args[I].template data_as<const input_storage<I, T, U>>()...);
    R* dst = result.template data_as<R>();
    for_each_broadcast<arity>(lens, strides, [&](std::size_t o, const std::array<std::size_t, arity>& off) {
        if constexpr (Fn::on_storage) dst[o] = this->apply(std::get<I>(ptrs)[off[I]]...);
        else dst[o] = store_element<R>(this->apply(load_element(std::get<I>(ptrs)[off[I]])...));
    });
}

// For the functor headers: X(relu) gives `using relu_op = pointwise<relu_fn>;` and the
// extern declaration of its kernels.
#define KILN_POINTWISE_ALIAS(BASE) using BASE##_op = pointwise<BASE##_fn>;
#define KILN_POINTWISE_EXTERN(BASE) extern template struct pointwise<BASE##_fn>;

}  // namespace kiln::op
