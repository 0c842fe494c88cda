"""Reloads under load, by hand (the issue's check: 16 clients for 60 s with a reload every
5 s, no failed request, the model always ready):

    /usr/bin/python3 bench/serve_reload_soak.py --model ../shared/models/mobilenet_v2 --clients 16 --seconds 60

Starts `kiln serve` on the model (copied into a temporary repository), runs CLIENTS REST
clients (binary extension, keep-alive; every fourth over gRPC when grpcio is there) sending
the model's test input and checking every answer against the stored output, reloads the
model every --reload-every seconds (POST .../load: compiled beside the old one, swapped),
and probes v2/models/m/ready every 20 ms. Exit 1 on any failed or wrong answer or any
probe that was not ready.

With --sigterm the clients are told to stop and the server gets SIGTERM while their last
requests are in flight: each must still be answered (200, or 503 / UNAVAILABLE for one the
server had not taken in yet), none dropped, and the server must exit 0.
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "tools"))
import onnx_pb  # noqa: E402
from test_serve import free_port, request  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--kiln", default=os.path.join(HERE, "..", "build", "bin", "kiln"))
ap.add_argument("--model", required=True, help="a folder with model.onnx and test_data_set_0/")
ap.add_argument("--clients", type=int, default=16)
ap.add_argument("--seconds", type=float, default=60)
ap.add_argument("--reload-every", type=float, default=5)
ap.add_argument("--sigterm", action="store_true", help="end with SIGTERM under load (the drain check)")
args = ap.parse_args()

DATATYPE = {"float32": "FP32", "int64": "INT64"}
data = os.path.join(args.model, "test_data_set_0")
inputs = [onnx_pb.read_tensor(os.path.join(data, f)) for f in sorted(os.listdir(data)) if f.startswith("input_")]
expected = [onnx_pb.read_tensor(os.path.join(data, f))[2] for f in sorted(os.listdir(data)) if f.startswith("output_")]
header = json.dumps({"inputs": [{"name": n, "shape": list(a.shape), "datatype": DATATYPE[str(a.dtype)],
                                 "parameters": {"binary_data_size": a.nbytes}} for n, _, a in inputs],
                     "parameters": {"binary_data_output": True}}).encode()
body = header + b"".join(a.tobytes() for _, _, a in inputs)

root = tempfile.mkdtemp(prefix="kiln_soak_")
os.makedirs(os.path.join(root, "m", "1"))
shutil.copy(os.path.join(args.model, "model.onnx"), os.path.join(root, "m", "1", "model.onnx"))
port, grpc_port = free_port(), free_port()
log = open(os.path.join(root, "server.log"), "w+")
proc = subprocess.Popen([args.kiln, "serve", "--model-repository", root, "--http-port", str(port),
                         "--grpc-port", str(grpc_port), "--metrics-port", str(free_port())],
                        stdout=log, stderr=subprocess.STDOUT)
while True:
    if proc.poll() is not None:
        log.seek(0)
        sys.exit("the server exited:\n" + log.read())
    try:
        if request(port, "GET", "/v2/health/ready", timeout=2)[0] == 200:
            break
    except OSError:
        time.sleep(0.1)

failures, answered, probes, not_ready, reloads = [], [0] * args.clients, [0], [0], []
done = threading.Event()
in_flight, refused, lock = [0], [0], threading.Lock()


def flight(d):
    with lock:
        in_flight[0] += d


def check(outputs):
    for got, want in zip(outputs, expected):
        if not np.allclose(got.reshape(want.shape), want, rtol=1e-3, atol=1e-4):
            failures.append("wrong numbers")


def rest_client(k):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    while not done.is_set():
        flight(1)
        try:
            conn.request("POST", "/v2/models/m/infer", body, {"Inference-Header-Content-Length": str(len(header))})
            r = conn.getresponse()
            raw = r.read()
            if r.status == 503 and done.is_set() and b"shutting down" in raw:
                refused[0] += 1
                continue
            if r.status != 200:
                failures.append((r.status, raw[:200]))
                continue
            n = int(r.getheader("Inference-Header-Content-Length"))
            outs, at = [], n
            for o in json.loads(raw[:n])["outputs"]:
                size = o["parameters"]["binary_data_size"]
                outs.append(np.frombuffer(raw[at:at + size], dtype=np.float32))
                at += size
            check(outs)
            answered[k] += 1
        except (OSError, http.client.HTTPException) as e:
            failures.append(repr(e))
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        finally:
            flight(-1)


def grpc_client(k, pb, pb_grpc):
    import grpc
    stub = pb_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(f"127.0.0.1:{grpc_port}", options=[
        ("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)]))
    req = pb.ModelInferRequest(model_name="m")
    for n, _, a in inputs:
        req.inputs.add(name=n, datatype=DATATYPE[str(a.dtype)], shape=list(a.shape))
        req.raw_input_contents.append(a.tobytes())
    while not done.is_set():
        flight(1)
        try:
            resp = stub.ModelInfer(req, timeout=60)
            check([np.frombuffer(b, dtype=np.float32) for b in resp.raw_output_contents])
            answered[k] += 1
        except grpc.RpcError as e:
            if done.is_set() and e.code() == grpc.StatusCode.UNAVAILABLE and "shutting down" in (e.details() or ""):
                refused[0] += 1
            else:
                failures.append(f"gRPC {e.code()}: {e.details()}")
        finally:
            flight(-1)


def grpc_stubs():
    """(pb2, pb2_grpc) generated from src/serve/grpc_service.proto, or None without grpcio."""
    import importlib
    import importlib.util
    if importlib.util.find_spec("grpc") is None or not shutil.which("grpc_python_plugin"):
        return None
    out = tempfile.mkdtemp()
    proto = os.path.join(HERE, "..", "src", "serve", "grpc_service.proto")
    subprocess.run(["protoc", f"--proto_path={os.path.dirname(proto)}", f"--python_out={out}", f"--grpc_out={out}",
                    f"--plugin=protoc-gen-grpc={shutil.which('grpc_python_plugin')}", proto], check=True)
    sys.path.insert(0, out)
    return importlib.import_module("grpc_service_pb2"), importlib.import_module("grpc_service_pb2_grpc")


def prober():
    while not done.is_set():
        probes[0] += 1
        if request(port, "GET", "/v2/models/m/ready")[0] != 200:
            not_ready[0] += 1
        time.sleep(0.02)


try:
    stubs = grpc_stubs()
    threads = [threading.Thread(target=grpc_client, args=(k, *stubs)) if stubs and k % 4 == 3
               else threading.Thread(target=rest_client, args=(k,)) for k in range(args.clients)]
    threads.append(threading.Thread(target=prober))
    for t in threads:
        t.start()
    start = time.time()
    while time.time() - start < args.seconds:
        time.sleep(min(args.reload_every, max(0, args.seconds - (time.time() - start))))
        if time.time() - start >= args.seconds:
            break
        t0 = time.time()
        status, _, answer = request(port, "POST", "/v2/repository/models/m/load")
        reloads.append(time.time() - t0)
        if status != 200:
            failures.append(("reload", status, answer[:200]))
    done.set()  # no new requests from here on
    if args.sigterm:
        time.sleep(0.005)
        with lock:
            at_signal = in_flight[0]
        proc.send_signal(signal.SIGTERM)
    for t in threads:
        t.join()
finally:
    if proc.poll() is None and not args.sigterm:
        proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=60)
    shutil.rmtree(root, ignore_errors=True)

total = sum(answered)
print(f"{args.clients} clients ({sum(1 for k in range(args.clients) if stubs and k % 4 == 3)} over gRPC) for "
      f"{args.seconds:.0f} s: {total} answered ({total / args.seconds:.1f}/s, fewest per client {min(answered)}), "
      f"{len(failures)} failed; {len(reloads)} reloads ({min(reloads or [0]):.2f}-{max(reloads or [0]):.2f} s); "
      f"ready probes {probes[0]}, not ready {not_ready[0]}")
if args.sigterm:
    print(f"SIGTERM with {at_signal} requests in flight: {refused[0]} refused as shutting down, the rest answered; "
          f"server exit code {code}")
    if code != 0:
        failures.append(f"exit code {code}")
if failures:
    print("failures:", failures[:5])
sys.exit(1 if failures or not_ready[0] or not reloads else 0)
