#!/usr/bin/env python3
"""Kiln's cpu target against ONNX Runtime's Python package, side by side, on a machine that has
`onnxruntime` for Python but no npm (the lent GPU machine, whose host CPU is an Intel Xeon with
AMX: the only such CPU these sessions reach). bench/compare.py is the tool everywhere else.

    python3 bench/device_cpu_compare.py --kiln build-gpu/bin/kiln --models-dir gpu-models \\
        --threads 2,16 --rounds 3 --out OUT.md

Each round runs every case once per engine, Kiln then ORT, each in a process of its own, on the
model's test_data_set_0 inputs; a cell is the median over rounds of each run's median latency.
Kiln modes: fp32, and `--bf16` where asked (--bf16; on AMX oneDNN runs bf16 natively), compared
with ORT fp32; QDQ twins (NAME_qdq folders) run as they are on both. The table names the CPU.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

ORT_CHILD = r"""
import json, os, sys, time
import numpy as np, onnx, onnxruntime as ort
from onnx import numpy_helper
model, data, threads, n, warm = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
o = ort.SessionOptions(); o.intra_op_num_threads = threads; o.inter_op_num_threads = 1
t0 = time.perf_counter(); s = ort.InferenceSession(model, o, providers=["CPUExecutionProvider"])
create = (time.perf_counter() - t0) * 1e3
feeds = {}
for i, inp in enumerate(s.get_inputs()):
    t = onnx.TensorProto(); t.ParseFromString(open(os.path.join(data, "input_%d.pb" % i), "rb").read())
    feeds[inp.name] = numpy_helper.to_array(t)
for _ in range(warm): s.run(None, feeds)
times = []
for _ in range(n):
    t0 = time.perf_counter(); s.run(None, feeds); times.append((time.perf_counter() - t0) * 1e3)
times.sort()
print(json.dumps({"median_ms": times[len(times) // 2], "min_ms": times[0], "session_create_ms": create,
                  "version": ort.__version__}))
"""


def cpu_line():
    model = ""
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and not model:
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    isa = [x for x in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_int8")
           if x in flags]
    return "%s (%s), %d cores" % (model or platform.processor(), " ".join(isa), os.cpu_count() or 0)


def run_json(cmd, timeout):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timed out"
    if p.returncode != 0:
        return None, (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
    try:
        return json.loads(p.stdout.strip().splitlines()[-1]), ""
    except (ValueError, IndexError):
        return None, "no JSON: " + p.stdout[-200:]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--models-dir", required=True)
    ap.add_argument("--models", default="", help="comma list (default: every folder with model.onnx)")
    ap.add_argument("--threads", default="2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--bf16", action="store_true", help="also Kiln --bf16 against ORT fp32")
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--out", default="")
    a = ap.parse_args()

    names = [m for m in a.models.split(",") if m] or sorted(
        d for d in os.listdir(a.models_dir) if os.path.isfile(os.path.join(a.models_dir, d, "model.onnx")))
    cases = []
    for name in names:
        model = os.path.join(a.models_dir, name, "model.onnx")
        data = os.path.join(a.models_dir, name, "test_data_set_0")
        if not (os.path.isfile(model) and os.path.isdir(data)):
            print("skip %s: no model.onnx or test_data_set_0" % name, file=sys.stderr)
            continue
        for t in [int(x) for x in a.threads.split(",")]:
            modes = ["fp32"] + (["bf16"] if a.bf16 and not name.endswith("_qdq") else [])
            for mode in modes:
                cases.append((name, model, data, t, mode))
    kiln_ms, ort_ms, notes = {}, {}, {}
    version = "?"
    for r in range(a.rounds):
        for (name, model, data, t, mode) in cases:
            key = (name, t, mode)
            cmd = [a.kiln, "perf", model, "--input", data, "--threads", str(t), "-n", str(a.n), "--warmup",
                   str(a.warmup), "--json", "--quiet"] + (["--bf16"] if mode == "bf16" else [])
            k, err = run_json(cmd, a.timeout)
            if k:
                kiln_ms.setdefault(key, []).append(k["median_ms"])
            else:
                notes[key] = "kiln: " + err
            if mode == "fp32" or (name, t, "fp32") not in ort_ms:
                o, err = run_json([sys.executable, "-c", ORT_CHILD, model, data, str(t), str(a.n), str(a.warmup)],
                                  a.timeout)
                if o:
                    ort_ms.setdefault((name, t, "fp32"), []).append(o["median_ms"])
                    version = o["version"]
                else:
                    notes[key] = notes.get(key, "") + " ort: " + err
            print("round %d %s t%d %s: kiln %s ort %s" % (r + 1, name, t, mode, kiln_ms.get(key, ["-"])[-1],
                                                          ort_ms.get((name, t, "fp32"), ["-"])[-1]), file=sys.stderr,
                  flush=True)
        write_table(a, cases, kiln_ms, ort_ms, notes, version, r + 1)
    print(write_table(a, cases, kiln_ms, ort_ms, notes, version, a.rounds))


def write_table(a, cases, kiln_ms, ort_ms, notes, version, rounds_done):
    """The table so far (rewritten after every round, so a run cut short still reports)."""
    lines = ["CPU: " + cpu_line() + "; ONNX Runtime %s (Python, CPU EP); %s; median of %d round(s) of %d runs" %
             (version, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), rounds_done, a.n), "",
             "| model | threads | Kiln mode | Kiln ms | ORT fp32 ms | Kiln / ORT | note |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for (name, model, data, t, mode) in cases:
        k = kiln_ms.get((name, t, mode))
        o = ort_ms.get((name, t, "fp32"))
        km = statistics.median(k) if k else None
        om = statistics.median(o) if o else None
        ratio = "%.2f" % (km / om) if km and om else "n/a"
        lines.append("| %s | %d | %s | %s | %s | %s | %s |" % (name, t, mode, "%.3f" % km if km else "n/a",
                                                             "%.3f" % om if om else "n/a", ratio,
                                                             notes.get((name, t, mode), "")))
    text = "\n".join(lines) + "\n"
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    return text


if __name__ == "__main__":
    main()
