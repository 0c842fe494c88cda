#!/usr/bin/env bash
# Fuzzes the ONNX frontend (or kiln serve's request decoders) for SECONDS seconds on one
# core at low priority:
#
#     scripts/fuzz.sh SECONDS        (e.g. scripts/fuzz.sh 1800 for 30 minutes)
#     scripts/fuzz.sh SECONDS serve  (fuzz/serve_request_fuzzer.cpp; findings in tests/data/serve_fuzz/)
#
# The serve target is built quickly, without build-fuzz: its sources (the request path of
# src/serve) are compiled with clang, libFuzzer, ASan and UBSan, and linked against the
# normal build's libkiln.so (KILN_FUZZ_HOST_BUILD, default build/, which must have built
# kiln_serve: the generated protobuf sources come from it). The library itself is then not
# instrumented: this fuzzes the decoders and the checks, not the kernels.
#
# Builds fuzz/parse_onnx_fuzzer in build-fuzz (clang, libFuzzer + ASan + UBSan) when
# needed, seeds it with the repo's models (tests/data/models, tests/data/bad_models,
# tests/data/fuzz) and the small ONNX backend test models in ../shared (read in place,
# copied only into the build folder), and runs it. A crash, a timeout or an oversized
# allocation stops libFuzzer: the input is copied to tests/data/fuzz/ (replayed by
# onnx_fuzz_regression_test) and fuzzing resumes with the corpus so far until the time
# is up. Prints the executions, exec/s and coverage of each run and in total.
#
# Environment: KILN_FUZZ_BUILD (build folder), KILN_FUZZ_CXX (clang++), KILN_FUZZ_JOBS
# (build jobs, default 2), KILN_FUZZ_SHARED (default ../shared next to the repo).
set -euo pipefail

seconds=${1:?usage: scripts/fuzz.sh SECONDS [onnx|serve]}
case $seconds in ''|*[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number" >&2; exit 2 ;; esac
target=${2:-onnx}
case $target in onnx|serve) ;; *) echo "fuzz.sh: the target is onnx or serve" >&2; exit 2 ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
cxx=${KILN_FUZZ_CXX:-clang++-14}
shared=${KILN_FUZZ_SHARED:-$root/../shared}
if [ "$target" = serve ]; then
    build=${KILN_FUZZ_BUILD:-$root/build-fuzz-serve}
    fuzzer=$build/bin/serve_request_fuzzer
    findings=$root/tests/data/serve_fuzz
else
    build=${KILN_FUZZ_BUILD:-$root/build-fuzz}
    fuzzer=$build/bin/parse_onnx_fuzzer
    findings=$root/tests/data/fuzz
fi

# Build (incremental; a no-op when up to date).
if [ "$target" = serve ]; then
    host=${KILN_FUZZ_HOST_BUILD:-$root/build}
    [ -f "$host/lib/libkiln.so" ] && [ -f "$host/src/serve/grpc_service.pb.cc" ] \
        || { echo "fuzz.sh: build kiln_serve in $host first (cmake --build $host --target kiln_serve)" >&2; exit 1; }
    mkdir -p "$build/obj" "$build/bin"
    flags=(-std=c++20 -O1 -gline-tables-only -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined
           -fno-sanitize-recover=all -w -I"$root/include" -I"$root/src" -I"$host/src/serve" -I"$root/fuzz")
    objs=() pids=()
    for src in "$root"/fuzz/serve_request_fuzzer.cpp "$root"/src/serve/{json_codec,grpc_codec,infer,datatype,loaded_model,batcher,model_repository,model_config}.cpp \
               "$host"/src/serve/{grpc_service,model_config}.pb.cc; do
        obj=$build/obj/$(basename "$src").o
        if [ ! -f "$obj" ] || [ -n "$(find "$src" "$root/fuzz/serve_fuzz_driver.hpp" "$root/src/serve" -newer "$obj" -name '*.[ch]*' -print -quit)" ]; then
            rm -f "$obj"  # a failed compile must not leave the old object to link
            nice -n 19 "$cxx" "${flags[@]}" -c "$src" -o "$obj" &
            pids+=($!)
            [ "$(jobs -rp | wc -l)" -lt "${KILN_FUZZ_JOBS:-2}" ] || wait -n
        fi
        objs+=("$obj")
    done
    for p in "${pids[@]}"; do wait "$p" || true; done
    for o in "${objs[@]}"; do [ -f "$o" ] || { echo "fuzz.sh: compiling $(basename "$o" .o) failed" >&2; exit 1; }; done
    "$cxx" "${flags[@]}" "${objs[@]}" -L"$host/lib" -Wl,-rpath,"$host/lib" -lkiln -lprotobuf -lpthread -o "$fuzzer"
elif [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$build" -DKILN_FUZZ=ON -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release \
        -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_PYTHON=OFF -DKILN_WERROR=OFF > "$build.cmake.log" \
        || { cat "$build.cmake.log" >&2; exit 1; }
    mv "$build.cmake.log" "$build/cmake.log"
fi
[ "$target" = serve ] || nice -n 19 cmake --build "$build" --target parse_onnx_fuzzer -j"${KILN_FUZZ_JOBS:-2}" | grep -v '^\[' || true
[ -x "$fuzzer" ] || { echo "fuzz.sh: the build did not produce $fuzzer" >&2; exit 1; }

# Seeds: small files only (libFuzzer's max_len follows the largest seed).
seeds=$build/seeds
rm -rf "$seeds" && mkdir -p "$seeds"
if [ "$target" = serve ]; then
    # Requests as clients send them (fuzz/serve_seeds.py) and the findings so far.
    for f in "$findings"/*; do [ -f "$f" ] && [ "$(basename "$f")" != README.md ] && cp "$f" "$seeds/"; done
fi
[ "$target" = serve ] || for f in "$root"/tests/data/models/*.onnx "$root"/tests/data/bad_models/*.onnx "$root"/tests/data/fuzz/*; do
    [ -f "$f" ] && cp "$f" "$seeds/$(basename "$(dirname "$f")")_$(basename "$f")"
done
if [ "$target" = onnx ] && [ -d "$shared/onnx-backend-tests" ]; then
    find "$shared/onnx-backend-tests" -name model.onnx -size -4k | sort | while read -r m; do
        cp "$m" "$seeds/backend_$(basename "$(dirname "$m")").onnx"
    done
fi
echo "fuzz.sh: $(ls "$seeds" | wc -l) seed files"

corpus=$build/corpus
artifacts=$build/artifacts
mkdir -p "$corpus" "$artifacts" "$findings"
# External data resolves against the working folder: give the fuzzer one that holds
# only the corpus's small external data file.
work=$build/work
rm -rf "$work" && mkdir -p "$work"
cp "$root/tests/data/bad_models/external_small.bin" "$work/"
cd "$work"
log=$build/fuzz.log
: > "$log"

# The clock starts after the build and the seeds: SECONDS is fuzzing time.
start=$(date +%s)
deadline=$(( start + seconds ))
total_execs=0
runs=0
found=()
while :; do
    left=$(( deadline - $(date +%s) ))
    [ "$left" -ge 10 ] || break
    runs=$((runs + 1))
    run_log=$build/run_$runs.log
    # One process (no -jobs/-workers), lowest priority. Allocations above 1 GB are
    # findings: inputs are at most a few hundred KB.
    set +e
    ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        nice -n 19 "$fuzzer" -max_total_time="$left" -timeout=60 -rss_limit_mb=4096 -malloc_limit_mb=1024 \
        -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" "$seeds" > "$run_log" 2>&1
    rc=$?
    set -e
    cat "$run_log" >> "$log"
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$run_log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$run_log" | tail -1)
    cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$run_log" | tail -1 || true)
    total_execs=$(( total_execs + ${execs:-0} ))
    done_line=$(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$run_log" | tail -1 || true)
    echo "fuzz.sh: run $runs: exit $rc, ${execs:-?} executions, ${rate:-?} exec/s, ${cov:-no coverage line}${done_line:+ ($done_line)}"
    # Crashes, timeouts and oversized allocations become regression inputs (slow units
    # are not kept: on a busy machine they measure the machine).
    new=0
    for a in "$artifacts"/*; do
        [ -f "$a" ] || continue
        case $(basename "$a") in crash-*|timeout-*|oom-*|leak-*) ;; *) rm -f "$a"; continue ;; esac
        dest=$findings/$(basename "$a")
        if [ ! -f "$dest" ]; then
            cp "$a" "$dest"
            found+=("$(basename "$a")")
            new=1
            echo "fuzz.sh: FOUND $(basename "$a"):"
            grep -E 'ERROR: |runtime error:|SUMMARY:|terminate called|what\(\):' "$run_log" | head -5 | sed 's/^/    /'
        fi
        rm -f "$a"
    done
    [ "$rc" -eq 0 ] && break
    [ "$new" -eq 1 ] || { echo "fuzz.sh: the fuzzer stopped (exit $rc) without an artifact; see $run_log" >&2; break; }
done

echo "fuzz.sh: total: $total_execs executions in $runs run(s) over $(( $(date +%s) - start )) s (asked: $seconds s); corpus $(ls "$corpus" | wc -l) files"
if [ "${#found[@]}" -gt 0 ]; then
    echo "fuzz.sh: ${#found[@]} finding(s) kept in ${findings#"$root"/}/: ${found[*]}"
    exit 1
fi
echo "fuzz.sh: no crash, timeout or oversized allocation"
