"""Every model of a folder in the shared layout (M/model.onnx, M/test_data_set_K/input_N.pb and
output_N.pb) served by a running `kiln serve` whose repository links them, by hand:

    /usr/bin/python3 bench/serve_check_models.py --port 8000 --models ../shared/models bert_small lstm_seq ...

    /usr/bin/python3 bench/serve_check_models.py --port 8000 --grpc-port 8001 --models ../shared/models ...

Each test set goes once as JSON and once binary (and once over gRPC with raw contents when
--grpc-port is given: stubs generated from src/serve/grpc_service.proto with protoc and
grpc_python_plugin); outputs within rtol 1e-3, atol 1e-4 of the stored ONNX Runtime outputs.
The int8 QDQ models (names ending in _qdq) cannot meet that against ORT's integer kernels
(ORT's own kernels differ by more across versions): they are held to issue 20's bounds on the
relative L2 error instead (bert_small_qdq 0.01, mobilenet_v2_qdq 0.2, resnet50_qdq 0.25).
"""
import argparse
import glob
import json
import os
import sys
import urllib.request

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "tools"))
import onnx_pb  # noqa: E402

DT = {"float32": "FP32", "int64": "INT64", "int32": "INT32", "float64": "FP64", "bool": "BOOL", "uint8": "UINT8", "int8": "INT8"}
NP = {v: k for k, v in DT.items()}

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, default=8000)
ap.add_argument("--grpc-port", type=int, default=None, help="also send every test set over gRPC (raw contents)")
ap.add_argument("--models", required=True)
ap.add_argument("names", nargs="+")
args = ap.parse_args()


def post(path, body, headers):
    req = urllib.request.Request(f"http://127.0.0.1:{args.port}{path}", data=body, method="POST", headers=headers)
    with urllib.request.urlopen(req, timeout=600) as r:
        return dict(r.headers), r.read()


QDQ_BOUND = {"bert_small_qdq": 0.01, "mobilenet_v2_qdq": 0.2, "resnet50_qdq": 0.25}


def grpc_client():
    import importlib
    import shutil
    import subprocess
    import tempfile
    import grpc
    proto = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "serve", "grpc_service.proto")
    out = tempfile.mkdtemp(prefix="kiln_grpc_stubs")
    subprocess.run(["protoc", f"--proto_path={os.path.dirname(proto)}", f"--python_out={out}", f"--grpc_out={out}",
                    f"--plugin=protoc-gen-grpc={shutil.which('grpc_python_plugin')}", proto], check=True)
    sys.path.insert(0, out)
    pb, pb_grpc = importlib.import_module("grpc_service_pb2"), importlib.import_module("grpc_service_pb2_grpc")
    limit = 64 << 20
    channel = grpc.insecure_channel(f"127.0.0.1:{args.grpc_port}", options=[
        ("grpc.max_send_message_length", limit), ("grpc.max_receive_message_length", limit)])
    stub = pb_grpc.GRPCInferenceServiceStub(channel)

    def infer(name, inputs):
        r = pb.ModelInferRequest(model_name=name)
        for n, _, a in inputs:
            r.inputs.add(name=n, datatype=DT[str(a.dtype)], shape=list(a.shape))
            r.raw_input_contents.append(a.tobytes())
        reply = stub.ModelInfer(r, timeout=600)
        return [np.frombuffer(reply.raw_output_contents[i], dtype=NP[o.datatype]).reshape(list(o.shape))
                for i, o in enumerate(reply.outputs)]
    return infer


def rest_infer(name, inputs, binary):
    if binary:
        header = json.dumps({"inputs": [{"name": n, "shape": list(a.shape), "datatype": DT[str(a.dtype)],
                                         "parameters": {"binary_data_size": a.nbytes}} for n, _, a in inputs],
                             "parameters": {"binary_data_output": True}}).encode()
        headers, body = post(f"/v2/models/{name}/infer", header + b"".join(a.tobytes() for _, _, a in inputs),
                             {"Inference-Header-Content-Length": str(len(header))})
    else:
        doc = {"inputs": [{"name": n, "shape": list(a.shape), "datatype": DT[str(a.dtype)],
                           "data": a.flatten().tolist()} for n, _, a in inputs]}
        headers, body = post(f"/v2/models/{name}/infer", json.dumps(doc).encode(), {"Content-Type": "application/json"})
    n = int(headers.get("Inference-Header-Content-Length", len(body)))
    meta, offset, outs = json.loads(body[:n]), n, []
    for o in meta["outputs"]:
        size = o.get("parameters", {}).get("binary_data_size")
        if size is None:
            outs.append(np.array(o["data"], dtype=NP[o["datatype"]]).reshape(o["shape"]))
        else:
            outs.append(np.frombuffer(body[offset:offset + size], dtype=NP[o["datatype"]]).reshape(o["shape"]))
            offset += size
    return outs


def rel_l2(g, e):
    g, e = g.astype(np.float64), e.astype(np.float64)
    return float(np.linalg.norm(g - e) / max(np.linalg.norm(e), 1e-30))


grpc_infer = grpc_client() if args.grpc_port else None
failed = 0
for name in args.names:
    for case in sorted(glob.glob(os.path.join(args.models, name, "test_data_set_*"))):
        inputs = [onnx_pb.read_tensor(p) for p in sorted(glob.glob(os.path.join(case, "input_*.pb")))]
        expected = [onnx_pb.read_tensor(p)[2] for p in sorted(glob.glob(os.path.join(case, "output_*.pb")))]
        for how in ("json", "binary") + (("grpc",) if grpc_infer else ()):
            outs = grpc_infer(name, inputs) if how == "grpc" else rest_infer(name, inputs, how == "binary")
            same = len(outs) == len(expected) and all(g.shape == e.shape for g, e in zip(outs, expected))
            worst = max(float(np.max(np.abs(g.astype(np.float64) - e))) if g.shape == e.shape else float("inf")
                        for g, e in zip(outs, expected))
            err = max(rel_l2(g, e) if g.shape == e.shape else float("inf") for g, e in zip(outs, expected))
            if name in QDQ_BOUND:
                ok = same and err <= QDQ_BOUND[name]
                rule = f"rel. L2 {err:.4f} <= {QDQ_BOUND[name]}"
            else:
                ok = same and all(np.allclose(g, e, rtol=1e-3, atol=1e-4) for g, e in zip(outs, expected))
                rule = f"max abs diff {worst:.2e}"
            failed += not ok
            print(f"{name} {os.path.basename(case)} {how:6}: {'ok' if ok else 'MISMATCH'} ({rule})", flush=True)
print(f"{failed} failed")
sys.exit(1 if failed else 0)
