"""deploy/kserve: the manifests parse, name the kinds and fields KServe reads, probe the server's
health endpoints, give a drain time above the exit timeout, and pass `kiln serve` only options it
has (checked against `kiln serve --help`); the Dockerfile builds on Debian 12 from the project's own
package list."""
import os
import re

import pytest

from conftest import REPO, kiln

yaml = pytest.importorskip("yaml")
DEPLOY = os.path.join(REPO, "deploy", "kserve")


def load(name):
    with open(os.path.join(DEPLOY, name)) as f:
        return yaml.safe_load(f)


def option_value(args, name, default=None):
    return args[args.index(name) + 1] if name in args else default


def serve_options():
    text = kiln("serve", "--help").stdout
    return set(re.findall(r"(--[a-z][a-z0-9-]*)", text))


def test_serving_runtime():
    rt = load("serving-runtime.yaml")
    assert rt["apiVersion"].startswith("serving.kserve.io/") and rt["kind"] == "ServingRuntime"
    spec = rt["spec"]
    assert {f["name"] for f in spec["supportedModelFormats"]} >= {"onnx", "kiln"}
    assert "v2" in spec["protocolVersions"]
    container = spec["containers"][0]
    args = container["args"]
    assert args[0] == "serve"
    unknown = {a for a in args if a.startswith("--")} - serve_options()
    assert not unknown, f"options kiln serve does not have: {unknown}"
    port = int(option_value(args, "--http-port"))
    assert port in {p["containerPort"] for p in container["ports"]}
    assert container["livenessProbe"]["httpGet"] == {"path": "/v2/health/live", "port": port}
    assert container["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": port}
    assert option_value(args, "--host") == "0.0.0.0"  # in a pod; loopback is the server's default


def test_grpc_serving_runtime():
    rt = load("serving-runtime-grpc.yaml")
    assert rt["kind"] == "ServingRuntime" and rt["spec"]["protocolVersions"] == ["grpc-v2"]
    container = rt["spec"]["containers"][0]
    args = container["args"]
    unknown = {a for a in args if a.startswith("--")} - serve_options()
    assert not unknown, f"options kiln serve does not have: {unknown}"
    port = int(option_value(args, "--grpc-port"))
    assert {"containerPort": port, "name": "h2c", "protocol": "TCP"} in container["ports"]  # KServe's gRPC port name
    assert container["livenessProbe"]["grpc"] == {"port": port}
    assert container["readinessProbe"]["grpc"] == {"port": port}
    assert option_value(args, "--host") == "0.0.0.0"


def test_inference_service_drains_before_it_is_killed():
    rt = load("serving-runtime.yaml")
    exit_timeout = int(option_value(rt["spec"]["containers"][0]["args"], "--exit-timeout-secs", "30"))
    isvc = load("inference-service.yaml")
    assert isvc["kind"] == "InferenceService"
    predictor = isvc["spec"]["predictor"]
    assert predictor["terminationGracePeriodSeconds"] > exit_timeout
    model = predictor["model"]
    assert model["runtime"] == rt["metadata"]["name"] and model["protocolVersion"] == "v2"
    assert model["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert model["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"


def test_dockerfile():
    with open(os.path.join(DEPLOY, "Dockerfile")) as f:
        text = f.read()
    assert re.search(r"^FROM debian:12\b", text, re.M)
    assert "scripts/install_deps.sh --build-only" in text
    assert re.search(r"^USER (?!root)", text, re.M)  # not root
    cmd = re.search(r"^CMD (\[.*?\])", text, re.M | re.S).group(1)
    args = yaml.safe_load(cmd.replace("\\\n", " "))
    unknown = {a for a in args if a.startswith("--")} - serve_options()
    assert not unknown, f"options kiln serve does not have: {unknown}"
