#!/usr/bin/env python3
"""tandem vs PyTorch on one GPU: training steps of one worker on Fashion-MNIST.

Both engines train the same models with the same optimizer (SGD, momentum 0.9,
weight decay 5e-4) at the same batch sizes:
  - the MLP 784-256-256-10 (scripts/experiments/quickstart.lua) at batch 64 and 1024,
  - LeNet-5 (scripts/experiments/lenet.lua) at batch 256,
all float32 (no TF32 unless --tf32, for both engines). PyTorch is given its best
case: the whole training set already on the GPU, batches gathered there, no host
read of the loss inside the timed loop, cuDNN autotuning on. tandem runs as its
trainer does: batches gathered on the host from the sampler, uploaded as bytes over
the copy engine, the loss read back every step. Runs alternate tandem / PyTorch
several times in this one script; the median of each is reported, and the ratio
is tandem / PyTorch.

The largest GEMM-bound case (the MLP at batch 1024) is also reported as a fraction
of the GPU's practical float32 peak: an 8192^3 cuBLAS SGEMM timed in the same
process as tandem's steps.

usage: tools/bench/gpu_vs_torch.py BUILD_DIR [--steps 300] [--reps 3] [--tf32] [--out FILE]
"""
import argparse
import gzip
import json
import subprocess
import sys
import time

import numpy as np
import torch

from bench_common import versus_torch, write_result

DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530  # the same normalisation as engine/data

CASES = [  # (name, experiment, batch)
    ("mlp", "scripts/experiments/quickstart.lua", 64),
    ("mlp", "scripts/experiments/quickstart.lua", 1024),
    ("lenet", "scripts/experiments/lenet.lua", 256),
]


def load_fashion_train(device):
    with gzip.open(f"{DATA}/train-images-idx3-ubyte.gz") as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(f"{DATA}/train-labels-idx1-ubyte.gz") as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    x = torch.from_numpy(((images.astype(np.float32) / 255.0) - MEAN) / STD).to(device)
    return x, torch.from_numpy(labels.astype(np.int64)).to(device)


def torch_model(name):
    nn = torch.nn
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                             nn.Linear(256, 10))
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))


def torch_run(name, x, y, batch, steps, warmup):
    torch.manual_seed(1)
    model = torch_model(name).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    loss_fn = torch.nn.CrossEntropyLoss(reduction="sum")
    g = torch.Generator(device="cuda").manual_seed(1)
    perm = torch.randperm(x.shape[0], generator=g, device="cuda")
    per_epoch = x.shape[0] // batch
    for t in range(warmup + steps):
        if t == warmup:
            torch.cuda.synchronize()
            start = time.perf_counter()
        i = t % per_epoch
        idx = perm[i * batch:(i + 1) * batch]
        xb, yb = x.index_select(0, idx), y.index_select(0, idx)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb) / batch
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    return steps * batch / (time.perf_counter() - start)


def tandem_run(build, experiment, batch, steps, warmup, tf32, peak=False):
    cmd = [f"{build}/bench/tandem_step_bench", experiment, "--batch", str(batch), "--steps", str(steps),
           "--warmup", str(warmup), "--device", "cuda"] + (["--peak"] if peak else []) + (["--tf32"] if tf32 else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tf32", action="store_true")
    ap.add_argument("--out")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu_vs_torch: PyTorch sees no GPU")
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.backends.cudnn.benchmark = True
    x, y = load_fashion_train("cuda")
    probe = tandem_run(args.build, CASES[0][1], 64, 10, 2, args.tf32, peak=True)
    peak = probe["sgemm_peak_flops"]

    rows = []
    for name, experiment, batch in CASES:
        ours, theirs, flops = [], [], []
        for _ in range(args.reps):
            r = tandem_run(args.build, experiment, batch, args.steps, args.warmup, args.tf32)
            ours.append(r["samples_per_s"])
            flops.append(r["flops"])
            theirs.append(torch_run(name, x, y, batch, args.steps, args.warmup))
        row = {"model": name, "batch": batch, **versus_torch(ours, theirs, flops, peak)}
        rows.append(row)
        print(f"{name:5s} batch {batch:4d}: tandem {row['tandem_samples_per_s']:10.0f} samples/s, "
              f"torch {row['torch_samples_per_s']:10.0f} samples/s, ratio {row['ratio']:.2f}x, "
              f"{row['tandem_gflops']:.0f} GFLOP/s = {row['fraction_of_sgemm_peak']:.3f} of the SGEMM peak "
              f"({peak / 1e12:.1f} TFLOP/s)", file=sys.stderr)
    result = {"benchmark": "gpu_vs_torch", "device": probe.get("device"), "torch": torch.__version__,
              "tf32": args.tf32, "sgemm_peak_tflops": peak / 1e12, "rows": rows}
    write_result(result, args.out)


if __name__ == "__main__":
    main()
