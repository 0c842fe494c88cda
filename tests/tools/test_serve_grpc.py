"""`kiln serve` over gRPC: inference.GRPCInferenceService and grpc.health.v1, end to end on loopback.

The client is Debian's python3-grpcio with stubs generated at test time from Kiln's
src/serve/grpc_service.proto (protoc --python_out and grpc_python_plugin, into a temporary
folder); the health service is called through the generic channel API with hand-serialized
messages, so nothing of Kiln's own code is on the client side. Outputs are checked against the
stored ONNX Runtime outputs of mobilenet_v2 and against NumPy for add_relu.
"""
import importlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from conftest import ADD_RELU, KILN, REPO
from test_serve import DRAIN_BATCH, DRAIN_PENDING, DRAIN_REQUESTS, MOBILENET, Server, mobilenet_case, request, wait_until_pending

grpc = pytest.importorskip("grpc")

PROTO = os.path.join(REPO, "src", "serve", "grpc_service.proto")
NP_OF = {"FP32": np.float32, "FP64": np.float64, "INT64": np.int64, "INT32": np.int32, "BOOL": np.bool_}


def grpc_built():
    """Whether the tool has the gRPC front end (CMake leaves it out where grpc++ is missing)."""
    if not os.path.exists(KILN):
        return False
    with open(KILN, "rb") as f:
        return b"inference.GRPCInferenceService" in f.read()


@pytest.fixture(scope="module")
def pb(tmp_path_factory):
    """The generated modules: (grpc_service_pb2, grpc_service_pb2_grpc)."""
    plugin = shutil.which("grpc_python_plugin")
    if not shutil.which("protoc") or not plugin:
        pytest.skip("protoc / grpc_python_plugin (protobuf-compiler-grpc) not installed")
    if not grpc_built():
        pytest.skip("kiln was built without gRPC")
    out = tmp_path_factory.mktemp("grpc_stubs")
    subprocess.run(["protoc", f"--proto_path={os.path.dirname(PROTO)}", f"--python_out={out}", f"--grpc_out={out}",
                    f"--plugin=protoc-gen-grpc={plugin}", PROTO], check=True)
    sys.path.insert(0, str(out))
    try:
        return importlib.import_module("grpc_service_pb2"), importlib.import_module("grpc_service_pb2_grpc")
    finally:
        sys.path.remove(str(out))


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve_grpc") / "models"
    (root / "small" / "1").mkdir(parents=True)
    os.symlink(ADD_RELU, root / "small" / "1" / "model.onnx")
    (root / "mobilenet" / "1").mkdir(parents=True)
    os.symlink(os.path.join(MOBILENET, "model.onnx"), root / "mobilenet" / "1" / "model.onnx")
    return str(root)


@pytest.fixture(scope="module")
def server(repo, pb):
    s = Server(repo)
    yield s
    s.stop()


class Client:
    def __init__(self, pb, port, metadata=None):
        self.pb, self.pb_grpc = pb
        limit = 64 << 20
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[
            ("grpc.max_send_message_length", limit), ("grpc.max_receive_message_length", limit)])
        self.stub = self.pb_grpc.GRPCInferenceServiceStub(self.channel)
        self.metadata = metadata

    def call(self, rpc, **fields):
        request = getattr(self.pb, rpc + "Request")(**fields)
        return getattr(self.stub, rpc)(request, timeout=120, metadata=self.metadata)

    def infer(self, request):
        return self.stub.ModelInfer(request, timeout=120, metadata=self.metadata)

    def health(self, service=""):
        """grpc.health.v1.Health/Check: the status number (1 SERVING, 2 NOT_SERVING)."""
        # HealthCheckRequest {string service = 1}; HealthCheckResponse {enum status = 1}.
        body = service.encode()
        req = (b"\x0a" + bytes([len(body)]) + body) if body else b""
        check = self.channel.unary_unary("/grpc.health.v1.Health/Check")
        reply = check(req, timeout=10)
        return reply[1] if len(reply) >= 2 and reply[0] == 0x08 else 0

    def close(self):
        self.channel.close()


@pytest.fixture()
def client(pb, server):
    c = Client(pb, server.grpc_port)
    yield c
    c.close()


def raw_request(pb, model, arrays, outputs=None):
    r = pb[0].ModelInferRequest(model_name=model)
    for name, a in arrays.items():
        r.inputs.add(name=name, datatype="FP32" if a.dtype == np.float32 else "INT64", shape=list(a.shape))
        r.raw_input_contents.append(a.tobytes())
    for o in outputs or []:
        r.outputs.add(name=o)
    return r


def outputs_of(response):
    out = {}
    for i, o in enumerate(response.outputs):
        dt = NP_OF[o.datatype]
        if response.raw_output_contents:
            a = np.frombuffer(response.raw_output_contents[i], dtype=dt)
        else:
            field = {"FP32": "fp32_contents", "FP64": "fp64_contents", "INT64": "int64_contents",
                     "INT32": "int_contents", "BOOL": "bool_contents"}[o.datatype]
            a = np.array(getattr(o.contents, field), dtype=dt)
        out[o.name] = a.reshape(list(o.shape))
    return out


def small_inputs():
    rng = np.random.default_rng(3)
    return {"x": rng.standard_normal((2, 3)).astype(np.float32), "y": rng.standard_normal((2, 3)).astype(np.float32)}


def test_health_metadata_and_readiness(client, server):
    assert client.call("ServerLive").live
    assert client.call("ServerReady").ready
    assert client.call("ModelReady", name="mobilenet").ready
    assert client.call("ModelReady", name="mobilenet", version="1").ready
    assert not client.call("ModelReady", name="mobilenet", version="2").ready
    meta = client.call("ServerMetadata")
    assert meta.name == "kiln" and "model_repository" in meta.extensions
    m = client.call("ModelMetadata", name="mobilenet")
    assert m.name == "mobilenet" and list(m.versions) == ["1"] and m.platform == "kiln_cpu"
    assert [(t.name, t.datatype, list(t.shape)) for t in m.inputs] == [("input", "FP32", [-1, 3, 224, 224])]
    assert [(t.name, t.datatype, list(t.shape)) for t in m.outputs] == [("logits", "FP32", [-1, 1000])]
    assert client.health() == 1  # SERVING
    assert client.health("inference.GRPCInferenceService") == 1
    assert "gRPC on 127.0.0.1:" in server.output()


def test_server_reflection_lists_and_describes_the_services(client):
    """grpc.reflection.v1alpha (what grpcurl and grpc_cli use) without the reflection .proto:
    ServerReflectionRequest {list_services = 7; file_containing_symbol = 4} written by hand."""
    def message(field, text):
        body = text.encode()
        return bytes([field << 3 | 2, len(body)]) + body

    info = client.channel.stream_stream("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")
    replies = list(info(iter([message(7, "*"), message(4, "inference.GRPCInferenceService")]), timeout=10))
    assert len(replies) == 2
    listed, described = replies
    for name in (b"inference.GRPCInferenceService", b"grpc.health.v1.Health", b"grpc.reflection.v1alpha.ServerReflection"):
        assert name in listed
    # The FileDescriptorProto of grpc_service.proto: its RPCs and messages by name.
    for name in (b"ModelInfer", b"ModelInferRequest", b"RepositoryModelLoad", b"raw_input_contents"):
        assert name in described


def test_raw_infer_matches_onnxruntime(client, pb):
    for k in (0, 1):
        x, expected = mobilenet_case(k)
        r = raw_request(pb, "mobilenet", {"input": x})
        r.id = f"g{k}"
        resp = client.infer(r)
        assert resp.model_name == "mobilenet" and resp.model_version == "1" and resp.id == f"g{k}"
        np.testing.assert_allclose(outputs_of(resp)["logits"], expected, rtol=1e-3, atol=1e-4)


def test_typed_infer_matches_onnxruntime(client, pb):
    x, expected = mobilenet_case(0)
    r = pb[0].ModelInferRequest(model_name="mobilenet", model_version="1")
    t = r.inputs.add(name="input", datatype="FP32", shape=list(x.shape))
    t.contents.fp32_contents.extend(x.flatten().tolist())
    resp = client.infer(r)
    assert not resp.raw_output_contents  # answered in kind
    np.testing.assert_allclose(outputs_of(resp)["logits"], expected, rtol=1e-3, atol=1e-4)


def test_small_model_against_numpy(client, pb):
    a = small_inputs()
    out = outputs_of(client.infer(raw_request(pb, "small", a)))
    np.testing.assert_allclose(out["output"] if "output" in out else next(iter(out.values())),
                               np.maximum(a["x"] + a["y"], 0), rtol=1e-6)


def test_a_request_above_4_mib_works(client, pb):
    # 32 images: 19.3 MB of raw input, above gRPC's default 4 MiB; each row must match the
    # stored output of the one image.
    x, expected = mobilenet_case(0)
    batch = np.repeat(x, 32, axis=0)
    r = raw_request(pb, "mobilenet", {"input": batch})
    assert r.ByteSize() > 19_000_000
    out = outputs_of(client.infer(r))["logits"]
    assert out.shape == (32, 1000)
    np.testing.assert_allclose(out, np.repeat(expected, 32, axis=0), rtol=1e-3, atol=1e-4)


def test_malformed_requests_get_a_status_and_the_server_stays_live(client, pb, server):
    x, _ = mobilenet_case(0)
    good = lambda: raw_request(pb, "mobilenet", {"input": x})
    cases = []

    def case(code, mangle):
        r = good()
        mangle(r)
        cases.append((code, r))

    INVALID, NOT_FOUND = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND
    case(NOT_FOUND, lambda r: setattr(r, "model_name", "nope"))
    case(INVALID, lambda r: setattr(r, "model_name", ""))
    case(NOT_FOUND, lambda r: setattr(r, "model_version", "7"))
    case(INVALID, lambda r: setattr(r, "model_version", "latest"))
    case(INVALID, lambda r: setattr(r.inputs[0], "name", "nope"))
    case(INVALID, lambda r: setattr(r.inputs[0], "datatype", "FP64"))
    case(INVALID, lambda r: setattr(r.inputs[0], "datatype", "STRING"))
    case(INVALID, lambda r: r.inputs[0].shape.append(1))
    case(INVALID, lambda r: r.inputs[0].shape.__setitem__(1, 4))
    case(INVALID, lambda r: r.inputs[0].shape.__setitem__(0, -1))
    case(INVALID, lambda r: r.inputs[0].shape.__setitem__(0, 1 << 40))
    case(INVALID, lambda r: [r.inputs[0].shape.__setitem__(i, (1 << 62) - 1) for i in range(4)])
    case(INVALID, lambda r: r.raw_input_contents.__setitem__(0, r.raw_input_contents[0][:-4]))
    case(INVALID, lambda r: r.raw_input_contents.append(b"1234"))
    case(INVALID, lambda r: r.inputs[0].contents.fp32_contents.append(1.0))
    case(INVALID, lambda r: r.inputs.add(name="input", datatype="FP32", shape=[1]))
    case(INVALID, lambda r: r.outputs.add(name="nope"))
    case(INVALID, lambda r: r.outputs.add(name=""))
    case(INVALID, lambda r: [r.ClearField("raw_input_contents"), r.inputs[0].contents.int_contents.extend([1, 2])])
    case(INVALID, lambda r: [r.ClearField("raw_input_contents"), setattr(r.inputs[0], "datatype", "FP16")])
    case(INVALID, lambda r: r.ClearField("inputs"))
    for code, r in cases:
        with pytest.raises(grpc.RpcError) as e:
            client.infer(r)
        assert e.value.code() == code, (e.value.code(), e.value.details(), r.inputs, r.model_name)
        assert e.value.details(), "a refusal names its reason"
        assert client.call("ServerLive").live
    # Other RPCs with bad arguments.
    for rpc, fields, code in [("ModelMetadata", {"name": "nope"}, NOT_FOUND),
                              ("ModelMetadata", {"name": "mobilenet", "version": "x"}, INVALID),
                              ("ModelStatistics", {"name": "nope"}, NOT_FOUND),
                              ("RepositoryModelLoad", {"model_name": "nope"}, NOT_FOUND),
                              ("RepositoryModelLoad", {"model_name": "../small"}, INVALID)]:
        with pytest.raises(grpc.RpcError) as e:
            client.call(rpc, **fields)
        assert e.value.code() == code, (rpc, e.value.code(), e.value.details())
    # Bytes that are no ModelInferRequest at all, and a message above the limit.
    infer = client.channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
    with pytest.raises(grpc.RpcError) as e:
        infer(b"\xff\xff\xff\xff", timeout=10)
    assert e.value.code() != grpc.StatusCode.OK
    # A model_name that is not UTF-8: refused, and protobuf's complaint kept out of the log.
    with pytest.raises(grpc.RpcError) as e:
        infer(b"\x0a\x02\xff\xfe", timeout=10)
    assert e.value.code() != grpc.StatusCode.OK
    assert "libprotobuf" not in server.output()
    # A client allowed to send more: the server's limit (64 MiB) refuses it.
    big = pb[0].ModelInferRequest(model_name="mobilenet", raw_input_contents=[b"\0" * (65 << 20)])
    channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}", options=[("grpc.max_send_message_length", 128 << 20)])
    with pytest.raises(grpc.RpcError) as e:
        pb[1].GRPCInferenceServiceStub(channel).ModelInfer(big, timeout=60)
    channel.close()
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value.details()
    assert client.call("ServerLive").live and server.proc.poll() is None


def test_repository_and_statistics(client):
    index = client.call("RepositoryIndex")
    assert {(m.name, m.version, m.state) for m in index.models} >= {("mobilenet", "1", "READY"), ("small", "1", "READY")}
    before = client.call("ModelStatistics", name="small").model_stats[0]
    assert before.name == "small" and before.version == "1" and before.inference_stats.success.count >= 1
    client.call("RepositoryModelUnload", model_name="small")
    assert not client.call("ModelReady", name="small").ready
    with pytest.raises(grpc.RpcError) as e:
        client.call("ModelMetadata", name="small")
    assert e.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.NOT_FOUND)
    client.call("RepositoryModelLoad", model_name="small")
    assert client.call("ModelReady", name="small").ready
    assert len(client.call("ModelStatistics").model_stats) >= 2


def test_a_busy_grpc_port_is_an_error(server, repo):
    proc = subprocess.run([KILN, "serve", "--model-repository", repo, "--http-port", "0", "--metrics-port", "0",
                           "--grpc-port", str(server.grpc_port)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    assert proc.returncode == 2 and "cannot listen" in proc.stderr, proc.stderr


def test_sigterm_drains_grpc(repo, pb):
    s = Server(repo, "--exit-timeout-secs", "20")
    c = Client(pb, s.grpc_port)
    try:
        x = np.random.default_rng(1).uniform(-1, 1, (DRAIN_BATCH, 3, 224, 224)).astype(np.float32)
        slow = raw_request(pb, "mobilenet", {"input": x})  # built once: the threads only send
        results = []

        def slow_request():
            own = Client(pb, s.grpc_port)  # one connection each, so the bodies travel side by side
            try:
                results.append(outputs_of(own.infer(slow))["logits"].shape)
            except grpc.RpcError as e:
                results.append((e.code(), e.details()))
            finally:
                own.close()

        threads = [threading.Thread(target=slow_request) for _ in range(DRAIN_REQUESTS)]
        for t in threads:
            t.start()
        wait_until_pending(s, DRAIN_PENDING)
        s.proc.send_signal(signal.SIGTERM)
        while "draining" not in s.output():
            time.sleep(0.002)
        # While they run: not ready, health NOT_SERVING, new inferences UNAVAILABLE.
        ready = c.call("ServerReady").ready
        health = c.health()
        with pytest.raises(grpc.RpcError) as e:
            c.infer(raw_request(pb, "small", small_inputs()))
        for t in threads:
            t.join()
        assert s.proc.wait(timeout=30) == 0, s.output()
        # The requests in before the signal were all answered; any later one was refused.
        refused = (grpc.StatusCode.UNAVAILABLE, "the server is shutting down")
        assert all(r in ((DRAIN_BATCH, 1000), refused) for r in results), results
        assert len(results) == DRAIN_REQUESTS and results.count((DRAIN_BATCH, 1000)) >= DRAIN_PENDING, results
        assert not ready and health == 2
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE and "shutting down" in e.value.details()
    finally:
        c.close()
        s.kill()
