#!/usr/bin/env python3
"""Exports torchvision models (random weights from a fixed seed) to ONNX with a dynamic batch
axis, in the ONNX test-data layout (model.onnx, test_data_set_0/input_0.pb), for machines that
have PyTorch but cannot receive the shared models (the lent GPU machine takes at most 64 MiB per
call; ResNet-50 alone is 100 MB). The outputs are not written: `kiln verify` compares targets.

    python3 bench/export_torchvision.py OUT_DIR resnet50 mobilenet_v2 efficientnet_b0
"""
import os
import sys

import numpy as np
import onnx
import torch
import torchvision
from onnx import numpy_helper


def export(name, out_dir):
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None).eval()
    x = torch.randn(1, 3, 224, 224)
    folder = os.path.join(out_dir, name)
    os.makedirs(os.path.join(folder, "test_data_set_0"), exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    kwargs = dict(input_names=["input"], output_names=["output"], opset_version=17,
                  dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    try:
        torch.onnx.export(model, (x,), path, dynamo=False, **kwargs)  # the TorchScript exporter, as users had it
    except TypeError:
        torch.onnx.export(model, (x,), path, **kwargs)  # an older torch without the dynamo switch
    except Exception as e:  # a newer torch without the TorchScript exporter: the dynamo one
        print("%s: TorchScript export failed (%s); exporting with dynamo=True" % (name, e), file=sys.stderr)
        torch.onnx.export(model, (x,), path, dynamo=True, **kwargs)
    onnx.checker.check_model(path)
    t = numpy_helper.from_array(x.numpy().astype(np.float32), "input")
    with open(os.path.join(folder, "test_data_set_0", "input_0.pb"), "wb") as f:
        f.write(t.SerializeToString())
    print("%s: %.1f MB" % (path, os.path.getsize(path) / 1e6))


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    for n in sys.argv[2:]:
        export(n, sys.argv[1])
