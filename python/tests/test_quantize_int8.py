"""kiln.quantize_int8 with calibration, on the trained fashion_resnet and its calibration folder."""
import json
import os

import numpy as np
import pytest

import kiln
from conftest import SHARED_MODELS, shared_model

FASHION_DIR = os.path.join(SHARED_MODELS, "fashion_resnet")


def calibration_sets(folder, names):
    sets = []
    k = 0
    while os.path.isdir(os.path.join(folder, f"data_set_{k}")):
        d = os.path.join(folder, f"data_set_{k}")
        sets.append({n: np.asarray(kiln.read_tensor_proto(os.path.join(d, f"input_{i}.pb"))) for i, n in enumerate(names)})
        k += 1
    return sets


def fashion_test_set():
    x = np.asarray(kiln.read_tensor_proto(os.path.join(FASHION_DIR, "test_data_set_0", "input_0.pb")))
    with open(os.path.join(SHARED_MODELS, "manifest_fashion.json")) as f:
        labels = json.load(f)["models"]["fashion_resnet"]["test_data_sets"][0]["labels"]
    return x, np.array(labels)


def parse(x):
    return kiln.parse_onnx(shared_model("fashion_resnet"), map_input_dims={"input": list(x.shape)})


def run(model, target, x):
    model.compile(kiln.get_target(target))
    return np.asarray(model.run({"input": x})[0])


@pytest.mark.parametrize("target", ["ref", "cpu"])
def test_fashion_accuracy_kept_and_program_saves(tmp_path, target):
    x, labels = fashion_test_set()
    want = run(parse(x), target, x)
    model = parse(x)
    calib = calibration_sets(os.path.join(FASHION_DIR, "calibration"), ["input"])
    assert len(calib) == 8
    summary = kiln.quantize_int8(model, kiln.get_target(target), calib)
    assert summary["quantized_ops"] == 13 and summary["skipped"] == [] and summary["calibration_runs"] == 8
    assert "quantize_linear" in str(model)
    got = run(model, target, x)
    acc32, acc8 = (want.argmax(1) == labels).mean(), (got.argmax(1) == labels).mean()
    assert acc8 >= 0.995 * acc32
    assert (got.argmax(1) == want.argmax(1)).sum() >= 15
    err = np.linalg.norm(got - want) / np.linalg.norm(want)
    assert 0 < err < 0.1
    kiln.save(model, str(tmp_path / "q.kiln"))
    again = kiln.load(str(tmp_path / "q.kiln"))
    assert np.array_equal(np.asarray(again.run({"input": x})[0]), got)


def test_methods_and_dump_scales(tmp_path):
    x, _ = fashion_test_set()
    calib = calibration_sets(os.path.join(FASHION_DIR, "calibration"), ["input"])[:2]
    scales = {}
    for method in ["minmax", "percentile", "entropy"]:
        model = parse(x)
        path = tmp_path / f"{method}.json"
        summary = kiln.quantize_int8(model, "ref", calib, method=method, dump_scales=str(path))
        with open(path) as f:
            dump = json.load(f)
        assert dump["method"] == method and dump["calibration_sets"] == 2
        acts = dump["activations"]
        # 15 without the residual fusion: the 3 adds' convolution inputs are not quantized
        assert len(acts) == summary["activation_tensors"] == 12 and summary["quantized_adds"] == 3
        assert summary["residual_convolutions"] == 3 and all(a["scale"] > 0 and a["type"] == "uint8" for a in acts)
        assert all(w["per_channel"] and w["scale_min"] > 0 for w in dump["weights"])
        scales[method] = [a["scale"] for a in acts]
    assert scales["minmax"] != scales["percentile"] and scales["minmax"] != scales["entropy"]
    assert scales["percentile"] != scales["entropy"]
    # Clipping never widens the range minmax saw.
    for m in ["percentile", "entropy"]:
        assert all(s <= mm * (1 + 1e-6) for s, mm in zip(scales[m], scales["minmax"]))


def test_ops_choice_and_bad_arguments():
    x, _ = fashion_test_set()
    calib = calibration_sets(os.path.join(FASHION_DIR, "calibration"), ["input"])[:1]
    model = parse(x)
    assert kiln.quantize_int8(model, "ref", calib, ops=["dot"])["quantized_ops"] == 1
    with pytest.raises(kiln.InvalidArgumentError, match="already quantized"):
        kiln.quantize_int8(model, "ref", calib)
    with pytest.raises(kiln.InvalidArgumentError, match="no int8 form"):
        kiln.quantize_int8(parse(x), "ref", calib, ops=["softmax"])
    with pytest.raises(kiln.InvalidArgumentError, match="list of dicts"):
        kiln.quantize_int8(parse(x), "ref", [x])


def test_residual_adds_modes():
    """residual_adds: 'fuse' (default) sums the residual into the convolution, 'quant_add' keeps
    8-bit adds, 'float' leaves the adds float32; all close to float32; others refused."""
    x, _ = fashion_test_set()
    want = run(parse(x), "cpu", x)
    calib = calibration_sets(os.path.join(FASHION_DIR, "calibration"), ["input"])[:2]
    expect = {"fuse": (3, 3), "quant_add": (3, 0), "float": (0, 0)}
    for mode, (adds, fused) in expect.items():
        model = parse(x)
        s = kiln.quantize_int8(model, "cpu", calib, residual_adds=mode)
        assert (s["quantized_adds"], s["residual_convolutions"]) == (adds, fused), (mode, s)
        got = run(model, "cpu", x)
        assert 0 < np.linalg.norm(got - want) / np.linalg.norm(want) < 0.1, mode
    with pytest.raises(kiln.InvalidArgumentError, match="fuse, quant_add or float"):
        kiln.quantize_int8(parse(x), "cpu", calib, residual_adds="none")
