#!/usr/bin/env python3
"""The GPU peer: PyTorch eager on the same architectures as the shared models, on the lent GPU
machine (where PyTorch with CUDA is installed and ONNX Runtime has no CUDA provider). Strict fp32
(TF32 off for convolutions and matmuls), as Kiln's gpu target computes; CUDA events around each
run, after warm-up. bench/gpu-check.sh runs it beside `kiln perf --target gpu`.

    python3 bench/torch_gpu_peer.py --make-models gpu-models/make_models.py --out peer.md

torchvision builds resnet50 and mobilenet_v2 (random weights); bert_small and vit_tiny come from
the shared models' make_models.py (its BertSmall and ViTSmall classes) when --make-models names it.
Weights do not change the time, so no checkpoint is needed.
"""
import argparse
import importlib.util
import statistics
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--make-models", default="", help="path of the shared models' make_models.py")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("-n", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--out", default="")
    a = ap.parse_args()

    import torch
    import torchvision

    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    dev = torch.device("cuda")
    models = {
        "resnet50": (lambda: torchvision.models.resnet50(weights=None), "image"),
        "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(weights=None), "image"),
    }
    if a.make_models:
        spec = importlib.util.spec_from_file_location("make_models", a.make_models)
        mm = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(mm)
            models["bert_small"] = (mm.BertSmall, "tokens")
            models["vit_tiny"] = (mm.ViTSmall, "image")
        except Exception as e:  # the peer still measures the torchvision models
            print("make_models.py not usable: %s" % e, file=sys.stderr)

    rows = []
    for name, (build, kind) in models.items():
        model = build().eval().to(dev)
        for b in [int(x) for x in a.batches.split(",")]:
            if kind == "image":
                args = (torch.randn(b, 3, 224, 224, device=dev),)
            else:
                ids = torch.randint(1, 8000, (b, 128), device=dev)
                args = (ids, torch.ones(b, 128, dtype=torch.int64, device=dev))
            times = []
            with torch.inference_mode():
                for _ in range(a.warmup):
                    model(*args)
                torch.cuda.synchronize()
                for _ in range(a.n):
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    t0 = time.perf_counter()
                    start.record()
                    model(*args)
                    end.record()
                    end.synchronize()
                    times.append(((time.perf_counter() - t0) * 1e3, start.elapsed_time(end)))
            wall = statistics.median(t[0] for t in times)
            gpu = statistics.median(t[1] for t in times)
            rows.append((name, b, wall, gpu))
            print("%s b%d: wall %.3f ms, events %.3f ms" % (name, b, wall, gpu), file=sys.stderr, flush=True)
    lines = ["PyTorch %s eager on %s, strict fp32 (TF32 off), median of %d runs after %d" %
             (torch.__version__, torch.cuda.get_device_name(0), a.n, a.warmup), "",
             "| model | batch | wall ms | CUDA events ms |", "| --- | --- | --- | --- |"]
    lines += ["| %s | %d | %.3f | %.3f |" % r for r in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
