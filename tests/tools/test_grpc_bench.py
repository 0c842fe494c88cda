"""kiln_grpc_bench (bench/grpc_client), the C++ gRPC load client, against `kiln serve` on add_relu.

It is built with the gRPC front end beside the tool (build/bin, or $KILN_BUILD_DIR/bin); without it
these tests skip. The server's statistics count the requests independently of the client.
"""
import json
import os
import subprocess

import numpy as np
import pytest

import onnx_pb
from conftest import ADD_RELU, BUILD
from test_serve import Server

BENCH = os.path.join(BUILD, "bin", "kiln_grpc_bench")
pytestmark = pytest.mark.skipif(not os.path.exists(BENCH), reason=f"{BENCH} is not built (no gRPC front end)")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """--input arguments for add_relu's x and y (float32[2, 3])."""
    d = tmp_path_factory.mktemp("grpc_bench_inputs")
    args = []
    for name in ("x", "y"):
        path = str(d / f"{name}.pb")
        onnx_pb.write_tensor(path, np.arange(6, dtype=np.float32).reshape(2, 3) - 2, name=name)
        args += ["--input", f"{name}={path}"]
    return args


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("grpc_bench") / "models"
    (root / "small" / "1").mkdir(parents=True)
    os.symlink(ADD_RELU, root / "small" / "1" / "model.onnx")
    s = Server(str(root))
    yield s
    s.stop()


def bench(*args):
    proc = subprocess.run([BENCH, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=60)
    assert proc.returncode >= 0, f"killed by signal {-proc.returncode}\n{proc.stderr}"
    return proc


def successes(server):
    stats = json.loads(server.get("/v2/models/small/stats")[2])["model_stats"][0]
    return stats["inference_stats"]["success"]["count"]


def test_every_request_answered(server, inputs):
    before = successes(server)
    proc = bench("--port", server.grpc_port, "--model", "small", *inputs, "-n", 5, "--warmup", 1, "--clients", 2,
                 "--json")
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)
    assert (r["client"], r["model"], r["clients"], r["count"], r["failures"]) == ("kiln_grpc_bench", "small", 2, 10, 0)
    assert 0 < r["min_ms"] <= r["p50_ms"] <= r["p90_ms"] <= r["p99_ms"] <= r["max_ms"]
    assert r["requests_per_s"] > 0
    assert successes(server) - before == 2 * (5 + 1)  # warmup requests reach the server too


def test_text_report(server, inputs):
    proc = bench("--port", server.grpc_port, "--model", "small", "--version", 1, *inputs, "-n", 3, "--warmup", 0)
    assert proc.returncode == 0, proc.stderr
    assert "small over gRPC (kiln_grpc_bench): 1 client(s), n=3, failures 0, p50 " in proc.stdout
    assert "requests/s" in proc.stdout and proc.stderr == ""


def test_a_wrong_model_fails_with_the_servers_error(server, inputs):
    proc = bench("--port", server.grpc_port, "--model", "nope", *inputs, "-n", 2, "--warmup", 1)
    assert proc.returncode == 1
    assert "n=0, failures 3" in proc.stdout
    assert "3 of 3 requests failed; the first: NOT_FOUND: unknown model 'nope'" in proc.stderr


def test_a_wrong_input_name_fails(server, inputs):
    proc = bench("--port", server.grpc_port, "--model", "small", "--input", inputs[1].replace("x=", "q="), inputs[2],
                 inputs[3], "-n", 1, "--warmup", 0)
    assert proc.returncode == 1
    assert "INVALID_ARGUMENT" in proc.stderr and "'q'" in proc.stderr


def test_usage_and_input_errors_exit_2(tmp_path):
    missing = tmp_path / "missing.pb"
    proc = bench("--model", "small", "--input", f"x={missing}")
    assert proc.returncode == 2 and "--input x=" in proc.stderr and "missing.pb" in proc.stderr
    for args, message in [(["--input", f"x={missing}"], "--model NAME is required"),
                          (["--model", "small"], "--input NAME=FILE.pb is required"),
                          (["--model", "small", "--input", "x"], "--input wants NAME=FILE.pb"),
                          (["--model", "small", "-n", "0"], "-n wants an integer >= 1"),
                          (["--bogus"], "unknown option '--bogus'"), (["--model"], "--model needs a value")]:
        proc = bench(*args)
        assert proc.returncode == 2 and message in proc.stderr, (args, proc.stderr)
    proc = bench("--help")
    assert proc.returncode == 0 and "--clients C" in proc.stdout
