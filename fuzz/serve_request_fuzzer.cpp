// libFuzzer target over kiln serve's request decoders: REST JSON, the REST binary tensor
// extension and gRPC's ModelInferRequest, each decoded, checked, run on a small model and
// encoded back (serve_fuzz_driver.hpp). Built and run by scripts/fuzz.sh SECONDS serve.
#include "serve_fuzz_driver.hpp"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    kiln::fuzz::run_serve_bytes(data, size);
    return 0;
}
