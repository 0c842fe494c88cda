#!/usr/bin/env python3
"""Checks that Kiln still compiles with clang 14, which the fuzz build (scripts/fuzz.sh) needs.

    scripts/clang_check.py [--build build] [--jobs N] [--cxx clang++-14]

GCC accepts constructs clang rejects (target_clones on a function template,
__builtin_cpu_supports("x86-64-v4"), ...); the normal build uses GCC only, so nothing else
would notice until someone tries to fuzz. A full clang build of the library takes ~20 min
on 2 cores; this check is a few minutes:

1. every translation unit of the library, the kiln tool and the Python module, compiled by
   clang's front end to LLVM IR with the flags of the GCC build's compile_commands.json (so
   the same defines, include folders, -O3, -fopenmp; -w: warnings are GCC's business, only
   errors count here), with LLVM's optimizer and code generator left out
   (-Xclang -disable-llvm-passes, the output thrown away). That is where GCC-only code
   fails: parsing, template instantiation and attributes (target_clones on a template,
   __builtin_cpu_supports("x86-64-v4")), and IR generation, which -fsyntax-only would skip:
   clang checks there that an intrinsic's ISA is enabled in its caller, which is not the
   case in code that relies on `#pragma GCC target` (clang ignores it). It costs about
   10% more than -fsyntax-only (measured on two files).
2. the libFuzzer driver fuzz/parse_onnx_fuzzer.cpp compiled and linked as fuzz.sh builds it
   (-fsanitize=fuzzer,address,undefined), against the GCC build's libkiln.so: it proves the
   driver compiles and that libFuzzer and the sanitizer runtimes are installed.

The unit tests (tests/) are left out: they are never built with clang, and some use C++20
that clang 14 lacks (parenthesized aggregate initialization, _Float16 on x86).

Needs a configured build folder (compile_commands.json) and, for step 2, its libkiln.so.
Prints one line per failing file with clang's errors, then 'clang check: N files, ...'.
Exit status 0 when everything compiled.
"""
import argparse
import concurrent.futures
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKED = ("src/", "tools/", "python/")


def clang_command(entry, cxx):
    """The GCC command of one compile_commands.json entry as a clang command that stops at LLVM IR."""
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    out = [cxx, "-c", "-emit-llvm", "-Xclang", "-disable-llvm-passes", "-o", os.devnull, "-w"]
    skip = False
    for a in args[1:]:
        if skip:
            skip = False
        elif a == "-o":
            skip = True
        elif a in ("-c", "-Werror") or a.startswith("-o"):
            pass
        else:
            out.append(a)
    return out


def run(cmd, cwd):
    proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc.returncode, proc.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build", help="the GCC build folder (default: build)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--cxx", default="clang++-14")
    args = ap.parse_args()
    build = os.path.abspath(os.path.join(ROOT, args.build))
    if not shutil.which(args.cxx):
        print(f"clang check: {args.cxx} is not installed (scripts/install_deps.sh installs it)")
        return 1
    db = os.path.join(build, "compile_commands.json")
    try:
        with open(db) as f:
            entries = json.load(f)
    except (OSError, ValueError) as e:
        print(f"clang check: cannot read {db}: {e}")
        return 1

    units = {}
    for e in entries:
        path = os.path.normpath(os.path.join(e["directory"], e["file"]))
        rel = os.path.relpath(path, ROOT)
        if rel.startswith(CHECKED) and rel not in units:
            units[rel] = (clang_command(e, args.cxx), e["directory"])
    if not units:
        print(f"clang check: no source files of {', '.join(CHECKED)} in {db}")
        return 1

    start = time.time()
    failed = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(run, cmd, cwd): rel for rel, (cmd, cwd) in sorted(units.items())}
        for fut in concurrent.futures.as_completed(futures):
            rc, out = fut.result()
            if rc != 0:
                rel = futures[fut]
                failed.append(rel)
                print(f"clang check: FAILED {rel}\n    " + out.strip()[:4000].replace("\n", "\n    "), flush=True)
    ir_s = time.time() - start

    # The fuzz driver, compiled and linked like build-fuzz's (libFuzzer's main, sanitizer
    # runtimes), against the GCC-built library: only clang's side is being checked.
    lib = os.path.join(build, "lib", "libkiln.so")
    out_dir = os.path.join(build, "clang-check")
    os.makedirs(out_dir, exist_ok=True)
    driver = "fuzz/parse_onnx_fuzzer.cpp"
    link_start = time.time()
    if not os.path.exists(lib):
        failed.append(driver)
        print(f"clang check: FAILED {driver}: {lib} is missing (build the library first)")
    else:
        rc, out = run([args.cxx, "-std=c++20", "-O1", "-w", "-I" + os.path.join(ROOT, "include"),
                       "-fsanitize=fuzzer,address,undefined", os.path.join(ROOT, driver), lib,
                       "-o", os.path.join(out_dir, "parse_onnx_fuzzer")], ROOT)
        if rc != 0:
            failed.append(driver)
            print(f"clang check: FAILED {driver}\n    " + out.strip()[:4000].replace("\n", "\n    "))
    link_s = time.time() - link_start

    n = len(units) + 1
    print(f"clang check: {n} files ({len(units)} compiled to IR in {ir_s:.0f} s with {args.jobs} jobs, the fuzz driver "
          f"compiled and linked in {link_s:.0f} s), {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
