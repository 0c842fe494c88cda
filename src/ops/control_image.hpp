// ImageDecoder: encoded bytes (uint8 [n]) -> uint8 [height, width, channels].
// BMP, PNM and uncompressed TIFF are read here; JPEG, PNG, WebP and JPEG 2000 go
// through the system libraries (libjpeg, libpng, libwebp, openjpeg) when Kiln was
// built with them. Decoding follows what those libraries do by default, which is
// what the ONNX reference (Pillow) does too; grayscale uses Pillow's RGB->L weights.
#pragma once
#include <kiln/operation.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::op {

enum class pixel_format : std::uint8_t { rgb, bgr, grayscale };

struct image_decoder {
    pixel_format format = pixel_format::rgb;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.format, "pixel_format"); }
    std::string name() const { return "image_decoder"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Decodes to interleaved 8-bit RGB; throws a kiln error naming the format on failure.
struct rgb_image {
    std::size_t width = 0, height = 0;
    std::vector<std::uint8_t> pixels;  // height * width * 3
};
rgb_image decode_rgb(const std::uint8_t* data, std::size_t size);

}  // namespace kiln::op
