"""`kiln run --output DIR` writes sequence and optional outputs as the ONNX backend tests store them
(SequenceProto, OptionalProto), checked against the suite's expected files with an independent
decoder (onnx_pb.py) on every backend test whose outputs are sequences or optionals."""
import csv
import os

import numpy as np
import pytest

import onnx_pb
from conftest import SHARED, kiln

SUITE = os.path.join(SHARED, "onnx-backend-tests")


def sequence_or_optional_tests():
    path = os.path.join(SUITE, "manifest.tsv")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return [(r["suite"], r["test"], r["output_types"].split(";")) for r in rows
            if "seq(" in r["output_types"] or "optional(" in r["output_types"]]


def decode(kind, data):
    if kind.startswith("seq("):
        return ("sequence", onnx_pb.decode_sequence(data))
    if kind.startswith("optional("):
        return ("optional", onnx_pb.decode_optional(data))
    return ("tensor", onnx_pb.decode_tensor(data))


def assert_same(got, want, where):
    """Same structure, element types and values (the suite's tolerance: rtol 1e-3, atol 1e-5)."""
    if isinstance(want, tuple) and len(want) == 3 and isinstance(want[2], np.ndarray):
        assert got[1] == want[1], f"{where}: element type {got[1]}, expected {want[1]}"
        np.testing.assert_allclose(got[2], want[2], rtol=1e-3, atol=1e-5, err_msg=where)
    elif isinstance(want, (list, tuple)):
        assert want is not None and got is not None and len(got) == len(want), f"{where}: {got!r} vs {want!r}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{where}[{i}]")
    else:
        assert got == want, f"{where}: {got!r}, expected {want!r}"


TESTS = sequence_or_optional_tests()


def test_the_suite_has_sequence_outputs():
    if not os.path.isdir(SUITE):
        pytest.skip("the ONNX backend tests are not at ../shared")
    assert len(TESTS) >= 20


@pytest.mark.parametrize("suite,name,output_types", TESTS, ids=[t[1] for t in TESTS])
def test_run_writes_sequence_and_optional_outputs(suite, name, output_types, tmp_path):
    folder = os.path.join(SUITE, suite, name)
    data = os.path.join(folder, "test_data_set_0")
    kiln("run", os.path.join(folder, "model.onnx"), "--input", data, "--output", tmp_path)
    for i, kind in enumerate(output_types):
        with open(os.path.join(data, f"output_{i}.pb"), "rb") as f:
            want = decode(kind, f.read())
        with open(tmp_path / f"output_{i}.pb", "rb") as f:
            got = decode(kind, f.read())
        assert_same(got, want, f"{name} output {i}")
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
