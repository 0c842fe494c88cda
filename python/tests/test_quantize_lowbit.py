"""kiln.quantize_int4_weights and kiln.quantize_fp8 on the trained fashion_resnet (16 labelled
images) and on bert_small (its stored ONNX Runtime output), against float32."""
import os

import numpy as np
import pytest

import kiln
from conftest import SHARED_MODELS, shared_model
from test_quantize_int8 import FASHION_DIR, calibration_sets, fashion_test_set, parse, run


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
