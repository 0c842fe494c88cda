"""version, targets, ops, onnx-ops and the help texts (text and --json)."""
import re

import pytest

from conftest import ADD_RELU, OK, USAGE, kiln, kiln_json

COMMANDS = ["read", "params", "compile", "run", "perf", "verify", "onnx-ops", "ops", "targets", "version", "serve"]
MODEL_COMMANDS = COMMANDS[:6]


def test_version_text_and_json():
    text = kiln("version").stdout
    m = re.fullmatch(r"kiln (\d+\.\d+\.\d+) \(ONNX opsets 1-(\d+)\)\n", text)
    assert m, text
    j = kiln_json("version")
    assert j["version"] == m.group(1)
    assert j["max_onnx_opset"] == int(m.group(2)) and j["max_onnx_opset"] >= 13
    assert kiln("--version").stdout == text


def test_targets_text_and_json():
    j = kiln_json("targets")
    by_name = {t["name"]: t for t in j["targets"]}
    assert set(by_name) == {"ref", "cpu", "gpu"}
    for name in ("ref", "cpu"):
        assert by_name[name]["available"] is True and by_name[name]["reason"] == ""
    # A missing target always says why.
    for t in j["targets"]:
        assert t["available"] or t["reason"], t
    lines = kiln("targets").stdout.splitlines()
    assert "ref: available" in lines and "cpu: available" in lines
    gpu = [l for l in lines if l.startswith("gpu: ")]
    assert len(gpu) == 1
    if not by_name["gpu"]["available"]:
        assert gpu[0] == "gpu: unavailable: " + by_name["gpu"]["reason"]
        # Asking for it anyway: an error (usage when not built, model/runtime otherwise) that says why
        # (a build with the gpu target compiles without a device, then refuses to run).
        proc = kiln("run", ADD_RELU, "--target", "gpu", expect=None)
        assert proc.returncode in (2, 3, 4) and "gpu" in proc.stderr and proc.stdout == ""


def test_onnx_ops_lists_the_supported_operators():
    names = kiln("onnx-ops").stdout.splitlines()
    assert len(names) == len(set(names)) > 100
    for op in ("Add", "Relu", "MatMul", "Softmax", "Conv", "Gemm", "Identity", "GlobalAveragePool"):
        assert op in names
    assert kiln_json("onnx-ops")["onnx_operators"] == names


def test_ops_lists_the_ir_operations():
    names = kiln("ops").stdout.splitlines()
    assert len(names) == len(set(names)) > 20
    assert all(n and " " not in n for n in names)
    assert kiln_json("ops")["operations"] == names


def test_general_help_lists_every_command_and_the_exit_codes():
    text = kiln("--help").stdout
    for c in COMMANDS:
        assert re.search(rf"^  {re.escape(c)} +\S", text, re.M), c
    assert "exit codes: 0 success, 1 verify mismatch, 2 usage error, 3 model error" in text
    assert "4 runtime error" in text
    assert kiln("help").stdout == text and kiln("-h").stdout == text
    # No command at all: the help, but as a usage error.
    assert kiln(expect=USAGE).stdout == text


# The options each command must list, with the default its help shows ("" when none is shown).
EXPECTED_OPTIONS = {
    "read": {"--target": "cpu", "--optimize": "off", "--passes": "", "--batch": "dynamic", "--input-dim": "",
             "--dyn-input-dim": "", "--default-dim-value": "dynamic"},
    "params": {"--batch": "dynamic", "--input-dim": "", "--dyn-input-dim": "",
               "--default-dyn-dim": "{min:0,max:4096,optimals:[1]}"},
    "compile": {"--target": "cpu", "-o": "", "--fast-math": "on", "--threads": "cores", "--exhaustive-tune": "off",
                "--fp16": "off", "--int8": "off", "--offload-copy": "on", "--device-id": "0"},
    "run": {"--target": "cpu", "--input": "random", "--input-file": "", "--output": "", "--output-npy": "",
            "--seed": "0"},
    "perf": {"--target": "cpu", "-n": "50", "--iterations": "50", "--warmup": "5", "--per-instruction": "off",
             "--seed": "0"},
    "verify": {"--target": "cpu", "--atol": "1e-4", "--rtol": "1e-3", "--expected": "", "--input": "random"},
    "onnx-ops": {}, "ops": {}, "targets": {}, "version": {},
    "serve": {"--model-repository": "", "--host": "127.0.0.1", "--http-port": "8000", "--grpc-port": "8001",
              "--metrics-port": "8002", "--exit-timeout-secs": "30", "--http-threads": "64", "--max-message-mb": "64",
              "--model-control-mode": "none", "--load-model": "", "--repository-poll-secs": "15",
              "--auth-token-env": "", "--auth-token-file": "", "--tls-cert": "", "--tls-key": ""},
}


@pytest.mark.parametrize("command", COMMANDS)
def test_command_help_lists_options_with_defaults(command):
    text = kiln(command, "--help").stdout
    assert text.startswith(f"usage: kiln {command}")
    assert ("<model.onnx|model.kiln>" in text.splitlines()[0]) == (command in MODEL_COMMANDS)
    # Every option line: "  --name [SYNTAX]   help (default: X)"; the help may wrap onto the next line.
    listed = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^  (-{1,2}[a-z][a-z0-9-]*)\b", line)
        if not m:
            continue
        body = line
        if i + 1 < len(lines) and lines[i + 1].startswith(" " * 34):
            body += lines[i + 1]
        d = re.search(r"\(default: ([^)]*)\)\s*$", body)
        listed[m.group(1)] = d.group(1) if d else ""
    for opt in ("--json", "--quiet", "--help"):
        assert opt in listed, (opt, text)
    assert listed["--json"] == "off"
    for opt, default in EXPECTED_OPTIONS[command].items():
        assert opt in listed, (command, opt, text)
        assert listed[opt] == default, (command, opt, listed[opt])
    # Help wins over everything else on the line, and exits 0.
    assert kiln(command, ADD_RELU, "--no-such-option", "--help", expect=OK).stdout == text


def test_help_and_parser_agree_on_the_options():
    """Every option `run --help` lists is accepted by `run` (the table drives both)."""
    text = kiln("run", "--help").stdout
    flags = re.findall(r"^  (--[a-z-]+)\s{2,}", text, re.M)
    assert "--quiet" in flags and "--json" in flags
    for flag in flags:
        if flag in ("--help",):
            continue
        proc = kiln("run", ADD_RELU, flag, "--quiet", "--target", "ref", expect=None)
        assert "unknown option" not in proc.stderr and "does not apply" not in proc.stderr, (flag, proc.stderr)


def test_compile_for_gpu_without_a_device(tmp_path):
    """kiln compile --target gpu --gpu-arch sm_90 needs no device: NVRTC compiles the kernels
    into the .kiln; running or loading it here says why not."""
    by_name = {t["name"]: t for t in kiln_json("targets")["targets"]}
    if by_name["gpu"]["available"] or by_name["gpu"]["reason"] == "built without CUDA":
        pytest.skip("needs a build with the gpu target on a machine without a device")
    out = tmp_path / "m.kiln"
    proc = kiln("compile", ADD_RELU, "--target", "gpu", "--gpu-arch", "sm_90", "-o", out)
    assert "for gpu" in proc.stdout and out.stat().st_size > 0
    assert b".target sm_90" in out.read_bytes()  # the kernels' PTX travels with the CUBIN
    proc = kiln("run", out, expect=None)
    assert proc.returncode in (3, 4) and by_name["gpu"]["reason"] in proc.stderr, proc.stderr
    proc = kiln("compile", ADD_RELU, "--target", "gpu", "--gpu-arch", "compute_90", "-o", out, expect=None)
    assert proc.returncode in (2, 3) and "compute_90" in proc.stderr, proc.stderr
    # --tf32 (float32 products and convolutions on TF32 tensor cores) is a compile option
    # saved with the program.
    proc = kiln("compile", ADD_RELU, "--target", "gpu", "--tf32", "-o", out)
    assert "for gpu" in proc.stdout and b"tf32" in out.read_bytes()
