"""examples/resnet50 end to end, as a user runs it: export torchvision's ResNet-50 with a dynamic
batch axis, classify the example's images from Python and from C++ (built against an installed
Kiln), check both against PyTorch's answers, run the worker pattern with hot swaps, and run one
compiled program over several batches. Needs the build folder (KILN_BUILD_DIR, default build)."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "resnet50")
BUILD = os.environ.get("KILN_BUILD_DIR", os.path.join(ROOT, "build"))
PYTHON = "/usr/bin/python3"


def run(cmd, **kw):
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"))
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, **kw)
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-4000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("resnet50")
    run([PYTHON, os.path.join(EXAMPLE, "export.py"), "--out", str(out), "--images", "3"])
    images = sorted(str(p) for p in (out / "images").iterdir())
    return out, images


@pytest.fixture(scope="module")
def example_programs(tmp_path_factory):
    """classify and serve_worker, built outside the tree against `cmake --install`'s prefix."""
    prefix = str(tmp_path_factory.mktemp("prefix"))
    run(["cmake", "--install", BUILD, "--prefix", prefix])
    build = str(tmp_path_factory.mktemp("example-build"))
    run(["cmake", "-S", EXAMPLE, "-B", build, "-DCMAKE_PREFIX_PATH=" + prefix, "-DCMAKE_BUILD_TYPE=Release"])
    run(["cmake", "--build", build, "-j", "2"])
    return build


def top5_lines(text):
    """{image: [class indices]} from `IMAGE: i:score name, ...` lines."""
    result = {}
    for line in text.splitlines():
        m = re.match(r"^(image_\d+\.png): (.*)$", line)
        if m:
            result[m.group(1)] = [int(c) for c in re.findall(r"(?:^|, )(\d+):", m.group(2))]
    return result


def test_classify_py_agrees_with_pytorch(exported):
    out, images = exported
    text = run([PYTHON, os.path.join(EXAMPLE, "classify.py"), str(out / "resnet50.onnx"), *images,
                "--check", str(out / "pytorch_outputs.npz")])
    assert "PyTorch agreement" in text and "OK" in text, text
    tops = top5_lines(text)
    assert len(tops) == 3 and all(len(v) == 5 for v in tops.values()), text


def test_classify_cpp_prints_what_python_prints(exported, example_programs):
    out, images = exported
    py = top5_lines(run([PYTHON, os.path.join(EXAMPLE, "classify.py"), str(out / "resnet50.onnx"), *images]))
    cpp = top5_lines(run([os.path.join(example_programs, "classify"), str(out / "resnet50.onnx"), *images]))
    assert cpp == py and len(cpp) == 3


def test_serve_worker_swaps_without_failing(exported, example_programs):
    out, _ = exported
    text = run([os.path.join(example_programs, "serve_worker"), str(out / "resnet50.onnx"), "--workers", "2",
                "--requests", "24", "--swap-every-ms", "100"])
    m = re.search(r"(\d+) requests on 2 workers: (\d+) failed, (\d+) swaps", text)
    assert m, text
    assert (int(m.group(1)), int(m.group(2))) == (24, 0) and int(m.group(3)) >= 1, text
    assert os.path.exists(str(out / "resnet50.onnx.kiln"))  # compiled once, saved beside the model


def test_one_program_runs_every_batch(exported):
    out, _ = exported
    text = run([PYTHON, os.path.join(EXAMPLE, "dynamic_batch.py"), str(out / "resnet50.onnx"), "--batches", "1,2,4",
                "--runs", "3"])
    assert "worst cost of the dynamic program" in text, text


def test_c_program_equals_the_python_module(exported, example_programs, tmp_path):
    """A C program including only kiln.h parses, compiles, runs and saves ResNet-50; its output equals
    the Python module's for the same input, bit for bit (same compiled kernels)."""
    out, images = exported
    script = f"""
import cv2, numpy as np, kiln, sys
sys.path.insert(0, {EXAMPLE!r})
from preprocess import blob_from_image
blob = blob_from_image(cv2.imread({images[0]!r}))
kiln.write_tensor_proto(blob, "input", {str(tmp_path / "input.pb")!r})
m = kiln.parse_onnx({str(out / "resnet50.onnx")!r}, map_input_dims={{"input": [1, 3, 224, 224]}})
m.compile(kiln.get_target("cpu"), offload_copy=True)
np.save({str(tmp_path / "python.npy")!r}, np.array(m.run({{"input": blob}})[0]))
"""
    run([PYTHON, "-c", script])
    text = run([os.path.join(example_programs, "run_c"), str(out / "resnet50.onnx"), str(tmp_path / "input.pb"),
                str(tmp_path / "c_output.pb"), str(tmp_path / "r50.kiln")])
    assert text.startswith("ok:"), text
    script = f"""
import numpy as np, kiln
c = np.array(kiln.read_tensor_proto({str(tmp_path / "c_output.pb")!r}))
py = np.load({str(tmp_path / "python.npy")!r})
assert c.shape == py.shape == (1, 1000), (c.shape, py.shape)
assert np.array_equal(c, py), float(np.abs(c - py).max())
print("equal")
"""
    assert run([PYTHON, "-c", script]).strip() == "equal"
