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
    // Equality compares lens, type and elements in row-major order, whatever the layout
    // (a literal made from bytes keeps its strides), so hash the standard form.
    if (!get_shape().is_tensor() || get_shape().get_type() == type::string || get_shape().dynamic() || !data_.data())
        return get_shape().is_tensor() && !get_shape().dynamic() ? get_shape().as_standard().hash()
                                                                 : get_shape().hash();
    const argument std_data = get_shape().standard() ? data_ : data_.copy();
    std::size_t h = std_data.get_shape().as_standard().hash();
    // Hash at most the first 4 KiB: enough to separate real constants cheaply.
    auto n = std::min<std::size_t>(std_data.get_shape().bytes(), 4096);
    return h ^ std::hash<std::string_view>{}(std::string_view(std_data.data(), n));
}

}  // namespace kiln
