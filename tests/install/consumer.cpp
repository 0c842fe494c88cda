// Built out of tree against an installed Kiln through find_package(Kiln CONFIG)
// (test_install.py): tests/data/models/mlp_dynamic.onnx with batch 3 through kiln.hpp,
// each softmax row's sum printed.
#include <kiln/kiln.hpp>

#include <cstdio>

int main(int argc, char** argv) try {
    if (argc != 2) return 2;
    auto p = kiln::api::parse_onnx(argv[1]);
    p.compile(kiln::api::target("cpu"));
    kiln::api::shape in(KILN_TYPE_FLOAT32, {3, 4});
    auto out = p.run({{"x", kiln::api::argument(in, std::vector<float>(12, 0.25f))}});
    auto probs = out[0].to_vector<float>();
    for (std::size_t row = 0; row < 3; ++row)
        std::printf("%.4f\n", probs[3 * row] + probs[3 * row + 1] + probs[3 * row + 2]);
    return 0;
} catch (const kiln::api::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
