#!/usr/bin/env python3
"""Replays tests/unit/test_golden.cpp's run in PyTorch and compares the losses.

The golden test, run with TANDEM_GOLDEN_DUMP=DIR, writes the initial parameters
(params.f32, in tandem's flat layout: per linear layer W[out, in] then b[out]) and
each step's sample indices. This script builds the same MLP in PyTorch from those
parameters, trains the same steps with torch.optim.SGD, and prints both loss lists.

usage: TANDEM_GOLDEN_DUMP=/tmp/g build/tests/unit_tests --run_test=test_golden && tools/golden/check_against_torch.py /tmp/g
"""
import gzip
import re
import sys

import numpy as np
import torch

DATA = "/usr/share/datasets/fashion-mnist"
SIZES = [784, 64, 32, 10]
LR, MOMENTUM, WD = 0.1, 0.9, 1e-3


def main(dump):
    with gzip.open(f"{DATA}/train-images-idx3-ubyte.gz") as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
    with gzip.open(f"{DATA}/train-labels-idx1-ubyte.gz") as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    x_all = torch.from_numpy((images.astype(np.float32) / 255.0 - 0.2860) / 0.3530)
    y_all = torch.from_numpy(labels.astype(np.int64))
    flat = torch.from_numpy(np.fromfile(f"{dump}/params.f32", dtype=np.float32))
    layers, offset = [], 0
    for i, (n_in, n_out) in enumerate(zip(SIZES, SIZES[1:])):
        lin = torch.nn.Linear(n_in, n_out)
        with torch.no_grad():
            lin.weight.copy_(flat[offset:offset + n_in * n_out].view(n_out, n_in))
            offset += n_in * n_out
            lin.bias.copy_(flat[offset:offset + n_out])
            offset += n_out
        layers += [lin] + ([torch.nn.ReLU()] if i + 2 < len(SIZES) else [])
    assert offset == flat.numel(), "parameter layout mismatch"
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WD)
    losses = []
    for line in open(f"{dump}/indices.txt"):
        idx = torch.tensor([int(v) for v in line.split()])
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x_all[idx]), y_all[idx])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    print("torch losses: " + ", ".join(f"{v:.6f}" for v in losses))
    src = open("tests/unit/test_golden.cpp").read()
    recorded = [float(v) for v in re.search(r"expected = \{([^}]*)\}", src).group(1).split(",")]
    worst = max(abs(a - b) for a, b in zip(losses, recorded))
    print(f"recorded:     " + ", ".join(f"{v:.6f}" for v in recorded))
    print(f"largest difference {worst:.2e}")
    sys.exit(0 if worst < 1e-4 else 1)


if __name__ == "__main__":
    main(sys.argv[1])
