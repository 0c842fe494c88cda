"""kiln perf --shapes: one program run with each set of input shapes in turn, reporting per
set the first call, the compiles it caused, latency and resident memory."""
import numpy as np
import pytest

import onnx_pb
from conftest import MLP, USAGE, kiln, kiln_json

DYN_X = ["--dyn-input-dim", "@x", "[{min:1,max:64},4]"]


def test_one_input_several_shapes_json():
    j = kiln_json("perf", MLP, *DYN_X, "--shapes", "x=1x4,7x4,33x4;x=7x4", "-n", "3", "--warmup", "1")
    rows = j["shapes"]
    assert [r["inputs"] for r in rows] == [{"x": [1, 4]}, {"x": [7, 4]}, {"x": [33, 4]}, {"x": [7, 4]}]
    # Each new set runs its first call on the generic program, its warm-up call asks for a
    # specialization (the second call of those shapes), and the timed runs use it.
    assert [r["compiles"] for r in rows] == [1, 1, 1, 0]  # the second 7x4 is cached
    assert [r["generic_runs"] for r in rows] == [2, 2, 2, 0]
    for r in rows:
        assert 0 < r["min_ms"] <= r["median_ms"] <= r["p90_ms"]
        assert r["first_call_ms"] > 0 and r["rss_mb"] > 0
    assert rows[2]["memory"]["parameter_bytes"] == 33 * 4 * 4
    s = j["specializations"]
    assert s["compiles"] == 3 and s["cached"] == 3 and s["evictions"] == 0 and s["max_specializations"] == 8
    # 5 calls a set (first, 1 warm-up, 3 runs) and the runs while the target tried out how to run
    # the specialization (on two threads); all of the second 7x4's hit
    settled = [r["settle_runs"] for r in rows]
    assert all(0 < n <= 100 for n in settled), settled
    assert s["hits"] == 3 + 3 + 3 + 5 + sum(settled)
    assert s["generic"] and s["generic_runs"] == 6 and s["background_compiles"] == 3


def test_text_output_names_each_set():
    out = kiln("perf", MLP, *DYN_X, "--shapes", "x=2x4,3x4", "-n", "2", "--warmup", "0").stdout
    assert "x=2x4" in out and "x=3x4" in out and "(1 compile," in out
    assert "specializations: 2 compiled" in out and "0 evicted" in out and "generic program:" in out


def _two_input_model(path):
    """ids int64 [1, seq] gathers rows of a table; mask float [1, seq] doubled."""
    f, i64 = onnx_pb.FLOAT, onnx_pb.INT64
    table = np.arange(100 * 8, dtype=np.float32).reshape(100, 8)
    path.write_bytes(onnx_pb.model(
        [onnx_pb.node("Gather", ["table", "ids"], ["emb"], "gather"),
         onnx_pb.node("Add", ["mask", "mask"], ["twice"], "add")],
        [("ids", i64, [1, "seq"]), ("mask", f, [1, "seq"])],
        [("emb", f, [1, "seq", 8]), ("twice", f, [1, "seq"])],
        initializers=[("table", table)]))
    return path


def test_several_inputs_per_set(tmp_path):
    model = _two_input_model(tmp_path / "two.onnx")
    dyn = ["--dyn-input-dim", "@ids", "[1,{min:1,max:64}]", "--dyn-input-dim", "@mask", "[1,{min:1,max:64}]"]
    j = kiln_json("perf", model, *dyn, "--shapes", "ids=1x7,mask=1x7;ids=1x33,mask=1x33;ids=1x7,1x9,mask=1x7,1x9",
                  "-n", "2", "--warmup", "0")
    assert [r["inputs"] for r in j["shapes"]] == [
        {"ids": [1, 7], "mask": [1, 7]}, {"ids": [1, 33], "mask": [1, 33]},
        {"ids": [1, 7], "mask": [1, 7]}, {"ids": [1, 9], "mask": [1, 9]}]
    assert [r["compiles"] for r in j["shapes"]] == [1, 1, 0, 1]


@pytest.mark.parametrize("shapes, message", [
    ("x=1x4,a", "not a shape"),
    ("1x4", "before any input name"),
    ("x=1x4;", "empty group"),
    ("x=1x4,2x4,y=1x1,2x2,3x3", "has 3 shapes"),
    ("x=1x4,x=2x4", "named twice"),
])
def test_bad_syntax_is_a_usage_error(shapes, message):
    proc = kiln("perf", MLP, *DYN_X, "--shapes", shapes, expect=USAGE)
    assert message in proc.stderr


def test_unknown_input_is_a_usage_error():
    proc = kiln("perf", MLP, *DYN_X, "--shapes", "y=1x4", expect=USAGE)
    assert "no input 'y'" in proc.stderr and "x" in proc.stderr


def test_help_documents_the_syntax():
    out = kiln("perf", "--help").stdout
    assert "--shapes" in out and "input_ids=1x1,1x17,2x128" in out
