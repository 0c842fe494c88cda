// An immutable tensor value: weights and constants held by @literal instructions.
#pragma once
#include <kiln/argument.hpp>
#include <kiln/errors.hpp>

#include <vector>

namespace kiln {

class literal {
public:
    literal() = default;
    // Copies `bytes` (element_space() elements of s's type, in s's layout).
    literal(const shape& s, const void* bytes);
    // Converts each value to s's element type; values are in row-major order.
    template <class T>
    literal(const shape& s, const std::vector<T>& values);
    // A scalar of T's element type.
    template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
    explicit literal(T scalar) : literal(shape(type_of<T>()), std::vector<T>{scalar}) {}
    // Takes the argument's data (made standard first when it is not).
    explicit literal(const argument& a);

    const argument& get_argument() const { return data_; }
    const shape& get_shape() const { return data_.get_shape(); }
    const char* data() const { return data_.data(); }
    bool empty() const { return data_.data() == nullptr && get_shape().is_tensor(); }
    template <class T>
    std::vector<T> to_vector() const { return data_.to_vector<T>(); }

    friend bool operator==(const literal& a, const literal& b) { return a.data_ == b.data_; }
    friend bool operator!=(const literal& a, const literal& b) { return !(a == b); }
    std::size_t hash() const;
    std::string to_string(std::size_t max_elements = 8) const { return data_.to_string(max_elements); }

private:
    argument data_;
};

template <class T>
literal::literal(const shape& s, const std::vector<T>& values) : data_(s.as_standard()) {
    if (values.size() != s.elements())
        throw_error(error_code::shape, "literal of shape " + s.to_string() + " given " +
                                           std::to_string(values.size()) + " values");
    visit(data_, [&](auto view) {
        using C = std::remove_reference_t<decltype(view[0])>;
        for (std::size_t i = 0; i < values.size(); ++i) {
            if constexpr (std::is_same_v<C, std::string> || std::is_same_v<T, std::string>) {
                if constexpr (std::is_same_v<C, T>) view[i] = values[i];
                else throw_unsupported_type(s.get_type(), "literal from these values");
            } else {
                view[i] = convert<C>(values[i]);
            }
        }
    });
}

}  // namespace kiln
