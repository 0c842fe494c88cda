// kiln: the command-line tool. Maps errors to the documented exit codes and never
// lets an exception escape as a crash.
#include "commands.hpp"

#include <kiln/errors.hpp>

#include <cstdlib>
#include <iostream>
#include <map>
#include <new>
#include <string>

#include <unistd.h>

using namespace kiln::cli;

namespace {

// OpenMP (libgomp, under oneDNN and Kiln's own kernels) reads its wait policy when it loads,
// before main. Its default lets a thread spin ~300000 times at each barrier waiting for a
// teammate; when another busy process holds that teammate's core, every barrier costs a time
// slice: two `kiln perf resnet50` at once took 460 ms per run each instead of ~45 alone.
// With a spin of 10000 they took ~108 ms each. A spin of 1000 runs as fast as 10000 alone and
// about 3x faster beside a busy 2-job build (bert_small 6.8 vs 21 ms, mobilenet_v2 6.5 vs 24,
// resnet50 37 vs 59; Zen 5, docs/performance.md); 0 (sleep at once) costs 15-30% alone.
// So, unless the user chose a policy, run again (once) with a spin count of 1000.
// A per-instruction profile is the exception: it stamps the time after every kernel, and in
// those pauses the short spin lets the other thread fall asleep, so that each next kernel is
// charged a wake-up (mobilenet_v2 --int8, 2 threads: the profile summed to 3.3 ms for a 1.46 ms
// run, fashion_resnet 0.38 for 0.31). With the workers spinning (OMP_WAIT_POLICY=active) the
// sums come to the run's time (1.66 for 1.42, 0.25 for 0.28): a profile runs with that policy.
void choose_openmp_wait(char** argv) {
    if (std::getenv("GOMP_SPINCOUNT") || std::getenv("OMP_WAIT_POLICY")) return;
    bool profile = false;
    for (char** a = argv + 1; *a; ++a) profile = profile || std::string(*a) == "--per-instruction";
    const int set = profile ? ::setenv("OMP_WAIT_POLICY", "active", 1) : ::setenv("GOMP_SPINCOUNT", "1000", 1);
    if (set != 0) return;
    ::execv("/proc/self/exe", argv);  // returns only on failure: then go on as we are
}

}  // namespace

int main(int argc, char** argv) {
    choose_openmp_wait(argv);
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
        std::cout << general_help();
        return args.empty() ? exit_usage : exit_ok;
    }
    if (args[0] == "--version") args[0] = "version";
    const std::string command = args[0];
    args.erase(args.begin());
    const auto* spec = find_command(command);
    if (!spec) {
        std::cerr << "kiln: unknown command '" << command << "'\n\n" << general_help();
        return exit_usage;
    }
    for (auto& a : args)
        if (a == "--help" || a == "-h") {
            std::cout << command_help(*spec);
            return exit_ok;
        }
    static const std::map<std::string, int (*)(const options&)> handlers = {
        {"read", cmd_read},     {"params", cmd_params}, {"compile", cmd_compile}, {"run", cmd_run},
        {"perf", cmd_perf},     {"verify", cmd_verify}, {"onnx-ops", cmd_onnx_ops}, {"ops", cmd_ops},
        {"targets", cmd_targets}, {"version", cmd_version}, {"serve", cmd_serve},
    };
    try {
        auto o = parse(command, args);
        return handlers.at(command)(o);
    } catch (const usage_error& e) {
        std::cerr << "kiln " << command << ": " << e.what() << "\n(see kiln " << command << " --help)\n";
        return exit_usage;
    } catch (const kiln::error& e) {
        std::cerr << "kiln " << command << ": " << e.what() << "\n";
        switch (e.code()) {
            case kiln::error_code::invalid_argument: return exit_usage;
            case kiln::error_code::runtime:
            case kiln::error_code::out_of_memory: return exit_runtime;
            default: return exit_model;
        }
    } catch (const std::bad_alloc&) {
        std::cerr << "kiln " << command << ": out of memory\n";
        return exit_runtime;
    } catch (const std::exception& e) {
        std::cerr << "kiln " << command << ": " << e.what() << "\n";
        return exit_runtime;
    }
}
