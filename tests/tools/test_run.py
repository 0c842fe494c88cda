"""`kiln run` and `kiln compile`: inputs from files, outputs to files, saved programs.

Outputs are decoded with tests/tools/onnx_pb.py (independent of Kiln's writer) and checked
against NumPy computations of the models.
"""
import os
import shutil

import numpy as np
import pytest

import onnx_pb
from conftest import ADD_RELU, DTYPES, EXAMPLE, FASHION, MLP, MODEL, USAGE, kiln, kiln_json

rng = np.random.default_rng(20261130)


def add_relu_inputs(tmp_path, shape=(2, 3)):
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    y = rng.uniform(-1, 1, shape).astype(np.float32)
    d = tmp_path / "in"
    d.mkdir()
    onnx_pb.write_tensor(d / "input_0.pb", x, "x")
    onnx_pb.write_tensor(d / "input_1.pb", y, "y")
    return d, x, y


def mlp_weights():
    """The MLP's weights, read back from the model file with the independent decoder."""
    data = open(MLP, "rb").read()
    weights = {}
    for field, _, graph in onnx_pb.fields(data):
        if field != 7:
            continue
        for gfield, _, v in onnx_pb.fields(graph):
            if gfield == 5:  # initializer
                name, _, a = onnx_pb.decode_tensor(v)
                weights[name] = a
    assert set(weights) == {"w1", "b1", "w2"}
    return weights


def mlp_reference(x):
    w = mlp_weights()
    h = np.maximum(x.astype(np.float64) @ w["w1"] + w["b1"], 0) @ w["w2"]
    e = np.exp(h - h.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("target", ["ref", "cpu"])
def test_run_input_output_dirs_add_relu(tmp_path, target):
    d, x, y = add_relu_inputs(tmp_path)
    out = tmp_path / "out"
    proc = kiln("run", ADD_RELU, "--target", target, "--input", d, "--output", out)
    assert proc.stdout.startswith("z: float32[2, 3]")
    assert proc.stderr == ""  # no progress output when stderr is not a terminal
    assert sorted(os.listdir(out)) == ["output_0.pb"]
    name, dt, z = onnx_pb.read_tensor(out / "output_0.pb")
    assert (name, dt, z.dtype, z.shape) == ("z", onnx_pb.FLOAT, np.float32, (2, 3))
    np.testing.assert_array_equal(z, np.maximum(x + y, 0))


def test_run_summary_text_and_json(tmp_path):
    d, x, y = add_relu_inputs(tmp_path)
    z = np.maximum(x + y, 0).astype(np.float64)
    j = kiln_json("run", ADD_RELU, "--input", d)
    assert j["model"] == str(ADD_RELU) and j["target"] == "cpu"
    assert j["compile_ms"] >= 0 and j["run_ms"] >= 0
    (o,) = j["outputs"]
    assert o["name"] == "z" and o["shape"] == "float32[2, 3]"
    np.testing.assert_allclose([o["min"], o["max"], o["mean"]], [z.min(), z.max(), z.mean()], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(o["first"], z.ravel()[:5], rtol=1e-6)
    line = kiln("run", ADD_RELU, "--input", d).stdout.splitlines()[0]
    assert line.startswith("z: float32[2, 3]  min ") and "  max " in line and "  first [" in line


def test_run_output_npy_and_input_file_npy(tmp_path):
    x = rng.uniform(-1, 1, (2, 3)).astype(np.float32)
    y = rng.uniform(-1, 1, (2, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    # A Fortran-ordered array: the reader must honour the layout.
    np.save(tmp_path / "y.npy", np.asfortranarray(y))
    out = tmp_path / "npy"
    kiln("run", ADD_RELU, "--input-file", "@x", tmp_path / "x.npy", "--input-file", "@y", tmp_path / "y.npy",
         "--output-npy", out)
    assert sorted(os.listdir(out)) == ["z.npy"]
    z = np.load(out / "z.npy")
    assert z.dtype == np.float32 and z.shape == (2, 3)
    np.testing.assert_array_equal(z, np.maximum(x + y, 0))


def test_input_file_pb_and_dir_mix(tmp_path):
    """--input-file overrides one input of --input DIR."""
    d, x, _ = add_relu_inputs(tmp_path)
    y2 = rng.uniform(-1, 1, (2, 3)).astype(np.float32)
    onnx_pb.write_tensor(tmp_path / "y2.pb", y2, "y")
    kiln("run", ADD_RELU, "--input", d, "--input-file", "@y", tmp_path / "y2.pb", "--output", tmp_path / "o")
    np.testing.assert_array_equal(onnx_pb.read_tensor(tmp_path / "o" / "output_0.pb")[2], np.maximum(x + y2, 0))


def test_kiln_python_writer_round_trip(tmp_path):
    """Inputs written with Kiln's own Python write_tensor_proto are read by the tool."""
    kiln_py = pytest.importorskip("kiln")
    x = rng.uniform(-1, 1, (2, 3)).astype(np.float32)
    y = rng.uniform(-1, 1, (2, 3)).astype(np.float32)
    d = tmp_path / "in"
    d.mkdir()
    kiln_py.write_tensor_proto(x, "x", str(d / "input_0.pb"))
    kiln_py.write_tensor_proto(y, "y", str(d / "input_1.pb"))
    kiln("run", ADD_RELU, "--input", d, "--output", tmp_path / "o")
    z = np.asarray(kiln_py.read_tensor_proto(str(tmp_path / "o" / "output_0.pb")))
    np.testing.assert_array_equal(z, np.maximum(x + y, 0))


@pytest.mark.parametrize("batch", [1, 3])
def test_mlp_dynamic_batch_from_the_input_files(tmp_path, batch):
    """An input file with another batch than the default re-sizes the symbolic dimension."""
    x = rng.uniform(-1, 1, (batch, 4)).astype(np.float32)
    onnx_pb.write_tensor(tmp_path / "x.pb", x, "x")
    j = kiln_json("run", MLP, "--input-file", "@x", tmp_path / "x.pb", "--output", tmp_path / "o")
    assert j["outputs"][0]["shape"] == f"float32[{batch}, 3]"
    _, _, probs = onnx_pb.read_tensor(tmp_path / "o" / "output_0.pb")
    np.testing.assert_allclose(probs, mlp_reference(x), rtol=1e-4, atol=1e-6)


def test_mlp_dynamic_batch_option_and_random_inputs():
    j = kiln_json("run", MLP, "--batch", "6", "--seed", "3")
    (o,) = j["outputs"]
    assert o["shape"] == "float32[6, 3]"
    assert 0 < o["min"] <= o["max"] < 1 and abs(o["mean"] - 1 / 3) < 1e-5  # softmax rows sum to 1
    # Random inputs are seeded: same seed, same values; another seed, others.
    assert kiln_json("run", MLP, "--batch", "6", "--seed", "3")["outputs"] == j["outputs"]
    assert kiln_json("run", MLP, "--batch", "6", "--seed", "4")["outputs"][0]["first"] != o["first"]


def test_dtypes_round_trip_every_element_type(tmp_path):
    """Identity on 13 element types: what goes in comes out bit for bit, in .pb and .npy."""
    values = {
        "bool": np.array([[True, False, True], [False, False, True]]),
        "int8": np.array([[-128, -1, 0], [1, 77, 127]], np.int8),
        "int16": np.array([[-32768, -2, 0], [3, 999, 32767]], np.int16),
        "int32": np.array([[-2**31, -5, 0], [6, 123456, 2**31 - 1]], np.int32),
        "int64": np.array([[-2**63, -7, 0], [8, 2**40, 2**63 - 1]], np.int64),
        "uint8": np.array([[0, 1, 2], [128, 200, 255]], np.uint8),
        "uint16": np.array([[0, 1, 2], [40000, 50000, 65535]], np.uint16),
        "uint32": np.array([[0, 1, 2], [3, 2**31, 2**32 - 1]], np.uint32),
        "uint64": np.array([[0, 1, 2], [3, 2**63, 2**64 - 1]], np.uint64),
        "float16": np.array([[-1.5, 0, 0.25], [65504, -6e-5, 3.140625]], np.float16),
        "float32": rng.uniform(-1e3, 1e3, (2, 3)).astype(np.float32),
        "float64": rng.uniform(-1e9, 1e9, (2, 3)),
        "bfloat16": np.array([[0x3F80, 0xBF80, 0], [0x4049, 0x7F7F, 0x0001]], np.uint16),  # raw bits
    }
    d = tmp_path / "in"
    d.mkdir()
    for i, (t, v) in enumerate(values.items()):
        onnx_pb.write_tensor(d / f"input_{i}.pb", v, "in_" + t,
                             onnx_pb.BFLOAT16 if t == "bfloat16" else None)
    kiln("run", DTYPES, "--target", "ref", "--input", d, "--output", tmp_path / "o", "--output-npy", tmp_path / "n")
    for i, (t, v) in enumerate(values.items()):
        name, dt, a = onnx_pb.read_tensor(tmp_path / "o" / f"output_{i}.pb")
        assert name == "out_" + t
        assert dt == (onnx_pb.BFLOAT16 if t == "bfloat16" else onnx_pb.ONNX_OF[v.dtype]), t
        np.testing.assert_array_equal(a, v, err_msg=t)
        n = np.load(tmp_path / "n" / f"out_{t}.npy")
        assert n.dtype == v.dtype, t  # bfloat16 is written as its uint16 bits
        np.testing.assert_array_equal(n, v, err_msg=t)


def test_fashion_resnet_matches_onnx_runtime(tmp_path):
    """The example's 16 images: logits close to ONNX Runtime's and the same classes."""
    data = os.path.join(EXAMPLE, "test_data_set_0")
    kiln("run", FASHION, "--input", data, "--output", tmp_path / "o", "--quiet")
    _, _, logits = onnx_pb.read_tensor(tmp_path / "o" / "output_0.pb")
    _, _, expected = onnx_pb.read_tensor(os.path.join(data, "output_0.pb"))
    assert logits.shape == expected.shape == (16, 10)
    np.testing.assert_allclose(logits, expected, rtol=1e-3, atol=1e-3)
    labels = [int(l) for l in open(os.path.join(EXAMPLE, "labels.txt")).read().split()]
    assert logits.argmax(axis=1).tolist() == labels


# ------------------------------------------------------------------ compile and saved programs
def test_compile_then_run_the_saved_program(tmp_path):
    d, x, y = add_relu_inputs(tmp_path)
    saved = tmp_path / "add_relu.kiln"
    j = kiln_json("compile", ADD_RELU, "-o", saved)
    assert j["target"] == "cpu" and j["output"] == str(saved) and j["compile_ms"] >= 0 and j["peak_rss_mb"] > 0
    assert set(j["memory"]) == {"arena_bytes", "parameter_bytes", "literal_bytes", "output_bytes"}
    assert j["memory"]["output_bytes"] == 24 and j["memory"]["parameter_bytes"] == 48
    assert open(saved, "rb").read(4) == b"KILN"
    kiln("run", saved, "--input", d, "--output", tmp_path / "a")
    kiln("run", ADD_RELU, "--input", d, "--output", tmp_path / "b")
    a = onnx_pb.read_tensor(tmp_path / "a" / "output_0.pb")[2]
    np.testing.assert_array_equal(a, onnx_pb.read_tensor(tmp_path / "b" / "output_0.pb")[2])
    np.testing.assert_array_equal(a, np.maximum(x + y, 0))
    # Chosen by content: a .kiln named .bin (and an .onnx named .kiln) still load.
    shutil.copy(saved, tmp_path / "program.bin")
    shutil.copy(ADD_RELU, tmp_path / "model.kiln")
    kiln("run", tmp_path / "program.bin", "--input", d, "--output", tmp_path / "c")
    kiln("run", tmp_path / "model.kiln", "--input", d, "--output", tmp_path / "e")
    for sub in ("c", "e"):
        np.testing.assert_array_equal(onnx_pb.read_tensor(tmp_path / sub / "output_0.pb")[2], a)
    # The saved program knows its target and its inputs.
    assert kiln_json("run", tmp_path / "program.bin", "--input", d)["target"] == "cpu"
    assert kiln("params", tmp_path / "program.bin").stdout == kiln("params", ADD_RELU).stdout
    assert kiln_json("read", saved)["compiled"] is True
    # A different --target than the one it was compiled for is the caller's mistake, and so
    # are shape options: the saved program's shapes are fixed.
    proc = kiln("run", saved, "--target", "ref", expect=USAGE)
    assert "compiled for cpu" in proc.stderr
    for opt in (["--batch", "4"], ["--default-dim-value", "4"], ["--input-dim", "@x", "4", "3"],
                ["--dyn-input-dim", "@x", "[{min:1,max:4},3]"]):
        proc = kiln("params", tmp_path / "program.bin", *opt, expect=USAGE)
        assert "saved .kiln program" in proc.stderr and opt[0] in proc.stderr


def test_compile_text_output(tmp_path):
    text = kiln("compile", MLP, "--target", "ref", "-o", tmp_path / "m.kiln").stdout
    assert text.startswith(f"compiled {MLP} for ref in ") and "memory: arena " in text and "peak RSS" in text


def test_saved_fashion_resnet_gives_the_same_logits(tmp_path, fashion_kiln):
    data = os.path.join(EXAMPLE, "test_data_set_0")
    kiln("run", fashion_kiln, "--input", data, "--output", tmp_path / "k")
    # The same static batch as the saved program (with no --batch the first call of batch 16
    # runs on the generic program, whose kernels sum in another order).
    kiln("run", FASHION, "--batch", "16", "--input", data, "--output", tmp_path / "o", "--quiet")
    np.testing.assert_array_equal(onnx_pb.read_tensor(tmp_path / "k" / "output_0.pb")[2],
                                  onnx_pb.read_tensor(tmp_path / "o" / "output_0.pb")[2])


def test_saved_program_with_a_dynamic_batch(tmp_path):
    saved = tmp_path / "mlp.kiln"
    kiln("compile", MLP, "--dyn-input-dim", "@x", "[{min:1,max:8},4]", "-o", saved)
    for batch in (2, 5):
        x = rng.uniform(-1, 1, (batch, 4)).astype(np.float32)
        np.save(tmp_path / "x.npy", x)
        kiln("run", saved, "--input-file", "@x", tmp_path / "x.npy", "--output-npy", tmp_path / f"o{batch}")
        np.testing.assert_allclose(np.load(tmp_path / f"o{batch}" / "probs.npy"), mlp_reference(x), rtol=1e-4,
                                   atol=1e-6)


def test_run_bad_input_file_shape_is_an_error_with_a_message(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((3, 3), np.float32))
    proc = kiln("run", ADD_RELU, "--input-file", "@x", tmp_path / "x.npy", expect=MODEL)
    # add_relu declares [2, 3]: the file is refused, not the model re-sized to it.
    assert "input 'x': the model declares float32[2, 3]" in proc.stderr and "holds float32[3, 3]" in proc.stderr
    proc = kiln("run", ADD_RELU, "--input-file", "@nope", tmp_path / "x.npy", expect=USAGE)
    assert "no input 'nope'" in proc.stderr and "x, y" in proc.stderr
    proc = kiln("run", ADD_RELU, "--input", tmp_path, expect=USAGE)
    assert "input_0.pb" in proc.stderr
    (tmp_path / "junk.npy").write_bytes(b"not numpy at all")
    proc = kiln("run", ADD_RELU, "--input-file", "@x", tmp_path / "junk.npy", expect=MODEL)
    assert "not a .npy file" in proc.stderr


def test_run_an_empty_batch(tmp_path):
    """--input-dim may give a dimension 0: an empty result, reported and written as such."""
    j = kiln_json("run", MLP, "--input-dim", "@x", "0", "4", "--output", tmp_path / "o", "--output-npy", tmp_path / "n")
    (o,) = j["outputs"]
    assert o["shape"] == "float32[0, 3]" and "min" not in o and "mean" not in o
    assert onnx_pb.read_tensor(tmp_path / "o" / "output_0.pb")[2].shape == (0, 3)
    assert np.load(tmp_path / "n" / "probs.npy").shape == (0, 3)
    assert kiln("run", MLP, "--input-dim", "@x", "0", "4").stdout.splitlines()[0] == "probs: float32[0, 3]"
