"""`kiln serve --model-control-mode none|explicit|poll` on loopback, with the small add_relu model."""
import json
import shutil
import subprocess
import time

from conftest import ADD_RELU, KILN
from test_serve import Server, infer_json, small_inputs


def make_repo(root, *names):
    root.mkdir(parents=True, exist_ok=True)
    for n in names:
        (root / n / "1").mkdir(parents=True)
        shutil.copy(ADD_RELU, root / n / "1" / "model.onnx")
    return root


def wait_for(predicate, seconds=20):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_explicit_mode_loads_only_what_it_is_told(tmp_path):
    root = make_repo(tmp_path / "models", "a", "b")
    s = Server(str(root), "--model-control-mode", "explicit", "--load-model", "a")
    try:
        assert s.get("/v2/models/a/ready")[0] == 200
        assert s.get("/v2/models/b/ready")[0] == 400
        index = {m["name"]: m for m in json.loads(s.post("/v2/repository/index", {})[2])}
        assert index["a"]["state"] == "READY" and index["b"]["state"] == "UNAVAILABLE"
        assert s.post("/v2/models/b/infer", infer_json(small_inputs()))[0] == 404
        assert s.post("/v2/repository/models/b/load")[0] == 200
        assert s.post("/v2/models/b/infer", infer_json(small_inputs()))[0] == 200
        assert s.post("/v2/repository/models/a/unload")[0] == 200
        assert s.get("/v2/models/a/ready")[0] == 400
        assert s.get("/v2/health/ready")[0] == 200  # unloaded on purpose
    finally:
        s.stop()


def test_explicit_mode_star_loads_everything(tmp_path):
    root = make_repo(tmp_path / "models", "a", "b")
    s = Server(str(root), "--model-control-mode", "explicit", "--load-model", "*")
    try:
        assert s.get("/v2/models/a/ready")[0] == 200 and s.get("/v2/models/b/ready")[0] == 200
    finally:
        s.stop()


def test_poll_mode_follows_the_folder(tmp_path):
    root = make_repo(tmp_path / "models", "a")
    s = Server(str(root), "--model-control-mode", "poll", "--repository-poll-secs", "1")
    try:
        assert s.get("/v2/models/a/ready")[0] == 200
        status, _, body = s.post("/v2/repository/models/a/unload")
        assert status == 400 and "poll" in json.loads(body)["error"]
        # A new model is loaded.
        make_repo(root, "c")
        assert wait_for(lambda: s.get("/v2/models/c/ready")[0] == 200), s.output()
        assert s.post("/v2/models/c/infer", infer_json(small_inputs()))[0] == 200
        # A new version replaces the old one (the default policy serves the latest).
        (root / "a" / "2").mkdir()
        shutil.copy(ADD_RELU, root / "a" / "2" / "model.onnx")
        assert wait_for(lambda: s.get("/v2/models/a/versions/2/ready")[0] == 200), s.output()
        assert s.get("/v2/models/a/versions/1/ready")[0] == 400
        assert s.post("/v2/models/a/infer", infer_json(small_inputs()))[0] == 200
        # A removed model is unloaded.
        shutil.rmtree(root / "c")
        assert wait_for(lambda: s.get("/v2/models/c/ready")[0] == 400), s.output()
        # A broken new version keeps the old one serving.
        (root / "a" / "3").mkdir()
        (root / "a" / "3" / "model.onnx").write_bytes(b"not a model")
        assert wait_for(lambda: "version 3" in s.output()), s.output()
        time.sleep(1.5)
        assert s.get("/v2/models/a/versions/2/ready")[0] == 200
        assert s.post("/v2/models/a/infer", infer_json(small_inputs()))[0] == 200
        assert s.live()
    finally:
        s.stop()


def test_load_model_needs_explicit_mode(tmp_path):
    root = make_repo(tmp_path / "models", "a")
    for extra, message in [(["--load-model", "a"], "explicit"), (["--model-control-mode", "sometimes"], "none, explicit")]:
        proc = subprocess.run([KILN, "serve", "--model-repository", str(root), *extra], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=60)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
