#!/usr/bin/env python3
"""Exports torchvision's ResNet-50 to ONNX the way the deployment guide does, makes a few test
images, and keeps PyTorch's answers for them so classify.py / classify.cpp can be checked.

    /usr/bin/python3 examples/resnet50/export.py --out /tmp/resnet50     # about 20 s on 2 cores

Writes into --out: resnet50.onnx (dynamic batch axis "batch_size", opset 13), images/*.png,
imagenet_classes.txt (the class names torchvision ships; nothing is downloaded) and
pytorch_outputs.npz (the logits PyTorch gives for each image, preprocessed as the guide does).

The weights are random (seeded): no download, and the numbers still have to agree. Needs Debian's
python3-torch, python3-torchvision, python3-opencv and python3-numpy.
"""
import argparse
import os

import cv2
import numpy as np
import torch
import torchvision

from preprocess import blob_from_image


def make_images(folder, count, seed):
    """Images with structure (gradients, shapes, texture) in odd sizes, so the resize matters."""
    rng = np.random.default_rng(seed)
    os.makedirs(folder, exist_ok=True)
    paths = []
    for i in range(count):
        h, w = int(rng.integers(180, 400)), int(rng.integers(180, 400))
        y, x = np.mgrid[0:h, 0:w].astype(np.float32)
        img = np.stack([127 + 120 * np.sin(x / (9 + 7 * c) + i + c * y / 31) for c in range(3)], axis=-1)
        img += rng.normal(0, 12, img.shape)
        img = np.clip(img, 0, 255).astype(np.uint8)
        for _ in range(4):
            color = tuple(int(v) for v in rng.integers(0, 256, 3))
            center = (int(rng.integers(0, w)), int(rng.integers(0, h)))
            cv2.circle(img, center, int(rng.integers(10, 80)), color, -1)
        path = os.path.join(folder, f"image_{i}.png")
        cv2.imwrite(path, img)
        paths.append(path)
    return paths


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder to write into")
    ap.add_argument("--images", type=int, default=4, help="test images to make")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(args.seed)

    model = torchvision.models.resnet50(weights=None)
    # Fresh BatchNorm statistics are 0 / 1, which makes a random network nearly linear; give them
    # spread so the exported graph computes something that looks like a trained one's.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.0)
                m.bias.uniform_(-0.1, 0.1)
    model.eval()

    # The guide's export call: one dynamic axis, the batch.
    onnx_path = os.path.join(args.out, "resnet50.onnx")
    dummy = torch.randn(1, 3, 224, 224)
    torch.onnx.export(model, dummy, onnx_path, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch_size"}, "output": {0: "batch_size"}}, opset_version=13)

    categories = torchvision.models.ResNet50_Weights.IMAGENET1K_V1.meta["categories"]
    with open(os.path.join(args.out, "imagenet_classes.txt"), "w") as f:
        f.write("\n".join(categories) + "\n")

    outputs = {}
    with torch.no_grad():
        for path in make_images(os.path.join(args.out, "images"), args.images, args.seed):
            blob = blob_from_image(cv2.imread(path))
            outputs[os.path.basename(path)] = model(torch.from_numpy(blob)).numpy()
    np.savez(os.path.join(args.out, "pytorch_outputs.npz"), **outputs)
    print(f"wrote {onnx_path}, {len(outputs)} images and PyTorch's outputs into {args.out}")


if __name__ == "__main__":
    main()
