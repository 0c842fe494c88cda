#!/usr/bin/python3
"""Exports torchvision architectures from PyTorch with dynamic axes, the way users do, and checks
Kiln against PyTorch's own outputs on each: `kiln verify --expected` at the exported size and, for
models exported with dynamic height and width (or time), at a second size the export never saw
(absolute tolerance 1e-5 of the largest output, at least 1e-4; relative 1e-3), and both sizes again
through one generic program (Python, dims left dynamic, never specialized). Run by hand (needs
Debian's python3-torch and python3-torchvision; 3 minutes for all on two cores); `make test` does
not run it.

    /usr/bin/python3 bench/torchvision_sweep.py OUT_DIR                 # every model below
    /usr/bin/python3 bench/torchvision_sweep.py OUT_DIR swin_t_hw lraspp_mobilenet_v3_large

Weights are random from a fixed seed; batch-norm statistics are randomized too, so that no
normalization is the identity. Prints one line per check and exits 1 if any failed.
"""
import os
import subprocess
import sys

import numpy as np
import torch
import torchvision
from onnx import numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KILN = os.environ.get("KILN", os.path.join(ROOT, "build", "bin", "kiln"))

tv = torchvision.models
seg = torchvision.models.segmentation
HW = {0: "batch", 2: "h", 3: "w"}
# name: (constructor, exported input shape, dynamic axes of the input, a second shape or None)
MODELS = {
    "squeezenet1_1": (lambda: tv.squeezenet1_1(), (2, 3, 224, 224), {0: "batch"}, None),
    "shufflenet_v2_x1_0": (lambda: tv.shufflenet_v2_x1_0(), (2, 3, 224, 224), {0: "batch"}, None),
    "densenet121": (lambda: tv.densenet121(), (2, 3, 224, 224), {0: "batch"}, None),
    "googlenet": (lambda: tv.googlenet(aux_logits=False, init_weights=True), (2, 3, 224, 224), {0: "batch"}, None),
    "mnasnet1_0": (lambda: tv.mnasnet1_0(), (2, 3, 224, 224), {0: "batch"}, None),
    "regnet_y_400mf": (lambda: tv.regnet_y_400mf(), (2, 3, 224, 224), {0: "batch"}, None),
    "mobilenet_v3_large": (lambda: tv.mobilenet_v3_large(), (2, 3, 224, 224), {0: "batch"}, None),
    "resnext50_32x4d": (lambda: tv.resnext50_32x4d(), (1, 3, 224, 224), {0: "batch"}, None),
    "efficientnet_v2_s": (lambda: tv.efficientnet_v2_s(), (1, 3, 224, 224), {0: "batch"}, None),
    "maxvit_t": (lambda: tv.maxvit_t(), (1, 3, 224, 224), {0: "batch"}, None),
    "r3d_18": (lambda: tv.video.r3d_18(), (1, 3, 8, 112, 112), {0: "batch", 2: "t"}, (2, 3, 6, 112, 112)),
    "convnext_tiny_hw": (lambda: tv.convnext_tiny(), (1, 3, 224, 224), HW, (2, 3, 160, 192)),
    "swin_t_hw": (lambda: tv.swin_t(), (1, 3, 224, 224), HW, (1, 3, 160, 192)),
    "lraspp_mobilenet_v3_large": (lambda: seg.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None),
                                  (1, 3, 256, 320), HW, (2, 3, 200, 248)),
    "deeplabv3_mobilenet_v3_large": (
        lambda: seg.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None, aux_loss=False),
        (1, 3, 224, 288), HW, (2, 3, 150, 170)),
    "fcn_resnet50": (lambda: seg.fcn_resnet50(weights=None, weights_backbone=None, aux_loss=False),
                     (1, 3, 200, 264), HW, (1, 3, 160, 120)),
}


def build(name):
    torch.manual_seed(0)
    model = MODELS[name][0]().eval()
    for m in model.modules():
        if isinstance(m, (torch.nn.BatchNorm2d, torch.nn.BatchNorm3d)):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    return model


def write_set(folder, model, dims):
    os.makedirs(folder, exist_ok=True)
    x = torch.randn(*dims)
    with torch.no_grad():
        y = model(x)
    if isinstance(y, dict):
        y = y["out"]
    with open(os.path.join(folder, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x.numpy(), "input").SerializeToString())
    with open(os.path.join(folder, "output_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(y.numpy().astype(np.float32), "output").SerializeToString())
    return float(y.abs().max())


def verify(path, folder, scale):
    # float32 through dozens of layers: absolute error scales with the outputs (FCN's reach ~100)
    atol = max(1e-4, 1e-5 * scale)
    proc = subprocess.run([KILN, "verify", path, "--input", folder, "--expected", folder, "--atol", "%.3g" % atol,
                           "--rtol", "1e-3"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=900)
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    detail = [l.strip() for l in proc.stdout.splitlines() if "max abs" in l]
    return proc.returncode == 0, (detail[0] if detail else last)


def generic_check(path, folders):
    """One program compiled with the dims left dynamic, never specialized (specialize_after=0):
    the generic program runs every set; its outputs against PyTorch's. Python module from build/."""
    sys.path.insert(0, os.path.join(ROOT, "build", "python"))
    import kiln
    from onnx import TensorProto

    def read(p):
        t = TensorProto()
        with open(p, "rb") as f:
            t.ParseFromString(f.read())
        return numpy_helper.to_array(t)

    prog = kiln.parse_onnx(path)
    prog.compile(kiln.get_target("cpu"), specialize_after=0)
    results = []
    for folder in folders:
        x, y = read(os.path.join(folder, "input_0.pb")), read(os.path.join(folder, "output_0.pb"))
        out = np.asarray(prog.run({"input": x})[0])
        err = float(np.abs(out - y).max()) if out.shape == y.shape else float("inf")
        results.append((os.path.basename(folder), err <= max(1e-4, 1e-5 * float(np.abs(y).max())), err))
    return results


def main():
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        print(__doc__)
        sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
    out_dir, names = sys.argv[1], sys.argv[2:] or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        sys.exit("unknown model(s): %s (known: %s)" % (", ".join(unknown), ", ".join(MODELS)))
    failed = 0
    for name in names:
        _, dims, axes, second = MODELS[name]
        model = build(name)
        folder = os.path.join(out_dir, name)
        path = os.path.join(folder, "model.onnx")
        os.makedirs(folder, exist_ok=True)
        torch.onnx.export(model, (torch.randn(*dims),), path, input_names=["input"], output_names=["output"],
                          opset_version=17, dynamic_axes={"input": axes, "output": {0: "batch"}})
        for dims_k in [dims] + ([second] if second else []):
            tag = "x".join(str(d) for d in dims_k)
            scale = write_set(os.path.join(folder, "set_" + tag), model, dims_k)
            ok, what = verify(path, os.path.join(folder, "set_" + tag), scale)
            failed += not ok
            print("%-30s %-18s %s  %s" % (name, tag, "ok  " if ok else "FAIL", what), flush=True)
        if second:  # the same sizes through one generic program
            sets = [os.path.join(folder, "set_" + "x".join(str(d) for d in k)) for k in (dims, second)]
            for tag, ok, err in generic_check(path, sets):
                failed += not ok
                print("%-30s %-18s %s  generic program: max abs %.3g" % (name, tag[4:], "ok  " if ok else "FAIL", err),
                      flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
