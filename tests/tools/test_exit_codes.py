"""Exit codes scripts rely on: 2 usage error, 3 model error, 4 runtime error; never a signal.

Every failing case must also say what was wrong on stderr (and print nothing on stdout that a
script could mistake for a result).
"""
import os
import subprocess

import pytest

import onnx_pb
from conftest import ADD_RELU, MLP, MODEL, REPO, RUNTIME, USAGE, kiln

MODEL_COMMANDS = [["read"], ["params"], ["compile", "-o", "out.kiln"], ["run"], ["perf", "-n", "1", "--warmup", "0"],
                  ["verify"]]


def fails(code, *args, says=(), cwd=REPO):
    proc = kiln(*args, expect=code, cwd=cwd)
    assert proc.stderr.strip(), f"kiln {args}: no message"
    for s in says:
        assert s in proc.stderr, (s, proc.stderr)
    return proc


# ------------------------------------------------------------------ 2: usage errors
@pytest.mark.parametrize("args,says", [
    (["frobnicate"], ["unknown command 'frobnicate'"]),
    (["run", ADD_RELU, "--bogus"], ["unknown option --bogus"]),
    (["run", ADD_RELU, "--bogus=3"], ["unknown option --bogus"]),
    (["params", ADD_RELU, "--target", "cpu"], ["--target does not apply to 'params'"]),
    (["run"], ["needs a model"]),
    (["perf", "--target", "ref"], ["needs a model"]),
    (["compile", ADD_RELU], ["-o"]),
    (["run", ADD_RELU, MLP], ["more than one model"]),
    (["version", ADD_RELU], ["takes no model"]),
    (["run", ADD_RELU, "--seed"], ["--seed needs a value"]),
    (["run", ADD_RELU, "--seed", "abc"], ["--seed expects a non-negative integer, got 'abc'"]),
    (["perf", ADD_RELU, "-n", "-3"], ["-n expects a non-negative integer"]),
    (["params", MLP, "--batch", "0"], ["--batch must be at least 1"]),
    (["verify", ADD_RELU, "--atol", "tight"], ["--atol expects a number, got 'tight'"]),
    (["verify", ADD_RELU, "--rtol", "-0.1"], ["--rtol must be a number >= 0"]),
    (["verify", ADD_RELU, "--atol", "nan"], ["--atol must be a number >= 0"]),
    (["run", ADD_RELU, "--input-file", "x", "x.npy"], ["expects @name"]),
    (["params", MLP, "--input-dim", "@x"], ["needs its dimensions"]),
    (["params", MLP, "--input-dim", "@nope", "2", "4"], ["no input named 'nope'"]),
    (["params", MLP, "--dyn-input-dim", "@x", "[{min:4,max:2},4]"], ["min > max"]),
    (["params", MLP, "--dyn-input-dim", "@x", "[{min:1},4]"], ["needs min and max"]),
    (["params", MLP, "--dyn-input-dim", "@x", "1,4"], ["missing '['"]),
    (["run", ADD_RELU, "--target", "tpu"], ["unknown target 'tpu'", "(see kiln targets)"]),
    (["read", ADD_RELU, "--passes", "no_such_pass"], ["no_such_pass"]),
    (["run", "no/such/model.onnx"], ["no/such/model.onnx", "does not exist"]),
    (["params", "tests/data"], ["is a folder"]),
])
def test_usage_errors(args, says):
    proc = fails(USAGE, *args, says=says)
    assert proc.stdout == "" or proc.stdout.startswith("usage: kiln"), proc.stdout


def test_usage_error_points_to_the_help():
    proc = fails(USAGE, "run", ADD_RELU, "--bogus")
    assert "see kiln run --help" in proc.stderr


def test_missing_input_files_are_usage_errors(tmp_path):
    fails(USAGE, "run", ADD_RELU, "--input", tmp_path, says=["input_0.pb", "'x'"])
    fails(USAGE, "run", ADD_RELU, "--input-file", "@x", tmp_path / "missing.npy", says=["missing.npy"])
    fails(USAGE, "run", ADD_RELU, "--input-file", "@x", tmp_path / "missing.pb", says=["missing.pb"])
    fails(USAGE, "verify", ADD_RELU, "--expected", tmp_path, says=["output_0.pb"])


# ------------------------------------------------------------------ 3: model errors
def _bad_files(tmp):
    """name -> bytes of a model the tool must refuse with exit code 3."""
    good = open(ADD_RELU, "rb").read()
    saved = tmp / "ok.kiln"
    kiln("compile", ADD_RELU, "--target", "ref", "-o", saved)
    kiln_bytes = saved.read_bytes()
    f = onnx_pb.FLOAT
    return {
        "empty.onnx": b"",
        "garbage.onnx": bytes(range(256)) * 4,
        "text.onnx": b"this is not a model\n",
        "truncated.onnx": good[: len(good) // 2],
        "unknown_op.onnx": onnx_pb.model([onnx_pb.node("FrobnicateTensor", ["x"], ["y"], "frob")],
                                         [("x", f, [2, 3])], [("y", f, [2, 3])]),
        "unknown_domain.onnx": onnx_pb.model([onnx_pb.node("Relu", ["x"], ["y"], "r", domain="com.example.nope")],
                                             [("x", f, [2, 3])], [("y", f, [2, 3])]),
        "shape_mismatch.onnx": onnx_pb.model([onnx_pb.node("Add", ["a", "b"], ["c"], "add")],
                                             [("a", f, [2, 3]), ("b", f, [4, 5])], [("c", f, [2, 3])]),
        "undefined_input.onnx": onnx_pb.model([onnx_pb.node("Relu", ["nowhere"], ["y"], "r")],
                                              [("x", f, [2, 3])], [("y", f, [2, 3])]),
        "kiln_magic_only.kiln": b"KILN",
        "kiln_truncated.kiln": kiln_bytes[: len(kiln_bytes) // 2],
        "kiln_corrupt.kiln": kiln_bytes[:16] + bytes(b ^ 0x5A for b in kiln_bytes[16:]),
    }


@pytest.fixture(scope="module")
def bad_models(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bad")
    paths = {}
    files = _bad_files(tmp)
    assert sorted(files) == sorted(BAD_NAMES)
    for name, data in files.items():
        (tmp / name).write_bytes(data)
        paths[name] = tmp / name
    return paths


EXPECTED_WORDS = {"unknown_op.onnx": "FrobnicateTensor", "unknown_domain.onnx": "com.example.nope",
                  "shape_mismatch.onnx": "add", "undefined_input.onnx": "nowhere"}


BAD_NAMES = ["empty.onnx", "garbage.onnx", "text.onnx", "truncated.onnx", "unknown_op.onnx", "unknown_domain.onnx",
             "shape_mismatch.onnx", "undefined_input.onnx", "kiln_magic_only.kiln", "kiln_truncated.kiln",
             "kiln_corrupt.kiln"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_models_exit_3_with_a_message(bad_models, name, tmp_path):
    for cmd in MODEL_COMMANDS:
        if name.endswith(".kiln") and cmd == ["verify"]:
            continue  # verify of a .kiln needs --expected (a usage error comes first)
        proc = fails(MODEL, cmd[0], bad_models[name], *cmd[1:], "--quiet", cwd=tmp_path)
        assert proc.stdout == ""
        if name in EXPECTED_WORDS:
            assert EXPECTED_WORDS[name] in proc.stderr, (cmd, proc.stderr)


def test_the_onnx_corpus_of_bad_models():
    """Every case of tests/data/bad_models (the ONNX frontend's corpus of invalid and hostile models).

    Its expected.tsv says per file what the parser must do: an error code name (parse, shape,
    unsupported, io -> exit 3, with each needle in the message), "any" (a byte flip may leave a
    valid model: exit 0, or an error with a message) or "ok" (exit 0).
    Without the table, every .onnx file there must give exit 3.
    """
    folder = os.path.join(REPO, "tests", "data", "bad_models")
    if not os.path.isdir(folder):
        pytest.skip("tests/data/bad_models is not in this checkout (it comes with the robustness work)")
    cases = []
    table = os.path.join(folder, "expected.tsv")
    if os.path.exists(table):
        for line in open(table):
            if line.startswith("#") or not line.strip():
                continue
            parts = line.rstrip("\n").split("\t")
            needles = [n for n in (parts[2] if len(parts) > 2 else "").split("|") if n]
            cases.append((parts[0], parts[1], needles))
    else:
        cases = [(f, "error", []) for f in sorted(os.listdir(folder)) if f.endswith(".onnx")]
    assert cases
    failures = []
    for f, outcome, needles in cases:
        try:
            proc = kiln("params", os.path.join(folder, f), "--quiet", expect=None, timeout=10)
        except subprocess.TimeoutExpired:
            failures.append(f"{f} ({outcome}): still parsing after 10 s")
            continue
        allowed = {"ok": (0,), "any": (0, MODEL, RUNTIME), "runtime": (RUNTIME,), "out_of_memory": (RUNTIME,),
                   "invalid_argument": (USAGE,)}.get(outcome, (MODEL,))
        if proc.returncode not in allowed:
            failures.append(f"{f} ({outcome}): exit {proc.returncode}: {proc.stderr.strip()[:300]}")
        elif proc.returncode != 0 and (not proc.stderr.strip() or proc.stdout):
            failures.append(f"{f}: exit {proc.returncode} without a message, or with output")
        elif proc.returncode != 0:
            missing = [n for n in needles if n not in proc.stderr]
            if missing:
                failures.append(f"{f}: message lacks {missing}: {proc.stderr.strip()[:300]}")
    assert not failures, "\n".join(failures)


# ------------------------------------------------------------------ 4: runtime errors
def test_unwritable_outputs_are_runtime_errors(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("in the way")
    fails(RUNTIME, "run", ADD_RELU, "--output", blocker / "out", says=["a_file"])
    fails(RUNTIME, "run", ADD_RELU, "--output-npy", blocker, says=["a_file"])
    fails(RUNTIME, "compile", ADD_RELU, "-o", blocker / "x.kiln", says=["x.kiln"])
    fails(RUNTIME, "compile", ADD_RELU, "-o", tmp_path / "no" / "such" / "dir" / "x.kiln", says=["x.kiln"])
