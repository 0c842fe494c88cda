#!/usr/bin/env python3
"""Per-instruction dispatch overhead: a model of N tiny elementwise ops (issue 6: under
1 microsecond each).

Builds an ONNX model (opset 13) whose graph is a chain of N elementwise ops (Add, Mul,
Relu, Sub, Tanh, ... with small constants) on a tiny tensor, runs `kiln perf --json` on it
and prints the median time per op:

  * ref                   every op a reference kernel
  * cpu, KILN_CPU_FUSION=0  every op its own generated kernel: the evaluator's cost per step
  * cpu                   the chain fused (a few kernels): what a real model gets

Run by hand (not part of `make test`):

    /usr/bin/python3 bench/dispatch_overhead.py [--kiln build/bin/kiln] [--ops 1000]
        [--shape 1,16] [--iterations 200] [--threads 1]

Needs the `onnx` Python package to write the model.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def build_model(path, n_ops, dims):
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper, save

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)
    nodes, inits = [], []
    cur = "x"
    kinds = ["Add", "Mul", "Relu", "Sub", "Tanh", "Neg", "Abs", "Sigmoid"]
    for i in range(n_ops):
        kind = kinds[i % len(kinds)]
        out = f"t{i}"
        if kind in ("Add", "Mul", "Sub"):
            c = f"c{i}"
            value = {"Add": 0.25, "Mul": 0.75, "Sub": 0.125}[kind]
            inits.append(numpy_helper.from_array(np.array([value], dtype=np.float32), c))
            nodes.append(helper.make_node(kind, [cur, c], [out]))
        else:
            nodes.append(helper.make_node(kind, [cur], [out]))
        cur = out
    nodes.append(helper.make_node("Identity", [cur], ["y"]))
    graph = helper.make_graph(nodes, "chain", [x], [y], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="kiln-bench")
    model.ir_version = 7
    save(model, path)


def perf(kiln, model, target, env_extra, iterations, threads):
    env = dict(os.environ)
    env.update(env_extra)
    cmd = [kiln, "perf", model, "--target", target, "--json", "--quiet", "-n", str(iterations), "--warmup", "20",
           "--threads", str(threads)]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", default="build/bin/kiln")
    ap.add_argument("--ops", type=int, default=1000)
    ap.add_argument("--shape", default="1,16")
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    dims = [int(d) for d in a.shape.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "chain.onnx")
        build_model(model, a.ops, dims)
        rows = [("ref", "ref", {}), ("cpu, KILN_CPU_FUSION=0", "cpu", {"KILN_CPU_FUSION": "0"}), ("cpu (fused)", "cpu", {})]
        print(f"{a.ops} elementwise ops on float32{dims}, {a.threads} thread(s), {a.iterations} iterations")
        print(f"{'configuration':<26} {'median ms':>10} {'us per op':>10} {'compile ms':>11}")
        for label, target, env in rows:
            r = perf(a.kiln, model, target, env, a.iterations, a.threads)
            print(f"{label:<26} {r['median_ms']:>10.4f} {1000.0 * r['median_ms'] / a.ops:>10.3f} {r['compile_ms']:>11.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
