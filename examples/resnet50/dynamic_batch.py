#!/usr/bin/env python3
"""One compiled program for batches 1 to 8, against one compiled program per exact batch.

    /usr/bin/python3 examples/resnet50/dynamic_batch.py /tmp/resnet50/resnet50.onnx

Parses with map_dyn_input_dims (batch 1..8), compiles once, and runs batches 1, 2, 4 and 8; then
parses with map_input_dims for each exact batch. Prints each batch's median latency both ways and
the cost of the dynamic program (the guide's table shows 6.5-7.1%; Kiln's goal is at most 3%), and
checks that both give the same outputs.

Kiln compiles a dynamic program's shapes as it meets them (a shape set seen `specialize_after`
times gets its own compiled program, in the background), so after warm-up a batch runs on code
made for it; the first calls of a new batch run the generic program and are slower (shown as
"first call").
"""
import argparse
import statistics
import sys
import time

import numpy as np

import kiln


def median_ms(model, feed, runs):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        model.run(feed)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--batches", default="1,2,4,8")
    ap.add_argument("--runs", type=int, default=20, help="timed runs per batch and program")
    ap.add_argument("--target", default="cpu")
    args = ap.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    target = kiln.get_target(args.target)
    rng = np.random.default_rng(0)

    dynamic = kiln.parse_onnx(args.model, map_dyn_input_dims={"input": [{"min": 1, "max": max(batches)}, 3, 224, 224]})
    dynamic.compile(target, offload_copy=True)
    print(f"{'batch':>5} {'first call ms':>14} {'dynamic ms':>11} {'exact ms':>9} {'cost':>7}")
    worst = 0.0
    ok = True
    for b in batches:
        feed = {"input": rng.uniform(-1, 1, (b, 3, 224, 224)).astype(np.float32)}
        t = time.perf_counter()
        dynamic_out = np.array(dynamic.run(feed)[0])
        first = (time.perf_counter() - t) * 1e3
        # The second call of a shape set starts its specialization's compile in the background;
        # time the program users get afterwards, not the generic one meanwhile.
        cached = dynamic.get_specialization_stats()["cached"]
        dynamic.run(feed)
        deadline = time.time() + 60
        while dynamic.get_specialization_stats()["cached"] <= cached and time.time() < deadline:
            time.sleep(0.05)
        exact = kiln.parse_onnx(args.model, map_input_dims={"input": [b, 3, 224, 224]})
        exact.compile(target, offload_copy=True)
        exact_out = np.array(exact.run(feed)[0])
        median_ms(exact, feed, 2)
        # Alternate the two so drift of a noisy machine hits both alike.
        d_times, e_times = [], []
        for _ in range(args.runs):
            d_times.append(median_ms(dynamic, feed, 1))
            e_times.append(median_ms(exact, feed, 1))
        d, e = statistics.median(d_times), statistics.median(e_times)
        cost = d / e - 1
        worst = max(worst, cost)
        rel = float(np.linalg.norm(dynamic_out - exact_out) / np.linalg.norm(exact_out))
        if rel > 1e-5:
            ok = False
            print(f"batch {b}: the dynamic program's outputs differ from the exact one's (rel. L2 {rel:.2e})")
        print(f"{b:>5} {first:>14.1f} {d:>11.2f} {e:>9.2f} {cost * 100:>6.1f}%")
    print(f"worst cost of the dynamic program: {worst * 100:.1f}% (goal: at most 3%)")
    print(f"specializations: {dynamic.get_specialization_stats()}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
