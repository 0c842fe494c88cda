// Attribute reflection: an op lists its attributes once,
//
//     template <class Self, class F>
//     static void reflect(Self& self, F f) { f(self.axis, "axis"); f(self.perm, "perm"); }
//
// and printing, equality, hashing and serialization all come from that list through
// to_value() / from_value().
#pragma once
#include <kiln/errors.hpp>
#include <kiln/literal.hpp>
#include <kiln/shape.hpp>
#include <kiln/value.hpp>

#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln {

template <class T>
concept reflectable = requires(T& x) { T::reflect(x, [](auto&, const char*) {}); };

class operation;
// An op nested in another op's attributes (target wrappers): {"name", "attributes"}.
value operation_to_value(const operation& op);
operation operation_from_value(const value& v);

template <class T>
value to_value(const T& x);
template <class T>
void from_value(const value& v, T& x);

value shape_to_value(const shape& s);
shape shape_from_value(const value& v);
value literal_to_value(const literal& l);
literal literal_from_value(const value& v);

namespace detail {
template <class T> struct is_vector : std::false_type {};
template <class T, class A> struct is_vector<std::vector<T, A>> : std::true_type {};
template <class T> struct is_optional : std::false_type {};
template <class T> struct is_optional<std::optional<T>> : std::true_type {};
// Makes a call that returns the (here incomplete) operation depend on T, so it is
// checked at instantiation, when operation is complete (clang checks it earlier).
template <class T> const value& dependent(const value& v) { return v; }
}  // namespace detail

template <class T>
value to_value(const T& x) {
    if constexpr (std::is_same_v<T, value>) {
        return x;
    } else if constexpr (std::is_same_v<T, bool>) {
        return value(x);
    } else if constexpr (std::is_enum_v<T>) {
        return value(static_cast<std::int64_t>(x));
    } else if constexpr (std::is_integral_v<T> || std::is_floating_point_v<T>) {
        return value(x);
    } else if constexpr (std::is_same_v<T, std::string>) {
        return value(x);
    } else if constexpr (std::is_same_v<T, shape>) {
        return shape_to_value(x);
    } else if constexpr (std::is_same_v<T, literal>) {
        return literal_to_value(x);
    } else if constexpr (std::is_same_v<T, operation>) {
        return operation_to_value(x);
    } else if constexpr (detail::is_optional<T>::value) {
        return x ? to_value(*x) : value();
    } else if constexpr (detail::is_vector<T>::value) {
        value::array a;
        a.reserve(x.size());
        for (const auto& e : x) a.push_back(to_value(e));
        return value(std::move(a));
    } else if constexpr (reflectable<T>) {
        value v = value::make_object();
        T::reflect(x, [&](const auto& field, const char* name) { v[name] = to_value(field); });
        return v;
    } else {
        static_assert(!std::is_same_v<T, T>, "type cannot be converted to a kiln::value");
    }
}

template <class T>
void from_value(const value& v, T& x) {
    if constexpr (std::is_same_v<T, value>) {
        x = v;
    } else if constexpr (std::is_same_v<T, bool>) {
        x = v.get_bool();
    } else if constexpr (std::is_enum_v<T>) {
        // Through the underlying type, so an out-of-range number is a parse error, not a wrapped enum.
        std::underlying_type_t<T> u{};
        from_value(v, u);
        x = static_cast<T>(u);
    } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
        auto i = v.get_int64();
        if (i < static_cast<std::int64_t>(std::numeric_limits<T>::lowest()) ||
            i > static_cast<std::int64_t>(std::numeric_limits<T>::max()))
            throw_error(error_code::parse, "integer " + std::to_string(i) + " out of range");
        x = static_cast<T>(i);
    } else if constexpr (std::is_integral_v<T>) {
        auto u = v.get_uint64();
        if (u > static_cast<std::uint64_t>(std::numeric_limits<T>::max()))
            throw_error(error_code::parse, "integer " + std::to_string(u) + " out of range");
        x = static_cast<T>(u);
    } else if constexpr (std::is_floating_point_v<T>) {
        x = static_cast<T>(v.get_double());
    } else if constexpr (std::is_same_v<T, std::string>) {
        x = v.get_string();
    } else if constexpr (std::is_same_v<T, shape>) {
        x = shape_from_value(v);
    } else if constexpr (std::is_same_v<T, literal>) {
        x = literal_from_value(v);
    } else if constexpr (std::is_same_v<T, operation>) {
        x = operation_from_value(detail::dependent<T>(v));
    } else if constexpr (detail::is_optional<T>::value) {
        if (v.is_null()) {
            x.reset();
        } else {
            typename T::value_type e{};
            from_value(v, e);
            x = std::move(e);
        }
    } else if constexpr (detail::is_vector<T>::value) {
        const auto& a = v.get_array();
        x.clear();
        x.reserve(a.size());
        for (const auto& e : a) {
            typename T::value_type item{};
            from_value(e, item);
            x.push_back(std::move(item));
        }
    } else if constexpr (reflectable<T>) {
        // Missing keys keep their defaults, so old files load with new attributes.
        T::reflect(x, [&](auto& field, const char* name) {
            if (const auto* f = v.find(name)) from_value(*f, field);
        });
    } else {
        static_assert(!std::is_same_v<T, T>, "type cannot be read from a kiln::value");
    }
}

}  // namespace kiln
