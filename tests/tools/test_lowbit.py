"""`--int4-weights` and `--fp8` on compile/run/perf/verify: the accuracy verify reports against
float32, saved programs, and the usage errors."""
import os

import pytest

from conftest import FASHION, SHARED, USAGE, kiln, kiln_json

FASHION_SHARED = os.path.join(SHARED, "models", "fashion_resnet")
CALIB = os.path.join(FASHION_SHARED, "calibration")
DATA = os.path.join(FASHION_SHARED, "test_data_set_0")

needs_shared = pytest.mark.skipif(not os.path.isdir(CALIB), reason="the shared fashion_resnet calibration folder is not there")


@needs_shared
@pytest.mark.parametrize("target", ["ref", "cpu"])
def test_verify_int4_weights_against_float32(target):
    args = ("verify", FASHION, "--target", target, "--input", DATA, "--int4-weights")
    j = kiln_json(*args, "--quiet")
    (o,) = j["outputs"]
    assert j["passed"] is True and j["precision"] == "int4"
    assert 0 < o["rel_l2"] <= 0.05 and o["top1_agreement"] >= 0.9
    proc = kiln(*args)
    assert "int4 weights: 1 matmuls" in proc.stderr, proc.stderr


@needs_shared
@pytest.mark.parametrize("target", ["ref", "cpu"])
def test_verify_fp8_against_float32(target):
    args = ("verify", FASHION, "--target", target, "--input", DATA, "--fp8", "--calibration", CALIB)
    j = kiln_json(*args, "--quiet")
    (o,) = j["outputs"]
    assert j["passed"] is True and j["precision"] == "float8e4m3fn"
    assert 0 < o["rel_l2"] <= 0.1 and o["top5_agreement"] == 1.0
    assert "fp8: 13 ops quantized" in kiln(*args).stderr


def test_int4_compile_and_run_the_saved_program(tmp_path):
    out = tmp_path / "fashion_int4.kiln"
    kiln("compile", FASHION, "--int4-weights", "-o", out, "--quiet")
    kiln("run", out, "--quiet")
    kiln("run", out, "--int4-weights", "--quiet")
    kiln("perf", out, "-n", "2", "--warmup", "1", "--quiet")
    # A saved int4 program is not taken for another precision.
    kiln("run", out, "--int8", "--quiet", expect=USAGE)
    kiln("run", out, "--fp8", "--quiet", expect=USAGE)


def test_lowbit_usage_errors():
    kiln("run", FASHION, "--int4-weights", "--fp8", "--quiet", expect=USAGE)
    kiln("run", FASHION, "--fp8", "--int8", "--quiet", expect=USAGE)
    kiln("run", FASHION, "--int4-weights", "--calibration", CALIB, "--quiet", expect=USAGE)
    proc = kiln("run", FASHION, "--fp8")
    assert "--fp8 without --calibration" in proc.stderr and "means NOTHING" in proc.stderr
