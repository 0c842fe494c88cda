import os

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEST_MODELS = os.path.join(REPO, "tests", "data", "models")
SHARED_MODELS = os.path.join(os.path.dirname(REPO), "shared", "models")
EXAMPLE = os.path.join(REPO, "examples", "fashion_resnet")


def read_pb(path):
    """Reads a TensorProto written by Kiln's own tools, through Kiln (no onnx package needed)."""
    import kiln

    return kiln.read_tensor_proto(path)


@pytest.fixture
def test_model():
    return lambda name: os.path.join(TEST_MODELS, name)


def shared_model(name):
    path = os.path.join(SHARED_MODELS, name, "model.onnx")
    if not os.path.exists(path):
        pytest.skip(f"{path} is not there")
    return path


def rel_close(actual, expected, rtol=1e-3, atol=1e-4):
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape
    bad = ~(np.abs(actual - expected) <= atol + rtol * np.abs(expected))
    assert not bad.any(), f"{bad.sum()} of {bad.size} elements differ, max abs diff {np.abs(actual - expected).max()}"
