#include "ops/control_tensor_util.hpp"

#include <kiln/errors.hpp>

#include <algorithm>
#include <numeric>

namespace kiln::op {

namespace {
std::size_t product(const std::vector<std::size_t>& v, std::size_t from, std::size_t to) {
    std::size_t p = 1;
    for (std::size_t i = from; i < to; ++i) p *= v[i];
    return p;
}

// Copies `n` elements of type t from src[soff] to dst[doff] (both standard buffers).
void copy_elements(type t, const argument& src, std::size_t soff, const argument& dst, std::size_t doff,
                   std::size_t n) {
    if (n == 0) return;
    visit_type(t, [&](auto tag) {
        using C = typename decltype(tag)::type;
        std::copy_n(src.data_as<C>() + soff, n, dst.data_as<C>() + doff);
    });
}

void check_tensor(const argument& a, const std::string& what) {
    if (!a.get_shape().is_tensor() || a.get_shape().dynamic())
        throw_error(error_code::shape, what + ": expected a tensor, got " + a.get_shape().to_string());
}
}  // namespace

argument slice_axis(const argument& in, std::size_t axis, std::size_t start, std::size_t count) {
    check_tensor(in, "slice");
    auto a = in.contiguous();
    auto lens = a.get_shape().lens();
    if (axis >= lens.size() || start + count > lens[axis])
        throw_error(error_code::shape, "slice: range out of bounds of " + a.get_shape().to_string());
    const std::size_t outer = product(lens, 0, axis);
    const std::size_t inner = product(lens, axis + 1, lens.size());
    const std::size_t mid = lens[axis];
    lens[axis] = count;
    argument out(shape(a.get_shape().get_type(), lens));
    for (std::size_t o = 0; o < outer; ++o)
        copy_elements(a.get_shape().get_type(), a, (o * mid + start) * inner, out, o * count * inner, count * inner);
    return out;
}

argument take_axis(const argument& a, std::size_t axis, std::size_t idx) {
    auto s = slice_axis(a, axis, idx, 1);
    auto lens = s.get_shape().lens();
    lens.erase(lens.begin() + static_cast<std::ptrdiff_t>(axis));
    return s.reshape(shape(s.get_shape().get_type(), lens));
}

argument concat_axis(const std::vector<argument>& items, std::size_t axis, const std::string& what) {
    if (items.empty()) throw_error(error_code::shape, what + ": nothing to concatenate");
    std::vector<argument> parts;
    for (auto& i : items) {
        check_tensor(i, what);
        parts.push_back(i.contiguous());
    }
    const auto& first = parts[0].get_shape();
    if (axis >= first.ndim())
        throw_error(error_code::shape, what + ": axis " + std::to_string(axis) + " out of range for " + first.to_string());
    auto lens = first.lens();
    std::size_t total = 0;
    for (auto& p : parts) {
        const auto& s = p.get_shape();
        if (s.get_type() != first.get_type())
            throw_error(error_code::type, what + ": items of types " + std::string(type_name(first.get_type())) +
                                              " and " + std::string(type_name(s.get_type())));
        bool ok = s.ndim() == first.ndim();
        for (std::size_t d = 0; ok && d < s.ndim(); ++d) ok = d == axis || s.lens()[d] == lens[d];
        if (!ok)
            throw_error(error_code::shape, what + ": cannot concatenate " + first.to_string() + " and " +
                                               s.to_string() + " along axis " + std::to_string(axis));
        total += s.lens()[axis];
    }
    const std::size_t outer = product(lens, 0, axis);
    const std::size_t inner = product(lens, axis + 1, lens.size());
    lens[axis] = total;
    argument out(shape(first.get_type(), lens));
    for (std::size_t o = 0; o < outer; ++o) {
        std::size_t acc = 0;
        for (auto& p : parts) {
            const std::size_t mid = p.get_shape().lens()[axis];
            copy_elements(first.get_type(), p, o * mid * inner, out, (o * total + acc) * inner, mid * inner);
            acc += mid;
        }
    }
    return out;
}

argument stack_axis(const std::vector<argument>& items, std::size_t axis, const shape& empty_item,
                    const std::string& what) {
    if (items.empty()) {
        auto lens = empty_item.dynamic() ? std::vector<std::size_t>(empty_item.ndim(), 0) : empty_item.lens();
        if (axis > lens.size()) throw_error(error_code::shape, what + ": stacking axis out of range");
        lens.insert(lens.begin() + static_cast<std::ptrdiff_t>(axis), 0);
        return argument(shape(empty_item.get_type(), lens));
    }
    std::vector<argument> parts;
    for (auto& i : items) {
        check_tensor(i, what);
        if (i.get_shape().lens() != items[0].get_shape().lens())
            throw_error(error_code::shape, what + ": per-iteration values differ in shape (" +
                                               items[0].get_shape().to_string() + " and " + i.get_shape().to_string() +
                                               ")");
        auto lens = i.get_shape().lens();
        if (axis > lens.size()) throw_error(error_code::shape, what + ": stacking axis out of range");
        lens.insert(lens.begin() + static_cast<std::ptrdiff_t>(axis), 1);
        parts.push_back(i.contiguous().reshape(shape(i.get_shape().get_type(), lens)));
    }
    return concat_axis(parts, axis, what);
}

}  // namespace kiln::op
