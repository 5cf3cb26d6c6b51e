#!/usr/bin/env python3
"""tandem vs PyTorch on one GPU: training steps of one worker on Fashion-MNIST.

Both engines train the same models with the same optimizer (SGD, momentum 0.9,
weight decay 5e-4) at the same batch sizes:
  - the MLP 784-256-256-10 (scripts/experiments/quickstart.lua) at batch 64 and 1024,
  - LeNet-5 (scripts/experiments/lenet.lua) at batch 256,
  - the wide MLP 784-4096-4096-4096-10 at batch 4096 (GEMM-bound),
in one arithmetic for both engines (--precision, default fp32):
  fp32  float32 everywhere (PyTorch: TF32 off);
  tf32  TF32 tensor cores for matmuls and convolutions (PyTorch: allow_tf32);
  bf16  tandem: GEMM and convolution inputs rounded to bfloat16 (and convolution
        outputs), float32 storage and accumulation (engine/core/precision.hpp); PyTorch: torch.autocast(bfloat16), its usual
        mixed precision, which also keeps activations in bfloat16 (a stronger peer
        than the same arithmetic, float32 matmul precision 'medium', would be).
PyTorch runs twice, given its best cases: the whole training set already on the GPU
and batches gathered there, no host read of the loss in the timed loop, cuDNN
autotuning on; once eager, once with the whole step (forward, backward, SGD) captured
in one CUDA graph (torch.cuda.graph) and replayed. tandem runs as its trainer does
(tools/bench/step_bench.cpp), its data set held on the GPU and batches gathered there
(data.on_device = 'auto') and its step fused and replayed from CUDA graphs
(fused_step = 'auto'), once more staged through host memory (data.on_device =
'never'), and once with the step op by op (fused_step = 'never'), so the gain of each
is measured side by side. Runs alternate tandem / staged / op by op / eager / graph
several times in this one script; the median of each is reported, with tandem's
ratio to each peer.

tandem's FLOP/s are also reported as a fraction of the GPU's practical peak in the
run's precision: an 8192^3 cuBLAS GEMM timed in tandem's process, in fp32, tf32 and
bf16 (all three reported).

usage: tools/bench/gpu_vs_torch.py BUILD_DIR [--steps 300] [--reps 3]
                                   [--precision fp32|tf32|bf16] [--out FILE]
"""
import argparse
import contextlib
import gzip
import json
import statistics
import subprocess
import sys
import time

import numpy as np
import torch

from bench_common import torch_step_runner, write_result

DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530  # the same normalisation as engine/data
WIDE = [4096, 4096, 4096]

CASES = [  # (model, experiment, batch, tandem overrides)
    ("mlp", "scripts/experiments/quickstart.lua", 64, []),
    ("mlp", "scripts/experiments/quickstart.lua", 1024, []),
    ("lenet", "scripts/experiments/lenet.lua", 256, []),
    ("wide", "scripts/experiments/quickstart.lua", 4096, ["model_args.hidden={%s}" % ",".join(map(str, WIDE))]),
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
    if name in ("mlp", "wide"):
        sizes = [784] + ([256, 256] if name == "mlp" else WIDE)
        layers = [nn.Flatten()]
        for a, b in zip(sizes, sizes[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        return nn.Sequential(*layers, nn.Linear(sizes[-1], 10))
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))


def torch_run(name, x, y, batch, steps, warmup, precision, graph):
    """Samples/s of PyTorch's step, eager or captured in one CUDA graph."""
    torch.manual_seed(1)
    model = torch_model(name).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    loss_fn = torch.nn.CrossEntropyLoss(reduction="sum")
    g = torch.Generator(device="cuda").manual_seed(1)
    perm = torch.randperm(x.shape[0], generator=g, device="cuda")
    per_epoch = x.shape[0] // batch
    static_x = torch.empty((batch,) + tuple(x.shape[1:]), device="cuda")
    static_y = torch.empty(batch, dtype=torch.long, device="cuda")

    def gather(t):  # on the device, into the static buffers (what a graph replay reads)
        i = t % per_epoch
        idx = perm[i * batch:(i + 1) * batch]
        torch.index_select(x, 0, idx, out=static_x)
        torch.index_select(y, 0, idx, out=static_y)

    def autocast():
        if precision == "bf16":
            # No cast cache: a CUDA graph capture must not keep tensors cast outside it.
            return torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False)
        return contextlib.nullcontext()

    def step():
        with autocast():
            loss = loss_fn(model(static_x), static_y) / batch
        loss.backward()
        opt.step()

    run_once = torch_step_runner(step, opt, gather, graph)

    for t in range(warmup + steps):
        if t == warmup:
            torch.cuda.synchronize()
            start = time.perf_counter()
        gather(t)
        run_once()
    torch.cuda.synchronize()
    return steps * batch / (time.perf_counter() - start)


def tandem_run(build, experiment, batch, steps, warmup, precision, sets, peak=False):
    cmd = [f"{build}/bench/tandem_step_bench", experiment, "--batch", str(batch), "--steps", str(steps),
           "--warmup", str(warmup), "--device", "cuda", "--precision", precision] + (["--peak"] if peak else [])
    for s in sets:
        cmd += ["--set", s]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--precision", choices=["fp32", "tf32", "bf16"], default="fp32")
    ap.add_argument("--tf32", action="store_true", help="the same as --precision tf32")
    ap.add_argument("--out")
    args = ap.parse_args()
    precision = "tf32" if args.tf32 else args.precision
    if not torch.cuda.is_available():
        sys.exit("gpu_vs_torch: PyTorch sees no GPU")
    torch.backends.cuda.matmul.allow_tf32 = precision != "fp32"
    torch.backends.cudnn.allow_tf32 = precision != "fp32"
    torch.backends.cudnn.benchmark = True
    x, y = load_fashion_train("cuda")
    probe = tandem_run(args.build, CASES[0][1], 64, 10, 2, precision, [], peak=True)
    peaks = probe["gemm_peak_flops"]
    peak = peaks[precision]

    rows = []
    for name, experiment, batch, sets in CASES:
        # tandem_staged: the same with the data set staged through host memory
        # (data.on_device = 'never'), what a held data set saves side by side.
        # tandem_op_by_op: the step not fused, not captured (fused_step = 'never').
        runs = {"tandem": [], "tandem_staged": [], "tandem_op_by_op": [], "torch_eager": [], "torch_graph": []}
        flops = []
        # The wide MLP's steps are long: fewer of them time it as well.
        steps, warmup = (args.steps, args.warmup) if name != "wide" else (max(20, args.steps // 10), 5)
        for _ in range(args.reps):
            r = tandem_run(args.build, experiment, batch, steps, warmup, precision, sets)
            runs["tandem"].append(r["samples_per_s"])
            flops.append(r["flops"])
            staged = tandem_run(args.build, experiment, batch, steps, warmup, precision, sets + ["data.on_device=never"])
            runs["tandem_staged"].append(staged["samples_per_s"])
            unfused = tandem_run(args.build, experiment, batch, steps, warmup, precision, sets + ["fused_step=never"])
            runs["tandem_op_by_op"].append(unfused["samples_per_s"])
            runs["torch_eager"].append(torch_run(name, x, y, batch, steps, warmup, precision, graph=False))
            runs["torch_graph"].append(torch_run(name, x, y, batch, steps, warmup, precision, graph=True))
            torch.cuda.empty_cache()
        med = {k: statistics.median(v) for k, v in runs.items()}
        row = {"model": name, "batch": batch, "samples_per_s": med, "runs": runs,
               "tandem_over_torch_eager": med["tandem"] / med["torch_eager"],
               "tandem_over_torch_graph": med["tandem"] / med["torch_graph"],
               "held_over_staged": med["tandem"] / med["tandem_staged"],
               "fused_over_op_by_op": med["tandem"] / med["tandem_op_by_op"],
               "graph_replays": r.get("graph_replays"),
               "tandem_tflops": statistics.median(flops) / 1e12,
               "fraction_of_gemm_peak": statistics.median(flops) / peak}
        rows.append(row)
        print(f"{name:5s} batch {batch:4d}: tandem {med['tandem']:10.0f} samples/s, torch eager "
              f"{med['torch_eager']:10.0f} ({row['tandem_over_torch_eager']:.2f}x), torch graph "
              f"{med['torch_graph']:10.0f} ({row['tandem_over_torch_graph']:.2f}x), data held on the GPU "
              f"{row['held_over_staged']:.2f}x staged, fused {row['fused_over_op_by_op']:.2f}x op by op "
              f"({row['graph_replays']} graph replays), "
              f"{row['tandem_tflops']:.1f} TFLOP/s = {row['fraction_of_gemm_peak']:.3f} of the {precision} GEMM peak "
              f"({peak / 1e12:.1f} TFLOP/s)", file=sys.stderr)
    result = {"benchmark": "gpu_vs_torch", "device": probe.get("device"), "torch": torch.__version__,
              "precision": precision, "gemm_peak_tflops": {k: v / 1e12 for k, v in peaks.items()}, "rows": rows}
    write_result(result, args.out)


if __name__ == "__main__":
    main()
