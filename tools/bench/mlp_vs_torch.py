#!/usr/bin/env python3
"""tandem vs PyTorch: single worker, one thread, training steps on Fashion-MNIST.

Both engines train the same model (the experiment's model: MLP 784-256-256-10 fp32
by default) with the same optimizer on the same kind of batches (a seeded
permutation, one gathered batch per step), pinned to the same single core. Runs
alternate tandem / PyTorch several times in this one script, so a noisy neighbour
hits both; the median of each is reported and the ratio is tandem / PyTorch.

usage: tools/bench/mlp_vs_torch.py BUILD_DIR [--batches 64,256] [--steps 300] [--reps 3]
Writes the result as JSON to stdout (and to --out FILE when given).
"""
import os

# One thread everywhere, before torch (and its BLAS) load.
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = "1"

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


def load_fashion_train():
    with gzip.open(f"{DATA}/train-images-idx3-ubyte.gz") as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
    with gzip.open(f"{DATA}/train-labels-idx1-ubyte.gz") as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    x = torch.from_numpy(((images.astype(np.float32) / 255.0) - MEAN) / STD)
    return x, torch.from_numpy(labels.astype(np.int64))


def torch_run(x, y, batch, steps, warmup, lr=0.05, momentum=0.9, wd=5e-4):
    torch.manual_seed(1)
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, weight_decay=wd)
    loss_fn = torch.nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(1)
    perm = torch.randperm(x.shape[0], generator=g)
    per_epoch = x.shape[0] // batch
    timed = 0.0
    for t in range(warmup + steps):
        start = time.perf_counter()
        i = t % per_epoch
        idx = perm[i * batch:(i + 1) * batch]
        xb, yb = x.index_select(0, idx), y.index_select(0, idx)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        if t >= warmup:
            timed += time.perf_counter() - start
    return steps * batch / timed


def tandem_run(build, experiment, batch, steps, warmup, peak=False):
    cmd = [f"{build}/bench/tandem_step_bench", experiment, "--batch", str(batch),
           "--steps", str(steps), "--warmup", str(warmup)] + (["--peak"] if peak else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--experiment", default="scripts/experiments/quickstart.lua")
    ap.add_argument("--batches", default="64,256")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args()

    # Pin to one core (the last one); the tandem child inherits the mask.
    core = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {core})
    torch.set_num_threads(1)
    x, y = load_fashion_train()
    peak = tandem_run(args.build, args.experiment, 64, 10, 2, peak=True)["gemm_peak_flops"]["fp32"]

    rows = []
    for batch in [int(b) for b in args.batches.split(",")]:
        ours, theirs, flops = [], [], []
        for _ in range(args.reps):
            r = tandem_run(args.build, args.experiment, batch, args.steps, args.warmup)
            ours.append(r["samples_per_s"])
            flops.append(r["flops"])
            theirs.append(torch_run(x, y, batch, args.steps, args.warmup))
        row = {"batch": batch, **versus_torch(ours, theirs, flops, peak)}
        rows.append(row)
        print(f"batch {batch:4d}: tandem {row['tandem_samples_per_s']:9.0f} samples/s, "
              f"torch {row['torch_samples_per_s']:9.0f} samples/s, ratio {row['ratio']:.2f}x, "
              f"{row['tandem_gflops']:.1f} GFLOP/s = {row['fraction_of_sgemm_peak']:.2f} of the "
              f"one-core SGEMM peak ({peak / 1e9:.1f} GFLOP/s)", file=sys.stderr)
    result = {"benchmark": "mlp_vs_torch", "core": core, "torch": torch.__version__,
              "sgemm_peak_gflops": peak / 1e9, "rows": rows}
    write_result(result, args.out)


if __name__ == "__main__":
    main()
