#!/usr/bin/python3
"""Exports torchvision's detection models from PyTorch with a dynamic image height and width, the
way users deploy them, and checks Kiln against ONNX Runtime on each: `kiln run` (the program
compiled for the dynamic image, as a new user runs it) at the exported size and at a second size
the export never saw.

Detections are compared as sets, not row by row: each of ONNX Runtime's detections must have one
of Kiln's with the same label, a score within 1e-4 + 1e-3 x score and a box within 0.05 px +
1e-3 x |coordinate| (keypoints like boxes; mask probabilities within 0.05, since a box that
moves by a tenth of a pixel in float32 moves the mask pasted into it). Scores that differ by
less than float32 rounding can come out in either order, and a top-k cut can fall on either
side of such a tie: a detection left unmatched on either side counts as a tie (and passes)
only when its score is within 2e-5 x score of another's or of the lowest score kept.
A model passes when Kiln misses no more detections than ONNX Runtime's own optimized graph
(`--opt all`, other kernels and fusions) misses against its unoptimized one, or 5% of them:
random weights make these heads chaotic (Mask R-CNN's pooled RoI features differ by 1.5%
between ONNX Runtime's two modes, from backbone features that differ by 1e-6), so a box that
moves by a pixel is noise there, not a bug. (With these weights SSDlite's scores are mostly exact ties: 42 distinct
values among its 300 detections in PyTorch, so most of its detections pass as ties.)

Weights are random from a fixed seed (every parameter moved by 0.01 x N(0, 1), the classifier's
logits scaled by 0.01 so that scores spread instead of saturating, score thresholds 0), so the
detections are not meaningful, but every stage of the models runs: anchors, box decoding,
NonMaxSuppression inside If and Loop, RoiAlign over a run-time number of boxes, mask and
keypoint heads. ONNX Runtime is the reference: it runs the ONNX graph as the specification
defines it, and PyTorch's eager outputs differ from its own export's here (Faster R-CNN: 381
of 400 box values differ between PyTorch and ONNX Runtime).

Run by hand (needs Debian's python3-torch, python3-torchvision, python3-onnx, and ONNX Runtime
from `bash bench/install_ort.sh`; 22 minutes on two cores shared with a test run and a build,
most of it Mask R-CNN and Keypoint R-CNN); `make test` does not run it.

    /usr/bin/python3 bench/detection_sweep.py OUT_DIR                  # every model below
    /usr/bin/python3 bench/detection_sweep.py OUT_DIR maskrcnn fcos

Prints one line per check and exits 1 if any failed.
"""
import glob
import os
import subprocess
import sys

import numpy as np
import onnx
import torch
import torchvision
from onnx import numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KILN = os.environ.get("KILN", os.path.join(ROOT, "build", "bin", "kiln"))
ORT_RUN = os.path.join(ROOT, "bench", "ort", "ort_run.js")

det = torchvision.models.detection
MODELS = {
    "ssdlite": lambda: det.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None),
    "fasterrcnn": lambda: det.fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None),
    "retinanet": lambda: det.retinanet_resnet50_fpn(weights=None, weights_backbone=None),
    "fcos": lambda: det.fcos_resnet50_fpn(weights=None, weights_backbone=None),
    "maskrcnn": lambda: det.maskrcnn_resnet50_fpn(weights=None, weights_backbone=None),
    "keypointrcnn": lambda: det.keypointrcnn_resnet50_fpn(weights=None, weights_backbone=None),
}
SIZES = [(320, 320), (256, 352)]  # the exported one, then one the export never saw


def build(name):
    torch.manual_seed(0)
    model = MODELS[name]().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.01 * torch.randn_like(p))
        if hasattr(model, "roi_heads"):
            model.roi_heads.box_predictor.cls_score.weight.mul_(0.01)
            model.roi_heads.box_predictor.cls_score.bias.zero_()
            model.roi_heads.score_thresh = 0.0
        elif hasattr(model.head.classification_head, "cls_logits"):
            model.head.classification_head.cls_logits.weight.mul_(0.01)
            model.score_thresh = 0.0
        else:  # SSD: one classifier per feature map
            for m in model.head.classification_head.module_list.modules():
                if isinstance(m, torch.nn.Conv2d) and m.out_channels % 91 == 0:
                    m.weight.mul_(0.01)
            model.score_thresh = 0.0
    return model


def write_tensor(path, array, name):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(array, name).SerializeToString())


def read_outputs(folder):
    out = {}
    for path in sorted(glob.glob(os.path.join(folder, "output_*.pb")), key=lambda p: int(p.rsplit("_", 1)[1][:-3])):
        t = onnx.TensorProto()
        with open(path, "rb") as f:
            t.ParseFromString(f.read())
        out[t.name] = numpy_helper.to_array(t)
    return out


def export(name, folder):
    model = build(name)
    x = torch.rand(3, *SIZES[0], generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        names = list(model([x])[0].keys())
    path = os.path.join(folder, "model.onnx")
    torch.onnx.export(model, ([x],), path, opset_version=17, input_names=["image"], output_names=names,
                      dynamic_axes={"image": {1: "h", 2: "w"}, **{k: {0: "detections"} for k in names}})
    sets = []
    for k, (h, w) in enumerate(SIZES):
        d = os.path.join(folder, "test_data_set_%d" % k)
        os.makedirs(d, exist_ok=True)
        img = torch.rand(3, h, w, generator=torch.Generator().manual_seed(1 + k)).numpy()
        write_tensor(os.path.join(d, "input_0.pb"), img, "image")
        sets.append(d)
    return path, sets


def close(a, b, atol, rtol):
    return np.all(np.abs(a.astype(np.float64) - b) <= atol + rtol * np.abs(b))


def compare(ref, got):
    """(unmatched, text): how many of ref's detections have no match in got (or of got's in ref,
    whichever is more), ties excused."""
    if set(ref) != set(got):
        return len(ref["scores"]), "outputs %s vs %s" % (sorted(got), sorted(ref))
    n = len(ref["scores"])
    if n == 0 and len(got["scores"]) == 0:
        return 0, "0 (both)"
    used = np.zeros(len(got["scores"]), bool)
    unmatched = []
    worst = {"boxes": 0.0, "scores": 0.0}
    for i in range(n):
        found = -1
        for j in np.flatnonzero(~used):
            if got["labels"][j] != ref["labels"][i]:
                continue
            if not close(got["scores"][j:j + 1], ref["scores"][i:i + 1], 1e-4, 1e-3):
                continue
            if not close(got["boxes"][j], ref["boxes"][i], 0.05, 1e-3):
                continue
            if "keypoints" in ref and not close(got["keypoints"][j], ref["keypoints"][i], 0.05, 1e-3):
                continue
            if "masks" in ref and not close(got["masks"][j], ref["masks"][i], 0.05, 0):
                continue
            found = j
            break
        if found < 0:
            unmatched.append(i)
            continue
        used[found] = True
        worst["boxes"] = max(worst["boxes"], float(np.abs(got["boxes"][found] - ref["boxes"][i]).max()))
        worst["scores"] = max(worst["scores"], float(abs(got["scores"][found] - ref["scores"][i])))
    def tie(scores, i):
        s = scores[i]
        others = np.abs(np.delete(scores, i) - s)
        tol = 2e-5 * abs(s) + 1e-7
        return bool(others.size and others.min() <= tol) or abs(s - scores.min()) <= tol

    untied = [i for i in unmatched if not tie(ref["scores"], i)]
    extra = [j for j in np.flatnonzero(~used) if not tie(got["scores"], j)]
    text = "%d, matched %d, ties %d, max |box| diff %.2g, |score| diff %.2g" % (
        len(got["scores"]), n - len(unmatched), len(unmatched) - len(untied), worst["boxes"], worst["scores"])
    if untied:
        text += ", unmatched %s" % untied[:5]
    return max(len(untied), len(extra)), text


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("%s failed: %s" % (os.path.basename(cmd[0] if cmd[0] != "node" else cmd[1]),
                                              (r.stderr or r.stdout).strip()[-400:]))


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) > 1 else 2)
    out_dir, names = sys.argv[1], sys.argv[2:] or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        sys.exit("unknown model(s): %s (known: %s)" % (", ".join(unknown), ", ".join(MODELS)))
    failed = 0
    for name in names:
        folder = os.path.join(out_dir, name)
        os.makedirs(folder, exist_ok=True)
        try:
            path, sets = export(name, folder)
        except Exception as e:  # noqa: BLE001 - report and go on with the others
            print("%-13s export failed: %s" % (name, e))
            failed += 1
            continue
        for d, (h, w) in zip(sets, SIZES):
            label = "%-13s %dx%d" % (name, h, w)
            try:
                run(["node", ORT_RUN, path, d, d + "_ort"])
                run(["node", ORT_RUN, path, d, d + "_ort_all", "--opt", "all"])
                run([KILN, "run", path, "--input", d, "--output", d + "_kiln"])
                ref = read_outputs(d + "_ort")
                floor, floor_text = compare(ref, read_outputs(d + "_ort_all"))
                missed, kiln_text = compare(ref, read_outputs(d + "_kiln"))
                ok = missed <= max(floor, 0.05 * len(ref["scores"]))
                text = "%d detections; Kiln %s; ONNX Runtime optimized %s" % (len(ref["scores"]), kiln_text, floor_text)
            except RuntimeError as e:
                ok, text = False, str(e)
            print("%s %s  %s" % (label, "ok  " if ok else "FAIL", text), flush=True)
            failed += not ok
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
