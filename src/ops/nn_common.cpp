#include "ops/nn_common.hpp"

#include <algorithm>

namespace kiln::op {

std::string to_string(pad_mode m) {
    switch (m) {
        case pad_mode::explicit_pads: return "explicit";
        case pad_mode::same_upper: return "same_upper";
        case pad_mode::same_lower: return "same_lower";
    }
    return "?";
}

std::vector<std::int64_t> spatial_dims(const shape& s) {
    std::vector<std::int64_t> d;
    for (std::size_t i = 2; i < s.ndim(); ++i) d.push_back(static_cast<std::int64_t>(s.lens()[i]));
    return d;
}

std::vector<std::int64_t> same_padding(pad_mode mode, const std::vector<std::int64_t>& in,
                                       const std::vector<std::int64_t>& kernel,
                                       const std::vector<std::int64_t>& stride,
                                       const std::vector<std::int64_t>& dilation) {
    const std::size_t r = in.size();
    std::vector<std::int64_t> pads(2 * r, 0);
    for (std::size_t i = 0; i < r; ++i) {
        std::int64_t out = (in[i] + stride[i] - 1) / stride[i];
        std::int64_t total = std::max<std::int64_t>(0, (out - 1) * stride[i] + (kernel[i] - 1) * dilation[i] + 1 - in[i]);
        std::int64_t small = total / 2;
        std::int64_t big = total - small;
        pads[i] = mode == pad_mode::same_upper ? small : big;
        pads[i + r] = mode == pad_mode::same_upper ? big : small;
    }
    return pads;
}

std::int64_t window_output_size(std::int64_t in, std::int64_t kernel, std::int64_t stride, std::int64_t dilation,
                                std::int64_t pad_begin, std::int64_t pad_end, bool ceil_mode,
                                const std::string& op_name) {
    const std::int64_t eff = (kernel - 1) * dilation + 1;
    const std::int64_t span = in + pad_begin + pad_end - eff;
    if (span < 0)
        throw_error(error_code::shape, op_name + ": window of " + std::to_string(eff) +
                                           " (kernel " + std::to_string(kernel) + ", dilation " +
                                           std::to_string(dilation) + ") is larger than the padded input " +
                                           std::to_string(in + pad_begin + pad_end));
    std::int64_t out = ceil_mode ? (span + stride - 1) / stride + 1 : span / stride + 1;
    // A window starting past the input and its begin padding would only see end padding.
    if (ceil_mode && (out - 1) * stride >= in + pad_begin) --out;
    return out;
}

std::vector<std::int64_t> spatial_attr(const std::vector<std::int64_t>& v, std::size_t rank, std::int64_t fallback,
                                       const std::string& op_name, const std::string& attr_name, bool positive) {
    if (v.empty()) return std::vector<std::int64_t>(rank, fallback);
    if (v.size() != rank)
        throw_error(error_code::shape, op_name + ": " + attr_name + " has " + std::to_string(v.size()) +
                                           " values, expected " + std::to_string(rank) + " (one per spatial dimension)");
    for (auto x : v)
        if (positive ? x < 1 : x < 0)
            throw_error(error_code::shape, op_name + ": " + attr_name + " value " + std::to_string(x) +
                                               (positive ? " must be positive" : " must not be negative"));
    return v;
}

std::vector<std::int64_t> padding_attr(const std::vector<std::int64_t>& v, std::size_t rank,
                                       const std::string& op_name) {
    if (v.empty()) return std::vector<std::int64_t>(2 * rank, 0);
    if (v.size() != 2 * rank)
        throw_error(error_code::shape, op_name + ": padding has " + std::to_string(v.size()) + " values, expected " +
                                           std::to_string(2 * rank) + " (begin and end per spatial dimension)");
    return v;
}

dynamic_dimension broadcast_dim(const dynamic_dimension& a, const dynamic_dimension& b, const std::string& op_name) {
    if (a.is_fixed() && a.min == 1) return b;
    if (b.is_fixed() && b.min == 1) return a;
    if (a.is_fixed() && b.is_fixed()) {
        if (a.min != b.min)
            throw_error(error_code::shape, op_name + ": dimensions " + std::to_string(a.min) + " and " +
                                               std::to_string(b.min) + " cannot be broadcast together");
        return a;
    }
    // A fixed size other than 1 is what the dynamic one must be (or broadcast to).
    if (a.is_fixed()) return a;
    if (b.is_fixed()) return b;
    // The same symbol is the same size: nothing to broadcast.
    if (!a.symbol.empty() && a.symbol == b.symbol) {
        auto d = a;
        d.min = std::max(a.min, b.min);
        d.max = std::max(std::min(a.max, b.max), d.min);
        return d;
    }
    return {std::max(a.min, b.min), std::max(a.max, b.max), {}};
}

bool any_dynamic(const std::vector<shape>& inputs) {
    return std::any_of(inputs.begin(), inputs.end(), [](const shape& s) { return s.is_tensor() && s.dynamic(); });
}

std::vector<std::int64_t> row_major_strides(const std::vector<std::int64_t>& lens) {
    std::vector<std::int64_t> s(lens.size(), 1);
    for (std::size_t i = lens.size(); i-- > 1;) s[i - 1] = s[i] * lens[i];
    return s;
}

std::int64_t product(const std::vector<std::int64_t>& v) {
    std::int64_t p = 1;
    for (auto x : v) p *= x;
    return p;
}

std::vector<std::int64_t> to_int64(const std::vector<std::size_t>& v) {
    return std::vector<std::int64_t>(v.begin(), v.end());
}

std::vector<std::size_t> to_size(const std::vector<std::int64_t>& v) {
    return std::vector<std::size_t>(v.begin(), v.end());
}

}  // namespace kiln::op
