"""`kiln serve` access control (--auth-token-env / --auth-token-file) on REST and gRPC, and both
over TLS (--tls-cert / --tls-key), on loopback with the small add_relu model."""
import json
import os
import shutil
import ssl
import subprocess

import pytest

from conftest import ADD_RELU, KILN
from test_serve import Server, infer_json, request, small_inputs
from test_serve_grpc import Client, pb  # noqa: F401 (the fixture)

TOKEN = "kiln-test-7c1f0e9a2b"


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve_auth") / "models"
    (root / "small" / "1").mkdir(parents=True)
    shutil.copy(ADD_RELU, root / "small" / "1" / "model.onnx")
    return root


def test_rest_needs_the_token_except_for_health(repo):
    s = Server(str(repo), "--auth-token-env", "KILN_TEST_TOKEN", env={"KILN_TEST_TOKEN": TOKEN})
    try:
        for path in ("/v2/health/live", "/v2/health/ready", "/v2/models/small/ready"):
            assert s.get(path)[0] == 200, path
        status, headers, body = s.get("/v2")
        assert status == 401 and "token" in json.loads(body)["error"] and headers.get("WWW-Authenticate") == "Bearer"
        assert s.get("/v2/models/small")[0] == 401
        assert request(s.port, "GET", "/v2", headers={"Authorization": "Bearer wrong"})[0] == 401
        assert request(s.port, "GET", "/v2", headers={"Authorization": "Bearer " + TOKEN[:-1]})[0] == 401
        assert request(s.port, "GET", "/v2", headers={"Authorization": "Bearer " + TOKEN})[0] == 200
        assert request(s.port, "GET", "/v2", headers={"X-API-Key": TOKEN})[0] == 200
        assert s.post("/v2/models/small/infer", infer_json(small_inputs()))[0] == 401
        assert s.post("/v2/repository/models/small/unload")[0] == 401
        assert s.get("/v2/models/small/ready")[0] == 200  # still loaded
        ok = s.post("/v2/models/small/infer", infer_json(small_inputs()), {"Authorization": "bearer " + TOKEN})
        assert ok[0] == 200, ok[2]
        assert TOKEN not in s.output()
    finally:
        s.stop()


def test_grpc_needs_the_token_except_for_health(repo, pb, tmp_path):  # noqa: F811
    import grpc
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    s = Server(str(repo), "--auth-token-file", str(token_file))
    try:
        anonymous = Client(pb, s.grpc_port)
        assert anonymous.call("ServerLive").live and anonymous.call("ServerReady").ready
        assert anonymous.health() == 1
        for rpc in ("ServerMetadata", "RepositoryIndex"):
            with pytest.raises(grpc.RpcError) as e:
                anonymous.call(rpc)
            assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        wrong = Client(pb, s.grpc_port, metadata=[("authorization", "Bearer nope")])
        with pytest.raises(grpc.RpcError) as e:
            wrong.call("ServerMetadata")
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        for md in ([("authorization", "Bearer " + TOKEN)], [("x-api-key", TOKEN)]):
            c = Client(pb, s.grpc_port, metadata=md)
            assert c.call("ServerMetadata").name == "kiln"
            c.close()
        anonymous.close()
        wrong.close()
        assert TOKEN not in s.output()
    finally:
        s.stop()


def test_token_sources_are_checked_at_start(repo, tmp_path):
    empty = tmp_path / "empty"
    empty.write_text("\n")
    env = {k: v for k, v in os.environ.items() if k != "KILN_NO_SUCH_VAR"}
    for extra, message in [(["--auth-token-env", "KILN_NO_SUCH_VAR"], "is not set"),
                           (["--auth-token-file", str(tmp_path / "missing")], "cannot read"),
                           (["--auth-token-file", str(empty)], "holds no token"),
                           (["--auth-token-env", "X", "--auth-token-file", str(empty)], "not both"),
                           (["--tls-cert", str(empty)], "both --tls-cert and --tls-key")]:
        proc = subprocess.run([KILN, "serve", "--model-repository", str(repo), "--http-port", "0", "--grpc-port", "0",
                               "--metrics-port", "0", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=60, env=env)
        assert proc.returncode == 2 and message in proc.stderr, (extra, proc.stderr)


def test_rest_and_grpc_over_tls(repo, pb, tmp_path):  # noqa: F811
    import grpc
    if not shutil.which("openssl"):
        pytest.skip("no openssl to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    context = ssl.create_default_context(cafile=str(cert))
    s = Server(str(repo), "--tls-cert", str(cert), "--tls-key", str(key), context=context)
    try:
        assert s.get("/v2")[0] == 200  # HTTPS
        with pytest.raises(Exception):
            request(s.port, "GET", "/v2", timeout=5)  # plain HTTP is not answered
        creds = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        channel = grpc.secure_channel(f"127.0.0.1:{s.grpc_port}", creds)
        stub = pb[1].GRPCInferenceServiceStub(channel)
        assert stub.ServerLive(pb[0].ServerLiveRequest(), timeout=30).live
        channel.close()
        plain = Client(pb, s.grpc_port)
        with pytest.raises(grpc.RpcError):
            plain.stub.ServerLive(pb[0].ServerLiveRequest(), timeout=5)
        plain.close()
        assert "gRPC (TLS) on" in s.output() and "HTTPS on" in s.output()
    finally:
        s.stop()
