#!/usr/bin/env python3
"""The deployment guide's Python inference, with Kiln: read an image with OpenCV, preprocess it
as the guide does, compile ResNet-50 for a target, run, print the top-5 classes.

    /usr/bin/python3 examples/resnet50/classify.py /tmp/resnet50/resnet50.onnx /tmp/resnet50/images/*.png

Prints, per image, one line `IMAGE: index:score name, ...` for the five best classes. With
--check NPZ (export.py's pytorch_outputs.npz) it also compares the logits with PyTorch's and exits
1 when they differ (rel. L2 above --rtol) or the top-1 class differs.
"""
import argparse
import os
import sys

import cv2
import numpy as np

import kiln
from preprocess import blob_from_image


def top5(logits):
    order = np.argsort(-logits)[:5]
    return [(int(i), float(logits[i])) for i in order]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", help="resnet50.onnx (or a .kiln)")
    ap.add_argument("images", nargs="+")
    ap.add_argument("--target", default="cpu")
    ap.add_argument("--check", help="pytorch_outputs.npz to compare against")
    ap.add_argument("--rtol", type=float, default=1e-4)
    args = ap.parse_args()

    classes_file = os.path.join(os.path.dirname(os.path.abspath(args.model)), "imagenet_classes.txt")
    classes = open(classes_file).read().splitlines() if os.path.exists(classes_file) else []

    if args.model.endswith(".kiln"):
        model = kiln.load(args.model)
    else:
        # The guide fixes the batch at parse time; the model's own batch axis is symbolic.
        model = kiln.parse_onnx(args.model, map_input_dims={"input": [1, 3, 224, 224]})
        model.compile(kiln.get_target(args.target), offload_copy=True, device_id=0)
    input_name = next(iter(model.get_inputs()))

    expected = np.load(args.check) if args.check else None
    worst = 0.0
    ok = True
    for path in args.images:
        image = cv2.imread(path)
        if image is None:
            sys.exit(f"cannot read image {path}")
        logits = np.array(model.run({input_name: blob_from_image(image)})[0]).reshape(-1)
        best = top5(logits)
        names = [f"{i}:{s:.3f} {classes[i] if i < len(classes) else ''}".rstrip() for i, s in best]
        print(f"{os.path.basename(path)}: " + ", ".join(names))
        if expected is not None:
            ref = expected[os.path.basename(path)].reshape(-1)
            rel = float(np.linalg.norm(logits - ref) / np.linalg.norm(ref))
            worst = max(worst, rel)
            if rel > args.rtol or int(np.argmax(ref)) != best[0][0]:
                ok = False
                print(f"  differs from PyTorch: rel. L2 {rel:.2e}, PyTorch's top-1 {int(np.argmax(ref))}")
    if expected is not None:
        print(f"PyTorch agreement: worst rel. L2 {worst:.2e} over {len(args.images)} images: " +
              ("OK" if ok else "MISMATCH"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
