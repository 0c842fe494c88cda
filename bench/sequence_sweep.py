#!/usr/bin/python3
"""Exports PyTorch sequence models with dynamic batch and length, the way users do, and checks
Kiln against PyTorch's own outputs at two sizes each with `kiln verify --expected` (atol 1e-4,
rtol 1e-3). The companion of torchvision_sweep.py for text and audio shapes; run by hand (needs
Debian's python3-torch; about a minute), `make test` does not run it.

    /usr/bin/python3 bench/sequence_sweep.py OUT_DIR            # every model below
    /usr/bin/python3 bench/sequence_sweep.py OUT_DIR gru_bi

Models (random weights from a fixed seed):
  tx_encoder   nn.TransformerEncoder, 4 layers, d 256, 4 heads, GELU, over token ids [batch, seq]
  transformer  nn.Transformer, 2+2 layers, d 128, causal target mask; src [batch, s], tgt [batch, t]
  gru_bi       bidirectional 2-layer nn.GRU, 40 -> 128 features, over [batch, time, 40]
  lstm_bi      bidirectional 2-layer nn.LSTM, 80 -> 192 features, over [batch, time, 80]
  lstm_state   streaming 2-layer nn.LSTM (hidden 160) given its states [2, batch, 160] and returning
               them: one output, Y and the final h and c flattened side by side
MultiheadAttention reshapes [seq, batch, E] to [seq * batch, E] with sizes from Shape: the
Transformers need dims that are products of named dims. Each model also gets a batch-1 input in
OUT_DIR/bench/NAME/test_data_set_0 for `bench/compare.py --models-dir OUT_DIR/bench`.
Prints one line per check and exits 1 if any failed.
"""
import os
import subprocess
import sys

import torch
from onnx import numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KILN = os.environ.get("KILN", os.path.join(ROOT, "build", "bin", "kiln"))


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(1000, 256)
        layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.1, batch_first=True, activation="gelu")
        self.enc = torch.nn.TransformerEncoder(layer, 4)
        self.head = torch.nn.Linear(256, 10)

    def forward(self, ids):
        return self.head(self.enc(self.emb(ids)).mean(1))


class Seq2Seq(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.t = torch.nn.Transformer(128, 4, 2, 2, 512, batch_first=True)

    def forward(self, src, tgt):
        n = tgt.shape[1]
        mask = torch.triu(torch.full((n, n), float("-inf")), 1)
        return self.t(src, tgt, tgt_mask=mask)


class BiGRU(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = torch.nn.GRU(40, 128, 2, batch_first=True, bidirectional=True)
        self.fc = torch.nn.Linear(256, 30)

    def forward(self, x):
        return self.fc(self.gru(x)[0])


class BiLSTM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(80, 192, 2, batch_first=True, bidirectional=True)
        self.fc = torch.nn.Linear(384, 29)

    def forward(self, x):
        return self.fc(self.lstm(x)[0])


class StreamingLSTM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(40, 160, 2, batch_first=True)

    def forward(self, x, h0, c0):
        y, (h, c) = self.lstm(x, (h0, c0))
        return torch.cat([y.flatten(1), h.transpose(0, 1).flatten(1), c.transpose(0, 1).flatten(1)], 1)


def ids(b, t):
    return torch.randint(0, 1000, (b, t))


def feats(b, t, c):
    return torch.randn(b, t, c)


# name: (constructor, input names, dynamic axes, [inputs at the exported size, at a second size, at batch 1 for compare.py])
MODELS = {
    "tx_encoder": (Encoder, ["ids"], {"ids": {0: "batch", 1: "seq"}, "output": {0: "batch"}},
                   lambda: [(ids(2, 17),), (ids(3, 50),), (ids(1, 128),)]),
    "transformer": (Seq2Seq, ["src", "tgt"],
                    {"src": {0: "batch", 1: "s"}, "tgt": {0: "batch", 1: "t"}, "output": {0: "batch", 1: "t"}},
                    lambda: [(feats(2, 19, 128), feats(2, 7, 128)), (feats(1, 33, 128), feats(1, 12, 128)),
                             (feats(1, 64, 128), feats(1, 32, 128))]),
    "gru_bi": (BiGRU, ["x"], {"x": {0: "batch", 1: "time"}, "output": {0: "batch", 1: "time"}},
               lambda: [(feats(2, 23, 40),), (feats(1, 71, 40),), (feats(1, 200, 40),)]),
    "lstm_bi": (BiLSTM, ["x"], {"x": {0: "batch", 1: "time"}, "output": {0: "batch", 1: "time"}},
                lambda: [(feats(2, 31, 80),), (feats(3, 97, 80),), (feats(1, 300, 80),)]),
    "lstm_state": (StreamingLSTM, ["x", "h0", "c0"],
                   {"x": {0: "batch", 1: "time"}, "h0": {1: "batch"}, "c0": {1: "batch"},
                    "output": {0: "batch", 1: "width"}},
                   lambda: [(feats(2, 16, 40), torch.randn(2, 2, 160), torch.randn(2, 2, 160)),
                            (feats(3, 5, 40), torch.randn(2, 3, 160), torch.randn(2, 3, 160)),
                            (feats(1, 32, 40), torch.randn(2, 1, 160), torch.randn(2, 1, 160))]),
}


def write_set(folder, names, inputs, output=None):
    os.makedirs(folder, exist_ok=True)
    for i, (n, t) in enumerate(zip(names, inputs)):
        with open(os.path.join(folder, "input_%d.pb" % i), "wb") as f:
            f.write(numpy_helper.from_array(t.numpy(), n).SerializeToString())
    if output is not None:
        with open(os.path.join(folder, "output_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(output.numpy(), "output").SerializeToString())


def sweep(models, out_dir, names, kiln_args=()):
    """Exports each named model of `models` and verifies it at its first two input sets
    (`kiln verify` given `kiln_args` too)."""
    failed = 0
    for name in names:
        torch.manual_seed(0)
        make, input_names, axes, sets = models[name]
        model = make().eval()
        inputs = sets()
        folder = os.path.join(out_dir, name)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "model.onnx")
        axes = dict(axes)
        axes.setdefault("output", {0: "batch"})
        torch.onnx.export(model, inputs[0], path, input_names=input_names, output_names=["output"],
                          dynamic_axes=axes, opset_version=17)
        for k, args in enumerate(inputs[:2]):
            with torch.no_grad():
                y = model(*args)
            d = os.path.join(folder, "set_%d" % k)
            write_set(d, input_names, args, y)
            proc = subprocess.run([KILN, "verify", path, "--input", d, "--expected", d, "--atol", "1e-4",
                                   "--rtol", "1e-3", *kiln_args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  timeout=900)
            detail = [l.strip() for l in proc.stdout.splitlines() if "max abs" in l]
            last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
            ok = proc.returncode == 0
            failed += 0 if ok else 1
            dims = " ".join("x".join(str(s) for s in a.shape) for a in args)
            print("%-16s %-26s %-4s  %s" % (name, dims, "ok" if ok else "FAIL", detail[0] if detail else last),
                  flush=True)
        bench = os.path.join(out_dir, "bench", name)
        write_set(os.path.join(bench, "test_data_set_0"), input_names, inputs[2])
        link = os.path.join(bench, "model.onnx")
        if not os.path.lexists(link):
            os.symlink(os.path.abspath(path), link)
    return failed


def command_line(doc, models, kiln_args=(), run=None):
    """OUT_DIR [NAME...]: sweeps the named models (all by default; `run(out_dir, names)` instead of
    this file's sweep where given); exits 1 if a check failed."""
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        print(doc)
        sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
    chosen = sys.argv[2:] or list(models)
    unknown = [n for n in chosen if n not in models]
    if unknown:
        sys.exit("unknown model(s): %s (known: %s)" % (", ".join(unknown), ", ".join(models)))
    failed = run(sys.argv[1], chosen) if run else sweep(models, sys.argv[1], chosen, kiln_args)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    command_line(__doc__, MODELS)
