// A small dynamic value: null, bool, integers, double, string, binary, array and
// ordered object. Op attributes are converted to and from it (printing, equality,
// hashing and the .kiln format all go through it), and the C and Python APIs use it
// for options.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace kiln {

class value {
public:
    struct binary {
        std::string bytes;
        friend bool operator==(const binary&, const binary&) = default;
    };
    using array = std::vector<value>;
    using object = std::vector<std::pair<std::string, value>>;  // keeps insertion order
    enum class kind : std::uint8_t { null, boolean, int64, uint64, float64, string, binary, array, object };

    value() = default;
    value(std::nullptr_t) {}
    value(bool b) : v_(b) {}
    template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
    value(I i) {
        if constexpr (std::is_signed_v<I>) v_ = static_cast<std::int64_t>(i);
        else v_ = static_cast<std::uint64_t>(i);
    }
    value(double d) : v_(d) {}
    value(float f) : v_(static_cast<double>(f)) {}
    value(std::string s) : v_(std::move(s)) {}
    value(const char* s) : v_(std::string(s)) {}
    value(std::string_view s) : v_(std::string(s)) {}
    value(binary b) : v_(std::move(b)) {}
    value(array a) : v_(std::move(a)) {}
    value(object o) : v_(std::move(o)) {}
    // {"key", value} pairs make an object; anything else makes an array.
    value(std::initializer_list<value> items);

    static value make_array() { return value(array{}); }
    static value make_object() { return value(object{}); }

    kind get_kind() const { return static_cast<kind>(v_.index()); }
    bool is_null() const { return get_kind() == kind::null; }
    bool is_bool() const { return get_kind() == kind::boolean; }
    bool is_integer() const { return get_kind() == kind::int64 || get_kind() == kind::uint64; }
    bool is_number() const { return is_integer() || get_kind() == kind::float64; }
    bool is_string() const { return get_kind() == kind::string; }
    bool is_binary() const { return get_kind() == kind::binary; }
    bool is_array() const { return get_kind() == kind::array; }
    bool is_object() const { return get_kind() == kind::object; }

    // Checked accessors: a wrong kind throws a kiln parse error naming both kinds.
    bool get_bool() const;
    std::int64_t get_int64() const;
    std::uint64_t get_uint64() const;
    double get_double() const;  // any number
    const std::string& get_string() const;
    const binary& get_binary() const;
    const array& get_array() const;
    array& get_array();
    const object& get_object() const;
    object& get_object();

    // Object access.
    bool contains(std::string_view key) const;
    const value& at(std::string_view key) const;  // throws when missing
    const value* find(std::string_view key) const;
    value& operator[](std::string_view key);  // inserts null when missing (objects only)
    // Array and object size.
    std::size_t size() const;
    void push_back(value v);

    std::string to_string() const;  // JSON-like; binary as hex up to 32 bytes, else by length
    std::size_t hash() const;
    friend bool operator==(const value& a, const value& b);
    friend bool operator!=(const value& a, const value& b) { return !(a == b); }

private:
    std::variant<std::monostate, bool, std::int64_t, std::uint64_t, double, std::string, binary, array,
                 object>
        v_;
};

std::ostream& operator<<(std::ostream& os, const value& v);
std::string_view kind_name(value::kind k);

}  // namespace kiln
