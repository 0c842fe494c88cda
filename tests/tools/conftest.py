"""Shared helpers of the `kiln` command-line tool tests.

The tool is build/bin/kiln, or $KILN_BUILD_DIR/bin/kiln (scripts/run_tests.py sets it).
Every call goes through `kiln()`, which also checks that the process ended by itself:
a test never accepts death by a signal (a negative returncode).
"""
import json
import os
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MODELS = os.path.join(REPO, "tests", "data", "models")
EXAMPLE = os.path.join(REPO, "examples", "fashion_resnet")
FASHION = os.path.join(EXAMPLE, "model.onnx")
SHARED = os.path.join(os.path.dirname(REPO), "shared")
BUILD = os.path.abspath(os.environ.get("KILN_BUILD_DIR", os.path.join(REPO, "build")))
KILN = os.path.join(BUILD, "bin", "kiln")

ADD_RELU = os.path.join(MODELS, "add_relu.onnx")
MLP = os.path.join(MODELS, "mlp_dynamic.onnx")
DTYPES = os.path.join(MODELS, "dtypes.onnx")
SMALL_MODELS = [ADD_RELU, MLP, DTYPES]

# Exit codes documented in `kiln --help`.
OK, MISMATCH, USAGE, MODEL, RUNTIME = 0, 1, 2, 3, 4


def pytest_collection_modifyitems(config, items):
    if not os.path.exists(KILN):
        skip = pytest.mark.skip(reason=f"{KILN} is not built")
        for item in items:
            item.add_marker(skip)


def kiln(*args, expect=OK, timeout=120, cwd=REPO, extra_env=None):
    """Runs the tool; asserts the exit code (None: any code) and that no signal ended it."""
    cmd = [KILN] + [str(a) for a in args]
    env = dict(os.environ)
    env.setdefault("KILN_NUM_THREADS", "2")
    for name, value in (extra_env or {}).items():  # None unsets
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                          timeout=timeout)
    assert proc.returncode >= 0, f"{' '.join(cmd)} was killed by signal {-proc.returncode}\n{proc.stderr}"
    if expect is not None:
        assert proc.returncode == expect, (
            f"{' '.join(cmd)} exited {proc.returncode}, expected {expect}\n"
            f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
    return proc


def kiln_json(*args, expect=OK):
    """Runs a command with --json; stdout must be exactly one JSON document."""
    proc = kiln(*args, "--json", expect=expect)
    return json.loads(proc.stdout)


@pytest.fixture(scope="session")
def fashion_kiln(tmp_path_factory):
    """fashion_resnet compiled once for the cpu target with the batch of its test data (16 images)."""
    out = tmp_path_factory.mktemp("fashion") / "fashion.kiln"
    kiln("compile", FASHION, "--target", "cpu", "--batch", "16", "-o", out, "--quiet")
    return out
