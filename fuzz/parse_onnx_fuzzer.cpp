// libFuzzer target over parse_onnx_buffer: each input is parsed as an ONNX model and,
// when it parses, compiled for ref and run on small inputs (onnx_fuzz_driver.hpp).
// Built by scripts/fuzz.sh (-DKILN_FUZZ=ON, clang, ASan + UBSan).
#include "onnx_fuzz_driver.hpp"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    kiln::fuzz::run_onnx_bytes(data, size);
    return 0;
}
