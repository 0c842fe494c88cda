"""Shape arithmetic over dims without names, as exporters write it for segmentation heads.

torchvision's LRASPP resizes its low-resolution branch to the size of a high-resolution one:
Resize(low, sizes=Concat(Slice(Shape(low), 0, 2), Shape(high)[2:])). Exported with dynamic
height and width, the spatial dims of `low` and `high` come out of strided convolutions and
have no names, so Shape gives <batch, C, ?, ?>. The batch and the channels must survive the
unknown values beside them, or the convolution after the Resize cannot be shaped (it once
failed to load: "x float32[1, 1, 1, 1]"). The model below is that pattern, small; it loads
with its dims dynamic and runs at several sizes, checked against the ref target.
"""
import numpy as np
import pytest

import onnx_pb
from conftest import kiln, kiln_json

FLOAT, INT64 = 1, 7
rng = np.random.default_rng(20261205)


def attr_ints(name, values):
    return onnx_pb.f_bytes(1, name) + b"".join(onnx_pb.f_varint(8, v) for v in values) + onnx_pb.f_varint(20, 7)


def attr_int(name, value):
    return onnx_pb.f_bytes(1, name) + onnx_pb.f_varint(3, value) + onnx_pb.f_varint(20, 2)


def attr_str(name, value):
    return onnx_pb.f_bytes(1, name) + onnx_pb.f_bytes(4, value) + onnx_pb.f_varint(20, 3)


def segmentation_head(path):
    n = onnx_pb.node
    nodes = [
        n("Conv", ["x", "w1"], ["hi"]),  # [N, 8, H, W]
        n("Conv", ["hi", "w2"], ["lo"], attributes=[attr_ints("strides", [2, 2]), attr_ints("pads", [1, 1, 1, 1])]),
        n("Shape", ["hi"], ["shape_hi"]),
        n("Gather", ["shape_hi", "two"], ["h"], attributes=[attr_int("axis", 0)]),
        n("Gather", ["shape_hi", "three"], ["w"], attributes=[attr_int("axis", 0)]),
        n("Concat", ["h", "w"], ["hw"], attributes=[attr_int("axis", 0)]),
        n("Shape", ["lo"], ["shape_lo"]),
        n("Slice", ["shape_lo", "start0", "end2"], ["nc"]),
        n("Concat", ["nc", "hw"], ["sizes"], attributes=[attr_int("axis", 0)]),
        n("Resize", ["lo", "", "", "sizes"], ["up"],
          attributes=[attr_str("mode", "linear"), attr_str("coordinate_transformation_mode", "half_pixel")]),
        n("Conv", ["up", "w3"], ["y"]),
    ]
    inits = [
        ("w1", rng.standard_normal((8, 3, 1, 1)).astype(np.float32)),
        ("w2", rng.standard_normal((8, 8, 3, 3)).astype(np.float32)),
        ("w3", rng.standard_normal((4, 8, 1, 1)).astype(np.float32)),
        ("two", np.array([2], np.int64)), ("three", np.array([3], np.int64)), ("start0", np.array([0], np.int64)), ("end2", np.array([2], np.int64)),
    ]
    path.write_bytes(onnx_pb.model(nodes, [("x", FLOAT, ["N", 3, "H", "W"])], [("y", FLOAT, ["N", 4, "H", "W"])],
                                   opset=13, initializers=inits))
    return path


def test_the_resized_branch_keeps_its_batch_and_channels(tmp_path):
    model = segmentation_head(tmp_path / "head.onnx")
    out = kiln_json("params", model)["outputs"][0]["shape"]
    assert out["dims"][0]["symbol"] == "N" and out["dims"][1] == 4, out


@pytest.mark.parametrize("dims", [(1, 3, 17, 23), (2, 3, 32, 40)])
def test_it_runs_at_any_size_like_the_ref_target(tmp_path, dims):
    model = segmentation_head(tmp_path / "head.onnx")
    d = tmp_path / "in"
    d.mkdir()
    onnx_pb.write_tensor(d / "input_0.pb", rng.uniform(-1, 1, dims).astype(np.float32), "x")
    kiln("verify", model, "--input", d)
    shape = kiln_json("run", model, "--input", d)["outputs"][0]["shape"]
    # Row-major (no strides in {}), though the generic program's convolutions write channels-last.
    assert shape == "float32[%d, 4, %d, %d]" % (dims[0], dims[2], dims[3]), shape
