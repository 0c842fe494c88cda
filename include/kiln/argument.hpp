// A shape plus the memory holding its data. An argument either owns its buffer
// (shared between copies) or borrows a caller's pointer (the caller keeps it alive).
// Tuples, sequences and optionals hold sub-arguments instead of a buffer.
#pragma once
#include <kiln/errors.hpp>
#include <kiln/shape.hpp>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

// Where an argument's bytes live. Host memory is directly addressable; device
// memory belongs to a target (device_id says which device).
enum class memory_location : std::uint8_t { host, device };

class argument {
public:
    argument() = default;
    // Allocates a zero-filled buffer for `s` (strings default-constructed).
    explicit argument(const shape& s);
    // The same for a kernel that writes every element of it (a generic program's results:
    // the zeroing was 2.7% of bert_small's generic run): contents unspecified (buffers over
    // 256 KiB are not zeroed). A tensor of strings, tuples and the rest as argument(s).
    static argument for_overwrite(const shape& s);
    // Shares an existing buffer (the shared_ptr keeps it alive).
    argument(const shape& s, std::shared_ptr<char> data);
    // Borrows memory the caller owns and keeps alive while the argument is used.
    static argument borrow(const shape& s, void* data,
                           memory_location where = memory_location::host, int device_id = 0);
    // Shares a buffer that lives in `where` (a CUDA tensor taken through DLPack): the
    // shared_ptr's deleter releases it when the last view goes.
    static argument adopt(const shape& s, std::shared_ptr<char> data, memory_location where, int device_id = 0);
    static argument make_tuple(std::vector<argument> elements);
    static argument make_sequence(const shape& element, std::vector<argument> items);
    static argument make_optional(const shape& element, std::optional<argument> item);

    const shape& get_shape() const { return shape_; }
    bool empty() const { return !data_ && subs_.empty() && shape_.is_tensor() && !has_shape_; }
    char* data() const { return data_.get(); }
    template <class T>
    T* data_as() const { return reinterpret_cast<T*>(data_.get()); }
    const std::shared_ptr<char>& buffer() const { return data_; }
    memory_location location() const { return location_; }
    int device_id() const { return device_id_; }

    // Tuple elements, sequence items, or the optional's value (0 or 1 items).
    const std::vector<argument>& elements() const { return subs_; }

    // The same memory seen through another shape (a view); `offset` in bytes.
    argument view(const shape& s, std::size_t offset = 0) const;
    argument reshape(const shape& s) const { return view(s, 0); }
    // A copy in row-major (standard) layout that owns its memory.
    argument copy() const;
    // This argument if already standard, else a standard copy.
    argument contiguous() const;
    // Copies element by element into `dest` (same type and lens, any layouts).
    void copy_to(const argument& dest) const;

    // Elements in row-major order, converted to T (numeric types only, or std::string).
    template <class T>
    std::vector<T> to_vector() const;
    // Reads one element as double / int64 (any numeric type), by row-major index.
    double get_double(std::size_t i) const;
    std::int64_t get_int64(std::size_t i) const;

    // Same shape kind, type and lens, and bitwise-equal elements (NaNs equal by bits).
    friend bool operator==(const argument& a, const argument& b);
    friend bool operator!=(const argument& a, const argument& b) { return !(a == b); }
    std::string to_string(std::size_t max_elements = 8) const;

private:
    shape shape_;
    std::shared_ptr<char> data_;
    std::vector<argument> subs_;
    memory_location location_ = memory_location::host;
    int device_id_ = 0;
    bool has_shape_ = false;
};

// A typed window on a tensor's elements that respects strides.
template <class T>
struct tensor_view {
    T* data;
    shape s;
    std::size_t size() const { return s.elements(); }
    // i-th element in row-major order.
    T& operator[](std::size_t i) const { return data[s.index(i)]; }
    T& at(const std::vector<std::size_t>& idx) const { return data[s.index(idx)]; }
};

// Calls f(tensor_view<C>) with the storage type C of the argument.
template <class F>
decltype(auto) visit(const argument& a, F&& f) {
    return visit_type(a.get_shape().get_type(), [&](auto tag) -> decltype(auto) {
        using C = typename decltype(tag)::type;
        return f(tensor_view<C>{a.template data_as<C>(), a.get_shape()});
    });
}

// Allocates a 64-byte aligned, zero-filled host buffer of `bytes` bytes
// (strings: `bytes / sizeof(std::string)` default-constructed strings).
std::shared_ptr<char> allocate_buffer(type t, std::size_t count);

template <class T>
std::vector<T> argument::to_vector() const {
    std::vector<T> out;
    if (shape_.dynamic() || !shape_.is_tensor()) return out;
    const std::size_t n = shape_.elements();
    out.reserve(n);
    visit(*this, [&](auto view) {
        using C = std::remove_cv_t<std::remove_reference_t<decltype(view[0])>>;
        for (std::size_t i = 0; i < n; ++i) {
            if constexpr (std::is_same_v<T, std::string> || std::is_same_v<C, std::string>) {
                if constexpr (std::is_same_v<T, C>) out.push_back(view[i]);
                else throw_unsupported_type(shape_.get_type(), "to_vector");
            } else {
                out.push_back(convert<T>(view[i]));
            }
        }
    });
    return out;
}

}  // namespace kiln
