"""Running one benchmark process and reading its result, shared by bench/compare.py,
bench/decode.py and bench/shapes.py (standard library only).

Each engine runs in a process of its own that prints its result as one JSON line on stdout
(the last such line counts); the side-by-side drivers read it with run_json. ONNX Runtime
runs through node with the onnxruntime-node module that bench/install_ort.sh installs into
bench/.cache (ensure_ort points ORT_NODE_MODULE at it).
"""
import json
import os
import subprocess

BENCH = os.path.dirname(os.path.abspath(__file__))


def run_json(cmd, env, timeout, preexec_fn=None):
    """Runs cmd; returns (its last JSON line parsed, None) or (None, a short note on the failure)."""
    try:
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=timeout, preexec_fn=preexec_fn)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:.0f} s"
    except OSError as e:
        return None, str(e)
    result = None
    for line in reversed(proc.stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                result = json.loads(line)
                break
            except ValueError:
                continue
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return None, f"exit {proc.returncode}: {tail[:300]}"
    if result is None:
        return None, "no JSON line on stdout"
    return result, None


def ensure_ort(env):
    """env with ORT_NODE_MODULE set, installing onnxruntime-node first when it is not."""
    if "ORT_NODE_MODULE" in env:
        return env
    proc = subprocess.run(["bash", os.path.join(BENCH, "install_ort.sh")], stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise SystemExit("bench/install_ort.sh failed")
    env = dict(env)
    env["ORT_NODE_MODULE"] = proc.stdout.strip().splitlines()[-1]
    return env
