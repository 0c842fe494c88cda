#!/usr/bin/python3
"""Side-by-side CPU benchmark: Kiln (`kiln perf`) against ONNX Runtime 1.30 (onnxruntime-node).

Run by hand, not by `make test`:

    /usr/bin/python3 bench/compare.py                       # every model, 2 threads, 5 rounds
    /usr/bin/python3 bench/compare.py --models mobilenet_v2,resnet50@8 --rounds 3
    /usr/bin/python3 bench/compare.py --engines ort --out docs/performance.md \\
        --section '## ONNX Runtime 1.30 baseline (this machine)'
    /usr/bin/python3 bench/compare.py --precisions fp32,bf16,fp16,int8,qdq --models resnet50,mobilenet_v2

With --precisions, each model's row holds ORT fp32, ORT on the model's QDQ twin (NAME_qdq in the
models folder), and Kiln in each precision asked for: fp32, `--bf16`, `--fp16`, `--int8 --calibration
<the model's or its QDQ twin's calibration folder>`, and Kiln on the QDQ twin; float modes are
compared with ORT fp32, int8 and qdq with ORT QDQ. A cell without its model or folder reads n/a.

Each round runs every engine once per case, Kiln then ORT, each in a process of its own (so the
peak RSS is that process's), on the same input files. See bench/README.md for the JSON contract
`kiln perf` has to meet and how the numbers are folded into the table.
"""
import argparse
import datetime
import json
import math
import os
import shlex
import shutil
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quiet  # noqa: E402  (bench/quiet.py)
import processes  # noqa: E402  (bench/processes.py)
import report  # noqa: E402  (bench/report.py)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
ORT_BENCH = os.path.join(BENCH, "ort", "ort_bench.js")
# Models in this order first (the order of ../shared/models/README.md), then any others.
MODEL_ORDER = ["resnet50", "mobilenet_v2", "efficientnet_b0", "bert_small", "vit_tiny", "lstm_seq",
               "mobilenet_v2_qdq", "bert_small_qdq", "fashion_resnet"]
# Extra batch sizes in the default set: resnet50 is the headline model, and fashion_resnet at batch
# 1 is too small (13 MMAC) to show anything but per-call overhead.
EXTRA_BATCHES = {"resnet50": [8], "fashion_resnet": [16]}
KILN_REQUIRED = ("median_ms", "p90_ms", "min_ms", "compile_ms", "peak_rss_mb")
ORT_REQUIRED = ("median_ms", "p90_ms", "min_ms", "session_create_ms", "peak_rss_mb")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def pb_batch(path):
    """First dimension of a serialized onnx.TensorProto (field 1, dims), without protobuf."""
    with open(path, "rb") as f:
        buf = f.read()
    pos = 0

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

    while pos < len(buf):
        key = varint()
        field, wire = key >> 3, key & 7
        if field == 1:
            return varint() if wire == 0 else (varint(), varint())[1]  # packed: length, first dim
        if wire == 0:
            varint()
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            pos += varint()
        else:
            break
    return 1  # a scalar input: call it batch 1


def discover_models(models_dir):
    names = [d for d in sorted(os.listdir(models_dir))
             if os.path.isfile(os.path.join(models_dir, d, "model.onnx"))]
    return sorted(names, key=lambda n: (MODEL_ORDER.index(n) if n in MODEL_ORDER else len(MODEL_ORDER), n))


def test_set_with_batch(model_dir, batch):
    """A test_data_set_N folder of the model whose inputs have the given batch, or None."""
    sets = sorted(d for d in os.listdir(model_dir) if d.startswith("test_data_set_"))
    for d in sets:
        first = os.path.join(model_dir, d, "input_0.pb")
        if os.path.exists(first) and pb_batch(first) == batch:
            return os.path.join(model_dir, d)
    return None


def make_cases(args):
    """[(model, batch)] from --models (NAME or NAME@BATCH items) or the default set."""
    if args.models:
        cases = []
        for item in args.models.split(","):
            name, _, batch = item.strip().partition("@")
            cases.append((name, int(batch) if batch else 1))
        return cases
    cases = []
    for name in discover_models(args.models_dir):
        cases.append((name, 1))
        cases += [(name, b) for b in EXTRA_BATCHES.get(name, [])]
    return cases


def node_cmd(args, model_path, extra):
    return [args.node, ORT_BENCH, model_path, *extra]


def raise_priority(nice):
    """preexec_fn for --nice: a session of the child's own, with that niceness for the session's
    scheduler autogroup and for the process. Linux shares CPU time fairly between autogroups (one
    per session) before it looks at a process's own niceness, so a plain `nice -n -20` does
    nothing against busy processes of other sessions."""
    def apply():
        os.setsid()
        try:
            with open("/proc/self/autogroup", "w") as f:
                f.write(str(nice))
        except OSError:
            pass  # no autogroups here, or no privilege: the process niceness below still applies
        try:
            os.nice(nice)
        except OSError:
            pass
    return apply


def run_json(cmd, env, timeout, nice=0):
    """Runs one benchmark process; returns (parsed last JSON line or None, note on failure)."""
    return processes.run_json(cmd, env, timeout, preexec_fn=raise_priority(nice) if nice else None)


def timed_run(args, cmd, env, what):
    """run_json on a quiet machine: waits for idle CPUs first, and repeats a run that other
    processes disturbed (foreign load above --max-load) up to --retries times, keeping the least
    disturbed one. Waiting and repeats share one budget (--wait-budget seconds for the whole
    benchmark), so a machine that never goes quiet still finishes. The result carries its
    `foreign_load` (0..1)."""
    best = None
    for attempt in range(args.retries + 1):
        t0 = time.monotonic()
        if args.wait_left > 0:
            quiet.wait_until_idle(min(args.idle_wait, args.wait_left), args.max_load, sample_s=0.5)
        args.wait_left -= time.monotonic() - t0
        with quiet.ForeignLoad() as load:
            res, err = run_json(cmd, env, args.timeout, args.nice)
        if err:
            return None, err
        res["foreign_load"] = round(load.fraction, 3) if load.fraction is not None else None
        if best is None or (res["foreign_load"] or 0) < (best["foreign_load"] or 0):
            best = res
        # Under a second, the kernel's 10 ms accounting ticks make the share too coarse to act on.
        disturbed = res["foreign_load"] is not None and res["foreign_load"] > args.max_load and load.wall >= 1.0
        if not disturbed or args.wait_left <= 0 or attempt == args.retries:
            break
        args.wait_left -= load.wall  # the run is thrown away: its time was overhead too
        log(f"  {what}: other processes took {res['foreign_load']:.0%} of the CPUs, running it again")
    return best, None


def inputs_for(args, env, model, batch):
    """The input folder both engines read for (model, batch): a stored test set with that batch,
    else seeded random inputs written once by ort_bench.js into bench/.cache/inputs/."""
    model_dir = os.path.join(args.models_dir, model)
    stored = test_set_with_batch(model_dir, batch)
    if stored:
        return stored
    out = os.path.join(args.cache_dir, "inputs", f"{model}_b{batch}_seed{args.seed}")
    if not os.path.exists(os.path.join(out, "input_0.pb")):
        cmd = node_cmd(args, os.path.join(model_dir, "model.onnx"),
                       ["--batch", str(batch), "--seed", str(args.seed), "--save-inputs", out])
        res, err = run_json(cmd, env, args.timeout)
        if err:
            raise RuntimeError(f"{model}@{batch}: could not write random inputs: {err}")
    return out


def pick_iterations(args, env, model_path, input_dir, threads):
    """--iterations, or as many as fill about --target-ms per round (measured with one short ORT
    run), the same count for both engines; warm-up covers about a tenth of that."""
    if args.iterations:
        return args.iterations, args.warmup if args.warmup is not None else 5
    res, err = run_json(node_cmd(args, model_path, ["--input-dir", input_dir, "--threads", str(threads),
                                                    "--iterations", "5", "--warmup", "2"]),
                        env, args.timeout, args.nice)
    per_run = res["median_ms"] if res else 50.0
    iterations = max(10, min(1000, math.ceil(args.target_ms / max(per_run, 1e-3))))
    warmup = args.warmup if args.warmup is not None else max(3, min(100, iterations // 10))
    return iterations, warmup


def ensure_ort(args):
    try:
        return processes.ensure_ort(dict(os.environ))
    except SystemExit as e:
        raise RuntimeError(str(e))


def kiln_state(args):
    """None when the Kiln binary is usable, else why Kiln's cells read 'n/a'."""
    if "kiln" not in args.engines:
        return "not requested"
    if not (os.path.isfile(args.kiln) and os.access(args.kiln, os.X_OK)):
        return f"{os.path.relpath(args.kiln, ROOT)} not built"
    return None


PRECISIONS = ("fp32", "bf16", "fp16", "int8", "qdq")


def calibration_dir(args, model):
    """The model's calibration folder, or its QDQ twin's (the same inputs), or None."""
    for name in (model, model + "_qdq"):
        d = os.path.join(args.models_dir, name, "calibration")
        if os.path.isdir(d):
            return d
    return None


def precision_runs(args, model, common, input_dir):
    """[(label, cmd or None, is_ort)] for one case in --precisions mode: ORT fp32, ORT QDQ, then Kiln
    in each precision asked for. A None cmd is a cell that cannot run (no QDQ twin, no calibration)."""
    base = os.path.join(args.models_dir, model, "model.onnx")
    qdq = os.path.join(args.models_dir, model + "_qdq", "model.onnx")
    has_qdq = os.path.isfile(qdq)
    kiln = [args.kiln, "perf", "--target", args.target, *common, "--json", "--input", input_dir,
            *shlex.split(args.kiln_args)]
    runs = [("ort fp32", node_cmd(args, base, ["--input-dir", input_dir, *common]), True),
            ("ort qdq", node_cmd(args, qdq, ["--input-dir", input_dir, *common]) if has_qdq else None, True)]
    for p in args.precisions:
        if p == "fp32":
            runs.append(("kiln fp32", [*kiln, base], False))
        elif p in ("bf16", "fp16"):
            runs.append((f"kiln {p}", [*kiln, base, f"--{p}"], False))
        elif p == "int8":
            calib = calibration_dir(args, model)
            runs.append(("kiln int8", [*kiln, base, "--int8", "--calibration", calib] if calib else None, False))
        elif p == "qdq":
            runs.append(("kiln qdq", [*kiln, qdq] if has_qdq else None, False))
    return runs


def benchmark_precisions(args):
    """--precisions: per case, every run of precision_runs in each round, alternating."""
    env = ensure_ort(args)
    kiln_missing = kiln_state(args)
    rows, notes, raw = [], [], []
    for threads in args.threads:
        for model, batch in make_cases(args):
            if model.endswith("_qdq"):
                continue  # the twin of another row's model
            input_dir = inputs_for(args, env, model, batch)
            base = os.path.join(args.models_dir, model, "model.onnx")
            iterations, warmup = pick_iterations(args, env, base, input_dir, threads)
            log(f"{model} batch {batch}, {threads} threads: {args.rounds} rounds x {iterations} iterations")
            common = ["--threads", str(threads), "--iterations", str(iterations), "--warmup", str(warmup)]
            runs = precision_runs(args, model, common, input_dir)
            got = {label: [] for label, _, _ in runs}
            failed = {}
            for rnd in range(args.rounds):
                for label, cmd, is_ort in runs:
                    if cmd is None or label in failed or (not is_ort and kiln_missing):
                        continue
                    res, err = timed_run(args, cmd, env, label)
                    need = ORT_REQUIRED if is_ort else KILN_REQUIRED
                    if err or any(k not in res for k in need):
                        failed[label] = err or f"JSON lacks one of {', '.join(need)}"
                        notes.append(f"{label} on {model} batch {batch}: {failed[label]}")
                        continue
                    got[label].append(res)
                    raw.append({"engine": label, "round": rnd, "case_model": model, **res})
                    args.ort_version = args.ort_version or res.get("ort_version")
                    log(f"  round {rnd + 1} {label}: median {res['median_ms']} ms, foreign load {res['foreign_load']}")
            rows.append((model, batch, threads, {label: report.aggregate(v) for label, v in got.items()}))
    return rows, notes, raw, kiln_missing


def render_precisions(args, rows, notes):
    cmd = shlex.join(["/usr/bin/python3", "bench/compare.py", *sys.argv[1:]])
    kiln_labels = [f"kiln {p}" for p in args.precisions]
    lines = [report.cpu_header() + ".", "",
             f"ONNX Runtime {args.ort_version or '1.30'} (onnxruntime-node, CPU EP) on the fp32 model and on its "
             f"QDQ twin; Kiln in each precision; {args.rounds} rounds, every run in a fresh process, the runs of "
             f"a round one after another; median over rounds of each round's median. Ratios: float modes "
             f"against ORT fp32, int8 and qdq against ORT QDQ. {datetime.date.today().isoformat()}.", "",
             f"Command: `{cmd}`", ""]
    header = ["model", "batch", "threads", "ORT fp32 ms", "ORT QDQ ms"] + [f"Kiln {p} ms (ratio)" for p in args.precisions]
    body = []
    for model, batch, threads, agg in rows:
        def ms(label):
            a = agg.get(label)
            return a["median_ms"] if a else None
        row = [model, batch, threads, report.fmt(ms("ort fp32")) if ms("ort fp32") else "n/a",
               report.fmt(ms("ort qdq")) if ms("ort qdq") else "n/a"]
        for label in kiln_labels:
            k = ms(label)
            against = ms("ort qdq") if label in ("kiln int8", "kiln qdq") else ms("ort fp32")
            if k is None:
                row.append("n/a")
            elif against:
                row.append(f"{report.fmt(k)} ({k / against:.2f})")
            else:
                row.append(report.fmt(k))
        body.append(row)
    lines.append(report.markdown_table(header, body))
    notes.append("ORT QDQ, Kiln qdq: the model's NAME_qdq twin in the models folder (n/a without one); Kiln int8: "
                 "`--int8 --calibration` on the model's calibration folder or its twin's.")
    lines += ["", *[f"- {n}" for n in notes]]
    return "\n".join(lines) + "\n"


def benchmark(args):
    env = ensure_ort(args) if "ort" in args.engines else dict(os.environ)
    kiln_missing = kiln_state(args)
    rows, notes, raw = [], [], []
    for threads in args.threads:
        for model, batch in make_cases(args):
            model_path = os.path.join(args.models_dir, model, "model.onnx")
            if not os.path.isfile(model_path):
                raise RuntimeError(f"no model {model_path}")
            input_dir = inputs_for(args, env, model, batch)
            iterations, warmup = pick_iterations(args, env, model_path, input_dir, threads)
            log(f"{model} batch {batch}, {threads} threads: {args.rounds} rounds x {iterations} iterations "
                f"(+{warmup} warm-up), inputs {os.path.relpath(input_dir, ROOT)}")
            common = ["--threads", str(threads), "--iterations", str(iterations), "--warmup", str(warmup)]
            kiln_cmd = [args.kiln, "perf", model_path, "--target", args.target, *common, "--json",
                        "--input", input_dir, *shlex.split(args.kiln_args)]
            ort_cmd = node_cmd(args, model_path, ["--input-dir", input_dir, *common])
            got = {"kiln": [], "ort": []}
            kiln_note = kiln_missing
            for rnd in range(args.rounds):
                if kiln_note is None:  # A ...
                    res, err = timed_run(args, kiln_cmd, env, "kiln")
                    if err or any(k not in res for k in KILN_REQUIRED):
                        kiln_note = err or f"JSON lacks one of {', '.join(KILN_REQUIRED)}"
                    else:
                        got["kiln"].append(res)
                if "ort" in args.engines:  # ... B
                    res, err = timed_run(args, ort_cmd, env, "ort")
                    if err or any(k not in res for k in ORT_REQUIRED):
                        raise RuntimeError(f"ORT failed on {model}@{batch}: {err or res}")
                    got["ort"].append(res)
                for engine in ("kiln", "ort"):
                    if len(got[engine]) == rnd + 1:
                        r = got[engine][-1]
                        raw.append({"engine": engine, "round": rnd, "case_model": model, **r})
                        args.ort_version = args.ort_version or r.get("ort_version")
                        log(f"  round {rnd + 1} {engine}: median {r['median_ms']} ms, "
                            f"foreign load {r['foreign_load']}")
            if kiln_note and kiln_note != kiln_missing:
                notes.append(f"Kiln on {model} batch {batch}: {kiln_note}")
            rows.append((model, batch, threads, report.aggregate(got["kiln"]), report.aggregate(got["ort"]),
                         iterations, kiln_note))
    return rows, notes, raw, kiln_missing


def render(args, rows, notes, kiln_missing):
    cmd = shlex.join(["/usr/bin/python3", "bench/compare.py", *sys.argv[1:]])
    ort_version = args.ort_version or "1.30"
    lines = [report.cpu_header() + ".",
             "",
             f"ONNX Runtime {ort_version} (onnxruntime-node, CPU EP, graph optimization `all`, sequential, "
             f"1 inter-op thread); {args.rounds} rounds, each engine in a fresh process per round; "
             f"median = median over rounds of each round's median; peak RSS = largest over rounds. "
             f"{datetime.date.today().isoformat()}.",
             "",
             f"Command: `{cmd}`",
             ""]
    if "kiln" not in args.engines:
        header = ["model", "batch", "threads", "median ms", "p90 ms", "min ms", "round medians ms",
                  "session create ms", "peak RSS MB", "iterations x rounds", "other load"]
        body = []
        for model, batch, threads, _, o, iters, _ in rows:
            body.append([model, batch, threads, report.fmt(o["median_ms"]), report.fmt(o["p90_ms"]),
                         report.fmt(o["min_ms"]),
                         f"{report.fmt(o['round_min_ms'])}-{report.fmt(o['round_max_ms'])}",
                         report.fmt(o["create_ms"], 0), report.fmt(o["peak_rss_mb"], 0),
                         f"{iters} x {o['rounds']}", f"{o['foreign_load']:.0%}"])
        notes.append("'other load': the largest share of the CPUs that other processes used during "
                     "any round (runs above --max-load were repeated, keeping the quietest).")
    else:
        header = ["model", "batch", "threads", "Kiln median ms", "ORT median ms", "Kiln/ORT",
                  "Kiln compile ms", "ORT session ms", "Kiln peak RSS MB", "ORT peak RSS MB"]
        body = []
        for model, batch, threads, k, o, _, kiln_note in rows:
            na = "fail" if (kiln_note and kiln_note != kiln_missing) else "n/a"
            ratio = f"{k['median_ms'] / o['median_ms']:.2f}" if k and o else "n/a"
            body.append([model, batch, threads,
                         report.fmt(k["median_ms"]) if k else na, report.fmt(o["median_ms"]) if o else "n/a",
                         ratio,
                         report.fmt(k["create_ms"], 0) if k else na, report.fmt(o["create_ms"], 0) if o else "n/a",
                         report.fmt(k["peak_rss_mb"], 0) if k else na,
                         report.fmt(o["peak_rss_mb"], 0) if o else "n/a"])
        loaded = [f"{m}@{b}" for m, b, _, k, o, _, _ in rows
                  if max((x or {}).get("foreign_load", 0) for x in (k, o)) > args.max_load]
        if loaded:
            notes.append(f"Other processes used more than {args.max_load:.0%} of the CPUs in some "
                         f"round of: {', '.join(loaded)} (see --raw for each round).")
        if kiln_missing and kiln_missing != "not requested":
            notes.insert(0, f"Kiln: n/a ({kiln_missing}).")
    lines.append(report.markdown_table(header, body))
    notes.append("ORT's peak RSS includes Node.js itself (about 40 MB before onnxruntime loads).")
    if args.nice:
        notes.append(f"Each benchmark process ran in a session of its own with niceness {args.nice} for "
                     "the process and its scheduler autogroup (`--nice`), to keep other users' processes "
                     "on this machine out of the measurement.")
    lines += ["", *[f"- {n}" for n in notes]]
    return "\n".join(lines) + "\n"


def main():
    shared = os.environ.get("KILN_SHARED_DIR", os.path.join(ROOT, "..", "shared"))
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", help="comma-separated NAME or NAME@BATCH (default: every model in "
                   "--models-dir at batch 1, plus resnet50@8 and fashion_resnet@16)")
    p.add_argument("--models-dir", default=os.path.join(shared, "models"))
    p.add_argument("--threads", default="2", help="intra-op threads; a comma-separated list runs each")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--iterations", type=int, help="timed runs per round (default: enough for --target-ms)")
    p.add_argument("--warmup", type=int, help="untimed runs before them (default: a tenth, 3 to 100)")
    p.add_argument("--target-ms", type=float, default=2000.0, help="timed milliseconds per round when "
                   "--iterations is not given")
    p.add_argument("--engines", default="kiln,ort", help="kiln,ort (default) or just one of them")
    p.add_argument("--kiln-args", default="", help="more options for `kiln perf`, e.g. '--exhaustive-tune' "
                   "(with KILN_TUNING_CACHE set, only the first round measures the candidates)")
    p.add_argument("--kiln", default=os.path.join(ROOT, "build", "bin", "kiln"))
    p.add_argument("--target", default="cpu")
    p.add_argument("--node", default=shutil.which("node") or "node")
    p.add_argument("--seed", type=int, default=1234, help="seed of the random inputs (batch sizes "
                   "without a stored test set)")
    p.add_argument("--timeout", type=int, default=900, help="seconds per benchmark process")
    p.add_argument("--cache-dir", default=os.environ.get("KILN_BENCH_CACHE", os.path.join(BENCH, ".cache")))
    p.add_argument("--max-load", type=float, default=0.10, help="share of the CPUs other processes may "
                   "use during a run before it is repeated (default 0.10; 1 turns the check off)")
    p.add_argument("--idle-wait", type=float, default=120.0, help="seconds to wait for idle CPUs "
                   "before each run (default 120)")
    p.add_argument("--retries", type=int, default=3, help="repeats of a disturbed run (default 3)")
    p.add_argument("--wait-budget", type=float, default=300.0, help="seconds that waiting for idle "
                   "CPUs and repeating disturbed runs may add to the whole benchmark (default 300)")
    p.add_argument("--nice", type=int, default=0, help="run each benchmark process in a session of its own "
                   "with this niceness (process and scheduler autogroup); a negative N (needs privileges) "
                   "keeps other users' processes on a busy machine out of the way")
    p.add_argument("--precisions", help="comma-separated fp32, bf16, fp16, int8, qdq: one row per model with "
                   "ORT fp32, ORT QDQ and Kiln in each (see above)")
    p.add_argument("--out", help="also write the Markdown to this file")
    p.add_argument("--section", help="with --out: replace (or append) this '## ...' section of the file "
                   "instead of overwriting it")
    p.add_argument("--raw", help="write every round's JSON result to this file, one per line")
    args = p.parse_args()
    args.ort_version = None
    args.wait_left = args.wait_budget
    args.threads = [int(t) for t in args.threads.split(",")]
    args.engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    if not set(args.engines) <= {"kiln", "ort"} or not args.engines:
        p.error("--engines takes kiln, ort or kiln,ort")
    if "ort" not in args.engines:
        p.error("ORT is the baseline every ratio needs; --engines must include ort")
    if args.rounds < 1:
        p.error("--rounds must be at least 1")

    # A plain SIGTERM would end Python without stopping the running benchmark process; as an
    # exception it unwinds through subprocess.run, which kills its child.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args.precisions = [x.strip() for x in args.precisions.split(",") if x.strip()] if args.precisions else None
    if args.precisions is not None and (not args.precisions or not set(args.precisions) <= set(PRECISIONS)):
        p.error(f"--precisions takes some of {', '.join(PRECISIONS)}")
    try:
        if args.precisions:
            rows, notes, raw, _ = benchmark_precisions(args)
        else:
            rows, notes, raw, kiln_missing = benchmark(args)
    except RuntimeError as e:
        log(f"compare.py: {e}")
        return 1
    text = render_precisions(args, rows, notes) if args.precisions else render(args, rows, notes, kiln_missing)
    print(text, end="")
    if args.raw:
        with open(args.raw, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in raw)
    if args.out:
        if args.section:
            old = open(args.out).read() if os.path.exists(args.out) else ""
            text = report.replace_section(old, args.section, text)
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
