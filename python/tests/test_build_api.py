"""The IR build API: a small CNN built instruction by instruction from Python, compiled and run,
agrees with the same network parsed from ONNX (its file written by an independent encoder)."""
import os
import sys

import numpy as np
import pytest

import kiln

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "tests", "tools"))
import onnx_pb  # noqa: E402  (the tool tests' protobuf encoder)


def attr_ints(name, values):
    return onnx_pb.f_bytes(1, name) + b"".join(onnx_pb.f_varint(8, v) for v in values) + onnx_pb.f_varint(20, 7)


@pytest.fixture
def weights():
    rng = np.random.default_rng(3)
    return rng.normal(0, 0.3, (4, 3, 3, 3)).astype(np.float32), rng.normal(0, 0.1, 4).astype(np.float32)


def onnx_cnn(path, w, b):
    nodes = [onnx_pb.node("Conv", ["x", "W", "B"], ["c"], attributes=[attr_ints("pads", [1, 1, 1, 1])]),
             onnx_pb.node("Relu", ["c"], ["r"]),
             onnx_pb.node("MaxPool", ["r"], ["y"], attributes=[attr_ints("kernel_shape", [2, 2]),
                                                               attr_ints("strides", [2, 2])])]
    with open(path, "wb") as f:
        f.write(onnx_pb.model(nodes, [("x", onnx_pb.FLOAT, [1, 3, 8, 8])], [("y", onnx_pb.FLOAT, [1, 4, 4, 4])],
                              initializers=[("W", w), ("B", b)]))


def built_cnn(w, b):
    p = kiln.program()
    mm = p.get_main_module()
    x = mm.add_parameter("x", kiln.shape("float32", [1, 3, 8, 8]))
    conv = mm.add_instruction(kiln.op("convolution", padding=[1, 1, 1, 1], stride=[1, 1], dilation=[1, 1]),
                              [x, mm.add_literal(w), mm.add_literal(b)])
    relu = mm.add_instruction(kiln.op("relu"), [conv])
    pool = mm.add_instruction(kiln.op("pooling", mode=1, lengths=[2, 2], stride=[2, 2]), [relu])
    mm.add_return([pool])
    return p, pool


@pytest.mark.parametrize("target", ["ref", "cpu"])
def test_built_cnn_matches_the_parsed_one(target, weights, tmp_path):
    w, b = weights
    built, pool = built_cnn(w, b)
    assert pool.shape().lens() == [1, 4, 4, 4]
    assert "convolution" in str(built.get_main_module()) and "@return" in str(built.get_main_module())
    assert list(built.get_inputs()) == ["x"]

    onnx_cnn(str(tmp_path / "cnn.onnx"), w, b)
    parsed = kiln.parse_onnx(str(tmp_path / "cnn.onnx"))

    x = np.random.default_rng(4).uniform(-1, 1, (1, 3, 8, 8)).astype(np.float32)
    results = []
    for p in (built, parsed):
        p.compile(kiln.get_target(target))
        results.append(np.array(p.run({"x": x})[0]))
    assert np.abs(results[1]).max() > 0.1  # not all zeros
    np.testing.assert_allclose(results[0], results[1], rtol=1e-6, atol=1e-6)


def test_literals_are_copied(weights):
    w, b = weights
    built, _ = built_cnn(w, b)
    x = np.ones((1, 3, 8, 8), np.float32)
    built.compile(kiln.get_target("ref"))
    before = np.array(built.run({"x": x})[0])
    w[:] = 0  # the program keeps its own copy
    np.testing.assert_array_equal(np.array(built.run({"x": x})[0]), before)


def test_bad_builds_raise_clear_errors():
    p = kiln.program()
    mm = p.get_main_module()
    x = mm.add_parameter("x", kiln.shape("float32", [2, 3]))
    with pytest.raises(kiln.Error, match="no_such_op"):
        kiln.op("no_such_op")
    with pytest.raises(kiln.Error):
        kiln.op("convolution", no_such_attribute=1)
    y = mm.add_parameter("y", kiln.shape("float32", [4, 5]))
    with pytest.raises(kiln.Error):  # [2, 3] x [4, 5]: the shape check names the op
        mm.add_instruction(kiln.op("dot"), [x, y])
    other = kiln.program().get_main_module()
    z = other.add_parameter("z", kiln.shape("float32", [2, 3]))
    with pytest.raises(kiln.Error, match="another module"):
        mm.add_instruction(kiln.op("relu"), [z])
    with pytest.raises(kiln.Error):
        kiln.op("convolution", padding=object())
