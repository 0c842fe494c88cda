#!/usr/bin/python3
"""Side-by-side greedy decode loop with a KV cache: Kiln (Python module) against ONNX Runtime 1.30.

Run by hand, not by `make test`:

    /usr/bin/python3 bench/decode.py                          # gpt_kv, 2 threads, 5 rounds
    /usr/bin/python3 bench/decode.py --models gpt_kv,path/to/decoder.onnx --rounds 3
    /usr/bin/python3 bench/decode.py --engines ort            # ONNX Runtime alone

Each round runs one whole decode loop per engine, Kiln then ORT, each in a process of its own
(so first-call latency includes Kiln's parse + compile and ORT's session creation every round,
and each peak RSS is that process's). A loop is 64 steps by default: a prefill of the prompt
at past length 0, then 63 steps of one token that feed the previous step's present_* outputs
back as past_*. Shapes change on every call (the past length grows by one), which is the point.

The decoder contract (the same as bench/ort/ort_decode.js, the ORT half):
  * `input_ids` int64 [batch, sequence];
  * cache inputs named `past...` ([batch, heads, past, head_dim]; the past axis is --past-axis,
    default 2), each paired with the output named with `past_key_values` or `past` replaced by
    `present`;
  * optional `attention_mask` (ones, [batch, past + sequence]) and `position_ids`;
  * logits: the output `logits`, else the first output. The token is the argmax of the last
    position (first one on a tie). Batch 1.
The prompt and the expected tokens come from greedy_64.json next to the model when there is one
(tests/data/dynamic_models/gpt_kv has PyTorch's), else --prompt.

Kiln's side uses the Python API of README.md: kiln.parse_onnx(path, map_dyn_input_dims=...)
with batch 1, sequence 1..--max-len and past 0..--max-len-1, compile(kiln.get_target(target)),
then run() with numpy arrays whose shapes change from call to call. Its threads are set with
KILN_NUM_THREADS. Only the standard library, numpy and the kiln module (build/python, or
--kiln-python DIR) are used; ORT runs through node (bench/install_ort.sh installs it).

Per engine the table gives: the first call (Kiln: parse + compile + prefill; ORT: session
creation + prefill), the median and p90 of the one-token steps (the median over rounds of each
round's median, resp. p90), Kiln/ORT ratios, and whether the tokens equal the reference and each
other. The header names the CPU (bench/report.py).
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
import quiet  # noqa: E402  (bench/quiet.py)
import report  # noqa: E402  (bench/report.py)
from processes import ensure_ort, run_json  # noqa: E402  (bench/processes.py)

ORT_DECODE = os.path.join(BENCH, "ort", "ort_decode.js")
DYNAMIC_MODELS = os.path.join(ROOT, "tests", "data", "dynamic_models")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------
# The graph's inputs and outputs, read from the .onnx file without the onnx package
# --------------------------------------------------------------------------------------
def _fields(buf, start, end):
    """Yields (field number, wire type, value) of one protobuf message; a length-delimited
    value is (offset, end) into buf, so large initializers are skipped, not copied."""
    pos = start

    def varint():
        nonlocal pos
        value = shift = 0
        while True:
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7

    while pos < end:
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            yield field, wire, varint()
        elif wire == 1:
            pos += 8
        elif wire == 2:
            n = varint()
            yield field, wire, (pos, pos + n)
            pos += n
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


ELEM_TYPES = {1: "float32", 6: "int32", 7: "int64", 10: "float16", 11: "float64", 16: "bfloat16"}


def _value_info(buf, span):
    name, elem, dims = "", 0, []
    for f, _, v in _fields(buf, *span):
        if f == 1:
            name = buf[v[0]:v[1]].decode()
        elif f == 2:  # TypeProto
            for tf, _, tv in _fields(buf, *v):
                if tf != 1:  # tensor_type
                    continue
                for ttf, _, ttv in _fields(buf, *tv):
                    if ttf == 1:
                        elem = ttv
                    elif ttf == 2:  # TensorShapeProto
                        for sf, _, sv in _fields(buf, *ttv):
                            if sf != 1:
                                continue
                            d = None
                            for df, _, dv in _fields(buf, *sv):
                                if df == 1:
                                    d = dv
                                elif df == 2:
                                    d = buf[dv[0]:dv[1]].decode()
                            dims.append(d)
    return {"name": name, "type": ELEM_TYPES.get(elem, str(elem)), "dims": dims}


def onnx_io(path):
    """{'inputs': [...], 'outputs': [...]}: name, element type and dims (int, dim_param string,
    or None) of the graph's inputs (initializers left out) and outputs."""
    with open(path, "rb") as f:
        buf = f.read()
    inputs, outputs, inits = [], [], set()
    for f, _, v in _fields(buf, 0, len(buf)):
        if f != 7:  # ModelProto.graph
            continue
        for gf, _, gv in _fields(buf, *v):
            if gf == 5:  # initializer: only its name (TensorProto field 8)
                for tf, _, tv in _fields(buf, *gv):
                    if tf == 8:
                        inits.add(buf[tv[0]:tv[1]].decode())
            elif gf == 11:
                inputs.append(_value_info(buf, gv))
            elif gf == 12:
                outputs.append(_value_info(buf, gv))
    return {"inputs": [i for i in inputs if i["name"] not in inits], "outputs": outputs}


# --------------------------------------------------------------------------------------
# The decoder contract (the same rules as ort_decode.js)
# --------------------------------------------------------------------------------------
def present_name(past, outputs):
    for cand in (past.replace("past_key_values", "present", 1) if past.startswith("past_key_values") else None,
                 "present" + past[len("past"):]):
        if cand and cand != past and cand in outputs:
            return cand
    return None


def make_plan(io, past_axis, dim_sizes):
    out_names = [o["name"] for o in io["outputs"]]
    plan = {"ids": None, "mask": None, "positions": None, "cache": [],
            "logits": "logits" if "logits" in out_names else out_names[0]}
    for i in io["inputs"]:
        name = i["name"]
        if name == "input_ids":
            plan["ids"] = name
        elif name == "attention_mask":
            plan["mask"] = name
        elif name == "position_ids":
            plan["positions"] = name
        elif name.startswith("past"):
            present = present_name(name, out_names)
            if not present:
                raise SystemExit(f"cache input '{name}' has no matching present output (outputs: {out_names})")
            if not 1 <= past_axis < len(i["dims"]):
                raise SystemExit(f"--past-axis {past_axis} is outside '{name}' of rank {len(i['dims'])}")
            shape = []
            for axis, d in enumerate(i["dims"]):
                if axis == 0:
                    shape.append(1)
                elif axis == past_axis:
                    shape.append(0)
                elif isinstance(d, int):
                    shape.append(d)
                elif d in dim_sizes:
                    shape.append(dim_sizes[d])
                else:
                    raise SystemExit(f"axis {axis} of '{name}' is symbolic ({d!r}): give --dim {d}=SIZE")
            if i["type"] != "float32":
                raise SystemExit(f"cache input '{name}' is {i['type']}; only float32 caches are handled")
            plan["cache"].append({"name": name, "present": present, "shape": shape})
        else:
            raise SystemExit(f"input '{name}' is none of input_ids, attention_mask, position_ids, past*")
    if not plan["ids"]:
        raise SystemExit(f"the model has no 'input_ids' input (inputs: {[i['name'] for i in io['inputs']]})")
    if not plan["cache"]:
        raise SystemExit("the model has no past* cache inputs: it is not a decoder with a KV cache")
    return plan


def load_reference(model_path, reference):
    if reference == "none":
        return None
    path = reference or os.path.join(os.path.dirname(os.path.abspath(model_path)), "greedy_64.json")
    if not os.path.exists(path):
        if reference:
            raise SystemExit(f"reference {reference} does not exist")
        return None
    with open(path) as f:
        ref = json.load(f)
    ref["file"] = path
    ref.setdefault("steps", len(ref.get("tokens") or []))
    return ref


def percentile(values, q):
    """Linear interpolation between closest ranks (numpy's default, as ort_bench.js does)."""
    s = sorted(values)
    if not s:
        return float("nan")
    pos = (len(s) - 1) * q
    lo, hi = int(pos), min(int(pos) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


# --------------------------------------------------------------------------------------
# Kiln's side: one decode loop in this process (--worker)
# --------------------------------------------------------------------------------------
def kiln_dyn_dims(io, plan, past_axis, max_len, dim_sizes, optimals=True):
    """map_dyn_input_dims for a batch-1 loop: sequence 1..max_len (optimal 1, the decode step,
    unless --no-optimals), past 0..max_len-1, attention mask 1..max_len; static dims as the model
    declares them."""
    seq = {"min": 1, "max": max_len, "optimals": [1]} if optimals else {"min": 1, "max": max_len}
    past = {"min": 0, "max": max_len - 1}
    total = {"min": 1, "max": max_len}
    dyn = {}
    for i in io["inputs"]:
        name, dims = i["name"], i["dims"]
        out = []
        for axis, d in enumerate(dims):
            if axis == 0:
                out.append(1)
            elif isinstance(d, int):
                out.append(d)
            elif name in (plan["ids"], plan["positions"]) and axis == 1:
                out.append(dict(seq))
            elif name == plan["mask"] and axis == 1:
                out.append(dict(total))
            elif name.startswith("past") and axis == past_axis:
                out.append(dict(past))
            elif d in dim_sizes:
                out.append(dim_sizes[d])
            else:
                raise SystemExit(f"axis {axis} of '{name}' is symbolic ({d!r}): give --dim {d}=SIZE")
        dyn[name] = out
    return dyn


def kiln_worker(args):
    import resource

    import numpy as np

    if args.kiln_python:
        sys.path.insert(0, args.kiln_python)
    import kiln

    model_path = args.worker
    io = onnx_io(model_path)
    plan = make_plan(io, args.past_axis, args.dim_sizes)
    ref = load_reference(model_path, args.reference)
    prompt = args.prompt_ids or (ref["prompt"] if ref else None)
    if not prompt:
        raise SystemExit("no prompt: give --prompt 1,2,3 or a reference file with one")
    steps = args.steps or (ref["steps"] if ref else 0) or 64
    max_len = max(args.max_len, len(prompt) + steps)
    dyn = kiln_dyn_dims(io, plan, args.past_axis, max_len, args.dim_sizes, not args.no_optimals)

    t0 = time.perf_counter()
    model = kiln.parse_onnx(model_path, map_dyn_input_dims=dyn)
    t1 = time.perf_counter()
    model.compile(kiln.get_target(args.target))
    t2 = time.perf_counter()
    out_names = list(model.get_output_names())
    logits_at = out_names.index(plan["logits"])
    present_at = [out_names.index(c["present"]) for c in plan["cache"]]

    cache = [np.zeros(c["shape"], np.float32) for c in plan["cache"]]
    ids, past = list(prompt), 0
    tokens, step_ms, prefill_ms = [], [], 0.0
    loop0 = time.perf_counter()
    for step in range(steps):
        seq = len(ids)
        feeds = {plan["ids"]: np.asarray([ids], np.int64)}
        if plan["mask"]:
            feeds[plan["mask"]] = np.ones((1, past + seq), np.int64)
        if plan["positions"]:
            feeds[plan["positions"]] = np.arange(past, past + seq, dtype=np.int64)[None, :]
        for c, arr in zip(plan["cache"], cache):
            feeds[c["name"]] = arr
        s0 = time.perf_counter()
        outs = model.run(feeds)
        arrays = [np.asarray(o) for o in outs]  # zero-copy views: the outputs are in host memory
        ms = (time.perf_counter() - s0) * 1e3
        if step == 0:
            prefill_ms = ms
        else:
            step_ms.append(ms)
        logits = arrays[logits_at]
        tok = int(np.argmax(logits.reshape(-1, logits.shape[-1])[-1]))
        tokens.append(tok)
        cache = [arrays[k] for k in present_at]
        past += seq
        ids = [tok]
    loop_ms = (time.perf_counter() - loop0) * 1e3
    result = {
        "engine": "kiln", "target": args.target, "model": model_name(model_path), "prompt": prompt,
        "steps": steps, "threads": args.threads, "max_len": max_len,
        "parse_ms": round((t1 - t0) * 1e3, 3), "compile_ms": round((t2 - t1) * 1e3, 3),
        "prefill_ms": round(prefill_ms, 3), "first_call_ms": round((t2 - t0) * 1e3 + prefill_ms, 3),
        "median_ms": round(percentile(step_ms, 0.5), 3), "p90_ms": round(percentile(step_ms, 0.9), 3),
        "min_ms": round(min(step_ms), 3) if step_ms else None,
        "max_ms": round(max(step_ms), 3) if step_ms else None,
        "loop_ms": round(loop_ms, 3), "step_ms": [round(x, 3) for x in step_ms],
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 3),
        "tokens": tokens, "reference": ref["file"] if ref else None,
        # Compared only when the loop is the reference's (same prompt, at most its steps).
        "matches_reference": (tokens == ref["tokens"][:steps]
                              if ref and ref.get("tokens") and prompt == ref["prompt"] and steps <= len(ref["tokens"])
                              else None),
    }
    print(json.dumps(result))


# --------------------------------------------------------------------------------------
# The side-by-side driver
# --------------------------------------------------------------------------------------
def model_name(path):
    base = os.path.basename(path)
    return os.path.basename(os.path.dirname(os.path.abspath(path))) if base == "model.onnx" else base[:-5] if base.endswith(".onnx") else base


def resolve_model(entry):
    if entry.endswith(".onnx") or os.path.sep in entry:
        path = entry if entry.endswith(".onnx") else os.path.join(entry, "model.onnx")
    else:
        path = os.path.join(DYNAMIC_MODELS, entry, "model.onnx")
    if not os.path.isfile(path):
        raise SystemExit(f"no model at {path}")
    return path


def common_args(args):
    out = ["--past-axis", str(args.past_axis)]
    if args.prompt:
        out += ["--prompt", args.prompt]
    if args.steps:
        out += ["--steps", str(args.steps)]
    if args.reference:
        out += ["--reference", args.reference]
    for d in args.dim:
        out += ["--dim", d]
    return out


def engine_cmd(args, engine, model_path):
    if engine == "kiln":
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", model_path, "--target", args.target,
               "--threads", str(args.threads), "--max-len", str(args.max_len), "--kiln-python", args.kiln_python]
        if args.no_optimals:
            cmd.append("--no-optimals")
    else:
        cmd = [args.node, ORT_DECODE, model_path, "--threads", str(args.threads), "--opt", args.opt]
    return cmd + common_args(args)


def aggregate(records):
    if not records:
        return None
    toks = [tuple(r["tokens"]) for r in records]
    return {
        "first_call_ms": statistics.median(r["first_call_ms"] for r in records),
        "prefill_ms": statistics.median(r["prefill_ms"] for r in records),
        "median_ms": statistics.median(r["median_ms"] for r in records),
        "p90_ms": statistics.median(r["p90_ms"] for r in records),
        "min_ms": min(r["min_ms"] for r in records),
        "peak_rss_mb": max(r["peak_rss_mb"] for r in records),
        "tokens": list(toks[0]) if len(set(toks)) == 1 else None,  # None: rounds disagree
        "matches_reference": [r.get("matches_reference") for r in records],
        "foreign_load": max((r.get("foreign_load") or 0.0) for r in records),
        "rounds": len(records),
        "records": records,
        "compile_ms": statistics.median(r["compile_ms"] for r in records) if "compile_ms" in records[0] else None,
        "session_create_ms": (statistics.median(r["session_create_ms"] for r in records)
                              if "session_create_ms" in records[0] else None),
    }


def paired_ratios(kiln_records, ort_records):
    """Kiln/ORT step medians of the same round: the machine's speed drifts over minutes (a whole
    process runs 1.5-2x slower at times, prefill included), so a ratio of two processes run seconds
    apart is steadier than the ratio of medians taken over all rounds."""
    ort_by_round = {r["round"]: r["median_ms"] for r in ort_records}
    return [k["median_ms"] / ort_by_round[k["round"]] for k in kiln_records if ort_by_round.get(k["round"])]


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def ref_cell(agg):
    m = agg["matches_reference"]
    if agg["tokens"] is None:
        return "rounds disagree"
    if all(v is None for v in m):
        return "no reference"
    return "yes" if all(m) else f"no ({m.count(False)} of {len(m)} rounds)"


def render(args, results, notes, ort_version):
    fmt = report.fmt
    lines = [f"Greedy decode with the KV cache, batch 1, {args.threads} threads, {args.rounds} rounds "
             f"(Kiln target `{args.target}`, ONNX Runtime {ort_version or '1.30'} with graph optimization "
             f"`{args.opt}`), {datetime.date.today().isoformat()}.", "", report.cpu_header(), ""]
    header = ["model", "engine", "first call ms", "prefill ms", "step median ms", "step p90 ms", "step min ms",
              "Kiln/ORT median", "Kiln/ORT p90", "paired Kiln/ORT median (range)", "peak RSS MB", "tokens = reference", "foreign load"]
    rows, agree = [], []
    for name, per in results.items():
        k, o = per.get("kiln"), per.get("ort")
        for engine, agg, label in (("kiln", k, "Kiln"), ("ort", o, "ORT")):
            if engine not in args.engines:
                continue
            if agg is None:
                rows.append([name, label] + ["fail" if per.get(engine + "_error") else "n/a"] * 10 + [""])
                continue
            ratio_m = ratio_p = paired = ""
            if engine == "kiln" and o:
                ratio_m = f"{agg['median_ms'] / o['median_ms']:.2f}x"
                ratio_p = f"{agg['p90_ms'] / o['p90_ms']:.2f}x"
                pairs = paired_ratios(agg["records"], o["records"])
                if pairs:
                    paired = f"{statistics.median(pairs):.2f}x ({min(pairs):.2f}-{max(pairs):.2f})"
            rows.append([name, label, fmt(agg["first_call_ms"]), fmt(agg["prefill_ms"]), fmt(agg["median_ms"], 3),
                         fmt(agg["p90_ms"], 3), fmt(agg["min_ms"], 3), ratio_m, ratio_p, paired, fmt(agg["peak_rss_mb"]),
                         ref_cell(agg), f"{agg['foreign_load']:.0%}"])
        if k and o:
            if k["tokens"] is None or o["tokens"] is None:
                agree.append(f"- {name}: an engine's tokens differ between rounds")
            else:
                d = first_difference(k["tokens"], o["tokens"])
                agree.append(f"- {name}: Kiln and ORT produced {'the same' if d is None else 'different'} "
                             f"{len(o['tokens'])} tokens" + ("" if d is None else f" (first difference at step {d})"))
    lines.append(report.markdown_table(header, rows))
    lines.append("")
    lines.append("First call: Kiln parse + compile + prefill (in the same process, cold), ORT session creation + "
                 "prefill. Step: one `run` of one token (sequence 1) at past lengths P to P + steps - 2 "
                 "(P: prompt length), outputs in host memory; median over rounds of each round's median (p90 likewise), min over all steps. "
                 "Paired: the median (and range) over rounds of that round's Kiln/ORT step-median ratio; the engines "
                 "alternate which runs first. "
                 "Foreign load: the largest share of the CPUs that other processes took during a round.")
    lines += [""] + agree + [f"- {n}" for n in notes]
    return "\n".join(lines).rstrip() + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="gpt_kv",
                   help="comma-separated names under tests/data/dynamic_models or paths to .onnx files")
    p.add_argument("--engines", default="kiln,ort")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--target", default="cpu", help="Kiln target")
    p.add_argument("--opt", default="all", help="ORT graph optimization level")
    p.add_argument("--prompt", default="", help="comma-separated token ids (default: the reference's)")
    p.add_argument("--steps", type=int, default=0, help="decode steps, prefill included (default: the reference's, else 64)")
    p.add_argument("--reference", default="", help="greedy_64.json-style file, or 'none' (default: next to the model)")
    p.add_argument("--max-len", type=int, default=128, help="Kiln: the dynamic ranges, sequence 1..N and past 0..N-1 "
                   "(raised to prompt + steps when that is more)")
    p.add_argument("--past-axis", type=int, default=2)
    p.add_argument("--dim", action="append", default=[], help="NAME=SIZE for a symbolic cache dim other than batch/past")
    p.add_argument("--kiln-python", default=os.path.join(ROOT, "build", "python"), help="folder with the kiln module")
    p.add_argument("--node", default="node")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per engine process")
    p.add_argument("--idle-wait", type=float, default=30.0, help="seconds to wait for idle CPUs before each process")
    p.add_argument("--max-load", type=float, default=0.10, help="foreign load above which a row gets a note")
    p.add_argument("--out", help="also write the Markdown to this file")
    p.add_argument("--section", help="with --out: replace (or append) only this '## ...' section")
    p.add_argument("--raw", help="write every process's JSON result to this file, one per line")
    p.add_argument("--no-optimals", action="store_true",
                   help="Kiln: no optimal for the sequence (the program with past free comes by itself, in the background)")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.engines = [e for e in args.engines.split(",") if e]
    args.prompt_ids = [int(x) for x in args.prompt.split(",") if x.strip()] if args.prompt else None
    args.dim_sizes = {}
    for d in args.dim:
        name, _, size = d.partition("=")
        if not size.isdigit():
            p.error(f"--dim wants NAME=SIZE, got {d!r}")
        args.dim_sizes[name] = int(size)
    if args.worker:
        os.environ.setdefault("KILN_NUM_THREADS", str(args.threads))
        return kiln_worker(args)

    for e in args.engines:
        if e not in ("kiln", "ort"):
            p.error(f"unknown engine {e!r} (kiln, ort)")
    env = dict(os.environ)
    env["KILN_NUM_THREADS"] = str(args.threads)
    if "ort" in args.engines:
        env = ensure_ort(env)
    models = [(model_name(resolve_model(m)), resolve_model(m)) for m in args.models.split(",") if m]
    records = {name: {e: [] for e in args.engines} for name, _ in models}
    errors, notes, ort_version, raw = {}, [], None, []
    for r in range(args.rounds):
        for name, path in models:
            # Alternate which engine goes first so that a drift of the machine's speed within a round
            # does not always favour the same engine.
            for engine in (args.engines if r % 2 == 0 else list(reversed(args.engines))):
                if (name, engine) in errors:
                    continue
                if args.idle_wait > 0:
                    quiet.wait_until_idle(args.idle_wait, args.max_load, sample_s=0.5)
                with quiet.ForeignLoad() as load:
                    res, err = run_json(engine_cmd(args, engine, path), env, args.timeout)
                if err:
                    errors[(name, engine)] = err
                    notes.append(f"{name}: {'Kiln' if engine == 'kiln' else 'ORT'} failed in round {r + 1}: {err}")
                    log(f"round {r + 1} {name} {engine}: FAILED: {err}")
                    continue
                res["foreign_load"] = round(load.fraction, 3) if load.fraction is not None else None
                res["round"] = r + 1
                ort_version = res.get("ort_version", ort_version)
                records[name][engine].append(res)
                raw.append(res)
                log(f"round {r + 1} {name} {engine}: first call {res['first_call_ms']:.1f} ms, step median "
                    f"{res['median_ms']:.3f} ms, p90 {res['p90_ms']:.3f} ms, reference "
                    f"{res.get('matches_reference')}")
    results = {}
    for name, _ in models:
        results[name] = {e: aggregate(records[name][e]) for e in args.engines}
        for e in args.engines:
            if (name, e) in errors:
                results[name][e + "_error"] = errors[(name, e)]
            agg = results[name][e]
            if agg and agg["foreign_load"] > args.max_load:
                notes.append(f"{name} {e}: other processes took up to {agg['foreign_load']:.0%} of the CPUs in a round")
    text = render(args, results, notes, ort_version)
    print(text, end="")
    if args.raw:
        with open(args.raw, "w") as f:
            for res in raw:
                f.write(json.dumps(res) + "\n")
    if args.out:
        old = open(args.out).read() if os.path.exists(args.out) else ""
        new = report.replace_section(old, args.section, text) if args.section else text
        with open(args.out, "w") as f:
            f.write(new)


if __name__ == "__main__":
    main()
