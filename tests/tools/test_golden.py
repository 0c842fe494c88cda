"""`kiln read` and `kiln params` compared exactly with the text in tests/tools/golden/.

When a deliberate change alters the printed text (a new IR printer, a renamed op), regenerate
the files and review the diff before committing:

    KILN_UPDATE_GOLDEN=1 /usr/bin/python3 -m pytest tests/tools/test_golden.py

(with KILN_BUILD_DIR set when the build is not in build/). The update mode rewrites the files and
still fails nothing, so run the tests once more without it afterwards.
"""
import os

import pytest

from conftest import ADD_RELU, DTYPES, FASHION, HERE, MLP, kiln, kiln_json

GOLDEN = os.path.join(HERE, "golden")
UPDATE = os.environ.get("KILN_UPDATE_GOLDEN") == "1"

# golden file -> kiln arguments. Model paths are given relative to the repository root (the
# tests run the tool from there), so the text holds no machine's paths.
CASES = {
    "read_add_relu.txt": ["read", "tests/data/models/add_relu.onnx"],
    "read_mlp_dynamic.txt": ["read", "tests/data/models/mlp_dynamic.onnx"],
    "read_mlp_dynamic_batch4.txt": ["read", "tests/data/models/mlp_dynamic.onnx", "--batch", "4"],
    "read_dtypes.txt": ["read", "tests/data/models/dtypes.onnx"],
    "read_fashion_resnet.txt": ["read", "examples/fashion_resnet/model.onnx"],
    "params_add_relu.txt": ["params", "tests/data/models/add_relu.onnx"],
    "params_mlp_dynamic.txt": ["params", "tests/data/models/mlp_dynamic.onnx"],
    "params_mlp_dynamic_batch4.txt": ["params", "tests/data/models/mlp_dynamic.onnx", "--batch", "4"],
    "params_mlp_dynamic_input_dim.txt": ["params", "tests/data/models/mlp_dynamic.onnx", "--input-dim", "@x", "7", "4"],
    "params_mlp_dynamic_dyn.txt": ["params", "tests/data/models/mlp_dynamic.onnx", "--dyn-input-dim", "@x",
                                   "[{min:1,max:8,optimals:[2,4]},4]"],
    "params_dtypes.txt": ["params", "tests/data/models/dtypes.onnx"],
    "params_fashion_resnet.txt": ["params", "examples/fashion_resnet/model.onnx"],
}


@pytest.mark.parametrize("golden", sorted(CASES))
def test_golden_text(golden):
    path = os.path.join(GOLDEN, golden)
    actual = kiln(*CASES[golden]).stdout
    assert actual.endswith("\n") and "/work/" not in actual
    if UPDATE:
        os.makedirs(GOLDEN, exist_ok=True)
        with open(path, "w") as f:
            f.write(actual)
        return
    assert os.path.exists(path), f"{path} is missing; see this file's docstring to create it"
    with open(path) as f:
        expected = f.read()
    assert actual == expected, f"`kiln {' '.join(CASES[golden])}` differs from {golden} (see the docstring to update)"


def test_every_golden_file_has_a_case():
    """A stale golden file (its case renamed or removed) is an error, not dead weight."""
    if UPDATE:
        pytest.skip("updating")
    assert sorted(f for f in os.listdir(GOLDEN) if f.endswith(".txt")) == sorted(CASES)


def _shape(j):
    return j["type"], j["dims"]


def test_params_json():
    j = kiln_json("params", ADD_RELU)
    assert [(i["name"], _shape(i["shape"]), i["has_default"]) for i in j["inputs"]] == [
        ("x", ("float32", [2, 3]), False), ("y", ("float32", [2, 3]), False)]
    assert [(o["name"], _shape(o["shape"])) for o in j["outputs"]] == [("z", ("float32", [2, 3]))]
    assert j["inputs"][0]["shape"]["text"] == "float32[2, 3]"

    j = kiln_json("params", MLP, "--batch", "5")
    assert _shape(j["inputs"][0]["shape"]) == ("float32", [5, 4])
    assert _shape(j["outputs"][0]["shape"]) == ("float32", [5, 3])

    j = kiln_json("params", MLP, "--dyn-input-dim", "@x", "[{min:1,max:8,optimals:[2,4]},4]")
    # The model names the dim "batch": the name stays, and the output shares it.
    assert j["inputs"][0]["shape"]["dims"] == [{"min": 1, "max": 8, "optimals": [2, 4], "symbol": "batch"}, 4]
    out_dims = j["outputs"][0]["shape"]["dims"]
    assert out_dims[1] == 3 and out_dims[0]["min"] == 1 and out_dims[0]["max"] == 8
    assert out_dims[0]["symbol"] == "batch"

    j = kiln_json("params", DTYPES)
    types = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
             "float64", "bfloat16"]
    assert [i["name"] for i in j["inputs"]] == ["in_" + t for t in types]
    assert [i["shape"]["type"] for i in j["inputs"]] == types
    assert [o["name"] for o in j["outputs"]] == ["out_" + t for t in types]
    assert [o["shape"]["type"] for o in j["outputs"]] == types

    # With no dim option the model's symbolic batch stays dynamic: the documented default
    # range, 1 as the optimal, and the output shares the name.
    batch = {"min": 0, "max": 4096, "optimals": [1], "symbol": "batch"}
    j = kiln_json("params", FASHION)
    assert [(i["name"], _shape(i["shape"])) for i in j["inputs"]] == [("input", ("float32", [batch, 1, 28, 28]))]
    assert [(o["name"], _shape(o["shape"])) for o in j["outputs"]] == [("logits", ("float32", [batch, 10]))]
    j = kiln_json("params", FASHION, "--batch", "1")
    assert [(i["name"], _shape(i["shape"])) for i in j["inputs"]] == [("input", ("float32", [1, 1, 28, 28]))]


def test_read_json_matches_the_text():
    for args in (["read", ADD_RELU], ["read", MLP, "--batch", "4"]):
        text = kiln(*args).stdout
        j = kiln_json(*args)
        assert j["model"] == args[1]
        assert j["compiled"] is False
        assert j["ir"] == text


def _foldable_model(path):
    """y = x + (c1 + c2) and an unused Relu: constant folding and dead code to remove."""
    import numpy as np

    import onnx_pb

    f = onnx_pb.FLOAT
    c1 = np.arange(6, dtype=np.float32).reshape(2, 3)
    nodes = [onnx_pb.node("Add", ["c1", "c2"], ["s"], "fold_me"), onnx_pb.node("Add", ["x", "s"], ["y"], "add"),
             onnx_pb.node("Relu", ["x"], ["unused"], "dead")]
    path.write_bytes(onnx_pb.model(nodes, [("x", f, [2, 3])], [("y", f, [2, 3])],
                                   initializers=[("c1", c1), ("c2", c1 * 10)]))
    return path


def test_read_optimize_passes_and_target(tmp_path):
    model = _foldable_model(tmp_path / "fold.onnx")
    parsed = kiln("read", model).stdout
    assert parsed.count("add(") == 2 and "relu(" in parsed
    optimized = kiln("read", model, "--optimize").stdout
    assert optimized.count("add(") == 1 and "relu(" not in optimized
    # The folded literal holds c1 + c2 = 11 * c1.
    assert "{0, 11, 22, 33, 44, 55}" in optimized, optimized
    # Passes by name, in the order given.
    assert "relu(" not in kiln("read", model, "--passes", "dce").stdout
    assert kiln("read", model, "--passes", "dce").stdout.count("add(") == 2
    folded = kiln("read", model, "--passes=propagate_constants,dce").stdout
    assert folded.count("add(") == 1 and "relu(" not in folded
    for target in ("ref", "cpu"):
        j = kiln_json("read", ADD_RELU, "--target", target)
        assert j["compiled"] is True and j["target"] == target
        assert j["ir"] and j["ir"] == kiln("read", ADD_RELU, "--target", target).stdout
        assert j["ir"] != kiln("read", ADD_RELU).stdout
