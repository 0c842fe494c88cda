#!/usr/bin/python3
"""Exports small PyTorch modules written the way users write them (a UNet, a super-resolution net,
a GPT, a TCN and single-op models) with dynamic axes and checks Kiln against PyTorch's own outputs
with `kiln verify --expected` (absolute tolerance 1e-5 of the largest output, at least 1e-4;
relative 1e-3): at the exported shape, at a shape the export never saw and, where the model allows
them, at a batch of 0 (an empty batch, on the cpu and the ref target) and at its smallest shape
(dims of 1 where the model allows). The companion of sequence_sweep.py for edge shapes; run by hand
(needs Debian's python3-torch; under a minute), `make test` does not run it.

    /usr/bin/python3 bench/module_sweep.py OUT_DIR            # every model below
    /usr/bin/python3 bench/module_sweep.py OUT_DIR unet grid_sample

Models (random weights from a fixed seed; normalization statistics and affines randomized too):
  unet            Conv, ConvTranspose stride 2, bilinear and nearest interpolate, cat, GroupNorm,
                  InstanceNorm, BatchNorm over [batch, 3, h, w] (h and w multiples of 4)
  espcn           ESPCN super-resolution (tanh convolutions, PixelShuffle 3) over [batch, 1, h, w]
  gpt             2-block GPT: token and position embeddings, MultiheadAttention with a causal
                  mask and a key_padding_mask from lengths, over ids and padding [batch, t]
  tcn             dilated causal Conv1d (F.pad), weight_norm, GELU, LayerNorm via permute, [batch, 4, t]
  the rest        one op each (SMALL below): cumsum, topk + gather, argmax, masked_fill from lengths
                  + softmax, where, einsum, roll, unfold, nonzero indexing, an unrolled LSTMCell,
                  Embedding with padding_idx, grid_sample (finite grids), layer norm written out by
                  hand over a dynamic last dim
Not covered, for reasons outside Kiln:
  F.layer_norm(x, x.shape[-1:]) with a dynamic last dim: PyTorch 1.13's export fails (a Gather).
  torchvision's raft_small: PyTorch 1.13 exports its sqrt of an int64 as an int64 Sqrt (invalid ONNX).
  torchvision's swin_v2_t: PyTorch 1.13 cannot export aten::zero.
  grid_sample at NaN grid coordinates: Kiln gives 0, PyTorch NaN; the ONNX spec says nothing of them.
  unet at batch 0: PyTorch's own InstanceNorm fails on an empty batch.
  unfold at batch 0: the export's last Reshape to {0, 18, -1} has no elements to infer the -1 from.
  gpt at batch 0: its Reshape's 0 (allowzero 0) copies the empty batch dim; ONNX rightly refuses it.
Prints one line per check and exits 1 if any failed.
"""
import os
import subprocess
import sys
from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sequence_sweep import command_line  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KILN = os.environ.get("KILN", os.path.join(ROOT, "build", "bin", "kiln"))


class NormBlock(nn.Module):
    def __init__(self, cin, cout, norm):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.n1 = nn.GroupNorm(4, cout) if norm == "gn" else nn.InstanceNorm2d(cout, affine=True)
        self.c2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.n2 = nn.BatchNorm2d(cout)

    def forward(self, x):
        return F.relu(self.n2(self.c2(F.relu(self.n1(self.c1(x))))))


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.e1, self.e2, self.e3 = NormBlock(3, 8, "gn"), NormBlock(8, 16, "in"), NormBlock(16, 32, "gn")
        self.up = nn.ConvTranspose2d(32, 16, 2, stride=2)
        self.d1, self.d2 = NormBlock(32, 16, "in"), NormBlock(24, 8, "gn")
        self.head = nn.Conv2d(16, 2, 1)

    def forward(self, x):
        s1 = self.e1(x)
        s2 = self.e2(F.max_pool2d(s1, 2))
        u = self.d1(torch.cat([self.up(self.e3(F.max_pool2d(s2, 2))), s2], 1))
        u = F.interpolate(u, scale_factor=2, mode="bilinear", align_corners=False)
        u = self.d2(torch.cat([u, s1], 1))
        n = F.interpolate(F.avg_pool2d(u, 2), scale_factor=2, mode="nearest")
        return self.head(torch.cat([u, n], 1))


class ESPCN(nn.Module):
    def __init__(self, r=3):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(1, 64, 5, padding=2), nn.Tanh(), nn.Conv2d(64, 32, 3, padding=1),
                                  nn.Tanh(), nn.Conv2d(32, r * r, 3, padding=1), nn.PixelShuffle(r))

    def forward(self, x):
        return self.body(x)


class GPTBlock(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, h, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, causal, pad):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=causal, key_padding_mask=pad, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab=100, d=32, heads=4, n=2, maxlen=64):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(maxlen, d)
        self.blocks = nn.ModuleList([GPTBlock(d, heads) for _ in range(n)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, ids, pad):
        t = ids.shape[1]
        x = self.tok(ids) + self.pos(torch.arange(t).unsqueeze(0))
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        for b in self.blocks:
            x = b(x, causal, pad)
        return self.head(self.ln(x))


class TCNBlock(nn.Module):
    def __init__(self, c, k, dilation):
        super().__init__()
        self.pad = (k - 1) * dilation
        self.conv = nn.utils.weight_norm(nn.Conv1d(c, c, k, dilation=dilation))
        self.ln = nn.LayerNorm(c)

    def forward(self, x):
        y = self.conv(F.pad(x, (self.pad, 0)))
        return x + F.gelu(self.ln(y.permute(0, 2, 1)).permute(0, 2, 1))


class TCN(nn.Module):
    def __init__(self):
        super().__init__()
        blocks = [TCNBlock(16, 3, d) for d in (1, 2, 4, 8)]
        self.body = nn.Sequential(nn.Conv1d(4, 16, 1), *blocks, nn.Conv1d(16, 3, 1))

    def forward(self, x):
        return self.body(x)


class Fn(nn.Module):
    """A module around a function of the inputs (the single-op models)."""

    def __init__(self, fn, **children):
        super().__init__()
        self.fn = fn
        for k, m in children.items():
            self.add_module(k, m)

    def forward(self, *xs):
        return self.fn(self, *xs)


def masked_softmax(m, x, lengths):
    mask = torch.arange(x.shape[1])[None, :] >= lengths[:, None]
    return torch.softmax(x.masked_fill(mask[:, :, None], -1e4), dim=1)


def topk_gather(m, x):
    v, i = torch.topk(x, 3, dim=-1)
    return v + torch.gather(x * 2.0, -1, i), i


def lstm_cell_unrolled(m, x):  # x [5, batch, 8]: 5 steps unrolled by the trace
    h = c = torch.zeros(x.shape[1], 16)
    outs = []
    for t in range(5):
        h, c = m.cell(x[t], (h, c))
        outs.append(m.out(h))
    return torch.stack(outs, 0)


def layer_norm_last(m, x):
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(((x - mean) ** 2).mean(-1, keepdim=True) + 1e-5)


SMALL = {
    "cumsum": lambda m, x: torch.cumsum(x, dim=1) + torch.cumsum(x, dim=2),
    "topk_gather": topk_gather,
    "argmax": lambda m, x: (torch.argmax(x, dim=1), torch.argmax(x, dim=-1, keepdim=True)),
    "masked_fill": masked_softmax,
    "where": lambda m, x, y: torch.where(x > y, x * y, x - y) + torch.where(x > 0, x, torch.zeros_like(x)),
    "einsum": lambda m, q, k: torch.einsum("bhqd,bhkd->bhqk", q, k),
    "roll": lambda m, x: torch.roll(x, shifts=3, dims=1) + torch.roll(x, shifts=(-2, 1), dims=(1, 2)),
    "unfold": lambda m, x: F.unfold(x, kernel_size=3, padding=1, stride=2),
    "nonzero": lambda m, x: x[torch.nonzero(x[:, 0] > 0)[:, 0]] * 2.0,  # the rows whose first column is positive
    "lstmcell": lstm_cell_unrolled,
    "emb_pad": lambda m, ids: m.emb(ids),
    "grid_sample": lambda m, x, g: F.grid_sample(x, g, mode="bilinear", padding_mode="zeros", align_corners=False)
    + F.grid_sample(x, g, mode="nearest", padding_mode="border", align_corners=True),
    "layernorm_last": layer_norm_last,
}


def small(name, **children):
    """The constructor of a single-op model; `children` are constructors of its submodules."""
    return lambda: Fn(SMALL[name], **{k: make() for k, make in children.items()})


# input makers, from the input's shape
def randn(shape):
    return torch.randn(*shape)


def ints(high):  # token ids; lengths (0 masks a whole row, past t masks nothing)
    return lambda shape: torch.randint(0, high, shape)


def padding(shape):  # key_padding_mask [batch, t] from lengths 1..t: True past each row's length
    return torch.arange(shape[1])[None, :] >= torch.randint(1, shape[1] + 1, (shape[0], 1))


def grid(shape):  # sampling points a little past the image's edges on every side
    return torch.rand(*shape) * 2.4 - 1.2


HW = {0: "batch", 2: "h", 3: "w"}
BTC = {0: "batch", 1: "t", 2: "c"}
BT = {0: "batch", 1: "t"}
# name: (constructor, inputs as (name, dynamic axes, maker), input shapes of each set: the exported
#        set, an unseen one, then a batch of 0 and the smallest shapes where the model allows them)
MODELS = {
    "unet": (UNet, [("input", HW, randn)], [[(1, 3, 64, 64)], [(2, 3, 48, 80)], [(1, 3, 4, 4)]]),
    "espcn": (ESPCN, [("input", HW, randn)], [[(1, 1, 32, 32)], [(2, 1, 20, 28)], [(0, 1, 8, 8)], [(1, 1, 1, 1)]]),
    "gpt": (GPT, [("ids", BT, ints(100)), ("pad", BT, padding)], [[(2, 12)] * 2, [(3, 7)] * 2, [(1, 1)] * 2]),
    "tcn": (TCN, [("input", {0: "batch", 2: "t"}, randn)], [[(2, 4, 50)], [(3, 4, 23)], [(0, 4, 10)], [(1, 4, 1)]]),
    "cumsum": (small("cumsum"), [("x", BTC, randn)], [[(2, 7, 5)], [(3, 11, 4)], [(0, 7, 5)], [(1, 1, 1)]]),
    "topk_gather": (small("topk_gather"), [("x", BT, randn)], [[(2, 9)], [(4, 13)], [(0, 9)], [(1, 3)]]),
    "argmax": (small("argmax"), [("x", BTC, randn)], [[(3, 6, 5)], [(2, 9, 8)], [(0, 6, 5)], [(1, 1, 1)]]),
    "masked_fill": (small("masked_fill"), [("x", BT, randn), ("lengths", {0: "batch"}, ints(14))],
                    [[(3, 8, 4), (3,)], [(2, 13, 4), (2,)], [(0, 8, 4), (0,)], [(1, 1, 4), (1,)]]),
    "where": (small("where"), [("x", BT, randn), ("y", BT, randn)],
              [[(2, 5)] * 2, [(4, 9)] * 2, [(0, 5)] * 2, [(1, 1)] * 2]),
    "einsum": (small("einsum"), [("q", {0: "batch", 2: "tq"}, randn), ("k", {0: "batch", 2: "tk"}, randn)],
               [[(2, 3, 5, 8), (2, 3, 6, 8)], [(1, 3, 9, 8), (1, 3, 4, 8)], [(0, 3, 5, 8), (0, 3, 6, 8)],
                [(1, 3, 1, 8), (1, 3, 1, 8)]]),
    "roll": (small("roll"), [("x", BTC, randn)], [[(2, 7, 5)], [(3, 10, 6)], [(0, 7, 5)], [(1, 1, 1)]]),
    "unfold": (small("unfold"), [("x", HW, randn)], [[(1, 2, 8, 8)], [(2, 2, 11, 7)], [(1, 2, 1, 1)]]),
    "nonzero": (small("nonzero"), [("x", {0: "n"}, randn)], [[(6, 4)], [(11, 4)], [(0, 4)], [(1, 4)]]),
    "lstmcell": (small("lstmcell", cell=partial(nn.LSTMCell, 8, 16), out=partial(nn.Linear, 16, 4)),
                 [("x", {1: "batch"}, randn)],
                 [[(5, 2, 8)], [(5, 4, 8)], [(5, 0, 8)], [(5, 1, 8)]]),
    "emb_pad": (small("emb_pad", emb=partial(nn.Embedding, 50, 8, padding_idx=0)), [("ids", BT, ints(50))],
                [[(2, 4)], [(3, 9)], [(0, 4)], [(1, 1)]]),
    "grid_sample": (small("grid_sample"), [("x", HW, randn), ("grid", {0: "batch", 1: "gh", 2: "gw"}, grid)],
                    [[(1, 2, 6, 7), (1, 5, 4, 2)], [(2, 2, 9, 5), (2, 3, 8, 2)], [(0, 2, 6, 7), (0, 5, 4, 2)],
                     [(1, 2, 1, 1), (1, 1, 1, 2)]]),
    "layernorm_last": (small("layernorm_last"), [("x", BTC, randn)],
                       [[(2, 3, 10)], [(1, 4, 37)], [(0, 3, 10)], [(1, 1, 1)]]),
}


def build(make):
    """The model in eval mode, its normalizations' statistics and affines randomized."""
    model = make().eval()
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
        if isinstance(m, (nn.modules.batchnorm._BatchNorm, nn.GroupNorm, nn.LayerNorm, nn.InstanceNorm2d)):
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)
    return model


def outputs(model, args):
    with torch.no_grad():
        y = model(*args)
    return list(y) if isinstance(y, tuple) else [y]


def write_set(folder, input_names, args, outs):
    """Writes the inputs and PyTorch's outputs; returns the largest output magnitude."""
    os.makedirs(folder, exist_ok=True)
    tensors = [("input_%d" % i, n, a) for i, (n, a) in enumerate(zip(input_names, args))]
    tensors += [("output_%d" % i, "output_%d" % i, o) for i, o in enumerate(outs)]
    for file, name, t in tensors:
        with open(os.path.join(folder, file + ".pb"), "wb") as f:
            f.write(numpy_helper.from_array(t.numpy(), name).SerializeToString())
    return max((float(o.abs().max()) for o in outs if o.numel()), default=0.0)


def verify(path, folder, scale, target):
    atol = max(1e-4, 1e-5 * scale)
    proc = subprocess.run([KILN, "verify", path, "--input", folder, "--expected", folder, "--target", target,
                           "--atol", "%.3g" % atol, "--rtol", "1e-3"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=900)
    lines = [l.strip() for l in proc.stdout.splitlines() if l.strip()]
    per_output = [l for l in lines if l.startswith("output_")]  # the first output out of tolerance, else the first
    bad = [l for l in per_output if not l.endswith(" ok")]
    return proc.returncode == 0, (bad or per_output or lines[-1:] or [""])[0]


def sweep(out_dir, names):
    failed = 0
    for name in names:
        make, inputs, shape_sets = MODELS[name]
        input_names = [n for n, _, _ in inputs]
        torch.manual_seed(0)
        model = build(make)
        sets = [[maker(s) for (_, _, maker), s in zip(inputs, shapes)] for shapes in shape_sets]
        results = [outputs(model, args) for args in sets]
        output_names = ["output_%d" % i for i in range(len(results[0]))]
        folder = os.path.join(out_dir, name)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "model.onnx")
        torch.onnx.export(model, tuple(sets[0]), path, input_names=input_names, output_names=output_names,
                          dynamic_axes={n: a for n, a, _ in inputs}, opset_version=17)  # outputs' dims inferred
        for args, outs in zip(sets, results):
            dims = "_".join("x".join(str(s) for s in a.shape) for a in args)
            scale = write_set(os.path.join(folder, "set_" + dims), input_names, args, outs)
            empty = any(a.numel() == 0 for a in args)
            for target in ("cpu", "ref") if empty else ("cpu",):
                ok, what = verify(path, os.path.join(folder, "set_" + dims), scale, target)
                failed += not ok
                print("%-15s %-4s %-26s %-4s  %s" % (name, target, dims.replace("_", " "), "ok" if ok else "FAIL",
                                                     what), flush=True)
    return failed


if __name__ == "__main__":
    command_line(__doc__, MODELS, run=sweep)
