#include "ops/control_image.hpp"

#include "ops/common.hpp"
#include "ops/control_image_codecs.hpp"

#include <kiln/register_op.hpp>

#include <cctype>
#include <cstring>

namespace kiln::op {

namespace {

[[noreturn]] void bad(const std::string& format, const std::string& why) {
    throw_error(error_code::invalid_argument, "image_decoder: " + format + ": " + why);
}

std::uint32_t le32(const std::uint8_t* p) { return p[0] | (p[1] << 8) | (p[2] << 16) | (std::uint32_t(p[3]) << 24); }
std::uint16_t le16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] | (p[1] << 8)); }

// Uncompressed BMP: 24/32-bit, or 8-bit with a palette; rows bottom-up unless the
// height is negative.
rgb_image decode_bmp(const std::uint8_t* d, std::size_t n) {
    if (n < 54) bad("BMP", "truncated header");
    const std::uint32_t offset = le32(d + 10), dib = le32(d + 14);
    const auto w = static_cast<std::int32_t>(le32(d + 18)), h = static_cast<std::int32_t>(le32(d + 22));
    const std::uint16_t bpp = le16(d + 28);
    const std::uint32_t compression = le32(d + 30);
    if (compression != 0) bad("BMP", "compressed bitmaps are not supported");
    if (w <= 0 || h == 0) bad("BMP", "bad dimensions");
    if (bpp != 24 && bpp != 32 && bpp != 8) bad("BMP", std::to_string(bpp) + " bits per pixel is not supported");
    rgb_image img;
    img.width = static_cast<std::size_t>(w);
    img.height = static_cast<std::size_t>(h < 0 ? -h : h);
    const std::size_t stride = (img.width * bpp / 8 + 3) / 4 * 4;
    if (offset + stride * img.height > n) bad("BMP", "truncated pixel data");
    const std::uint8_t* palette = d + 14 + dib;
    img.pixels.resize(img.width * img.height * 3);
    for (std::size_t y = 0; y < img.height; ++y) {
        const std::size_t src_row = h < 0 ? y : img.height - 1 - y;
        const std::uint8_t* row = d + offset + src_row * stride;
        for (std::size_t x = 0; x < img.width; ++x) {
            const std::uint8_t* px = bpp == 8 ? palette + 4 * row[x] : row + x * (bpp / 8);
            std::uint8_t* out = img.pixels.data() + (y * img.width + x) * 3;
            out[0] = px[2];
            out[1] = px[1];
            out[2] = px[0];
        }
    }
    return img;
}

// Binary PNM: P6 (RGB) and P5 (gray), 8-bit.
rgb_image decode_pnm(const std::uint8_t* d, std::size_t n) {
    std::size_t at = 2;
    auto token = [&]() -> long {
        while (at < n && (std::isspace(d[at]) || d[at] == '#')) {
            if (d[at] == '#')
                while (at < n && d[at] != '\n') ++at;
            else
                ++at;
        }
        long v = 0;
        bool any = false;
        while (at < n && std::isdigit(d[at])) {
            v = v * 10 + (d[at++] - '0');
            any = true;
        }
        if (!any) bad("PNM", "bad header");
        return v;
    };
    const bool color = d[1] == '6';
    long w = token(), h = token(), maxval = token();
    ++at;  // the single whitespace before the pixels
    if (w <= 0 || h <= 0 || maxval <= 0 || maxval > 255) bad("PNM", "only 8-bit images are supported");
    rgb_image img;
    img.width = static_cast<std::size_t>(w);
    img.height = static_cast<std::size_t>(h);
    const std::size_t ch = color ? 3 : 1;
    if (at + img.width * img.height * ch > n) bad("PNM", "truncated pixel data");
    img.pixels.resize(img.width * img.height * 3);
    for (std::size_t i = 0; i < img.width * img.height; ++i)
        for (std::size_t c = 0; c < 3; ++c) img.pixels[i * 3 + c] = d[at + i * ch + (color ? c : 0)];
    return img;
}

// Baseline uncompressed TIFF, 8-bit RGB(A) or gray, chunky, in strips.
rgb_image decode_tiff(const std::uint8_t* d, std::size_t n) {
    if (n < 8) bad("TIFF", "truncated header");
    const bool big = d[0] == 'M';
    auto u16 = [&](std::size_t o) -> std::uint32_t {
        if (o + 2 > n) bad("TIFF", "truncated");
        return big ? (d[o] << 8 | d[o + 1]) : (d[o] | d[o + 1] << 8);
    };
    auto u32 = [&](std::size_t o) -> std::uint32_t {
        if (o + 4 > n) bad("TIFF", "truncated");
        return big ? (std::uint32_t(d[o]) << 24 | d[o + 1] << 16 | d[o + 2] << 8 | d[o + 3])
                   : (d[o] | d[o + 1] << 8 | d[o + 2] << 16 | std::uint32_t(d[o + 3]) << 24);
    };
    std::size_t ifd = u32(4);
    const std::size_t entries = u16(ifd);
    std::uint32_t width = 0, height = 0, compression = 1, spp = 1, planar = 1, bits = 8, rows_per_strip = 0;
    std::vector<std::uint32_t> offsets, counts;
    // All values of a tag (inline when they fit in 4 bytes).
    auto values = [&](std::size_t e) {
        const std::uint32_t type = u16(e + 2), count = u32(e + 4);
        const std::size_t size = type == 3 ? 2 : 4;
        std::size_t where = count * size <= 4 ? e + 8 : u32(e + 8);
        std::vector<std::uint32_t> out;
        for (std::uint32_t i = 0; i < count; ++i) out.push_back(size == 2 ? u16(where + i * 2) : u32(where + i * 4));
        return out;
    };
    for (std::size_t i = 0; i < entries; ++i) {
        const std::size_t e = ifd + 2 + i * 12;
        auto v = values(e);
        if (v.empty()) continue;
        switch (u16(e)) {
            case 256: width = v[0]; break;
            case 257: height = v[0]; break;
            case 258: bits = v[0]; break;
            case 259: compression = v[0]; break;
            case 273: offsets = v; break;
            case 277: spp = v[0]; break;
            case 278: rows_per_strip = v[0]; break;
            case 279: counts = v; break;
            case 284: planar = v[0]; break;
            default: break;
        }
    }
    (void)rows_per_strip;
    if (compression != 1) bad("TIFF", "compressed TIFF is not supported");
    if (bits != 8 || planar != 1 || (spp != 1 && spp != 3 && spp != 4))
        bad("TIFF", "only 8-bit chunky gray, RGB or RGBA images are supported");
    std::vector<std::uint8_t> raw;
    for (std::size_t s = 0; s < offsets.size() && s < counts.size(); ++s) {
        if (std::size_t(offsets[s]) + counts[s] > n) bad("TIFF", "truncated strip");
        raw.insert(raw.end(), d + offsets[s], d + offsets[s] + counts[s]);
    }
    rgb_image img;
    img.width = width;
    img.height = height;
    if (raw.size() < img.width * img.height * spp) bad("TIFF", "not enough pixel data");
    img.pixels.resize(img.width * img.height * 3);
    for (std::size_t i = 0; i < img.width * img.height; ++i)
        for (std::size_t c = 0; c < 3; ++c) img.pixels[i * 3 + c] = raw[i * spp + (spp == 1 ? 0 : c)];
    return img;
}

bool starts_with(const std::uint8_t* d, std::size_t n, const char* magic, std::size_t m, std::size_t at = 0) {
    return n >= at + m && std::memcmp(d + at, magic, m) == 0;
}

}  // namespace

rgb_image decode_rgb(const std::uint8_t* d, std::size_t n) {
    if (starts_with(d, n, "BM", 2)) return decode_bmp(d, n);
    if (starts_with(d, n, "P6", 2) || starts_with(d, n, "P5", 2)) return decode_pnm(d, n);
    if (starts_with(d, n, "II*\0", 4) || starts_with(d, n, "MM\0*", 4)) return decode_tiff(d, n);
    if (starts_with(d, n, "\xff\xd8\xff", 3)) return decode_jpeg(d, n);
    if (starts_with(d, n, "\x89PNG", 4)) return decode_png(d, n);
    if (starts_with(d, n, "RIFF", 4) && starts_with(d, n, "WEBP", 4, 8)) return decode_webp(d, n);
    if (starts_with(d, n, "\0\0\0\x0cjP  ", 8) || starts_with(d, n, "\xff\x4f\xff\x51", 4)) return decode_jpeg2000(d, n);
    throw_error(error_code::unsupported, "image_decoder: unknown image format");
}

shape image_decoder::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs("image_decoder", inputs, 1);
    if (inputs[0].get_type() != type::uint8 || inputs[0].ndim() != 1)
        throw_error(error_code::type, "image_decoder: input must be 1-D uint8 bytes, got " + inputs[0].to_string());
    std::size_t c = format == pixel_format::grayscale ? 1 : 3;
    return shape::make_dynamic(type::uint8, {{0, dynamic_dimension::unbounded, {}},
                                             {0, dynamic_dimension::unbounded, {}},
                                             {c, c, {}}});
}

argument image_decoder::compute(const shape&, const std::vector<argument>& args) const {
    auto bytes = args[0].contiguous();
    auto img = decode_rgb(bytes.data_as<std::uint8_t>(), bytes.get_shape().elements());
    const std::size_t px = img.width * img.height;
    const std::size_t c = format == pixel_format::grayscale ? 1 : 3;
    argument out(shape(type::uint8, {img.height, img.width, c}));
    auto* o = out.data_as<std::uint8_t>();
    for (std::size_t i = 0; i < px; ++i) {
        const std::uint8_t* p = img.pixels.data() + i * 3;
        if (format == pixel_format::rgb) {
            std::memcpy(o + i * 3, p, 3);
        } else if (format == pixel_format::bgr) {
            o[i * 3] = p[2];
            o[i * 3 + 1] = p[1];
            o[i * 3 + 2] = p[0];
        } else {
            // ITU-R 601-2 luma with Pillow's fixed-point weights and rounding.
            o[i] = static_cast<std::uint8_t>((p[0] * 19595u + p[1] * 38470u + p[2] * 7471u + 0x8000u) >> 16);
        }
    }
    return out;
}

KILN_REGISTER_OP(image_decoder)

}  // namespace kiln::op
