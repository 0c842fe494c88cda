"""The issue 22 goals measured in one go, by hand (numbers for docs/server.md):

    /usr/bin/python3 bench/serve_goals.py --work /tmp/kiln_goals [--rounds 3] [-n 300]

--work keeps the repository it builds (and so the compiled caches) between runs:
  mb    mobilenet_v2, kiln.threads 1: one client over REST (binary) and gRPC against
        `kiln perf --threads 1` (rounds alternate; goals +0.5 ms and +1.0 ms on the p50), and
        the server's time outside queue and compute from its statistics (goal <= 100 us);
        gRPC is measured with build/bin/kiln_grpc_bench (C++) where built, else with
        serve_latency.py (Python, ~0.9 ms of its own), and REST also with wrk where installed;
  r50k  resnet50 as a saved .kiln: time from start to ready (goal <= 3 s), reload (<= 2 s);
  r50b  resnet50, max_batch_size 8, dynamic_batching: 8 clients against `kiln perf --batch 8`
        images/s (goal >= 0.9x);
  lstm  lstm_seq (1x100x80 requests), max_batch_size 8, dynamic_batching with a 1 ms delay and
        a warm-up per batch size: 8 clients against 1 (goals: >= 2x the rate, >= 3 rows a run,
        p99 <= 3x p50), with wrk when installed (rounds alternate 1 and 8 clients).
Prints the load average before and after: on a shared machine the numbers are upper bounds.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "tools"))
from test_serve import free_port, request  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--kiln", default=os.path.join(HERE, "..", "build", "bin", "kiln"))
ap.add_argument("--grpc-bench", default=None, help="the C++ gRPC client (default: kiln_grpc_bench beside --kiln)")
ap.add_argument("--models", default=os.path.join(HERE, "..", "..", "shared", "models"))
ap.add_argument("--work", required=True)
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("-n", type=int, default=300)
ap.add_argument("--skip", default="", help="comma-separated parts to skip: latency,start,throughput,lstm; rest "
                                           "(the REST rows of latency, for a short gRPC-only run)")
ap.add_argument("--lstm-instances", type=int, default=1,
                help="lstm part: instance_group count (the server splits the cores between the instances)")
args = ap.parse_args()
skip = set(args.skip.split(","))
GRPC_BENCH = args.grpc_bench or os.path.join(os.path.dirname(args.kiln), "kiln_grpc_bench")
MB, R50 = os.path.join(args.models, "mobilenet_v2"), os.path.join(args.models, "resnet50")
MB_IN, R50_IN = os.path.join(MB, "test_data_set_0", "input_0.pb"), os.path.join(R50, "test_data_set_0", "input_0.pb")
LSTM = os.path.join(args.models, "lstm_seq")
LSTM_IN = os.path.join(LSTM, "test_data_set_0", "input_0.pb")


def load():
    return open("/proc/loadavg").read().split()[0]


def folder(name, config, source, kiln_file=False):
    d = os.path.join(args.work, name, "1")
    os.makedirs(d, exist_ok=True)
    target = os.path.join(d, "model.kiln" if kiln_file else "model.onnx")
    if not os.path.exists(target):
        if kiln_file:
            subprocess.run([args.kiln, "compile", source, "-o", target], check=True, stdout=subprocess.DEVNULL)
        else:
            shutil.copy(source, target)
    with open(os.path.join(args.work, name, "config.pbtxt"), "w") as f:
        f.write(config)


def start(*extra):
    port = free_port()
    log = open(os.path.join(args.work, "server.log"), "w")
    t0 = time.perf_counter()
    proc = subprocess.Popen([args.kiln, "serve", "--model-repository", args.work, "--http-port", str(port),
                             "--grpc-port", str(free_port()), "--metrics-port", str(free_port()), *extra],
                            stdout=log, stderr=subprocess.STDOUT)
    while True:
        if proc.poll() is not None:
            sys.exit("the server exited; see " + log.name)
        try:
            if request(port, "GET", "/v2/health/ready", timeout=2)[0] == 200:
                return proc, port, time.perf_counter() - t0
        except OSError:
            pass
        time.sleep(0.01)


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)


def perf(model, *extra):
    out = subprocess.run([args.kiln, "perf", model, "--json", "--quiet", *extra], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def wrk_p50(port):
    """REST p50 from wrk (a C client: no Python on the 2 cores), or None without wrk."""
    w = wrk_run(port, "mb", MB_IN, 1)
    return w[1] if w else None


def wrk_run(port, model, input_pb, clients, seconds=5):
    """(requests/s, p50 ms, p99 ms) from wrk with `clients` connections, or None without wrk."""
    if not shutil.which("wrk"):
        return None
    import onnx_pb
    name, _, a = onnx_pb.read_tensor(input_pb)
    header = json.dumps({"inputs": [{"name": name, "shape": list(a.shape), "datatype": "FP32",
                                     "parameters": {"binary_data_size": a.nbytes}}],
                         "parameters": {"binary_data_output": True}}).encode()
    body, script = os.path.join(args.work, f"wrk_{model}.bin"), os.path.join(args.work, f"wrk_{model}.lua")
    with open(body, "wb") as f:
        f.write(header + a.tobytes())
    with open(script, "w") as f:
        f.write(f'local f = io.open("{body}", "rb")\nwrk.method = "POST"\nwrk.body = f:read("*all")\nf:close()\n'
                f'wrk.headers["Inference-Header-Content-Length"] = "{len(header)}"\n')
    out = subprocess.run(["wrk", "-t1", f"-c{clients}", f"-d{seconds}s", "--latency", "-s", script,
                          f"http://127.0.0.1:{port}/v2/models/{model}/infer"], check=True, capture_output=True,
                         text=True).stdout
    if re.search(r"Non-2xx or 3xx responses: (\d+)", out):
        sys.exit("wrk saw failed requests:\n" + out)

    def ms(p):
        m = re.search(rf"^\s+{p}%\s+([0-9.]+)(us|ms|s)", out, re.M)
        return float(m.group(1)) * {"us": 1e-3, "ms": 1, "s": 1e3}[m.group(2)]
    return float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1)), ms(50), ms(99)


def grpc_bench(grpc_port):
    """gRPC figures from kiln_grpc_bench (C++, as wrk for REST: the client's own cost stays small): its JSON
    (p50_ms, min_ms, ...), or None where it is not built (a build without the gRPC front end)."""
    if not os.access(GRPC_BENCH, os.X_OK):
        return None
    import onnx_pb
    name = onnx_pb.read_tensor(MB_IN)[0]
    out = subprocess.run([GRPC_BENCH, "--port", str(grpc_port), "--model", "mb", "--input", f"{name}={MB_IN}",
                          "-n", str(args.n), "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def client(*extra):
    out = subprocess.run([sys.executable, os.path.join(HERE, "serve_latency.py"), *extra], check=True,
                         capture_output=True, text=True).stdout
    p50 = float(re.search(r"p50 ([0-9.]+) ms", out).group(1))
    p99 = float(re.search(r"p99 ([0-9.]+)", out).group(1))
    rate = float(re.search(r"([0-9.]+) requests/s", out).group(1))
    return p50, p99, rate


os.makedirs(args.work, exist_ok=True)
print(f"load average at start: {load()}")
folder("mb", 'parameters { key: "kiln.threads" value: { string_value: "1" } }\n', os.path.join(MB, "model.onnx"))
folder("r50k", "", os.path.join(R50, "model.onnx"), kiln_file=True)
folder("r50b", "max_batch_size: 8\ndynamic_batching { max_queue_delay_microseconds: 200000 preferred_batch_size: [8] }\n",
       os.path.join(R50, "model.onnx"))

if "latency" not in skip:
    proc, port, _ = start("--model-control-mode", "explicit", "--load-model", "mb")
    grpc_port = int(re.search(r"gRPC on 127.0.0.1:(\d+)", open(os.path.join(args.work, "server.log")).read()).group(1))
    n = str(args.n)
    for r in range(args.rounds):
        p = perf(os.path.join(args.work, "mb", "1", "model.onnx"), "--threads", "1", "-n", n, "--input-file", "@input",
                 MB_IN)
        s0 = json.loads(request(port, "GET", "/v2/models/mb/stats")[2])["model_stats"][0]["inference_stats"]
        med, b = p["median_ms"], grpc_bench(grpc_port)
        if b:  # minima too: on a shared machine they move less with the load than the medians
            g, by = b["p50_ms"], f"kiln_grpc_bench; minima {b['min_ms']:.2f} against {p['min_ms']:.2f}"
        else:
            g, by = client("--grpc-port", str(grpc_port), "--port", str(port), "--model", "mb", "--input", MB_IN,
                           "-n", n)[0], "serve_latency.py"
        rest = ""
        if "rest" not in skip:
            h, w = client("--port", str(port), "--model", "mb", "--input", MB_IN, "-n", n)[0], wrk_p50(port)
            rest = f"; REST binary p50 {h:.2f} ({h - med:+.2f})"
            rest += f"; REST p50 from wrk {w:.2f} ({w - med:+.2f})" if w else ""
        # The server's own compute over the round: when it runs slower than perf's median, the
        # front ends' p50s move with it (a slower machine for that minute, not the transport).
        s1 = json.loads(request(port, "GET", "/v2/models/mb/stats")[2])["model_stats"][0]["inference_stats"]
        runs = s1["compute_infer"]["count"] - s0["compute_infer"]["count"]
        infer = (s1["compute_infer"]["ns"] - s0["compute_infer"]["ns"]) / max(1, runs) / 1e6
        print(f"round {r + 1} (load {load()}): kiln perf median {med:.2f} ms; gRPC p50 {g:.2f} ({g - med:+.2f}, {by})"
              + rest + f"; the server's compute mean {infer:.2f} ms ({infer - med:+.2f})")
    s = json.loads(request(port, "GET", "/v2/models/mb/stats")[2])["model_stats"][0]["inference_stats"]
    count = s["success"]["count"]
    per = {k: s[k]["ns"] / count / 1000 for k in ("success", "queue", "compute_input", "compute_infer", "compute_output")}
    print(f"server time per request over {count} requests (us, means): outside queue and compute "
          f"{per['success'] - per['queue'] - per['compute_infer']:.0f} (input {per['compute_input']:.0f}, output "
          f"{per['compute_output']:.0f}), compute {per['compute_infer']:.0f}")
    stop(proc)

if "start" not in skip:
    for _ in range(2):
        proc, port, ready = start("--model-control-mode", "explicit", "--load-model", "r50k")
        print(f"resnet50 .kiln: ready {ready:.2f} s after start (load {load()})")
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            assert request(port, "POST", "/v2/repository/models/r50k/load")[0] == 200
            times.append(time.perf_counter() - t0)
        print("resnet50 .kiln: reload " + ", ".join(f"{t:.2f}" for t in times) + " s")
        stop(proc)

if "throughput" not in skip:
    b8 = os.path.join(args.work, "resnet50_b8.kiln")
    if not os.path.exists(b8):
        subprocess.run([args.kiln, "compile", os.path.join(R50, "model.onnx"), "--batch", "8", "-o", b8], check=True,
                       stdout=subprocess.DEVNULL)
    proc, port, ready = start("--model-control-mode", "explicit", "--load-model", "r50b")
    for r in range(args.rounds):
        p = perf(b8, "-n", "5", "--warmup", "1")
        ips = 8 / (p["median_ms"] / 1000)
        s0 = json.loads(request(port, "GET", "/v2/models/r50b/stats")[2])["model_stats"][0]
        p50, p99, rate = client("--port", str(port), "--model", "r50b", "--input", R50_IN, "-n", "6", "--warmup", "2",
                                "--clients", "8")
        s = json.loads(request(port, "GET", "/v2/models/r50b/stats")[2])["model_stats"][0]
        # The server's own compute rate over the round: what the clients' gaps between batches cost.
        runs = s["execution_count"] - s0["execution_count"]
        infer_ns = s["inference_stats"]["compute_infer"]["ns"] - s0["inference_stats"]["compute_infer"]["ns"]
        rows = s["inference_count"] - s0["inference_count"]
        own = rows / (infer_ns / 1e9) if infer_ns else 0
        line = (f"round {r + 1} (load {load()}): kiln perf --batch 8 {ips:.1f} images/s; 8 Python clients {rate:.1f} "
                f"images/s ({rate / ips:.2f}x), p50 {p50:.0f} ms, {rows / max(1, runs):.2f} rows a run; the server's "
                f"compute alone {own:.1f} images/s ({own / ips:.2f}x)")
        w = wrk_run(port, "r50b", R50_IN, 8, seconds=8)
        if w:
            line += f"; 8 wrk connections {w[0]:.1f} images/s ({w[0] / ips:.2f}x), p50 {w[1]:.0f} ms"
        print(line)
    stop(proc)
if "lstm" not in skip:
    # The model keeps `time` dynamic, so its batch sizes are not compiled ahead: a warm-up
    # sample per batch size compiles their specializations before the version serves.
    warm = "".join(f'model_warmup {{ name: "b{b}" batch_size: {b} count: 2 inputs {{ key: "features" value: '
                   f'{{ data_type: TYPE_FP32 dims: [100, 80] random_data: true }} }} }}\n' for b in range(1, 9))
    instances = f"instance_group {{ count: {args.lstm_instances} }}\n" if args.lstm_instances > 1 else ""
    folder("lstm", "max_batch_size: 8\ndynamic_batching { max_queue_delay_microseconds: 1000 }\n" + instances + warm,
           os.path.join(LSTM, "model.onnx"))
    proc, port, ready = start("--model-control-mode", "explicit", "--load-model", "lstm")
    for r in range(args.rounds):
        row = {}
        for clients in (1, 8):
            s0 = json.loads(request(port, "GET", "/v2/models/lstm/stats")[2])["model_stats"][0]
            w = wrk_run(port, "lstm", LSTM_IN, clients)
            if w:
                rate, p50, p99 = w
            else:
                p50, p99, rate = client("--port", str(port), "--model", "lstm", "--input", LSTM_IN, "-n", str(args.n),
                                        "--clients", str(clients))
            s1 = json.loads(request(port, "GET", "/v2/models/lstm/stats")[2])["model_stats"][0]
            rows = (s1["inference_count"] - s0["inference_count"]) / max(1, s1["execution_count"] - s0["execution_count"])
            row[clients] = (rate, p50, p99, rows)
        (r1, p1, q1, _), (r8, p8, q8, b8) = row[1], row[8]
        print(f"round {r + 1} (load {load()}, {'wrk' if shutil.which('wrk') else 'Python clients'}, "
              f"{args.lstm_instances} instance(s)): lstm_seq 1 client "
              f"{r1:.0f} requests/s (p50 {p1:.2f} ms); 8 clients {r8:.0f}/s ({r8 / r1:.2f}x), {b8:.2f} rows a run, "
              f"p50 {p8:.2f} ms, p99 {q8:.2f} ms ({q8 / p8:.2f}x p50)")
    stop(proc)
print(f"load average at the end: {load()}")
