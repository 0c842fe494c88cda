"""The workflow users know from MIGraphX, with kiln in place of migraphx."""
import os

import numpy as np
import pytest

import kiln
from conftest import EXAMPLE, rel_close, shared_model


def test_readme_workflow(tmp_path):
    model = kiln.parse_onnx(os.path.join(EXAMPLE, "model.onnx"))
    inputs, outputs = model.get_inputs(), model.get_outputs()
    assert list(inputs) == ["input"] and list(outputs) == ["logits"]
    assert inputs["input"].lens() == [1, 1, 28, 28]
    model.compile(kiln.get_target("cpu"), offload_copy=True, device_id=0, fast_math=True, exhaustive_tune=False)
    usage = model.get_memory_usage()
    assert usage["literal_bytes"] > 1_000_000
    x = np.random.RandomState(0).rand(*model.get_inputs()["input"].lens()).astype(np.float32)
    results = model.run({"input": x})
    out = np.array(results[0])
    assert out.shape == (1, 10) and np.isfinite(out).all()
    kiln.save(model, str(tmp_path / "fashion.kiln"))
    again = kiln.load(str(tmp_path / "fashion.kiln"), device_id=0)
    assert np.array_equal(np.asarray(again.run({"input": x})[0]), out)
    assert str(again) == str(model)


def test_matches_onnx_runtime_on_example_images():
    model = kiln.parse_onnx(os.path.join(EXAMPLE, "model.onnx"), map_input_dims={"input": [16, 1, 28, 28]})
    model.compile(kiln.get_target("cpu"))
    x = np.asarray(kiln.read_tensor_proto(os.path.join(EXAMPLE, "test_data_set_0", "input_0.pb")))
    expected = np.asarray(kiln.read_tensor_proto(os.path.join(EXAMPLE, "test_data_set_0", "output_0.pb")))
    out = np.asarray(model.run({"input": x})[0])
    rel_close(out, expected)
    labels = [int(l) for l in open(os.path.join(EXAMPLE, "labels.txt"))]
    assert list(out.argmax(axis=1)) == labels


@pytest.mark.parametrize("name", ["mobilenet_v2", "bert_small", "lstm_seq"])
def test_shared_models_against_ort(name):
    path = shared_model(name)
    folder = os.path.dirname(path)
    names = list(kiln.parse_onnx(path).get_inputs())
    data = os.path.join(folder, "test_data_set_0")
    feeds = {n: np.asarray(kiln.read_tensor_proto(os.path.join(data, f"input_{i}.pb"))) for i, n in enumerate(names)}
    # The exported batch/sequence axes are symbolic: size them from the data, as a user would.
    model = kiln.parse_onnx(path, map_input_dims={n: list(v.shape) for n, v in feeds.items()})
    model.compile(kiln.get_target("cpu"))
    outs = model.run(feeds)
    for i, o in enumerate(outs):
        rel_close(np.asarray(o), np.asarray(kiln.read_tensor_proto(os.path.join(data, f"output_{i}.pb"))))


def test_dynamic_batch_from_python(test_model):
    model = kiln.parse_onnx(test_model("mlp_dynamic.onnx"),
                            map_dyn_input_dims={"x": [{"min": 1, "max": 8, "optimals": [4]}, 4]})
    assert model.get_inputs()["x"].dynamic()
    model.compile(kiln.get_target("cpu"))
    for n in (1, 3, 8):
        x = np.random.RandomState(n).randn(n, 4).astype(np.float32)
        p = np.asarray(model.run({"x": x})[0])
        assert p.shape == (n, 3)
        np.testing.assert_allclose(p.sum(axis=1), np.ones(n), rtol=1e-5)
    with pytest.raises(kiln.ShapeError, match="'x'"):
        model.run({"x": np.zeros((9, 4), np.float32)})


def test_program_text_and_shapes(test_model):
    model = kiln.parse_onnx(test_model("add_relu.onnx"))
    text = str(model)
    assert "@param" in text and "@return" in text
    s = model.get_inputs()["x"]
    assert s.type() == "float32" and s.lens() == [2, 3] and s.strides() == [3, 1]
    assert s.elements() == 6 and s.bytes() == 24 and s.standard() and not s.dynamic()
    assert kiln.shape("int8", [4, 5]).bytes() == 20
    assert kiln.shape("float32", [2, 3], [1, 2]).transposed()
    model.sort()


def test_tf32_is_a_compile_option(tmp_path):
    """tf32=True (the gpu target's TF32 tensor cores for float32) compiles on any target and
    is saved with the program; strict fp32 is the default."""
    model = kiln.parse_onnx(os.path.join(EXAMPLE, "model.onnx"))
    model.compile(kiln.get_target("ref"), tf32=True)
    path = tmp_path / "tf32.kiln"
    kiln.save(model, str(path))
    assert b"tf32" in path.read_bytes()
    x = np.zeros(model.get_inputs()["input"].lens(), np.float32)
    assert np.isfinite(np.asarray(kiln.load(str(path)).run({"input": x})[0])).all()


def test_gpu_arch_compiles_ahead_for_another_architecture(tmp_path):
    """gpu_arch='sm_100' compiles the gpu target's kernels for that architecture without a
    device (the .kiln names it); a name that is no architecture is refused."""
    model = kiln.parse_onnx(os.path.join(EXAMPLE, "model.onnx"))
    try:
        model.compile(kiln.get_target("gpu"), gpu_arch="sm_100")
    except kiln.Error as e:
        if "built without CUDA" in str(e):
            pytest.skip(str(e))
        raise
    path = tmp_path / "sm100.kiln"
    kiln.save(model, str(path))
    assert b"sm_100" in path.read_bytes()
    with pytest.raises(kiln.Error, match="not a CUDA architecture"):
        kiln.parse_onnx(os.path.join(EXAMPLE, "model.onnx")).compile(kiln.get_target("gpu"), gpu_arch="sm_x")
