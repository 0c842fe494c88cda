#!/usr/bin/python3
"""A/B of two Kiln settings on one model, per instruction kind and output shape.

Run by hand, not by `make test`:

    /usr/bin/python3 bench/ab.py mobilenet_v2 --a KILN_CPU_INPUT_REORDER=dnnl --b "" --rounds 6
    /usr/bin/python3 bench/ab.py resnet50 --a KILN_CPU_CONV_GEMM_STRIDED=0 --input DIR
    /usr/bin/python3 bench/ab.py resnet50 --a KILN_CPU_CONV_GEMM=1x1 --each   # per instruction
    KILN_TUNING_CACHE=/tmp/t.txt /usr/bin/python3 bench/ab.py resnet50 --a-args=--exhaustive-tune

Each round runs `kiln perf --per-instruction` once with A's environment and once with B's
(space-separated NAME=VALUE settings, alternating, each a fresh process), and the table gives,
per (output shape, instruction kind) summed over its instructions, the minimum and the median
over the rounds, A beside B, and the same for the whole run's median. The machines these
benchmarks run on are noisy (another tenant moves a whole run by up to 2x); alternating
rounds and comparing per instruction separates a change's effect from that noise.
"""
import argparse
import collections
import json
import os
import shlex
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def settings(text):
    env = {}
    for item in text.split():
        name, _, value = item.partition("=")
        env[name] = value
    return env


def one_run(kiln, model, input_dir, threads, runs, extra_env, each=False, extra_args=()):
    cmd = [kiln, "perf", model, "--threads", str(threads), "-n", str(runs), "--per-instruction", "--json",
           *extra_args]
    if input_dir:
        cmd += ["--input", input_dir]
    # The tool profiles with its threads spinning (OMP_WAIT_POLICY=active) unless GOMP_SPINCOUNT
    # or OMP_WAIT_POLICY is set here: a short spin charges each profiled kernel a wake-up.
    env = dict(os.environ)
    env.update(extra_env)
    for name, value in extra_env.items():
        if value == "":
            env.pop(name, None)  # NAME= unsets it
    data = json.loads(subprocess.run(cmd, check=True, stdout=subprocess.PIPE, env=env, text=True).stdout)
    sums = collections.defaultdict(float)
    seen = collections.Counter()
    for ins in data.get("per_instruction", []):
        op = ins.get("op", "?")
        if op in ("load", "allocate"):
            continue
        shape = ins.get("shape", "")
        if each:
            # The k-th instruction with this output shape, whatever its kind: A's and B's
            # programs may lower one layer to different kinds.
            seen[shape] += 1
            sums[(shape, "#%d" % seen[shape])] += float(ins.get("ms", 0.0))
        else:
            sums[(shape, op)] += float(ins.get("ms", 0.0))
    sums[("", "TOTAL (run median)")] = float(data["median_ms"])
    return sums


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="a folder name under --models-dir, or a path to an .onnx file")
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "..", "shared", "models"))
    ap.add_argument("--a", default="", help="A's settings, e.g. 'KILN_CPU_SILU=dnnl' (default: none)")
    ap.add_argument("--b", default="", help="B's settings (default: none)")
    ap.add_argument("--a-args", default="", help="more `kiln perf` options for A, e.g. '--exhaustive-tune'")
    ap.add_argument("--b-args", default="", help="more `kiln perf` options for B")
    ap.add_argument("--input", help="folder of input_K.pb files (default: the model's test_data_set_0 if any)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=100, help="iterations per kiln perf")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--each", action="store_true",
                    help="one row per instruction (the k-th with its output shape) instead of per kind")
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "bin", "kiln"))
    args = ap.parse_args()
    model = args.model if args.model.endswith(".onnx") else os.path.join(args.models_dir, args.model, "model.onnx")
    input_dir = args.input
    default_inputs = os.path.join(os.path.dirname(model), "test_data_set_0")
    if input_dir is None and os.path.isdir(default_inputs):
        input_dir = default_inputs
    rows = collections.defaultdict(lambda: ([], []))
    for _ in range(args.rounds):
        for side, text, extra in ((0, args.a, args.a_args), (1, args.b, args.b_args)):
            for key, ms in one_run(args.kiln, model, input_dir, args.threads, args.runs, settings(text),
                                      args.each, shlex.split(extra)).items():
                rows[key][side].append(ms)
    print("A: %s\nB: %s\n%d rounds; per output shape and kind, ms summed over its instructions: min / median"
          % ((args.a + " " + args.a_args).strip() or "(defaults)", (args.b + " " + args.b_args).strip() or "(defaults)",
             args.rounds))
    fmt = lambda v: "%.3f / %.3f" % (min(v), statistics.median(v)) if v else "-"
    print("%-44s %-28s %18s %18s" % ("shape", "kind", "A", "B"))
    for key in sorted(rows, key=lambda k: -max(rows[k][0] + rows[k][1])):
        a, b = rows[key]
        print("%-44s %-28s %18s %18s" % (key[0][:44], key[1][:28], fmt(a), fmt(b)))


if __name__ == "__main__":
    main()
