#!/usr/bin/python3
"""Writes the serve fuzzer's seed corpus into OUT (kept in tests/data/serve_fuzz/): requests
as clients send them (REST JSON and binary bodies, gRPC messages with raw and typed
contents, as tritonclient builds them), each prefixed with the driver's form byte
(fuzz/serve_fuzz_driver.hpp). A seed named *_refused must be refused, the others answered.

    /usr/bin/python3 fuzz/serve_seeds.py OUT
"""
import importlib
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JSON, BINARY, GRPC, ADD, MIXED = 0, 1, 2, 0, 4


def pb2():
    out = tempfile.mkdtemp(prefix="kiln_seeds_")
    proto = os.path.join(ROOT, "src", "serve", "grpc_service.proto")
    subprocess.run(["protoc", f"--proto_path={os.path.dirname(proto)}", f"--python_out={out}", proto], check=True)
    sys.path.insert(0, out)
    return importlib.import_module("grpc_service_pb2")


def rest_json(inputs, **extra):
    return json.dumps({"id": "1", "inputs": inputs, **extra}).encode()


def rest_binary(inputs, outputs=None):
    header, tail = [], b""
    for name, dt, arr in inputs:
        raw = arr.tobytes()
        header.append({"name": name, "shape": list(arr.shape), "datatype": dt,
                       "parameters": {"binary_data_size": len(raw)}})
        tail += raw
    h = json.dumps({"inputs": header, **({"outputs": outputs} if outputs else {})}).encode()
    return struct.pack("<I", len(h)) + h + tail


def main(out):
    os.makedirs(out, exist_ok=True)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    seeds = {
        "json_flat": (JSON | ADD, rest_json([{"name": n, "shape": [2, 3], "datatype": "FP32", "data": x.ravel().tolist()}
                                             for n in "xy"])),
        "json_nested_outputs": (JSON | ADD, rest_json(
            [{"name": n, "shape": [2, 3], "datatype": "FP32", "data": x.tolist()} for n in "xy"],
            outputs=[{"name": "output_0", "parameters": {"binary_data": True}}], parameters={"binary_data_output": True})),
        "json_mixed": (JSON | MIXED, rest_json([
            {"name": "i", "shape": [2], "datatype": "INT64", "data": [1, -2]},
            {"name": "h", "shape": [1, 2], "datatype": "FP16", "data": [0.5, 1.5]},
            {"name": "b", "shape": [3], "datatype": "BOOL", "data": [True, False, True]},
            {"name": "u", "shape": [2, 2], "datatype": "UINT8", "data": [[1, 2], [3, 255]]}])),
        "binary_add": (BINARY | ADD, rest_binary([("x", "FP32", x), ("y", "FP32", x)],
                                                 [{"name": "output_0", "parameters": {"binary_data": True}}])),
        "binary_mixed": (BINARY | MIXED, rest_binary([
            ("i", "INT64", np.array([3, 4], np.int64)), ("h", "FP16", np.ones((2, 2), np.float16)),
            ("b", "BOOL", np.array([1, 0, 1], np.bool_)), ("u", "UINT8", np.ones((2, 2), np.uint8))])),
    }
    m = pb2()
    req = m.ModelInferRequest(model_name="add", id="g1")
    for n in "xy":
        t = req.inputs.add(name=n, datatype="FP32", shape=[2, 3])
        req.raw_input_contents.append(x.tobytes())
    req.outputs.add(name="output_0")
    seeds["grpc_raw"] = (GRPC | ADD, req.SerializeToString())
    req = m.ModelInferRequest(model_name="add", model_version="1")
    for n in "xy":
        t = req.inputs.add(name=n, datatype="FP32", shape=[2, 3])
        t.contents.fp32_contents.extend(x.ravel().tolist())
    seeds["grpc_typed"] = (GRPC | ADD, req.SerializeToString())
    req = m.ModelInferRequest(model_name="mixed")
    req.inputs.add(name="i", datatype="INT64", shape=[2]).contents.int64_contents.extend([5, 6])
    req.inputs.add(name="h", datatype="FP16", shape=[1, 2])
    req.inputs.add(name="b", datatype="BOOL", shape=[3]).contents.bool_contents.extend([True, False, False])
    req.inputs.add(name="u", datatype="UINT8", shape=[2, 2]).contents.uint_contents.extend([1, 2, 3, 4])
    seeds["grpc_mixed_typed_refused"] = (GRPC | MIXED, req.SerializeToString())
    req = m.ModelInferRequest(model_name="mixed")
    for name, dt, shape, arr in [("i", "INT64", [2], np.array([1, 2], np.int64)),
                                 ("h", "FP16", [3, 2], np.ones((3, 2), np.float16)),
                                 ("b", "BOOL", [3], np.array([1, 1, 0], np.bool_)),
                                 ("u", "UINT8", [2, 2], np.arange(4, dtype=np.uint8))]:
        req.inputs.add(name=name, datatype=dt, shape=shape)
        req.raw_input_contents.append(arr.tobytes())
    seeds["grpc_mixed_raw"] = (GRPC | MIXED, req.SerializeToString())
    for name, (form, body) in seeds.items():
        with open(os.path.join(out, "seed_" + name), "wb") as f:
            f.write(bytes([form]) + body)
    print(f"serve_seeds.py: {len(seeds)} seeds in {out}")


if __name__ == "__main__":
    main(sys.argv[1])
