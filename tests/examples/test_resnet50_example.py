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
