#!/usr/bin/python3
"""Per-layer comparison of Kiln and ONNX Runtime on one model, grouped by output shape.

Run by hand, not by `make test`:

    /usr/bin/python3 bench/layers.py resnet50                  # ../shared/models/resnet50, batch 1
    /usr/bin/python3 bench/layers.py resnet50 --input DIR      # other input_K.pb files (e.g. batch 8)

Kiln's side is `kiln perf --per-instruction --json` (median per instruction), ORT's is its
profiler (bench/ort/ort_profile.js, median per node). The two graphs are not cut the same way
(fusions, reorders), so times are summed per output shape: each row is every instruction or
node whose result has that shape. ORT's profiler adds a few microseconds per node, so many
small nodes look slower than they run; the whole-run ratio is compare.py's job.
"""
import argparse
import collections
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def kiln_layers(kiln, model, input_dir, threads, runs):
    cmd = [kiln, "perf", model, "--threads", str(threads), "-n", str(runs), "--per-instruction", "--json"]
    if input_dir:
        cmd += ["--input", input_dir]
    # The tool profiles with its threads spinning (OMP_WAIT_POLICY=active) unless GOMP_SPINCOUNT
    # or OMP_WAIT_POLICY is set here: a short spin charges each profiled kernel a wake-up.
    env = dict(os.environ)
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, env=env, text=True).stdout
    data = json.loads(out)
    rows = []
    for ins in data.get("per_instruction", []):
        shape = ins.get("shape", "")
        if not shape.startswith("float") or "[" not in shape:
            continue  # scratch buffers and the like (uint8)
        dims = [int(d) for d in shape[shape.index("[") + 1:shape.index("]")].replace(" ", "").split(",") if d]
        rows.append((ins.get("op", "?"), tuple(dims), float(ins.get("ms", 0.0)) * 1000.0))
    return data.get("median_ms"), rows


def ort_layers(node, model, input_dir, threads, runs):
    script = os.path.join(ROOT, "bench", "ort", "ort_profile.js")
    out = subprocess.run([node, script, model, input_dir, "--threads", str(threads), "--runs", str(runs)],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    rows = []
    for line in out.splitlines():
        n = json.loads(line)
        rows.append((n["op"], tuple(n["shape"]), float(n["median_us"])))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="a folder name under --models-dir, or a path to an .onnx file")
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "..", "shared", "models"))
    ap.add_argument("--input", help="folder of input_K.pb files (default: the model's test_data_set_0)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "bin", "kiln"))
    ap.add_argument("--node", default="node")
    args = ap.parse_args()
    model = args.model if args.model.endswith(".onnx") else os.path.join(args.models_dir, args.model, "model.onnx")
    input_dir = args.input or os.path.join(os.path.dirname(model), "test_data_set_0")
    kiln_ms, kiln = kiln_layers(args.kiln, model, input_dir, args.threads, args.runs)
    ort = ort_layers(args.node, model, input_dir, args.threads, args.runs)
    by_shape = collections.defaultdict(lambda: [[], []])
    for op, shape, us in kiln:
        by_shape[shape][0].append((us, op))
    for op, shape, us in ort:
        by_shape[shape][1].append((us, op))
    rows = []
    for shape, (k, o) in by_shape.items():
        rows.append((sum(u for u, _ in k) - sum(u for u, _ in o), shape, k, o))
    rows.sort(key=lambda r: -r[0])
    print(f"{'output shape':>22} {'kiln us':>9} {'ort us':>9} {'diff':>8}  (each instruction / node, us)")
    for diff, shape, k, o in rows:
        ks, os_ = sum(u for u, _ in k), sum(u for u, _ in o)
        detail = " kiln " + " ".join(f"{u:.0f}" for u, _ in sorted(k)) + " | ort " + " ".join(f"{u:.0f}" for u, _ in sorted(o))
        print(f"{str(list(shape)):>22} {ks:9.0f} {os_:9.0f} {diff:+8.0f} {detail[:140]}")
    total_k = sum(u for _, _, u in kiln)
    total_o = sum(u for _, _, u in ort)
    print(f"{'total':>22} {total_k:9.0f} {total_o:9.0f} {total_k - total_o:+8.0f}  (kiln run median {kiln_ms} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
