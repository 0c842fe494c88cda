// PLACEHOLDER: replaced by the exact ONNX-conformant conversions (helper task).
#include <kiln/float_types.hpp>

#include <cstring>

namespace kiln {

half::half(float f) { _Float16 h = static_cast<_Float16>(f); std::memcpy(&bits, &h, 2); }
half::half(double d) { _Float16 h = static_cast<_Float16>(d); std::memcpy(&bits, &h, 2); }
half::operator float() const { _Float16 h; std::memcpy(&h, &bits, 2); return static_cast<float>(h); }

bfloat16::bfloat16(float f) { std::uint32_t u; std::memcpy(&u, &f, 4); bits = static_cast<std::uint16_t>(u >> 16); }
bfloat16::bfloat16(double d) : bfloat16(static_cast<float>(d)) {}
bfloat16::operator float() const { std::uint32_t u = std::uint32_t(bits) << 16; float f; std::memcpy(&f, &u, 4); return f; }

#define KILN_STUB(NAME) \
    NAME::NAME(float, bool) {} \
    NAME::operator float() const { return 0.0f; }
KILN_STUB(fp8e4m3fn)
KILN_STUB(fp8e4m3fnuz)
KILN_STUB(fp8e5m2)
KILN_STUB(fp8e5m2fnuz)
KILN_STUB(fp8e8m0)
KILN_STUB(fp4e2m1)

}  // namespace kiln
