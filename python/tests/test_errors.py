"""Bad input raises kiln.Error subclasses that name what was wrong and what was expected."""
import re

import numpy as np
import pytest

import kiln


@pytest.fixture
def add_relu(test_model):
    model = kiln.parse_onnx(test_model("add_relu.onnx"))
    model.compile(kiln.get_target("ref"))
    return model


def ok_inputs():
    return {"x": np.ones((2, 3), np.float32), "y": np.ones((2, 3), np.float32)}


def test_wrong_dtype(add_relu):
    feeds = ok_inputs()
    feeds["x"] = feeds["x"].astype(np.float64)
    with pytest.raises(kiln.TypeError, match=r"'x'.*float32"):
        add_relu.run(feeds)


def test_wrong_shape(add_relu):
    feeds = ok_inputs()
    feeds["y"] = np.ones((3, 2), np.float32)
    with pytest.raises(kiln.ShapeError, match=r"'y'.*float32\[2, 3\]"):
        add_relu.run(feeds)


def test_wrong_rank(add_relu):
    feeds = ok_inputs()
    feeds["y"] = np.ones((6,), np.float32)
    with pytest.raises(kiln.ShapeError):
        add_relu.run(feeds)


def test_missing_input(add_relu):
    with pytest.raises(kiln.InvalidArgumentError, match="missing input 'y'"):
        add_relu.run({"x": np.ones((2, 3), np.float32)})


def test_unknown_input(add_relu):
    feeds = ok_inputs()
    feeds["z"] = np.ones((2, 3), np.float32)
    with pytest.raises(kiln.InvalidArgumentError, match="unknown input 'z'"):
        add_relu.run(feeds)


def test_error_classes_are_also_builtin_errors(add_relu):
    with pytest.raises(ValueError):
        add_relu.run({"x": np.ones((2, 3), np.float32)})
    assert issubclass(kiln.ShapeError, kiln.Error) and kiln.ShapeError.code == 3


def test_corrupt_model_bytes():
    with pytest.raises(kiln.ParseError):
        kiln.parse_onnx(b"\x08\x07this is not an onnx model")
    with pytest.raises(kiln.IOError):
        kiln.parse_onnx("/nonexistent/model.onnx")


def test_unknown_target():
    with pytest.raises(kiln.InvalidArgumentError, match="unknown target"):
        kiln.get_target("tpu")


def test_quantization_not_yet(test_model):
    model = kiln.parse_onnx(test_model("add_relu.onnx"))
    with pytest.raises(kiln.InvalidArgumentError, match="unknown op"):
        kiln.quantize_fp16(model, ops=["convolutoin"])
    with pytest.raises(kiln.InvalidArgumentError, match="no calibration data"):
        kiln.quantize_int8(model, kiln.get_target("cpu"), [])
    with pytest.raises(kiln.InvalidArgumentError, match="calibration method"):
        kiln.quantize_int8(model, "cpu", [{}], method="kl")


def test_gpu_target_says_why_it_cannot_run(test_model):
    """`gpu` is always a known target; where it cannot run it says why: a build without CUDA
    refuses to compile for it, a machine without a device compiles (NVRTC needs none) but
    refuses to run. Never a crash."""
    assert "gpu" in kiln.targets()
    gpu = kiln.get_target("gpu")
    why = gpu.unavailable_reason()
    if not why:
        pytest.skip("this machine has a CUDA device")
    assert why in ("no CUDA driver", "built without CUDA") or why.startswith("no CUDA device: "), why
    model = kiln.parse_onnx(test_model("add_relu.onnx"))
    refused = pytest.raises(kiln.UnsupportedError, match=re.escape("target gpu is not available: " + why))
    if why == "built without CUDA":
        with refused:
            model.compile(gpu)
        return
    model.compile(gpu)
    with refused:
        model.run(ok_inputs())
