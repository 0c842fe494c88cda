#include "ops/control_image_codecs.hpp"

#include <kiln/errors.hpp>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>

#ifdef KILN_HAVE_JPEG
#include <jpeglib.h>
#endif
#ifdef KILN_HAVE_PNG
#include <png.h>
#endif
#ifdef KILN_HAVE_WEBP
#include <webp/decode.h>
#endif
#ifdef KILN_HAVE_OPENJPEG
#include <openjpeg.h>
#endif

namespace kiln::op {

namespace {
[[noreturn]] void fail(const std::string& format, const std::string& why) {
    throw_error(error_code::invalid_argument, "image_decoder: " + format + ": " + why);
}
[[noreturn, maybe_unused]] void missing(const std::string& format, const std::string& library) {
    throw_error(error_code::unsupported, "image_decoder: " + format + " needs " + library +
                                             ", which this build of Kiln does not have");
}
}  // namespace

// ---- JPEG ----
#ifdef KILN_HAVE_JPEG
namespace {
struct jpeg_error : jpeg_error_mgr {
    std::jmp_buf jump;
    char message[JMSG_LENGTH_MAX] = {};
};
void on_jpeg_error(j_common_ptr info) {
    auto* e = reinterpret_cast<jpeg_error*>(info->err);
    e->format_message(info, e->message);
    std::longjmp(e->jump, 1);
}
void on_jpeg_message(j_common_ptr, int) {}
}  // namespace

rgb_image decode_jpeg(const std::uint8_t* data, std::size_t size) {
    jpeg_decompress_struct info{};
    jpeg_error err;
    info.err = jpeg_std_error(&err);
    err.error_exit = on_jpeg_error;
    err.emit_message = on_jpeg_message;
    rgb_image img;
    // The library reports errors by longjmp: nothing with a destructor lives between here and there
    // except `img`, which is only resized before the first library call that can fail afterwards.
    if (setjmp(err.jump)) {
        jpeg_destroy_decompress(&info);
        fail("JPEG", err.message);
    }
    jpeg_create_decompress(&info);
    jpeg_mem_src(&info, const_cast<unsigned char*>(data), static_cast<unsigned long>(size));
    jpeg_read_header(&info, TRUE);
    info.out_color_space = JCS_RGB;
    jpeg_start_decompress(&info);
    img.width = info.output_width;
    img.height = info.output_height;
    img.pixels.resize(img.width * img.height * 3);
    while (info.output_scanline < info.output_height) {
        JSAMPROW row = img.pixels.data() + std::size_t(info.output_scanline) * img.width * 3;
        jpeg_read_scanlines(&info, &row, 1);
    }
    jpeg_finish_decompress(&info);
    jpeg_destroy_decompress(&info);
    return img;
}
#else
rgb_image decode_jpeg(const std::uint8_t*, std::size_t) { missing("JPEG", "libjpeg"); }
#endif

// ---- PNG ----
#ifdef KILN_HAVE_PNG
rgb_image decode_png(const std::uint8_t* data, std::size_t size) {
    png_image png{};
    png.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&png, data, size)) fail("PNG", png.message);
    png.format = PNG_FORMAT_RGB;
    rgb_image img;
    img.width = png.width;
    img.height = png.height;
    img.pixels.resize(PNG_IMAGE_SIZE(png));
    if (!png_image_finish_read(&png, nullptr, img.pixels.data(), 0, nullptr)) {
        std::string why = png.message;
        png_image_free(&png);
        fail("PNG", why);
    }
    return img;
}
#else
rgb_image decode_png(const std::uint8_t*, std::size_t) { missing("PNG", "libpng"); }
#endif

// ---- WebP ----
#ifdef KILN_HAVE_WEBP
rgb_image decode_webp(const std::uint8_t* data, std::size_t size) {
    int w = 0, h = 0;
    std::uint8_t* rgb = WebPDecodeRGB(data, size, &w, &h);
    if (rgb == nullptr) fail("WebP", "cannot decode");
    rgb_image img;
    img.width = static_cast<std::size_t>(w);
    img.height = static_cast<std::size_t>(h);
    img.pixels.assign(rgb, rgb + img.width * img.height * 3);
    WebPFree(rgb);
    return img;
}
#else
rgb_image decode_webp(const std::uint8_t*, std::size_t) { missing("WebP", "libwebp"); }
#endif

// ---- JPEG 2000 ----
#ifdef KILN_HAVE_OPENJPEG
namespace {
struct memory_stream {
    const std::uint8_t* data;
    std::size_t size;
    std::size_t at = 0;
};
OPJ_SIZE_T read_fn(void* buf, OPJ_SIZE_T n, void* user) {
    auto* s = static_cast<memory_stream*>(user);
    if (s->at >= s->size) return static_cast<OPJ_SIZE_T>(-1);
    n = std::min<OPJ_SIZE_T>(n, s->size - s->at);
    std::memcpy(buf, s->data + s->at, n);
    s->at += n;
    return n;
}
OPJ_OFF_T skip_fn(OPJ_OFF_T n, void* user) {
    auto* s = static_cast<memory_stream*>(user);
    auto to = std::min<std::size_t>(s->size, s->at + static_cast<std::size_t>(std::max<OPJ_OFF_T>(n, 0)));
    auto moved = static_cast<OPJ_OFF_T>(to - s->at);
    s->at = to;
    return moved;
}
OPJ_BOOL seek_fn(OPJ_OFF_T n, void* user) {
    auto* s = static_cast<memory_stream*>(user);
    if (n < 0 || static_cast<std::size_t>(n) > s->size) return OPJ_FALSE;
    s->at = static_cast<std::size_t>(n);
    return OPJ_TRUE;
}
void quiet(const char*, void*) {}
}  // namespace

rgb_image decode_jpeg2000(const std::uint8_t* data, std::size_t size) {
    memory_stream ms{data, size};
    const bool jp2 = size >= 4 && data[0] == 0 && data[1] == 0 && data[2] == 0 && data[3] == 0x0c;
    opj_codec_t* codec = opj_create_decompress(jp2 ? OPJ_CODEC_JP2 : OPJ_CODEC_J2K);
    opj_set_info_handler(codec, quiet, nullptr);
    opj_set_warning_handler(codec, quiet, nullptr);
    opj_set_error_handler(codec, quiet, nullptr);
    opj_dparameters_t params;
    opj_set_default_decoder_parameters(&params);
    opj_stream_t* stream = opj_stream_create(OPJ_J2K_STREAM_CHUNK_SIZE, OPJ_TRUE);
    opj_stream_set_user_data(stream, &ms, nullptr);
    opj_stream_set_user_data_length(stream, size);
    opj_stream_set_read_function(stream, read_fn);
    opj_stream_set_skip_function(stream, skip_fn);
    opj_stream_set_seek_function(stream, seek_fn);
    opj_image_t* image = nullptr;
    bool ok = opj_setup_decoder(codec, &params) && opj_read_header(stream, codec, &image) &&
              opj_decode(codec, stream, image) && opj_end_decompress(codec, stream);
    rgb_image img;
    std::string why;
    if (!ok || image == nullptr || image->numcomps == 0) {
        why = "cannot decode";
    } else {
        const auto& c0 = image->comps[0];
        img.width = c0.w;
        img.height = c0.h;
        img.pixels.resize(img.width * img.height * 3);
        const bool gray = image->numcomps < 3;
        for (OPJ_UINT32 c = 0; c < (gray ? 1u : 3u) && why.empty(); ++c)
            if (image->comps[c].w != c0.w || image->comps[c].h != c0.h) why = "subsampled components are not supported";
        for (std::size_t i = 0; why.empty() && i < img.width * img.height; ++i)
            for (std::size_t c = 0; c < 3; ++c) {
                const auto& comp = image->comps[gray ? 0 : c];
                int v = comp.data[i] + (comp.sgnd ? 1 << (comp.prec - 1) : 0);
                if (comp.prec > 8) v >>= (comp.prec - 8);
                img.pixels[i * 3 + c] = static_cast<std::uint8_t>(std::clamp(v, 0, 255));
            }
    }
    if (image) opj_image_destroy(image);
    opj_stream_destroy(stream);
    opj_destroy_codec(codec);
    if (!why.empty()) fail("JPEG 2000", why);
    return img;
}
#else
rgb_image decode_jpeg2000(const std::uint8_t*, std::size_t) { missing("JPEG 2000", "openjpeg"); }
#endif

}  // namespace kiln::op
