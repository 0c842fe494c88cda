// ImageDecoder.
#include "onnx/onnx_node.hpp"
#include "ops/control_image.hpp"

#include <kiln/errors.hpp>

namespace kiln::onnx_frontend {

namespace {

std::vector<instruction_ref> parse_image_decoder(onnx_node& node) {
    auto f = node.attr_string("pixel_format", "RGB");
    op::image_decoder d;
    if (f == "RGB") d.format = op::pixel_format::rgb;
    else if (f == "BGR") d.format = op::pixel_format::bgr;
    else if (f == "Grayscale") d.format = op::pixel_format::grayscale;
    else node.fail(error_code::parse, "unknown pixel_format '" + f + "'");
    return {node.add(d, {node.input(0)})};
}

}  // namespace

KILN_ONNX_OP("ImageDecoder", parse_image_decoder)

}  // namespace kiln::onnx_frontend
