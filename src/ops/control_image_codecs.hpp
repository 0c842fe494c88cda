// The image formats decoded through system libraries. Each throws an `unsupported`
// kiln error when Kiln was built without that library.
#pragma once
#include "ops/control_image.hpp"

namespace kiln::op {

rgb_image decode_jpeg(const std::uint8_t* data, std::size_t size);
rgb_image decode_png(const std::uint8_t* data, std::size_t size);
rgb_image decode_webp(const std::uint8_t* data, std::size_t size);
rgb_image decode_jpeg2000(const std::uint8_t* data, std::size_t size);

}  // namespace kiln::op
