#!/usr/bin/env python3
"""Runs every test suite of Kiln and prints one summary line: N passed, N failed[, N skipped].

Suites: unit (GoogleTest), capi (GoogleTest over the C API and kiln.hpp), conformance (the ONNX
backend tests on each target), models (on ref, then on cpu), gpu, gpu-device and conformance-gpu-compile (builds with the gpu target only: its
kernels through NVRTC and on the host, without a device; the GPU-only tests; every backend test compiled for the gpu), python (pytest), tools (pytest over the kiln command-line tool),
install (cmake --install, then a C and a C++ program built against the prefix), examples
(examples/resnet50 end to end: PyTorch export, Python and C++ classification, the worker), clang (one step:
the sources compile with clang 14, which the fuzz build needs; scripts/clang_check.py). A suite
whose program is not built yet is reported as failed, never silently dropped.
"""
import argparse
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3"


def run(cmd, env=None, log=None):
    print("+ " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if log:
        with open(log, "w") as f:
            f.write(proc.stdout)
    return proc


def cpu_has_avx512():
    """Whether this machine's CPU has AVX-512 F (Linux: /proc/cpuinfo)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return "avx512f" in line.split()
    except OSError:
        pass
    return False


# The cpu target's unit tests once more as an AVX2 machine runs them (oneDNN's blocked
# layouts, Kiln's AVX2 kernels): on AVX-512 machines only, where both paths can run.
AS_AVX2 = {"ONEDNN_MAX_CPU_ISA": "AVX2", "KILN_CPU_MAX_ISA": "avx2"}


def gtest_suite(build, name, binary, extra=(), env_extra=None):
    exe = os.path.join(build, "bin", binary)
    if not os.path.exists(exe):
        print(f"[{name}] {exe} is missing")
        return 0, 1, 0
    out_json = os.path.join(build, "test-results", f"{name}.json")
    env = dict(os.environ, **env_extra) if env_extra else None
    proc = run([exe, f"--gtest_output=json:{out_json}", *extra], env=env,
               log=os.path.join(build, "test-results", f"{name}.log"))
    passed = failed = skipped = 0
    try:
        with open(out_json) as f:
            data = json.load(f)
        for suite in data.get("testsuites", []):
            for case in suite.get("testsuite", []):
                if case.get("result") == "SKIPPED" or case.get("status") == "NOTRUN":
                    skipped += 1
                elif case.get("failures"):
                    failed += 1
                    print(f"[{name}] FAILED {suite['name']}.{case['name']}")
                    for fl in case["failures"]:
                        print("    " + fl.get("failure", "").replace("\n", "\n    ")[:2000])
                else:
                    passed += 1
    except (OSError, ValueError):
        print(proc.stdout[-5000:])
        return passed, failed + 1, skipped
    if proc.returncode != 0 and failed == 0:
        print(proc.stdout[-5000:])
        failed += 1
    return passed, failed, skipped


def summary_line_suite(build, name, cmd):
    """A program that ends with its own 'N passed, N failed[, N skipped]' line."""
    exe = os.path.join(build, "bin", cmd[0])
    if not os.path.exists(exe):
        print(f"[{name}] {exe} is missing")
        return 0, 1, 0
    proc = run([exe, *cmd[1:]], log=os.path.join(build, "test-results", f"{name}.log"))
    lines = [l for l in proc.stdout.strip().splitlines() if " passed, " in l]
    out = proc.stdout.strip().splitlines()
    for l in out:
        if l.startswith("FAIL") or l.startswith("UNEXPECTED") or l.startswith("STALE"):
            print(f"[{name}] {l}")
    if not lines:
        print(proc.stdout[-3000:])
        return 0, 1, 0
    parts = {}
    for p in lines[-1].split(","):
        n, word = p.strip().split()[:2]
        parts[word] = int(n)
    failed = parts.get("failed", 0)
    if proc.returncode != 0 and failed == 0:
        failed = 1
    return parts.get("passed", 0), failed, parts.get("skipped", 0)


def pytest_suite(build, name, path):
    if not os.path.isdir(os.path.join(ROOT, path)):
        return 0, 0, 0
    xml = os.path.join(build, "test-results", f"{name}.xml")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(build, "python") + os.pathsep + env.get("PYTHONPATH", "")
    env["KILN_BUILD_DIR"] = build
    proc = run([PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}", path], env=env,
               log=os.path.join(build, "test-results", f"{name}.log"))
    try:
        root = ET.parse(xml).getroot()
        suites = [root] if root.tag == "testsuite" else list(root)
        total = sum(int(s.get("tests", 0)) for s in suites)
        failed = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
        skipped = sum(int(s.get("skipped", 0)) for s in suites)
    except (OSError, ET.ParseError):
        print(proc.stdout[-5000:])
        return 0, 1, 0
    if failed:
        print(proc.stdout[-8000:])
    if proc.returncode not in (0, 5) and failed == 0:
        print(proc.stdout[-5000:])
        failed = 1
    return total - failed - skipped, failed, skipped


def clang_suite(build):
    """One step: scripts/clang_check.py (the library and the fuzz driver compile with clang 14)."""
    log = os.path.join(build, "test-results", "clang.log")
    proc = run([PYTHON, os.path.join(ROOT, "scripts", "clang_check.py"), "--build", build], log=log)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0:
        print("\n".join(lines[-60:]))
        print(f"[clang] FAILED (all of clang's output: {log})")
        return 0, 1, 0
    print(f"[clang] {lines[-1] if lines else ''}")
    return 1, 0, 0


def has_gpu_target(build):
    """Whether CMake built the gpu target here (cmake/KilnGpu.cmake records it)."""
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            return "KILN_HAVE_GPU:INTERNAL=ON\n" in f.readlines()
    except OSError:
        return False


def gpu_suite(build, name, binary):
    """A gpu suite where the build has the gpu target; else none (said, not hidden)."""
    if not has_gpu_target(build):
        print(f"[{name}] not run: this build has no gpu target (no CUDA 13 / cuDNN 9 found)")
        return 0, 0, 0
    return gtest_suite(build, name, binary)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--only", default="", help="comma-separated suites")
    args = ap.parse_args()
    build = os.path.abspath(os.path.join(ROOT, args.build))
    os.makedirs(os.path.join(build, "test-results"), exist_ok=True)

    suites = {
        "unit": lambda: gtest_suite(build, "unit", "kiln_unit_tests"),
        "unit-cpu-as-avx2": lambda: gtest_suite(build, "unit-cpu-as-avx2", "kiln_unit_tests", ["--gtest_filter=cpu_*"],
                                                AS_AVX2) if cpu_has_avx512() else (0, 0, 0),
        "capi": lambda: gtest_suite(build, "capi", "kiln_capi_tests"),
        "conformance-ref": lambda: summary_line_suite(build, "conformance-ref", ["kiln_conformance", "--target", "ref"]),
        "conformance-cpu": lambda: summary_line_suite(build, "conformance-cpu", ["kiln_conformance", "--target", "cpu"]),
        "models": lambda: gtest_suite(build, "models", "kiln_model_tests"),
        # The same real models compiled for the cpu target (its kernels, its dynamic programs).
        "models-cpu": lambda: gtest_suite(build, "models-cpu", "kiln_model_tests", (),
                                          {"KILN_MODEL_TEST_TARGET": "cpu"}),
        # The gpu target without a device; the GPU-only tests skip where there is none.
        "gpu": lambda: gpu_suite(build, "gpu", "kiln_gpu_tests"),
        "gpu-device": lambda: gpu_suite(build, "gpu-device", "kiln_gpu_device_tests"),
        # Every backend test compiles for the gpu (NVRTC included) without a device.
        "conformance-gpu-compile": lambda: summary_line_suite(
            build, "conformance-gpu-compile", ["kiln_conformance", "--target", "gpu", "--compile-only"])
        if has_gpu_target(build) else (0, 0, 0),
        "python": lambda: pytest_suite(build, "python", "python/tests"),
        "tools": lambda: pytest_suite(build, "tools", "tests/tools"),
        "install": lambda: pytest_suite(build, "install", "tests/install"),
        "examples": lambda: pytest_suite(build, "examples", "tests/examples"),
        "clang": lambda: clang_suite(build),
    }
    only = [s for s in args.only.split(",") if s]
    total = [0, 0, 0]
    for name, fn in suites.items():
        if only and name not in only:
            continue
        p, f, s = fn()
        print(f"[{name}] {p} passed, {f} failed" + (f", {s} skipped" if s else ""), flush=True)
        total = [total[0] + p, total[1] + f, total[2] + s]
    line = f"{total[0]} passed, {total[1]} failed"
    if total[2]:
        line += f", {total[2]} skipped"
    print(line)
    return 1 if total[1] else 0


if __name__ == "__main__":
    sys.exit(main())
