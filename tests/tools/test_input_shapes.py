"""Input files against the model's declared shapes and against --batch.

A dimension the model declares is never resized to fit an input file: a file that disagrees is a
shape error (exit 3) naming the input and both shapes. Symbolic dimensions take the file's size,
unless --batch (or --default-dim-value) sized them: then a file that disagrees is a usage error
(exit 2) in every command that takes both, never a silent choice of one of the two sizes.
"""
import numpy as np
import pytest

import onnx_pb
from conftest import MODEL, USAGE, kiln, kiln_json

FLOAT, INT64, BOOL = 1, 7, 9
rng = np.random.default_rng(20261201)


def relu_model(tmp_path, dims, name="relu.onnx"):
    path = tmp_path / name
    path.write_bytes(onnx_pb.model([onnx_pb.node("Relu", ["x"], ["y"])], [("x", FLOAT, dims)], [("y", FLOAT, dims)]))
    return path


def input_dir(tmp_path, *arrays, name="in"):
    d = tmp_path / name
    d.mkdir()
    for i, (n, a) in enumerate(arrays):
        onnx_pb.write_tensor(d / f"input_{i}.pb", a, n)
    return d


def test_declared_static_dims_are_never_overridden_by_an_input(tmp_path):
    model = relu_model(tmp_path, [2, 3])
    d = input_dir(tmp_path, ("x", rng.uniform(-1, 1, (7, 7)).astype(np.float32)))
    for args in (["run"], ["perf", "-n", "2", "--warmup", "0"], ["verify"]):
        proc = kiln(*args, model, "--input", d, expect=MODEL)
        assert "input 'x'" in proc.stderr and "float32[2, 3]" in proc.stderr and "float32[7, 7]" in proc.stderr, \
            proc.stderr
    # The same through --input-file, and a rank that differs.
    onnx_pb.write_tensor(tmp_path / "x3.pb", np.zeros((2, 3, 1), np.float32), "x")
    proc = kiln("run", model, "--input-file", "@x", tmp_path / "x3.pb", expect=MODEL)
    assert "input 'x'" in proc.stderr and "float32[2, 3]" in proc.stderr and "float32[2, 3, 1]" in proc.stderr
    # An input of the declared shape runs.
    x = rng.uniform(-1, 1, (2, 3)).astype(np.float32)
    ok = input_dir(tmp_path, ("x", x), name="ok")
    kiln("run", model, "--input", ok, "--output", tmp_path / "o")
    np.testing.assert_array_equal(onnx_pb.read_tensor(tmp_path / "o" / "output_0.pb")[2], np.maximum(x, 0))


def test_symbolic_dims_stay_dynamic_declared_ones_do_not(tmp_path):
    model = relu_model(tmp_path, ["batch", 3])
    x = rng.uniform(-1, 1, (5, 3)).astype(np.float32)
    d = input_dir(tmp_path, ("x", x))
    j = kiln_json("run", model, "--input", d)
    assert j["outputs"][0]["shape"] == "float32[5, 3]"
    bad = input_dir(tmp_path, ("x", np.zeros((5, 4), np.float32)), name="bad")
    proc = kiln("run", model, "--input", bad, expect=MODEL)
    assert "input 'x'" in proc.stderr and "float32[{batch=0:4096:[1]}, 3]" in proc.stderr
    assert "float32[5, 4]" in proc.stderr


def test_a_size_past_the_default_range_says_how_to_widen_it(tmp_path):
    # A second of 16 kHz audio is past the default range 0:4096 of a symbolic dim: the error names
    # the dim and its range and the options that widen it; --default-dyn-dim widens every such
    # dim and keeps its name.
    model = relu_model(tmp_path, ["batch", "samples"])
    x = rng.uniform(-1, 1, (2, 16000)).astype(np.float32)
    d = input_dir(tmp_path, ("x", x))
    proc = kiln("run", model, "--input", d, expect=MODEL)
    assert "dim 1 'samples' is 16000, outside its range 0:4096" in proc.stderr, proc.stderr
    assert "--default-dyn-dim" in proc.stderr and "default_dyn_dim_value" in proc.stderr, proc.stderr
    wide = ["--default-dyn-dim", "{min:0,max:480000}"]
    j = kiln_json("run", model, "--input", d, *wide)
    assert j["outputs"][0]["shape"] == "float32[2, 16000]"
    assert "{samples=0:480000" in kiln("params", model, *wide).stdout
    for bad in ("{min:5}", "{min:9,max:1}", "[{min:0,max:4},{min:0,max:4}]", "{min:0,max:4,step:2}"):
        proc = kiln("params", model, "--default-dyn-dim", bad, expect=USAGE)
        assert "--default-dyn-dim" in proc.stderr, proc.stderr
    # A saved program keeps the ranges it was compiled with.
    kiln("compile", model, *wide, "-o", tmp_path / "m.kiln")
    kiln_json("run", tmp_path / "m.kiln", "--input", d)
    kiln("run", tmp_path / "m.kiln", "--input", d, *wide, expect=USAGE)


def test_a_kiln_compiled_with_no_dim_option_runs_every_size(tmp_path):
    """The README's compile-then-run: symbolic dims stay dynamic, so one .kiln serves any batch,
    and the program for the default size is saved compiled (nothing compiles at load)."""
    model = relu_model(tmp_path, ["batch", 3])
    out = tmp_path / "m.kiln"
    kiln("compile", model, "-o", out)
    for n in (1, 5, 2):
        x = rng.uniform(-1, 1, (n, 3)).astype(np.float32)
        d = input_dir(tmp_path, ("x", x), name=f"b{n}")
        kiln("run", out, "--input", d, "--output", tmp_path / f"o{n}")
        np.testing.assert_array_equal(onnx_pb.read_tensor(tmp_path / f"o{n}" / "output_0.pb")[2], np.maximum(x, 0))
    j = kiln_json("params", out)
    assert j["inputs"][0]["shape"]["dims"][0] == {"min": 0, "max": 4096, "optimals": [1], "symbol": "batch"}


@pytest.mark.parametrize("option", ["--batch", "--default-dim-value"])
def test_batch_and_input_files_that_disagree_are_a_usage_error(tmp_path, option):
    model = relu_model(tmp_path, ["batch", 3])
    d = input_dir(tmp_path, ("x", rng.uniform(-1, 1, (1, 3)).astype(np.float32)))
    for args in (["run"], ["perf", "-n", "2", "--warmup", "0"], ["verify"]):
        proc = kiln(*args, model, option, "8", "--input", d, expect=USAGE)
        assert "--batch 8" in proc.stderr and "input 'x'" in proc.stderr and "float32[1, 3]" in proc.stderr, \
            proc.stderr
    proc = kiln("run", model, option, "8", "--input-file", "@x", d / "input_0.pb", expect=USAGE)
    assert "--batch 8" in proc.stderr
    # Agreeing options run at that batch.
    x = rng.uniform(-1, 1, (8, 3)).astype(np.float32)
    d8 = input_dir(tmp_path, ("x", x), name="in8")
    j = kiln_json("perf", model, option, "8", "--input", d8, "-n", "2", "--warmup", "0")
    assert j["batch"] == 8
    assert kiln_json("run", model, option, "8", "--input", d8)["outputs"][0]["shape"] == "float32[8, 3]"


def vad_model(tmp_path):
    """y = If(sr == 16000) then Relu(Reshape(x, [2, 256])) else Reshape(x, [3, 256]), x: [1, 512].

    The 8 kHz branch only fits other chunks: it must not fail loading, only running it."""
    then_g = onnx_pb.graph([onnx_pb.node("Reshape", ["x", "shape16"], ["r"]), onnx_pb.node("Relu", ["r"], ["y16"])],
                           [], [("y16", FLOAT, [2, 256])], name="then")
    else_g = onnx_pb.graph([onnx_pb.node("Reshape", ["x", "shape8"], ["y8"], name="reshape_8k")], [],
                           [("y8", FLOAT, [3, 256])], name="else")
    nodes = [onnx_pb.node("Equal", ["sr", "sr16"], ["is16"]),
             onnx_pb.node("If", ["is16"], ["y"], name="vad_if",
                          attributes=[onnx_pb.attr_graph("then_branch", then_g),
                                      onnx_pb.attr_graph("else_branch", else_g)])]
    inits = [("sr16", np.array(16000, np.int64)), ("shape16", np.array([2, 256], np.int64)),
             ("shape8", np.array([3, 256], np.int64))]
    path = tmp_path / "vad.onnx"
    path.write_bytes(onnx_pb.model(nodes, [("x", FLOAT, [1, 512]), ("sr", INT64, [1])], [("y", FLOAT, [2, 256])],
                                   initializers=inits))
    return path


@pytest.mark.parametrize("target", ["ref", "cpu"])
def test_if_branch_for_another_sample_rate_fails_only_when_taken(tmp_path, target):
    model = vad_model(tmp_path)
    x = rng.uniform(-1, 1, (1, 512)).astype(np.float32)
    d16 = input_dir(tmp_path, ("x", x), ("sr", np.array([16000], np.int64)), name="sr16")
    kiln("run", model, "--target", target, "--input", d16, "--output", tmp_path / "o")
    np.testing.assert_array_equal(onnx_pb.read_tensor(tmp_path / "o" / "output_0.pb")[2],
                                  np.maximum(x.reshape(2, 256), 0))
    d8 = input_dir(tmp_path, ("x", x), ("sr", np.array([8000], np.int64)), name="sr8")
    proc = kiln("run", model, "--target", target, "--input", d8, expect=MODEL)
    assert "reshape_8k" in proc.stderr and "vad_if" in proc.stderr, proc.stderr
