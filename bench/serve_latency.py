"""Latency of one client over `kiln serve` REST (binary extension, keep-alive) or gRPC (raw
contents, one channel), by hand:

    /usr/bin/python3 bench/serve_latency.py --port 8000 --model M --input INPUT_0.pb -n 200
    /usr/bin/python3 bench/serve_latency.py --grpc-port 8001 --model M --input INPUT_0.pb -n 200

Prints p50/p90/p99 in ms; compare the p50 with `kiln perf MODEL` (its median) on the same input.
--clients N runs N clients at once (each its own connection) and adds the requests per second.
"""
import argparse
import http.client
import json
import os
import importlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "tools"))
import onnx_pb  # noqa: E402

DATATYPE = {"float32": "FP32", "int64": "INT64", "int32": "INT32", "float64": "FP64", "bool": "BOOL"}

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, default=8000)
ap.add_argument("--grpc-port", type=int, default=0, help="gRPC instead of REST (stubs generated with grpc_python_plugin)")
ap.add_argument("--model", required=True)
ap.add_argument("--input", action="append", required=True, help="input_N.pb (repeat, in input order)")
ap.add_argument("-n", type=int, default=200)
ap.add_argument("--warmup", type=int, default=10)
ap.add_argument("--clients", type=int, default=1)
args = ap.parse_args()

tensors = [onnx_pb.read_tensor(p) for p in args.input]
header = json.dumps({"inputs": [{"name": n, "shape": list(a.shape), "datatype": DATATYPE[str(a.dtype)],
                                 "parameters": {"binary_data_size": a.nbytes}} for n, _, a in tensors],
                     "parameters": {"binary_data_output": True}}).encode()
body = header + b"".join(a.tobytes() for _, _, a in tensors)
times = []


def grpc_stubs():
    """grpc_service_pb2 and _pb2_grpc, generated from src/serve/grpc_service.proto into a temporary folder."""
    proto = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "serve", "grpc_service.proto")
    out = tempfile.mkdtemp()
    subprocess.run(["protoc", f"--proto_path={os.path.dirname(proto)}", f"--python_out={out}", f"--grpc_out={out}",
                    f"--plugin=protoc-gen-grpc={shutil.which('grpc_python_plugin')}", proto], check=True)
    sys.path.insert(0, out)
    return importlib.import_module("grpc_service_pb2"), importlib.import_module("grpc_service_pb2_grpc")


def grpc_client():
    import grpc
    pb, pb_grpc = grpc_stubs()
    channel = grpc.insecure_channel(f"127.0.0.1:{args.grpc_port}", options=[
        ("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)])
    stub = pb_grpc.GRPCInferenceServiceStub(channel)
    req = pb.ModelInferRequest(model_name=args.model)
    for n, _, a in tensors:
        req.inputs.add(name=n, datatype=DATATYPE[str(a.dtype)], shape=list(a.shape))
        req.raw_input_contents.append(a.tobytes())
    for i in range(args.warmup + args.n):
        start = time.perf_counter()
        stub.ModelInfer(req, timeout=60)
        if i >= args.warmup:
            times.append((time.perf_counter() - start) * 1e3)
    channel.close()


def client():
    if args.grpc_port:
        return grpc_client()
    conn = http.client.HTTPConnection("127.0.0.1", args.port)
    for i in range(args.warmup + args.n):
        start = time.perf_counter()
        conn.request("POST", f"/v2/models/{args.model}/infer", body,
                     {"Inference-Header-Content-Length": str(len(header)), "Content-Type": "application/octet-stream"})
        r = conn.getresponse()
        r.read()
        assert r.status == 200, r.status
        if i >= args.warmup:
            times.append((time.perf_counter() - start) * 1e3)


def server_counts():
    """(inferences, executions) of the model so far, from the statistics on the REST port."""
    try:
        conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=5)
        conn.request("GET", f"/v2/models/{args.model}/stats")
        s = json.loads(conn.getresponse().read())["model_stats"]
        return sum(m["inference_count"] for m in s), sum(m["execution_count"] for m in s)
    except (OSError, KeyError, ValueError):
        return None, None


rows0, runs0 = server_counts()
threads = [threading.Thread(target=client) for _ in range(args.clients)]
wall = time.perf_counter()
for t in threads:
    t.start()
for t in threads:
    t.join()
wall = time.perf_counter() - wall
times.sort()
q = lambda p: times[min(len(times) - 1, int(p * len(times)))]
rows, runs = server_counts()
stats = f"; executed batches: {(rows - rows0) / max(runs - runs0, 1):.2f} rows a run" if runs is not None else ""
print(f"{args.model} over {'gRPC' if args.grpc_port else 'REST'}: {args.clients} client(s), n={len(times)} p50 {statistics.median(times):.3f} ms, "
      f"p90 {q(0.9):.3f}, p99 {q(0.99):.3f}, min {times[0]:.3f}; {args.clients * (args.warmup + args.n) / wall:.1f} requests/s{stats}")
