#!/usr/bin/env bash
# Builds the C API and its tests with AddressSanitizer and UndefinedBehaviorSanitizer and runs
# them (a by-hand check, not part of `make test`: the instrumented build takes long on 2 cores):
#
#     scripts/sanitize.sh [GTEST_FILTER]      (default: every C API test)
#
# The build goes to build-asan (KILN_SANITIZE_BUILD to change it), with g++; the library and the
# tests are instrumented, the third-party libraries (oneDNN, protobuf) are not. Any finding ends
# the test program with the sanitizer's report, so the run fails. Leak checking is on; the
# suppressions file names the leaks that are not Kiln's (one-time allocations of libraries
# kept until exit).
set -euo pipefail

filter=${1:-*}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KILN_SANITIZE_BUILD:-$root/build-asan}

if [ ! -f "$build/CMakeCache.txt" ]; then
    mkdir -p "$build"
    # -O1 (asserts kept): a third of -O2's compile time with ASan, and fast enough to run the tests.
    launcher=$(command -v ccache || true)
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Sanitize -DCMAKE_CXX_FLAGS_SANITIZE="-O1 -g1" \
        -DCMAKE_C_FLAGS_SANITIZE="-O1 -g1" ${launcher:+-DCMAKE_CXX_COMPILER_LAUNCHER=$launcher} \
        -DKILN_SANITIZE=address,undefined -DKILN_BUILD_PYTHON=OFF -DKILN_WERROR=OFF > "$build/cmake.log" \
        || { cat "$build/cmake.log" >&2; exit 1; }
fi
nice -n 10 cmake --build "$build" --target kiln_capi_tests -j"${KILN_SANITIZE_JOBS:-2}" | grep -v '^\[' || true
tests=$build/bin/kiln_capi_tests
[ -x "$tests" ] || { echo "sanitize.sh: the build did not produce $tests" >&2; exit 1; }

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/scripts/sanitize.supp}
export KILN_NUM_THREADS=${KILN_NUM_THREADS:-2}
start=$(date +%s)
"$tests" --gtest_filter="$filter" 2>&1 | tail -n 40
status=${PIPESTATUS[0]}
echo "sanitize.sh: kiln_capi_tests exited $status after $(( $(date +%s) - start )) s"
exit "$status"
