// Loads a compiled `.kiln`, feeds each float32 input seeded random values, runs it through
// kiln.hpp's program::run (the C API underneath) --warmup times, then -n times, and prints
// {"median_ms": M, "min_ms": m} as `kiln perf --json` does, so the two can be compared.
#include <kiln/kiln.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace k = kiln::api;

int main(int argc, char** argv) {
    std::string path;
    int n = 50, warmup = 5;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "-n" && i + 1 < argc) n = std::atoi(argv[++i]);
        else if (a == "--warmup" && i + 1 < argc) warmup = std::atoi(argv[++i]);
        else path = a;
    }
    if (path.empty() || n < 1) {
        std::fprintf(stderr, "usage: run_loop model.kiln [-n 50] [--warmup 5]\n");
        return 2;
    }
    try {
        k::program p = k::load(path);
        std::mt19937 rng(0);
        std::uniform_real_distribution<float> u(-1.f, 1.f);
        std::map<std::string, k::argument> inputs;
        for (const auto& name : p.input_names()) {
            auto s = p.input_shape(name);
            if (s.type() != KILN_TYPE_FLOAT32) {
                std::fprintf(stderr, "input %s is not float32\n", name.c_str());
                return 2;
            }
            // A dynamic dim runs at its first optimal (else its min, at least 1), as kiln perf does.
            std::vector<std::size_t> lens;
            std::size_t count = 1;
            const auto rank = s.lens().size();
            for (std::size_t d = 0; d < rank; ++d) {
                auto dim = s.dynamic() ? s.dyn_dim(d) : k::dynamic_dimension{s.lens()[d], s.lens()[d], {}, ""};
                lens.push_back(!dim.optimals.empty() ? dim.optimals.front() : std::max<std::size_t>(dim.min, 1));
                count *= lens.back();
            }
            std::vector<float> values(count);
            for (auto& v : values) v = u(rng);
            inputs.emplace(name, k::argument(k::shape(KILN_TYPE_FLOAT32, lens), values));
        }
        for (int i = 0; i < warmup; ++i) p.run(inputs);
        std::vector<double> ms;
        for (int i = 0; i < n; ++i) {
            auto t = std::chrono::steady_clock::now();
            auto out = p.run(inputs);
            ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
        }
        std::sort(ms.begin(), ms.end());
        std::printf("{\"median_ms\": %.6f, \"min_ms\": %.6f}\n", ms[ms.size() / 2], ms.front());
    } catch (const k::error& e) {
        std::fprintf(stderr, "kiln error: %s\n", e.what());
        return 1;
    }
    return 0;
}
