"""kiln.quantize_int4_weights and kiln.quantize_fp8 on the trained fashion_resnet (16 labelled
images) and on bert_small (its stored ONNX Runtime output), against float32; and an ONNX model
with its own int4 weights (opset 21 blocked DequantizeLinear -> MatMul), written by the tool
tests' independent encoder, against NumPy."""
import os
import sys

import numpy as np
import pytest

import kiln
from conftest import SHARED_MODELS, shared_model
from test_quantize_int8 import FASHION_DIR, calibration_sets, fashion_test_set, parse, run

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "tests", "tools"))
import onnx_pb  # noqa: E402  (the tool tests' protobuf encoder)

INT4 = 22  # TensorProto.INT4


def int4_tensor(name, values):
    """An INT4 TensorProto: two's complement nibbles, element 2i in the low half of byte i."""
    flat = (values.astype(np.int8).ravel() & 15).astype(np.uint8)
    if flat.size % 2:
        flat = np.append(flat, 0)
    raw = (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8).tobytes()
    dims = b"".join(onnx_pb.f_varint(1, d) for d in values.shape)
    return dims + onnx_pb.f_varint(2, INT4) + onnx_pb.f_bytes(8, name) + onnx_pb.f_bytes(9, raw)


def attr_int(name, v):
    return onnx_pb.f_bytes(1, name) + onnx_pb.f_varint(3, v) + onnx_pb.f_varint(20, 2)


def bert_inputs():
    d = os.path.join(SHARED_MODELS, "bert_small", "test_data_set_0")
    ids = np.asarray(kiln.read_tensor_proto(os.path.join(d, "input_0.pb")))
    mask = np.asarray(kiln.read_tensor_proto(os.path.join(d, "input_1.pb")))
    want = np.asarray(kiln.read_tensor_proto(os.path.join(d, "output_0.pb")))
    return ids, mask, want


def rel_l2(got, want):
    return float(np.linalg.norm(got.astype(np.float64) - want) / np.linalg.norm(want.astype(np.float64)))


@pytest.mark.parametrize("target", ["ref", "cpu"])
def test_int4_fashion_classifier_and_program_saves(tmp_path, target):
    x, labels = fashion_test_set()
    want = run(parse(x), target, x)
    model = parse(x)
    summary = kiln.quantize_int4_weights(model)
    # fashion_resnet's one Gemm (its classifier); the convolutions stay float32.
    assert summary["quantized_ops"] == 1 and summary["skipped"] == []
    assert summary["weight_bytes_after"] < summary["weight_bytes_before"] / 6
    assert "matmul_int4" in str(model)
    got = run(model, target, x)
    assert (got.argmax(1) == labels).mean() >= 0.99 * (want.argmax(1) == labels).mean()
    assert 0 < rel_l2(got, want) < 0.05
    kiln.save(model, str(tmp_path / "q.kiln"))
    assert np.array_equal(np.asarray(kiln.load(str(tmp_path / "q.kiln")).run({"input": x})[0]), got)
    with pytest.raises(kiln.InvalidArgumentError):
        kiln.quantize_int4_weights(parse(x), block_size=0)


def test_int4_bert_small_matmuls():
    ids, mask, want = bert_inputs()
    model = kiln.parse_onnx(shared_model("bert_small"), map_input_dims={"input_ids": list(ids.shape),
                                                                        "attention_mask": list(mask.shape)})
    summary = kiln.quantize_int4_weights(model, block_size=32)
    # The 24 weight matmuls; the 8 attention products of two activations stay float32.
    assert summary["quantized_ops"] == 24
    assert len(summary["skipped"]) == 8
    model.compile(kiln.get_target("cpu"))
    got = np.asarray(model.run({"input_ids": ids, "attention_mask": mask})[0])
    # Measured 0.04 on the evaluation batches (bench/int8_eval.py); docs/quantization.md.
    assert 0 < rel_l2(got, want) < 0.08


@pytest.mark.parametrize("target", ["ref", "cpu"])
def test_fp8_fashion_accuracy_and_program_saves(tmp_path, target):
    x, labels = fashion_test_set()
    want = run(parse(x), target, x)
    model = parse(x)
    calib = calibration_sets(os.path.join(FASHION_DIR, "calibration"), ["input"])
    summary = kiln.quantize_fp8(model, kiln.get_target(target), calib)
    assert summary["quantized_ops"] == 13 and summary["calibration_runs"] == 8
    assert "float8e4m3fn" in str(model)
    got = run(model, target, x)
    assert (got.argmax(1) == labels).mean() >= 0.99 * (want.argmax(1) == labels).mean()
    assert 0 < rel_l2(got, want) < 0.1
    kiln.save(model, str(tmp_path / "q.kiln"))
    assert np.array_equal(np.asarray(kiln.load(str(tmp_path / "q.kiln")).run({"input": x})[0]), got)
    with pytest.raises(kiln.InvalidArgumentError):
        kiln.quantize_fp8(parse(x), kiln.get_target(target), [])


def test_onnx_int4_blocked_dequantize_matmul(tmp_path):
    k, n, bs = 40, 6, 16
    rs = np.random.RandomState(5)
    q = rs.randint(-8, 8, size=(k, n))
    zp = rs.randint(-8, 8, size=(3, n))
    scale = (rs.rand(3, n).astype(np.float32) + 0.5) * np.float32(0.1)
    x = rs.randn(3, k).astype(np.float32)
    nodes = [onnx_pb.node("DequantizeLinear", ["w", "s", "z"], ["wf"], attributes=[attr_int("axis", 0),
                                                                                   attr_int("block_size", bs)]),
             onnx_pb.node("MatMul", ["x", "wf"], ["y"])]
    g = b"".join(onnx_pb.f_bytes(1, m) for m in nodes) + onnx_pb.f_bytes(2, "g")
    g += onnx_pb.f_bytes(5, int4_tensor("w", q)) + onnx_pb.f_bytes(5, int4_tensor("z", zp))
    g += onnx_pb.f_bytes(5, onnx_pb.encode_tensor(scale, "s"))
    g += onnx_pb.f_bytes(11, onnx_pb.value_info("x", onnx_pb.FLOAT, [3, k]))
    g += onnx_pb.f_bytes(12, onnx_pb.value_info("y", onnx_pb.FLOAT, [3, n]))
    path = tmp_path / "int4.onnx"
    path.write_bytes(onnx_pb.f_varint(1, 10) + onnx_pb.f_bytes(7, g) +
                     onnx_pb.f_bytes(8, onnx_pb.f_bytes(1, "") + onnx_pb.f_varint(2, 21)))
    w = (q - np.repeat(zp, bs, axis=0)[:k]).astype(np.float32) * np.repeat(scale, bs, axis=0)[:k]
    want = x.astype(np.float64) @ w.astype(np.float64)
    for target in ("ref", "cpu"):
        model = kiln.parse_onnx(str(path))
        model.compile(kiln.get_target(target))
        assert ("cpu::int4_gemm" if target == "cpu" else "matmul_int4") in str(model)
        got = np.asarray(model.run({"x": x})[0])
        assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
