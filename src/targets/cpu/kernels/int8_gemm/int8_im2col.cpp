#include "targets/cpu/kernels/int8_gemm/int8_im2col.hpp"

#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace kiln::cpu {

shape int8_im2col::compute_shape(const std::vector<shape>& inputs) const {
    auto bad = [&](const std::string& why) { throw_error(error_code::shape, name() + ": " + why); };
    if (inputs.size() != 2) bad("expected x and an output buffer");
    if (kernel.size() != 2 || stride.size() != 2 || pad.size() != 2 || out.size() != 2) bad("needs 2-D geometry");
    for (std::size_t d = 0; d < 2; ++d)
        if (kernel[d] < 1 || stride[d] < 1 || pad[d] < 0 || out[d] < 1) bad("bad geometry");
    const shape& x = inputs[0];
    if (!x.is_tensor() || x.dynamic() || x.ndim() != 4 || !x.standard() ||
        (x.get_type() != type::uint8 && x.get_type() != type::int8))
        bad("x " + x.to_string() + " is not a row-major 4-D 8-bit tensor");
    const auto& l = x.lens();
    const std::size_t rows = l[0] * static_cast<std::size_t>(out[0] * out[1]);
    const std::size_t k = l[1] * static_cast<std::size_t>(kernel[0] * kernel[1]);
    const shape& y = inputs[1];
    if (!y.is_tensor() || y.get_type() != x.get_type() || !y.standard() ||
        y.lens() != std::vector<std::size_t>{rows, k})
        bad("the output buffer " + y.to_string() + " is not [" + std::to_string(rows) + ", " + std::to_string(k) + "]");
    return y;
}

argument int8_im2col::compute(context&, const shape&, const std::vector<argument>& args) const {
    const auto& l = args[0].get_shape().lens();
    const std::size_t n = l[0], c = l[1], h = l[2], w = l[3];
    const auto kh = static_cast<std::size_t>(kernel[0]), kw = static_cast<std::size_t>(kernel[1]);
    const auto oh = static_cast<std::size_t>(out[0]), ow = static_cast<std::size_t>(out[1]);
    const std::size_t k = c * kh * kw, rows = n * oh;
    const auto* x = reinterpret_cast<const std::uint8_t*>(args[0].data());
    auto* y = reinterpret_cast<std::uint8_t*>(args[1].data());
    const auto z = static_cast<std::uint8_t>(x_zero_point);  // an int8 zero point's bits for s8
    // One output row of windows per (image, oy); rows are independent. Per window, each of
    // the c * kh input rows gives kw contiguous bytes (x is row-major): a short copy where
    // the window is inside the image, the zero point for taps outside it.
    auto row = [&](std::size_t r) {
        const std::size_t b = r / oh, oy = r % oh;
        std::vector<const std::uint8_t*> src(c * kh);  // null: the row is outside the image
        for (std::size_t ci = 0; ci < c; ++ci)
            for (std::size_t ky = 0; ky < kh; ++ky) {
                const auto iy = static_cast<std::ptrdiff_t>(oy * static_cast<std::size_t>(stride[0]) + ky) - pad[0];
                src[ci * kh + ky] = iy >= 0 && iy < static_cast<std::ptrdiff_t>(h)
                                        ? x + ((b * c + ci) * h + static_cast<std::size_t>(iy)) * w
                                        : nullptr;
            }
        std::uint8_t* dst = y + r * ow * k;
        for (std::size_t ox = 0; ox < ow; ++ox) {
            const auto ix0 = static_cast<std::ptrdiff_t>(ox * static_cast<std::size_t>(stride[1])) - pad[1];
            const bool inside = ix0 >= 0 && ix0 + static_cast<std::ptrdiff_t>(kw) <= static_cast<std::ptrdiff_t>(w);
            for (const std::uint8_t* s : src) {
                if (s && inside && kw == 3)
                    std::memcpy(dst, s + ix0, 3);  // a fixed size: two moves, not a call
                else if (s && inside)
                    std::memcpy(dst, s + ix0, kw);
                else
                    for (std::size_t kx = 0; kx < kw; ++kx) {
                        const auto ix = ix0 + static_cast<std::ptrdiff_t>(kx);
                        dst[kx] = s && ix >= 0 && ix < static_cast<std::ptrdiff_t>(w) ? s[ix] : z;
                    }
                dst += kw;
            }
        }
    };
    const int threads = rows * ow * k < (std::size_t{1} << 16) ? 1 : std::max(omp_get_max_threads(), 1);
#pragma omp parallel for schedule(static) num_threads(threads)
    for (std::int64_t r = 0; r < static_cast<std::int64_t>(rows); ++r) row(static_cast<std::size_t>(r));
    return args[1];
}

KILN_REGISTER_OP(int8_im2col)

}  // namespace kiln::cpu
