"""A decoder with a KV cache driven from Python as bench/decode.py and README's example do: the
sequence's decode step (1) as an optimal, compiled ahead with the past length free, and greedy
tokens compared with PyTorch's (tests/data/dynamic_models/gpt_kv/greedy_64.json)."""
import json
import os

import numpy as np

import kiln

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPT_KV = os.path.join(REPO, "tests", "data", "dynamic_models", "gpt_kv")
CACHE = ["past_key_0", "past_value_0", "past_key_1", "past_value_1"]


def greedy(model, prompt, steps):
    outs = list(model.get_output_names())
    cache = [np.zeros((1, 4, 0, 16), np.float32) for _ in CACHE]
    ids, tokens = list(prompt), []
    for _ in range(steps):
        feeds = {"input_ids": np.asarray([ids], np.int64)}
        feeds.update(zip(CACHE, cache))
        out = model.run(feeds)
        logits = np.asarray(out[0])
        tokens.append(int(np.argmax(logits[0, -1])))
        cache = [np.asarray(out[outs.index(name.replace("past", "present"))]) for name in CACHE]
        ids = [tokens[-1]]
    return tokens


def test_decode_step_compiled_ahead_gives_pytorchs_tokens():
    with open(os.path.join(GPT_KV, "greedy_64.json")) as f:
        ref = json.load(f)
    seq = {"min": 1, "max": 128, "optimals": [1]}
    past = {"min": 0, "max": 127}
    dyn = {"input_ids": [1, seq]}
    dyn.update({name: [1, 4, past, 16] for name in CACHE})
    model = kiln.parse_onnx(os.path.join(GPT_KV, "model.onnx"), map_dyn_input_dims=dyn)
    model.compile(kiln.get_target("cpu"))
    assert greedy(model, ref["prompt"], len(ref["tokens"])) == ref["tokens"]
