"""Every model of a folder in the shared layout (M/model.onnx, M/test_data_set_K/input_N.pb and
output_N.pb) served by a running `kiln serve` whose repository links them, by hand:

    /usr/bin/python3 bench/serve_check_models.py --port 8000 --models ../shared/models bert_small lstm_seq ...

Each test set goes once as JSON and once binary; outputs within rtol 1e-3, atol 1e-4.
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
ap.add_argument("--models", required=True)
ap.add_argument("names", nargs="+")
args = ap.parse_args()


def post(path, body, headers):
    req = urllib.request.Request(f"http://127.0.0.1:{args.port}{path}", data=body, method="POST", headers=headers)
    with urllib.request.urlopen(req, timeout=600) as r:
        return dict(r.headers), r.read()


failed = 0
for name in args.names:
    for case in sorted(glob.glob(os.path.join(args.models, name, "test_data_set_*"))):
        inputs = [onnx_pb.read_tensor(p) for p in sorted(glob.glob(os.path.join(case, "input_*.pb")))]
        expected = [onnx_pb.read_tensor(p)[2] for p in sorted(glob.glob(os.path.join(case, "output_*.pb")))]
        for binary in (False, True):
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
            ok = len(outs) == len(expected) and all(
                g.shape == e.shape and np.allclose(g, e, rtol=1e-3, atol=1e-4) for g, e in zip(outs, expected))
            failed += not ok
            worst = max(float(np.max(np.abs(g.astype(np.float64) - e))) if g.shape == e.shape else float("inf")
                        for g, e in zip(outs, expected))
            print(f"{name} {os.path.basename(case)} {'binary' if binary else 'json  '}: {'ok' if ok else 'MISMATCH'} "
                  f"(max abs diff {worst:.2e})", flush=True)
print(f"{failed} failed")
sys.exit(1 if failed else 0)
