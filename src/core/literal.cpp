#include <kiln/literal.hpp>

#include <functional>
#include <string_view>

namespace kiln {

literal::literal(const shape& s, const void* bytes) : data_(s) {
    if (s.get_type() == type::string) {
        auto* src = static_cast<const std::string*>(bytes);
        auto* dst = data_.data_as<std::string>();
        for (std::size_t i = 0; i < s.element_space(); ++i) dst[i] = src[i];
    } else if (s.bytes() > 0) {
        std::memcpy(data_.data(), bytes, s.bytes());
    }
}

literal::literal(const argument& a) : data_(a.contiguous()) {}

std::size_t literal::hash() const {
    std::size_t h = get_shape().hash();
    if (!get_shape().is_tensor() || get_shape().get_type() == type::string) return h;
    // Hash at most the first 4 KiB: enough to separate real constants cheaply.
    auto n = std::min<std::size_t>(get_shape().bytes(), 4096);
    return h ^ std::hash<std::string_view>{}(std::string_view(data_.data(), n));
}

}  // namespace kiln
