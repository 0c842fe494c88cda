"""Dims that are products of named dims, as PyTorch's attention exports them.

torch.nn.MultiheadAttention (inside every nn.TransformerEncoder / nn.Transformer) reshapes its
[seq, batch, E] projection to [seq * batch, E] for the output projection, with the sizes taken
from Shape: Reshape(x, Concat(Mul(Gather(Shape(x), 0), Gather(Shape(x), 1)), E)), and back to
[seq, batch, E] after it. A dim of "seq * batch" is no affine expression of the names: such
exports once failed to load with dynamic batch and sequence ("dim 'batch' cannot change on
its own"). The pattern below, small, must load with its dims named, and run at several sizes
like the ref target.
"""
import numpy as np
import pytest

import onnx_pb
from conftest import kiln, kiln_json

FLOAT = 1
E = 16
rng = np.random.default_rng(20261205)


def attr_ints(name, values):
    return onnx_pb.f_bytes(1, name) + b"".join(onnx_pb.f_varint(8, v) for v in values) + onnx_pb.f_varint(20, 7)


def attr_int(name, value):
    return onnx_pb.f_bytes(1, name) + onnx_pb.f_varint(3, value) + onnx_pb.f_varint(20, 2)


def attention_projection(path):
    n = onnx_pb.node
    nodes = [
        n("Transpose", ["x"], ["xt"], attributes=[attr_ints("perm", [1, 0, 2])]),  # [seq, batch, E]
        n("Shape", ["xt"], ["s"]),
        n("Gather", ["s", "i0"], ["t"], attributes=[attr_int("axis", 0)]),
        n("Gather", ["s", "i1"], ["b"], attributes=[attr_int("axis", 0)]),
        n("Gather", ["s", "i2"], ["e"], attributes=[attr_int("axis", 0)]),
        n("Mul", ["t", "b"], ["tb"]),
        n("Concat", ["tb", "e"], ["flat_shape"], attributes=[attr_int("axis", 0)]),
        n("Reshape", ["xt", "flat_shape"], ["flat"]),  # [seq * batch, E]
        n("Gemm", ["flat", "w", "bias"], ["proj"], attributes=[attr_int("transB", 1)]),
        n("Shape", ["proj"], ["s2"]),
        n("Gather", ["s2", "i1"], ["e2"], attributes=[attr_int("axis", 0)]),
        n("Concat", ["t", "b", "e2"], ["back_shape"], attributes=[attr_int("axis", 0)]),
        n("Reshape", ["proj", "back_shape"], ["back"]),  # [seq, batch, E]
        n("Transpose", ["back"], ["bt"], attributes=[attr_ints("perm", [1, 0, 2])]),
        n("Add", ["x", "bt"], ["y"]),
    ]
    inits = [
        ("w", rng.standard_normal((E, E)).astype(np.float32)), ("bias", rng.standard_normal(E).astype(np.float32)),
        ("i0", np.array([0], np.int64)), ("i1", np.array([1], np.int64)), ("i2", np.array([2], np.int64)),
    ]
    path.write_bytes(onnx_pb.model(nodes, [("x", FLOAT, ["batch", "seq", E])],
                                   [("y", FLOAT, ["batch", "seq", E]), ("proj", FLOAT, ["rows", E])],
                                   opset=13, initializers=inits))
    return path


def test_the_product_dim_keeps_its_names(tmp_path):
    outs = kiln_json("params", attention_projection(tmp_path / "mha.onnx"))["outputs"]
    assert [d["symbol"] for d in outs[0]["shape"]["dims"][:2]] == ["batch", "seq"], outs
    assert outs[1]["shape"]["dims"][0]["symbol"] == "batch*seq", outs


@pytest.mark.parametrize("dims", [(1, 1), (2, 7), (3, 50)])
def test_it_runs_at_any_size_like_the_ref_target(tmp_path, dims):
    model = attention_projection(tmp_path / "mha.onnx")
    d = tmp_path / "in"
    d.mkdir()
    onnx_pb.write_tensor(d / "input_0.pb", rng.uniform(-1, 1, dims + (E,)).astype(np.float32), "x")
    kiln("verify", model, "--input", d)
    shapes = [o["shape"] for o in kiln_json("run", model, "--input", d)["outputs"]]
    assert shapes == ["float32[%d, %d, %d]" % (dims[0], dims[1], E), "float32[%d, %d]" % (dims[0] * dims[1], E)], shapes
