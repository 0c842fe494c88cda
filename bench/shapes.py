#!/usr/bin/python3
"""Dynamic shapes side by side: one Kiln program for many input shapes, against ONNX Runtime 1.30
and against Kiln's own static compiles (issue 18's goals).

Run by hand, not by `make test`:

    /usr/bin/python3 bench/shapes.py                        # both parts, 2 threads, 5 rounds
    /usr/bin/python3 bench/shapes.py --parts bert --rounds 3
    /usr/bin/python3 bench/shapes.py --parts resnet --mem-calls 200
    /usr/bin/python3 bench/shapes.py --quick                # smoke run: 1 round, few iterations

Part `bert`: bert_small (input_ids, attention_mask int64 [batch, sequence]) at sequence lengths
7, 33, 77, 128 (batch 1) in ONE Kiln program parsed with batch 1..--max-batch and sequence
1..--max-seq dynamic (kiln.parse_onnx(path, map_dyn_input_dims=...)), against one ORT session.
Per length: the first call (Kiln: includes compiling that shape, if it compiles one), median and
min after warm-up, Kiln/ORT (goal <= 0.9), and how many compiles Kiln had done by then
(program.get_specialization_stats()).

Part `resnet`: ResNet-50 with batch 1..--max-batch dynamic in one Kiln program, against a static
Kiln compile per batch size (goal: dynamic at most 3% slower) and ORT for reference. Then memory:
one more process per engine runs --mem-calls calls (default 1000) with random batch sizes in
1..--max-batch and reports the resident set after the first 10 calls and after all of them
(goal: within 1.1x).

Each round starts each engine as a new process (Kiln dynamic, [Kiln static,] ORT, in turn), all
on the same inputs: seeded random data written as input_K.pb files (onnx.TensorProto) for the
round (token ids uniform in [0, --id-high), masks of ones, images N(0, 1)). Kiln's worker is this
script (`--worker`, the kiln module from build/python, threads through KILN_NUM_THREADS); ORT's
is bench/ort/ort_shapes.js (session options as in ort_bench.js). Rows are the median over rounds
of each round's median; min is the fastest single run; first call is the median over rounds.
The header names the CPU (bench/report.py); a note names the rounds in which other processes
took more than --max-load of the CPUs (bench/quiet.py), which makes numbers indicative only.
"""
import argparse
import datetime
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
import quiet  # noqa: E402  (bench/quiet.py)
import report  # noqa: E402  (bench/report.py)
from processes import ensure_ort, run_json  # noqa: E402  (bench/processes.py)

ORT_SHAPES = os.path.join(BENCH, "ort", "ort_shapes.js")
PARTS = ("bert", "resnet")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def percentile(values, q):
    """Linear interpolation between closest ranks (numpy's default, as ort_bench.js does)."""
    s = sorted(values)
    if not s:
        return float("nan")
    pos = (len(s) - 1) * q
    lo, hi = int(pos), min(int(pos) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


# --------------------------------------------------------------------------------------
# Inputs: serialized onnx.TensorProto files (dims, data_type, name, raw_data), the bytes
# onnx.numpy_helper.from_array writes, so ort_shapes.js (tensor_proto.js) and kiln read them.
# --------------------------------------------------------------------------------------
ONNX_TYPES = {"float32": 1, "int32": 6, "int64": 7, "float64": 11}


def _varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def tensor_proto(name, arr):
    arr = arr if arr.flags["C_CONTIGUOUS"] else arr.copy()
    out = bytearray()
    for d in arr.shape:
        out += b"\x08" + _varint(int(d))
    out += b"\x10" + _varint(ONNX_TYPES[str(arr.dtype)])
    nb = name.encode()
    out += b"\x42" + _varint(len(nb)) + nb
    raw = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
    out += b"\x4a" + _varint(len(raw)) + raw
    return bytes(out)


def write_case(folder, arrays):
    """arrays: [(input name, ndarray)] in the graph's input order -> folder/input_K.pb."""
    os.makedirs(folder, exist_ok=True)
    inputs = []
    for k, (name, arr) in enumerate(arrays):
        path = os.path.join(folder, f"input_{k}.pb")
        with open(path, "wb") as f:
            f.write(tensor_proto(name, arr))
        inputs.append({"name": name, "file": path, "shape": list(arr.shape), "type": str(arr.dtype)})
    return inputs


# --------------------------------------------------------------------------------------
# The cases of each part
# --------------------------------------------------------------------------------------
def bert_cases(args, seed, folder):
    import numpy as np

    rng = np.random.default_rng(seed)
    cases = []
    for L in args.lengths:
        ids = rng.integers(0, args.id_high, size=(1, L), dtype=np.int64)
        mask = np.ones((1, L), np.int64)
        name = f"seq{L}"
        inputs = write_case(os.path.join(folder, name), [("input_ids", ids), ("attention_mask", mask)])
        cases.append({"name": name, "label": str(L), "dir": os.path.join(folder, name), "inputs": inputs})
    return cases


def resnet_cases(args, seed, folder, batches):
    import numpy as np

    rng = np.random.default_rng(seed)
    cases = []
    for b in batches:
        x = rng.standard_normal((b, 3, 224, 224), dtype=np.float32)
        name = f"b{b}"
        inputs = write_case(os.path.join(folder, name), [("input", x)])
        cases.append({"name": name, "label": str(b), "dir": os.path.join(folder, name), "inputs": inputs})
    return cases


def dyn_dims(args, part):
    batch = {"min": 1, "max": args.max_batch, "optimals": [1]}
    if part == "bert":
        seq = {"min": 1, "max": args.max_seq}
        return {"input_ids": [dict(batch), dict(seq)], "attention_mask": [dict(batch), dict(seq)]}
    return {"input": [dict(batch), 3, 224, 224]}


def model_path(args, part):
    name = "bert_small" if part == "bert" else "resnet50"
    path = os.path.join(args.models_dir, name, "model.onnx")
    if not os.path.isfile(path):
        raise SystemExit(f"no model at {path} (--models-dir)")
    return path


# --------------------------------------------------------------------------------------
# Kiln's side: one process per plan (--worker PLAN.json)
# --------------------------------------------------------------------------------------
def rss_mb():
    """The current resident set of this process in MB (not the peak)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)


def kiln_worker(args):
    import resource

    import numpy as np

    if args.kiln_python:
        sys.path.insert(0, args.kiln_python)
    import kiln

    with open(args.worker) as f:
        plan = json.load(f)
    baseline = rss_mb()
    feeds = {}
    for c in plan["cases"]:
        d = {}
        for i in c["inputs"]:
            arr = np.ascontiguousarray(np.array(kiln.read_tensor_proto(i["file"])))
            if list(arr.shape) != i["shape"] or str(arr.dtype) != i["type"]:
                raise SystemExit(f"{i['file']}: read {arr.dtype}{list(arr.shape)}, wrote {i['type']}{i['shape']}")
            d[i["name"]] = arr
        feeds[c["name"]] = d
    target = kiln.get_target(args.target)
    compile_kw = {}
    if plan.get("max_specializations") is not None:
        compile_kw["max_specializations"] = plan["max_specializations"]
    if plan.get("specialize_after") is not None:
        compile_kw["specialize_after"] = plan["specialize_after"]
    if plan.get("buckets"):
        compile_kw["dynamic_buckets"] = {"batch": plan["buckets"]}

    def timed_run(model, feed):
        s0 = time.perf_counter()
        outs = model.run(feed)
        for o in outs:
            np.asarray(o)  # zero-copy view: the outputs are in host memory
        return (time.perf_counter() - s0) * 1e3

    def measure(model, feed):
        first = timed_run(model, feed)
        for _ in range(plan["warmup"]):
            timed_run(model, feed)
        # Steady state: the specialization the warm-up asked for (a dynamic program compiles
        # it in the background while the generic program serves the calls) is ready.
        if hasattr(model, "finish_specializations"):
            model.finish_specializations()
        times = [timed_run(model, feed) for _ in range(plan["iterations"])]
        return {"first_ms": round(first, 3), "median_ms": round(percentile(times, 0.5), 3),
                "p90_ms": round(percentile(times, 0.9), 3), "min_ms": round(min(times), 3),
                "iterations": len(times), "warmup": plan["warmup"]}

    result = {"engine": "kiln", "kiln_mode": plan["kiln_mode"], "mode": plan["mode"], "target": args.target,
              "threads": args.threads, "baseline_rss_mb": round(baseline, 3)}
    if plan["kiln_mode"] == "static":
        result["cases"] = []
        for c in plan["cases"]:
            dims = {i["name"]: i["shape"] for i in c["inputs"]}
            t0 = time.perf_counter()
            model = kiln.parse_onnx(plan["model"], map_input_dims=dims)
            model.compile(target, **compile_kw)
            compile_ms = (time.perf_counter() - t0) * 1e3
            row = {"name": c["name"], "compile_ms": round(compile_ms, 3)}
            row.update(measure(model, feeds[c["name"]]))
            result["cases"].append(row)
            del model
    else:
        t0 = time.perf_counter()
        model = kiln.parse_onnx(plan["model"], map_dyn_input_dims=plan["dyn_dims"])
        t1 = time.perf_counter()
        model.compile(target, **compile_kw)
        t2 = time.perf_counter()
        result["parse_ms"] = round((t1 - t0) * 1e3, 3)
        result["compile_ms"] = round((t2 - t1) * 1e3, 3)
        result["inputs"] = {k: str(v) for k, v in model.get_inputs().items()}
        if plan["mode"] == "memory":
            seq, sample_after = plan["sequence"], plan["sample_after"]
            early = early_stats = None
            trace = []
            l0 = time.perf_counter()
            for n, name in enumerate(seq, 1):
                timed_run(model, feeds[name])
                if n == sample_after:
                    early, early_stats = rss_mb(), dict(model.get_specialization_stats())
                if n % 100 == 0:
                    trace.append(round(rss_mb(), 1))
            result.update({"calls": len(seq), "sample_after": sample_after,
                           "rss_early_mb": round(early, 3) if early is not None else None,
                           "rss_end_mb": round(rss_mb(), 3), "rss_every_100_mb": trace,
                           "loop_ms": round((time.perf_counter() - l0) * 1e3, 3),
                           "stats_early": early_stats})
        else:
            result["cases"] = []
            for c in plan["cases"]:
                row = {"name": c["name"]}
                row.update(measure(model, feeds[c["name"]]))
                row["stats"] = dict(model.get_specialization_stats())
                result["cases"].append(row)
        result["stats"] = dict(model.get_specialization_stats())
        try:
            result["memory_usage"] = dict(model.get_memory_usage())
        except Exception as e:  # noqa: BLE001  (informational only)
            result["memory_usage"] = str(e)
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 3)
    print(json.dumps(result))


# --------------------------------------------------------------------------------------
# The driver
# --------------------------------------------------------------------------------------
ENGINE_LABELS = {"kiln": "Kiln", "static": "Kiln static", "ort": "ORT"}


def engine_cmd(args, engine, plan_file):
    if engine == "ort":
        return [args.node, ORT_SHAPES, plan_file, "--threads", str(args.threads), "--opt", args.opt]
    return [sys.executable, os.path.abspath(__file__), "--worker", plan_file, "--target", args.target,
            "--threads", str(args.threads), "--kiln-python", args.kiln_python]


def write_plan(path, args, part, engine, mode, cases, **extra):
    plan = {"model": model_path(args, part), "mode": mode, "kiln_mode": "static" if engine == "static" else "dyn",
            "dyn_dims": dyn_dims(args, part), "max_specializations": args.max_specializations,
            "specialize_after": args.specialize_after,
            "buckets": [int(b) for b in args.buckets.split(",")] if args.buckets else [],
            "cases": [{"name": c["name"], "dir": c["dir"], "inputs": c["inputs"]} for c in cases],
            "warmup": args.warmup[part], "iterations": args.iterations[part]}
    plan.update(extra)
    with open(path, "w") as f:
        json.dump(plan, f)
    return path


class Runner:
    def __init__(self, args, env):
        self.args, self.env = args, env
        self.errors, self.notes, self.raw = {}, [], []
        self.ort_version = None

    def run(self, part, engine, plan_file, round_no, what="latency"):
        key = (part, engine, what)
        if key in self.errors:
            return None
        if self.args.idle_wait > 0:
            quiet.wait_until_idle(self.args.idle_wait, self.args.max_load, sample_s=0.5)
        with quiet.ForeignLoad() as load:
            res, err = run_json(engine_cmd(self.args, engine, plan_file), self.env, self.args.timeout)
        label = ENGINE_LABELS[engine]
        if err:
            self.errors[key] = err
            self.notes.append(f"{part} {what}: {label} failed in round {round_no}: {err}")
            log(f"round {round_no} {part} {what} {label}: FAILED: {err}")
            return None
        res.update({"part": part, "engine_label": label, "what": what, "round": round_no,
                    "foreign_load": round(load.fraction, 3) if load.fraction is not None else None,
                    "wall_s": round(load.wall, 2)})
        self.ort_version = res.get("ort_version", self.ort_version)
        self.raw.append(res)
        if "cases" in res:
            fl = res["foreign_load"]
            log(f"round {round_no} {part} {label}: " + ", ".join(
                f"{c['name']} {c['median_ms']:.2f} ms" for c in res["cases"])
                + (f" (foreign load {fl:.0%})" if fl is not None else ""))
        else:
            log(f"round {round_no} {part} memory {label}: RSS {res.get('rss_early_mb')} -> {res.get('rss_end_mb')} MB")
        return res


def agg_cases(records):
    """{case name: aggregated numbers} over rounds for one engine."""
    out = {}
    if not records:
        return out
    for name in [c["name"] for c in records[0]["cases"]]:
        rows = [next(c for c in r["cases"] if c["name"] == name) for r in records]
        out[name] = {
            "first_ms": statistics.median(c["first_ms"] for c in rows),
            "median_ms": statistics.median(c["median_ms"] for c in rows),
            "p90_ms": statistics.median(c["p90_ms"] for c in rows),
            "min_ms": min(c["min_ms"] for c in rows),
            "round_medians": [c["median_ms"] for c in rows],
            "compile_ms": statistics.median(c["compile_ms"] for c in rows) if "compile_ms" in rows[0] else None,
            "compiles": sorted({c["stats"]["compiles"] for c in rows}) if "stats" in rows[0] else None,
        }
    return out


def stats_text(st):
    if not isinstance(st, dict):
        return str(st)
    return (f"compiles {st.get('compiles')} ({report.fmt(st.get('compile_ms'))} ms in all), cached {st.get('cached')}, "
            f"evictions {st.get('evictions')}, hits {st.get('hits')}, failed {st.get('failed_compiles')}, "
            f"max_specializations {st.get('max_specializations')}")


def ratio(a, b):
    return a / b if a is not None and b else None


def goal_cell(r, goal):
    if r is None:
        return "n/a"
    return "yes" if r <= goal else f"no ({(r / goal - 1) * 100:.0f}% over)"


def max_load(records):
    vals = [r.get("foreign_load") or 0.0 for r in records]
    return max(vals) if vals else None


def load_line(args, recs):
    parts = []
    for engine, rs in recs.items():
        if rs:
            loads = [r.get("foreign_load") or 0.0 for r in rs]
            busy = sum(1 for x in loads if x > args.max_load)
            parts.append(f"{ENGINE_LABELS[engine]} up to {max(loads):.0%}"
                         + (f" ({busy} of {len(rs)} rounds above {args.max_load:.0%})" if busy else ""))
    return "Foreign load (the largest share of the CPUs other processes took during a round): " + "; ".join(parts) + "."


def render_bert(args, recs):
    fmt = report.fmt
    k, o = agg_cases(recs.get("kiln")), agg_cases(recs.get("ort"))
    cases = [(f"seq{L}", str(L)) for L in args.lengths]
    header = ["sequence", "Kiln first call ms", "Kiln median ms", "Kiln min ms", "ORT first call ms", "ORT median ms",
              "ORT min ms", "Kiln/ORT median", "goal <= 0.9x", "Kiln compiles so far"]
    rows = []
    for name, label in cases:
        kc, oc = k.get(name), o.get(name)
        r = ratio(kc and kc["median_ms"], oc and oc["median_ms"])
        rows.append([label,
                     fmt(kc["first_ms"]) if kc else "n/a", fmt(kc["median_ms"]) if kc else "n/a",
                     fmt(kc["min_ms"]) if kc else "n/a",
                     fmt(oc["first_ms"]) if oc else "n/a", fmt(oc["median_ms"]) if oc else "n/a",
                     fmt(oc["min_ms"]) if oc else "n/a",
                     f"{r:.2f}x" if r else "n/a", goal_cell(r, 0.9),
                     "/".join(str(x) for x in kc["compiles"]) if kc and kc["compiles"] else "n/a"])
    lines = [f"### bert_small: sequence lengths {', '.join(map(str, args.lengths))} (batch 1), one program",
             "", report.markdown_table(header, rows), ""]
    kr, orr = recs.get("kiln") or [], recs.get("ort") or []
    facts = []
    if kr:
        facts.append(f"Kiln: one program parsed with `map_dyn_input_dims` batch 1..{args.max_batch}, sequence "
                     f"1..{args.max_seq} ({kr[0].get('inputs')}); parse {fmt(statistics.median(r['parse_ms'] for r in kr))} ms, "
                     f"compile() {fmt(statistics.median(r['compile_ms'] for r in kr))} ms (before the first call); "
                     f"after all lengths: {stats_text(kr[-1]['stats'])} (last round); peak RSS {fmt(max(r['peak_rss_mb'] for r in kr))} MB.")
    if orr:
        facts.append(f"ORT: one session, creation {fmt(statistics.median(r['session_create_ms'] for r in orr))} ms; "
                     f"peak RSS {fmt(max(r['peak_rss_mb'] for r in orr))} MB (Node.js included).")
    lines += facts + [load_line(args, recs)]
    return lines


def render_resnet(args, recs, mem):
    fmt = report.fmt
    k, s, o = agg_cases(recs.get("kiln")), agg_cases(recs.get("static")), agg_cases(recs.get("ort"))
    header = ["batch", "Kiln dyn first call ms", "Kiln dyn median ms", "Kiln dyn min ms", "static compile ms",
              "static first call ms", "static median ms", "static min ms", "dyn/static median", "goal <= 1.03x",
              "ORT median ms", "ORT min ms", "dyn/ORT median"]
    rows = []
    for b in args.batches:
        name = f"b{b}"
        kc, sc, oc = k.get(name), s.get(name), o.get(name)
        r = ratio(kc and kc["median_ms"], sc and sc["median_ms"])
        ro = ratio(kc and kc["median_ms"], oc and oc["median_ms"])
        rows.append([str(b),
                     fmt(kc["first_ms"]) if kc else "n/a", fmt(kc["median_ms"]) if kc else "n/a",
                     fmt(kc["min_ms"]) if kc else "n/a",
                     fmt(sc["compile_ms"]) if sc else "n/a", fmt(sc["first_ms"]) if sc else "n/a",
                     fmt(sc["median_ms"]) if sc else "n/a", fmt(sc["min_ms"]) if sc else "n/a",
                     f"{r:.3f}x" if r else "n/a", goal_cell(r, 1.03),
                     fmt(oc["median_ms"]) if oc else "n/a", fmt(oc["min_ms"]) if oc else "n/a",
                     f"{ro:.2f}x" if ro else "n/a"])
    lines = [f"### ResNet-50: batch 1..{args.max_batch} in one program against a static compile per batch",
             "", report.markdown_table(header, rows), ""]
    kr = recs.get("kiln") or []
    if kr:
        lines.append(f"Kiln dyn: parse {fmt(statistics.median(r['parse_ms'] for r in kr))} ms, compile() "
                     f"{fmt(statistics.median(r['compile_ms'] for r in kr))} ms; after all batches: {stats_text(kr[-1]['stats'])} "
                     f"(last round); compiles so far per batch: "
                     + ", ".join(f"b{b} {'/'.join(map(str, k[f'b{b}']['compiles']))}" for b in args.batches
                                 if f"b{b}" in k and k[f"b{b}"]["compiles"]) + ".")
    lines.append("Static: `parse_onnx(map_input_dims=...)` + compile() for each batch size in the same process "
                 "(the compile column is that, parse included).")
    lines.append(load_line(args, recs))
    if mem:
        mh = ["engine", "calls", f"RSS after {args.mem_sample} calls MB", "RSS after all MB", "all / first",
              "goal <= 1.1x", "peak RSS MB", "Kiln specializations", "loop s", "foreign load"]
        mrows = []
        for engine, r in mem.items():
            if r is None:
                mrows.append([ENGINE_LABELS[engine]] + ["fail"] * 9)
                continue
            q = ratio(r["rss_end_mb"], r["rss_early_mb"])
            st = r.get("stats")
            mrows.append([ENGINE_LABELS[engine] + (" dyn" if engine == "kiln" else ""), str(r["calls"]),
                          fmt(r["rss_early_mb"]), fmt(r["rss_end_mb"]), f"{q:.3f}x" if q else "n/a",
                          goal_cell(q, 1.1) if engine == "kiln" else "", fmt(r["peak_rss_mb"]),
                          (f"compiles {st['compiles']}, cached {st['cached']}, evictions {st['evictions']}"
                           if st else ""), f"{r['loop_ms'] / 1e3:.1f}",
                          f"{r['foreign_load']:.0%}" if r.get("foreign_load") is not None else "n/a"])
        lines += ["", f"Memory: {args.mem_calls} calls with batch sizes drawn uniformly from 1..{args.max_batch} "
                  f"(seed {args.seed}; the same sequence and data for each engine), resident set (current, not peak) "
                  f"after the first {args.mem_sample} calls and after all:", "", report.markdown_table(mh, mrows)]
        kt = (mem.get("kiln") or {}).get("rss_every_100_mb")
        if kt:
            lines += ["", f"Kiln RSS every 100 calls (MB): {', '.join(str(x) for x in kt)}."]
    return lines


def render(args, sections, notes, ort_version):
    head = [f"Dynamic shapes, {args.threads} threads, {args.rounds} round(s) (Kiln target `{args.target}` through "
            f"the Python module; ONNX Runtime {ort_version or '1.30'} with graph optimization `{args.opt}`, one "
            f"session), {datetime.date.today().isoformat()}.", "", report.cpu_header(), ""]
    body = []
    for s in sections:
        body += s + [""]
    foot = [f"Median: the median over rounds of each round's median of {', '.join(f'{p} {args.iterations[p]}' for p in args.parts)} "
            f"timed calls after {', '.join(f'{p} {args.warmup[p]}' for p in args.parts)} warm-up calls (per shape, after its "
            "first call); min: the fastest single call; first call: the first call with that shape in the process "
            "(median over rounds; Kiln's includes compiling the shape when it compiles one). A call: `run` with numpy "
            "arrays until the outputs are in host memory (ORT: `session.run`)."]
    foot += [f"- {n}" for n in notes]
    return "\n".join(head + body + foot).rstrip() + "\n"


def parse_list(text, what):
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"{what}: comma-separated integers, got {text!r}")
    if not vals or min(vals) < 1:
        raise SystemExit(f"{what}: positive integers, got {text!r}")
    return vals


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--parts", "--models", dest="parts", default="bert,resnet",
                   help="comma-separated: bert (bert_small sequence lengths), resnet (ResNet-50 batch + memory)")
    p.add_argument("--rounds", type=int, default=None, help="default 5 (--quick: 1)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="smoke run: 1 round, few iterations, batches 1,2, 30 memory calls")
    p.add_argument("--engines", default="kiln,static,ort",
                   help="kiln (one dynamic program), static (Kiln compile per shape; resnet only), ort")
    p.add_argument("--lengths", default="7,33,77,128", help="bert: sequence lengths, in the order they run")
    p.add_argument("--max-seq", type=int, default=128, help="bert: Kiln's sequence range 1..N")
    p.add_argument("--max-batch", type=int, default=8, help="Kiln's batch range 1..N (both parts; memory draws from it)")
    p.add_argument("--batches", default="1,2,4,8", help="resnet: batch sizes timed, in order")
    p.add_argument("--iterations", type=int, default=None, help="timed calls per shape (default bert 30, resnet 10)")
    p.add_argument("--warmup", type=int, default=None, help="untimed calls per shape after its first (default bert 5, resnet 2)")
    p.add_argument("--mem-calls", type=int, default=1000, help="resnet memory: calls with random batch sizes (0: skip)")
    p.add_argument("--mem-sample", type=int, default=10, help="resnet memory: the early RSS sample, after this many calls")
    p.add_argument("--mem-engines", default="kiln", help="resnet memory: kiln and/or ort")
    p.add_argument("--max-specializations", type=int, default=None, help="Kiln compile option (default: Kiln's)")
    p.add_argument("--specialize-after", type=int, default=None,
                   help="Kiln compile option (default: Kiln's; 0: every shape on the generic program)")
    p.add_argument("--buckets", default="", help="Kiln compile option dynamic_buckets for the batch, e.g. 1,2,4,8 "
                   "(sizes compiled ahead; others padded up to the next)")
    p.add_argument("--id-high", type=int, default=100, help="bert: token ids uniform in [0, N)")
    p.add_argument("--seed", type=int, default=1234, help="round r's data uses seed + r")
    p.add_argument("--models-dir", default=os.path.join(os.environ["KILN_SHARED_DIR"], "models")
                   if os.environ.get("KILN_SHARED_DIR") else os.path.join(ROOT, "..", "shared", "models"))
    p.add_argument("--target", default="cpu", help="Kiln target")
    p.add_argument("--opt", default="all", help="ORT graph optimization level")
    p.add_argument("--kiln-python", default=os.path.join(ROOT, "build", "python"), help="folder with the kiln module")
    p.add_argument("--node", default="node")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per engine process")
    p.add_argument("--idle-wait", type=float, default=20.0, help="seconds to wait for idle CPUs before each process")
    p.add_argument("--max-load", type=float, default=0.10, help="foreign load above which a round is flagged")
    p.add_argument("--out", help="also write the Markdown to this file")
    p.add_argument("--section", help="with --out: replace (or append) only this '## ...' section")
    p.add_argument("--raw", help="write every process's JSON result to this file, one per line")
    p.add_argument("--keep-inputs", help="write the inputs under this folder and keep them (default: a temporary folder)")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        os.environ.setdefault("KILN_NUM_THREADS", str(args.threads))
        return kiln_worker(args)

    args.parts = [x for x in args.parts.split(",") if x]
    for x in args.parts:
        if x not in PARTS:
            p.error(f"unknown part {x!r} (bert, resnet)")
    args.engines = [e for e in args.engines.split(",") if e]
    args.mem_engines = [e for e in args.mem_engines.split(",") if e]
    for e in args.engines + args.mem_engines:
        if e not in ENGINE_LABELS:
            p.error(f"unknown engine {e!r} (kiln, static, ort)")
    args.lengths = parse_list(args.lengths, "--lengths")
    if args.quick:
        if args.rounds is None:
            args.rounds = 1
        if args.batches == "1,2,4,8":
            args.batches = "1,2"
        if args.mem_calls == 1000:
            args.mem_calls = 30
    args.rounds = 5 if args.rounds is None else args.rounds
    args.batches = parse_list(args.batches, "--batches")
    if max(args.lengths) > args.max_seq:
        p.error(f"--lengths go above --max-seq {args.max_seq}")
    if max(args.batches) > args.max_batch:
        p.error(f"--batches go above --max-batch {args.max_batch}")
    defaults = {"bert": (5, 30), "resnet": (2, 10)} if not args.quick else {"bert": (1, 5), "resnet": (1, 3)}
    args.warmup = {k: (args.warmup if args.warmup is not None else w) for k, (w, _) in defaults.items()}
    args.iterations = {k: (args.iterations if args.iterations is not None else n) for k, (_, n) in defaults.items()}

    env = dict(os.environ)
    env["KILN_NUM_THREADS"] = str(args.threads)
    if "ort" in args.engines + args.mem_engines:
        env = ensure_ort(env)
    runner = Runner(args, env)
    work = args.keep_inputs or tempfile.mkdtemp(prefix="kiln_shapes_")
    recs = {part: {e: [] for e in args.engines if not (part == "bert" and e == "static")} for part in args.parts}
    mem = {}
    try:
        for r in range(args.rounds):
            seed = args.seed + r
            for part in args.parts:
                folder = os.path.join(work, f"round{r + 1}", part)
                cases = (bert_cases(args, seed, folder) if part == "bert"
                         else resnet_cases(args, seed, folder, args.batches))
                for engine in recs[part]:
                    plan = write_plan(os.path.join(folder, f"plan_{engine}.json"), args, part, engine, "latency", cases)
                    res = runner.run(part, engine, plan, r + 1)
                    if res:
                        recs[part][engine].append(res)
                if not args.keep_inputs:
                    shutil.rmtree(folder, ignore_errors=True)
        if "resnet" in args.parts and args.mem_calls > 0:
            folder = os.path.join(work, "memory")
            batches = list(range(1, args.max_batch + 1))
            cases = resnet_cases(args, args.seed, folder, batches)
            rnd = random.Random(args.seed)
            sequence = [f"b{rnd.choice(batches)}" for _ in range(args.mem_calls)]
            for engine in args.mem_engines:
                if engine == "static":
                    continue
                plan = write_plan(os.path.join(folder, f"plan_{engine}.json"), args, "resnet", engine, "memory",
                                  cases, sequence=sequence, sample_after=args.mem_sample)
                mem[engine] = runner.run("resnet", engine, plan, 1, what="memory")
    finally:
        if not args.keep_inputs:
            shutil.rmtree(work, ignore_errors=True)

    sections = []
    if "bert" in args.parts:
        sections.append(render_bert(args, recs["bert"]))
    if "resnet" in args.parts:
        sections.append(render_resnet(args, recs["resnet"], mem))
    text = render(args, sections, runner.notes, runner.ort_version)
    print(text, end="")
    if args.raw:
        with open(args.raw, "w") as f:
            for res in runner.raw:
                f.write(json.dumps(res) + "\n")
    if args.out:
        old = open(args.out).read() if os.path.exists(args.out) else ""
        new = report.replace_section(old, args.section, text) if args.section else text
        with open(args.out, "w") as f:
            f.write(new)


if __name__ == "__main__":
    main()
