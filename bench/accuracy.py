#!/usr/bin/env python3
"""fashion_resnet's accuracy on the 10,000 labelled Fashion-MNIST test images in float32,
fp16, bf16, int8 (each calibration method), fp8 and int4 weights, as Kiln compiles it:

    /usr/bin/python3 bench/accuracy.py [--target cpu] [--eval DIR] [--modes fp32,fp16,bf16,int8,fp8,int4]

The evaluation data is not stored in the shared folder: make_fashion_models.py --eval-only writes
../shared/models/fashion_resnet/eval/{input_0.pb, labels.pb} from the dataset-fashion-mnist
package (see the models README); without that folder the script reads the package's t10k idx
files itself (--mnist-dir, normalised as the README says). Without either it says so and uses
the 16 labelled images of test_data_set_0 (labels from manifest_fashion.json), which shows the
table's form, not the accuracy. int8 is calibrated on fashion_resnet/calibration (8 sets of 16 training
images), fp8 likewise (minmax). int4 quantizes the weights of the matmuls and gemms only (block 32;
fashion_resnet's classifier Gemm: its convolutions stay float32). The bar (issue 20): int8 >=
99.5% of float32's accuracy, fp16/bf16 >= 99.9%, int4 >= 99%.
Needs numpy and the kiln module (--kiln-python, default build/python).
"""
import argparse
import gzip
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FASHION = os.path.join(os.path.dirname(ROOT), "shared", "models", "fashion_resnet")
BATCH = 16  # the calibration sets' batch: every program here is compiled for it


def read_idx(path):
    """An idx file of the MNIST format (gzip): ubyte images [n, rows, cols] or labels [n]."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="cpu")
    ap.add_argument("--eval", default=os.path.join(FASHION, "eval"), help="folder with input_0.pb and labels.pb")
    ap.add_argument("--mnist-dir", default="/usr/share/datasets/fashion-mnist",
                    help="the dataset-fashion-mnist package's idx files, used when --eval is not there")
    ap.add_argument("--modes", default="fp32,fp16,bf16,int8-minmax,int8-percentile,int8-entropy,fp8,int4")
    ap.add_argument("--kiln-python", default=os.path.join(ROOT, "build", "python"))
    args = ap.parse_args()
    sys.path.insert(0, args.kiln_python)
    import kiln

    if os.path.exists(os.path.join(args.eval, "input_0.pb")):
        x = np.asarray(kiln.read_tensor_proto(os.path.join(args.eval, "input_0.pb")))
        labels = np.asarray(kiln.read_tensor_proto(os.path.join(args.eval, "labels.pb")))
        source = f"{len(labels)} test images ({args.eval})"
    elif os.path.exists(os.path.join(args.mnist_dir, "t10k-images-idx3-ubyte.gz")):
        pixels = read_idx(os.path.join(args.mnist_dir, "t10k-images-idx3-ubyte.gz"))
        x = ((pixels.astype(np.float32) / np.float32(255) - np.float32(0.2860)) / np.float32(0.3530))[:, None]
        labels = read_idx(os.path.join(args.mnist_dir, "t10k-labels-idx1-ubyte.gz")).astype(np.int64)
        source = f"{len(labels)} test images ({args.mnist_dir})"
    else:
        print(f"note: {args.eval} is not there (make_fashion_models.py --eval-only writes it); "
              "using the 16 images of test_data_set_0 instead: the table's form, not the accuracy", file=sys.stderr)
        x = np.asarray(kiln.read_tensor_proto(os.path.join(FASHION, "test_data_set_0", "input_0.pb")))
        with open(os.path.join(os.path.dirname(FASHION), "manifest_fashion.json")) as f:
            labels = np.array(json.load(f)["models"]["fashion_resnet"]["test_data_sets"][0]["labels"])
        source = "16 test images (test_data_set_0)"
    n = len(labels)
    pad = (-n) % BATCH
    xp = np.concatenate([x, np.zeros((pad,) + x.shape[1:], x.dtype)]) if pad else x
    calib = []
    k = 0
    while os.path.isdir(os.path.join(FASHION, "calibration", f"data_set_{k}")):
        calib.append({"input": np.asarray(kiln.read_tensor_proto(
            os.path.join(FASHION, "calibration", f"data_set_{k}", "input_0.pb")))})
        k += 1

    target = kiln.get_target(args.target)
    print(f"fashion_resnet on {args.target}, {source}\n")
    print("| mode | accuracy | of fp32 | same class as fp32 | prepare s | eval s |")
    print("| --- | --- | --- | --- | --- | --- |")
    fp32_pred = None
    fp32_acc = None
    for mode in args.modes.split(","):
        model = kiln.parse_onnx(os.path.join(FASHION, "model.onnx"), map_input_dims={"input": [BATCH, 1, 28, 28]})
        t0 = time.perf_counter()
        if mode == "fp16":
            kiln.quantize_fp16(model)
        elif mode == "bf16":
            kiln.quantize_bf16(model)
        elif mode.startswith("int8"):
            method = mode.partition("-")[2] or "minmax"
            kiln.quantize_int8(model, target, calib, method=method)
        elif mode.startswith("fp8"):
            kiln.quantize_fp8(model, target, calib, method=mode.partition("-")[2] or "minmax")
        elif mode == "int4":
            kiln.quantize_int4_weights(model)
        elif mode != "fp32":
            raise SystemExit(f"unknown mode {mode}")
        model.compile(target)
        t1 = time.perf_counter()
        pred = np.concatenate([np.asarray(model.run({"input": xp[i:i + BATCH]})[0]).argmax(1)
                               for i in range(0, len(xp), BATCH)])[:n]
        t2 = time.perf_counter()
        acc = float((pred == labels).mean())
        if mode == "fp32":
            fp32_pred, fp32_acc = pred, acc
        rel = f"{100 * acc / fp32_acc:.2f}%" if fp32_acc else "-"
        same = f"{int((pred == fp32_pred).sum())}/{n}" if fp32_pred is not None else "-"
        print(f"| {mode} | {acc:.4f} | {rel} | {same} | {t1 - t0:.2f} | {t2 - t1:.2f} |", flush=True)


if __name__ == "__main__":
    main()
