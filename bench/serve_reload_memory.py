"""Reload memory of `kiln serve`, by hand: starts the server on one model, then CYCLES times
unloads it, loads it again (from the cached .kiln) and sends one request, and reports the
server's RSS after the first cycle and after the last, and where the growth is (anonymous
heap, anonymous mappings, file-backed, from /proc/PID/smaps):

    /usr/bin/python3 bench/serve_reload_memory.py --model ../shared/models/mobilenet_v2 --cycles 100
    /usr/bin/python3 bench/serve_reload_memory.py --model ../shared/models/resnet50 --instances 1,2 --cycles 0

The issue's goals: RSS after 100 cycles <= 1.1x after the first (exit 1 otherwise, --limit);
with --instances A,B --cycles 0 it compares the RSS of each instance_group count after one
request per instance (2 ResNet-50 instances <= 1.3x one). Extra environment for the server
goes in --env K=V (e.g. ONEDNN_PRIMITIVE_CACHE_CAPACITY=0, to look for where memory goes).
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "tools"))
import onnx_pb  # noqa: E402
from test_serve import free_port, request  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--kiln", default=os.path.join(HERE, "..", "build", "bin", "kiln"))
ap.add_argument("--model", required=True, help="a folder with model.onnx and test_data_set_0/")
ap.add_argument("--cycles", type=int, default=100)
ap.add_argument("--instances", default="1", help="instance_group counts to compare, e.g. 1,2")
ap.add_argument("--threads", type=int, default=0, help="kiln.threads (0: the server's default)")
ap.add_argument("--limit", type=float, default=1.1)
ap.add_argument("--env", action="append", default=[])
ap.add_argument("--detail", action="store_true", help="list the mappings that grew most")
ap.add_argument("--work", help="the repository folder, kept (its compiled caches reused); default: a temporary one")
ap.add_argument("--every", type=int, default=0, help="print the RSS every N cycles")
args = ap.parse_args()

DATATYPE = {"float32": "FP32", "int64": "INT64"}
tensors = [onnx_pb.read_tensor(os.path.join(args.model, "test_data_set_0", f))
           for f in sorted(os.listdir(os.path.join(args.model, "test_data_set_0"))) if f.startswith("input_")]
header = json.dumps({"inputs": [{"name": n, "shape": list(a.shape), "datatype": DATATYPE[str(a.dtype)],
                                 "parameters": {"binary_data_size": a.nbytes}} for n, _, a in tensors],
                     "parameters": {"binary_data_output": True}}).encode()
body = header + b"".join(a.tobytes() for _, _, a in tensors)


def server_pid(pid):
    """The kiln process: `pid` itself, or its descendant when --kiln is a wrapper script."""
    for _ in range(8):
        if open(f"/proc/{pid}/comm").read().strip() == "kiln":
            return pid
        children = open(f"/proc/{pid}/task/{pid}/children").read().split()
        if not children:
            return pid
        pid = int(children[-1])
    return pid


def smaps(pid):
    """RSS in MiB: total, [heap], other anonymous, file-backed."""
    pid = server_pid(pid)
    out = {"total": 0, "heap": 0, "anon": 0, "file": 0}
    kind = None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
                name = head[5] if len(head) > 5 else ""
                kind = "heap" if name == "[heap]" else "file" if name.startswith("/") else "anon"
            elif head[0] == "Rss:":
                out[kind] += int(head[1]) / 1024
                out["total"] += int(head[1]) / 1024
    return out


def mappings(pid):
    """{first line of the mapping: Rss KiB}"""
    out, key = {}, None
    with open(f"/proc/{server_pid(pid)}/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and not head[0].endswith(":"):
                key = line.strip()
            elif head[0] == "Rss:":
                out[key] = int(head[1])
    return out


def show(label, m):
    return f"{label}: RSS {m['total']:.1f} MiB (heap {m['heap']:.1f}, anon {m['anon']:.1f}, file {m['file']:.1f})"


def run_server(count):
    root = args.work or tempfile.mkdtemp(prefix="kiln_reload_mem_")
    os.makedirs(os.path.join(root, "m", "1"), exist_ok=True)
    if not os.path.exists(os.path.join(root, "m", "1", "model.onnx")):
        shutil.copy(os.path.join(args.model, "model.onnx"), os.path.join(root, "m", "1", "model.onnx"))
    config = f"instance_group [ {{ count: {count} }} ]\n"
    if args.threads:
        config += f'parameters {{ key: "kiln.threads" value: {{ string_value: "{args.threads}" }} }}\n'
    with open(os.path.join(root, "m", "config.pbtxt"), "w") as f:
        f.write(config)
    port = free_port()
    env = dict(os.environ, **dict(e.split("=", 1) for e in args.env))
    log = open(os.path.join(root, "server.log"), "w+")
    proc = subprocess.Popen([args.kiln, "serve", "--model-repository", root, "--http-port", str(port),
                             "--grpc-port", str(free_port()), "--metrics-port", str(free_port())],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        while True:
            if proc.poll() is not None:
                log.seek(0)
                sys.exit("the server exited:\n" + log.read())
            try:
                if request(port, "GET", "/v2/health/ready", timeout=2)[0] == 200:
                    break
            except OSError:
                time.sleep(0.1)

        def infer():
            status, _, answer = request(port, "POST", "/v2/models/m/infer", body,
                                        {"Inference-Header-Content-Length": str(len(header))})
            assert status == 200, answer[:300]

        def cycle():
            assert request(port, "POST", "/v2/repository/models/m/unload")[0] == 200
            status, _, answer = request(port, "POST", "/v2/repository/models/m/load")
            assert status == 200, answer
            infer()

        # One request per instance at once, so that every instance's arena exists.
        threads = [threading.Thread(target=infer) for _ in range(count)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if args.cycles == 0:
            return smaps(proc.pid)
        start = time.time()
        cycle()
        first, first_maps = smaps(proc.pid), mappings(proc.pid)
        print(show("after cycle 1", first))
        for i in range(2, args.cycles + 1):
            cycle()
            if (args.every and i % args.every == 0) or i in (10, 25, 50, 75) or i == args.cycles:
                print(show(f"after cycle {i}", smaps(proc.pid)))
        last = smaps(proc.pid)
        ratio = last["total"] / first["total"]
        if args.detail:
            now = mappings(proc.pid)
            grown = sorted(((now.get(k, 0) - first_maps.get(k, 0), k) for k in set(now) | set(first_maps)), reverse=True)
            for kib, k in grown[:8] + grown[-3:]:
                print(f"  {kib:+7d} KiB  {k}")
        print(f"{args.cycles} cycles in {time.time() - start:.1f} s: {ratio:.3f}x the RSS after the first "
              f"(goal <= {args.limit}x); growth: heap {last['heap'] - first['heap']:+.1f}, anon "
              f"{last['anon'] - first['anon']:+.1f}, file {last['file'] - first['file']:+.1f} MiB")
        return ratio
    finally:
        os.kill(server_pid(proc.pid), signal.SIGTERM)  # --kiln may be a wrapper (heaptrack)
        proc.wait(timeout=300)
        if not args.work:
            shutil.rmtree(root, ignore_errors=True)


counts = [int(c) for c in args.instances.split(",")]
if args.cycles == 0:
    base = None
    for c in counts:
        m = run_server(c)
        base = base or m["total"]
        print(show(f"instance_group count {c}", m) + f"; {m['total'] / base:.3f}x count {counts[0]}")
    sys.exit(0)
sys.exit(0 if run_server(counts[0]) <= args.limit else 1)
