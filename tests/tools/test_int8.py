"""`--int8` on compile/run/perf/verify: calibration folders, the warning without one, the methods,
--dump-scales, saved programs and the usage errors."""
import json
import os
import re

import pytest

from conftest import FASHION, OK, SHARED, USAGE, kiln, kiln_json

FASHION_SHARED = os.path.join(SHARED, "models", "fashion_resnet")
CALIB = os.path.join(FASHION_SHARED, "calibration")
DATA = os.path.join(FASHION_SHARED, "test_data_set_0")

needs_shared = pytest.mark.skipif(not os.path.isdir(CALIB), reason="the shared fashion_resnet calibration folder is not there")


@needs_shared
@pytest.mark.parametrize("target", ["ref", "cpu"])
def test_verify_int8_reports_accuracy_against_float32(target):
    args = ("verify", FASHION, "--target", target, "--input", DATA, "--int8", "--calibration", CALIB)
    j = kiln_json(*args, "--quiet")
    (o,) = j["outputs"]
    assert j["passed"] is True and j["precision"] == "int8" and j["against"] == "ref (float32)"
    assert 0 < o["rel_l2"] <= 0.1 and o["cosine"] > 0.99
    assert o["top1_agreement"] >= 0.9 and o["top5_agreement"] == 1.0
    proc = kiln(*args)
    lines = proc.stdout.splitlines()
    assert re.match(r"    rel\. L2 \S+ \(bound 0\.25\), cosine \S+, top-1 agreement \S+, fp32 top-1 in top-5 1  ok$",
                    lines[2]), lines[2]
    assert re.search(r"int8: 13 ops quantized \(and 3 residual adds, 3 fused into their convolutions\), 12 activations calibrated \(minmax, 8 sets\)", proc.stderr), proc.stderr
    assert "WARNING" not in proc.stderr


@needs_shared
def test_int8_compile_dump_scales_and_run_the_saved_program(tmp_path):
    out, scales = tmp_path / "fashion_int8.kiln", tmp_path / "scales.json"
    kiln("compile", FASHION, "--int8", "--calibration", CALIB, "--calibration-method", "percentile",
         "--dump-scales", scales, "-o", out, "--quiet")
    dump = json.loads(scales.read_text())
    assert dump["method"] == "percentile" and dump["calibration_sets"] == 8
    # 10 read by products, 2 more by residual adds (the other 3 inputs of the adds are
    # convolutions' float results, fused: int8_options::fuse_residual)
    assert len(dump["activations"]) == 12 and len(dump["weights"]) == 13
    assert all(a["scale"] > 0 for a in dump["activations"])
    j = kiln_json("verify", out, "--int8", "--input", DATA, "--expected", DATA, "--quiet")
    assert j["passed"] is True and j["precision"] == "int8" and j["outputs"][0]["rel_l2"] <= 0.1
    kiln("run", out, "--input", DATA, "--quiet")
    kiln("perf", out, "-n", "2", "--warmup", "1", "--quiet")
    # A saved int8 program is not re-quantized, nor taken for another precision.
    kiln("run", out, "--bf16", "--quiet", expect=USAGE)
    kiln("run", out, "--int8", "--calibration", CALIB, "--quiet", expect=USAGE)


def test_int8_without_calibration_warns_loudly():
    proc = kiln("run", FASHION, "--int8")
    assert "WARNING" in proc.stderr and "RANDOM" in proc.stderr and "means NOTHING" in proc.stderr
    proc = kiln("perf", FASHION, "--int8", "-n", "2", "--warmup", "1", "--calibration-method", "percentile")
    assert "WARNING" in proc.stderr


def test_int8_usage_errors(tmp_path):
    kiln("run", FASHION, "--int8", "--bf16", "--quiet", expect=USAGE)
    kiln("run", FASHION, "--calibration", CALIB, "--quiet", expect=USAGE)  # without --int8
    kiln("run", FASHION, "--int8", "--calibration-method", "kl", "--quiet", expect=USAGE)
    proc = kiln("run", FASHION, "--int8", "--calibration", tmp_path, "--quiet", expect=USAGE)
    assert "no data_set_K folders" in proc.stderr
    kiln("run", FASHION, "--int8", "--calibration", tmp_path / "missing", "--quiet", expect=USAGE)


@needs_shared
def test_int8_entropy_scales_are_written(tmp_path):
    """entropy clips harder than the others (docs/quantization.md has what that costs)."""
    files = {}
    for method in ["minmax", "entropy"]:
        files[method] = tmp_path / f"{method}.json"
        kiln("compile", FASHION, "--int8", "--calibration", CALIB, "--calibration-method", method,
             "--dump-scales", files[method], "-o", tmp_path / f"{method}.kiln", "--quiet")
    mm, en = (json.loads(files[m].read_text())["activations"] for m in ["minmax", "entropy"])
    assert len(mm) == len(en) == 12  # the 3 fused residual convolutions calibrate nothing
    assert all(0 < e["scale"] <= m["scale"] * (1 + 1e-6) for e, m in zip(en, mm))
    assert any(e["scale"] < m["scale"] for e, m in zip(en, mm))


QDQ = os.path.join(SHARED, "models", "mobilenet_v2_qdq")
QDQ_DATA = os.path.join(QDQ, "test_data_set_0")


@pytest.mark.skipif(not os.path.isdir(QDQ_DATA), reason="the shared mobilenet_v2_qdq model is not there")
def test_int8_kernels_chosen_with_vnni_run_on_a_cpu_without(tmp_path):
    """A program whose int8 kernels were chosen where oneDNN has a VNNI dot product loads and runs
    where it has none, computing in float inside the kernels. ONEDNN_MAX_CPU_ISA=AVX2 makes this
    CPU one without; KILN_CPU_INT8_KERNELS=all makes a CPU without VNNI choose the kernels as one
    with VNNI does. The QDQ model's bounds against ONNX Runtime's outputs hold (rel. L2 <= 0.2)."""
    import numpy as np
    from onnx_pb import read_tensor

    saved, out = tmp_path / "mobilenet_v2_qdq.kiln", tmp_path / "out"
    kiln("compile", os.path.join(QDQ, "model.onnx"), "--batch", "1", "-o", saved, "--quiet",
         extra_env={"KILN_CPU_INT8_KERNELS": "all"})
    assert kiln("read", saved).stdout.count("cpu::quant_conv") == 52
    kiln("run", saved, "--input", QDQ_DATA, "--output", out, "--quiet", extra_env={"ONEDNN_MAX_CPU_ISA": "AVX2"})
    y = read_tensor(out / "output_0.pb")[2].astype(np.float64)  # (name, type, values)
    want = read_tensor(os.path.join(QDQ_DATA, "output_0.pb"))[2].astype(np.float64)
    rel_l2 = np.linalg.norm(y - want) / np.linalg.norm(want)
    cosine = float(np.dot(y.ravel(), want.ravel()) / (np.linalg.norm(y) * np.linalg.norm(want)))
    assert rel_l2 <= 0.2 and cosine >= 0.99, (rel_l2, cosine)


@needs_shared
def test_int8_residual_adds_modes():
    """--int8-residual-adds: fused into the convolutions (default), 8-bit adds, or float32 adds;
    each is accurate, and the summary says which it did."""
    args = ("verify", FASHION, "--input", DATA, "--int8", "--calibration", CALIB)
    said = {
        "fuse": "13 ops quantized (and 3 residual adds, 3 fused into their convolutions), 12 activations",
        "quant_add": "13 ops quantized (and 3 residual adds), 15 activations",
        "float": "13 ops quantized, 10 activations",
    }
    for mode, summary in said.items():
        proc = kiln(*args, "--int8-residual-adds", mode)
        assert summary in proc.stderr, (mode, proc.stderr)
        j = kiln_json(*args, "--int8-residual-adds", mode, "--quiet")
        assert j["passed"] is True and 0 < j["outputs"][0]["rel_l2"] <= 0.05, (mode, j)
    kiln(*args, "--int8-residual-adds", "none", "--quiet", expect=USAGE)
    kiln("run", FASHION, "--int8-residual-adds", "float", "--quiet", expect=USAGE)  # without --int8
