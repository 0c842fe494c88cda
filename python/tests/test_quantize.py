"""kiln.quantize_fp16 / quantize_bf16 before compile, as MIGraphX users call them."""
import os

import numpy as np
import pytest

import kiln
from conftest import EXAMPLE


def rel_l2(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def run(target, x, quantize=None, **kwargs):
    model = kiln.parse_onnx(os.path.join(EXAMPLE, "model.onnx"), map_input_dims={"input": list(x.shape)})
    if quantize:
        quantize(model, **kwargs)
    model.compile(kiln.get_target(target))
    return model, np.asarray(model.run({"input": x})[0])


@pytest.mark.parametrize("quantize,bound", [(kiln.quantize_fp16, 0.04), (kiln.quantize_bf16, 0.17)])
@pytest.mark.parametrize("target", ["ref", "cpu"])
def test_close_to_float32_and_saves(tmp_path, quantize, bound, target):
    x = np.random.RandomState(1).rand(4, 1, 28, 28).astype(np.float32)
    _, want = run("ref", x)
    model, got = run(target, x, quantize)
    assert got.dtype == np.float32 and got.shape == want.shape
    err = rel_l2(got, want)
    assert 0 < err <= bound
    # The top class survives the rounding on these images.
    assert (got.argmax(1) == want.argmax(1)).all()
    kiln.save(model, str(tmp_path / "q.kiln"))
    again = kiln.load(str(tmp_path / "q.kiln"))
    assert np.array_equal(np.asarray(again.run({"input": x})[0]), got)


def test_named_ops_only():
    x = np.random.RandomState(2).rand(1, 1, 28, 28).astype(np.float32)
    model = kiln.parse_onnx(os.path.join(EXAMPLE, "model.onnx"))
    kiln.quantize_fp16(model, ops=["convolution"])
    text = str(model)
    assert "float16" in text
    _, want = run("ref", x)
    model.compile(kiln.get_target("ref"))
    assert rel_l2(np.asarray(model.run({"input": x})[0]), want) <= 0.04
