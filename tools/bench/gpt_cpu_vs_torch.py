#!/usr/bin/env python3
"""tandem vs PyTorch on one CPU core: tokens/s of one worker training a GPT.

The model and optimizer are scripts/experiments/gpt.lua's: a byte-level GPT
(models/gpt.lua) of 2 pre-norm blocks, 4 heads, 128 wide, sequence 64, vocabulary
256, learned positions, tied output projection, no dropout; batch 32 sequences,
cross-entropy at every position, AdamW (lr 2e-3, betas 0.9/0.99, eps 1e-8, weight
decay 0.1 on matrices and embeddings only), the gradient norm clipped to 1.0; float32.
The PyTorch model is tools/bench/gpt_vs_torch.py's (the same parameter layout, same
count: 437,760).

Peers, pinned to the same single core (the last one; the tandem child inherits the
mask), one thread each, timed over the same steps after the same warm-up:
  - tandem: `tandem run scripts/experiments/gpt.lua device=cpu` with overrides; tokens/s
    from the run's trace.jsonl over the iterations after the warm-up (sum of step_ms:
    batch gathered by the sampler, forward, backward, clipping, AdamW), as the trainer
    runs them. data.validation is cut to 0.5% so the run's final evaluation (outside
    the timed steps) costs little; the lr schedule (warm-up, cosine) stays, which
    changes no step's cost.
  - torch eager (Debian's python3-torch), attention as tandem computes it (q k^T,
    masked softmax, att v); batches gathered at random offsets from the same corpus
    bytes, already in memory, inside the timed loop; constant lr.
  - torch eager with F.scaled_dot_product_attention: only when this torch has it
    (torch 1.13 does not; the row is then reported as skipped).
Runs alternate tandem / PyTorch --reps times in this one script, so a noisy
neighbour hits both; the median of each is reported, and the ratio is tandem / peer.

Peak fraction: the model's training FLOPs per token by nanoGPT's estimate
(model.estimate_mfu): 6 N + 12 n_layer seq n_embd, N the parameters without the
position embedding (nanoGPT's get_num_params(non_embedding=True); the tied token
embedding counts once, as the output projection), times tokens/s, over the best
1536^3 SGEMM on the same core (tandem_step_bench --peak, as mlp_vs_torch.py measures
it). The estimate counts the causal attention's products at full square, as both
engines compute them.

The corpus is the Debian `fortunes` package's text files (as gpt_vs_torch.py reads
them, and as tandem's data.files folder lists them).

Run from the repository root:
usage: tools/bench/gpt_cpu_vs_torch.py BUILD_DIR [--corpus DIR] [--steps 40] [--warmup 10]
                                       [--reps 3] [--out FILE]
"""
import os

# One thread everywhere, before torch (and its BLAS) load; the tandem child inherits it.
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = "1"

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

from bench_common import write_result
from gpt_vs_torch import (CORPUS, EXPERIMENT, corpus_files, tandem_overrides, tandem_tokens_per_s, torch_gpt,
                          torch_optimizer)

VALIDATION = 0.005  # tandem's held-out fraction: a short final evaluation


class Config:  # scripts/experiments/gpt.lua
    n_layer, n_head, n_embd, seq_len, vocab = 2, 4, 128, 64, 256
    batch = 32
    lr, beta1, beta2, eps, weight_decay, clip = 2e-3, 0.9, 0.99, 1e-8, 0.1, 1.0


def tandem_phases(root, name, warmup):
    """Mean ms per timed iteration of each phase the trace records for rank 0."""
    with open(os.path.join(root, name, "trace.jsonl")) as f:
        steps = [json.loads(line) for line in f]
    steps = [r["workers"][0] for r in steps if r.get("event") == "iteration" and r["iteration"] >= warmup]
    keys = ("step_ms", "data_ms", "compute_ms", "optimizer_ms")
    return {k: sum(w[k] for w in steps) / len(steps) for k in keys}


def torch_tokens_per_s(data, cfg, steps, warmup, sdpa):
    """data: the training bytes as a uint8 tensor (in memory)."""
    torch.manual_seed(1)
    model = torch_gpt(cfg, sdpa)
    opt = torch_optimizer(model, cfg, capturable=False)
    gen = torch.Generator().manual_seed(1)
    span = torch.arange(cfg.seq_len + 1)
    timed = 0.0
    for t in range(warmup + steps):
        start = time.perf_counter()
        starts = torch.randint(0, data.numel() - cfg.seq_len - 1, (cfg.batch, 1), generator=gen)
        window = data[starts + span].long()
        x, y = window[:, :-1].contiguous(), window[:, 1:].contiguous()
        opt.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
        opt.step()
        loss.item()  # tandem reads its loss every step too
        if t >= warmup:
            timed += time.perf_counter() - start
    return steps * cfg.batch * cfg.seq_len / timed


def sgemm_peak_flops(build):
    """The best 1536^3 SGEMM on this core, as mlp_vs_torch.py measures it (tandem_step_bench --peak)."""
    cmd = [f"{build}/bench/tandem_step_bench", "scripts/experiments/quickstart.lua", "--batch", "64",
           "--steps", "10", "--warmup", "2", "--peak"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["gemm_peak_flops"]["fp32"]


def flops_per_token(cfg, params):
    """nanoGPT's estimate (model.estimate_mfu): 6 N + 12 L T C, N without the position embedding."""
    n = params - cfg.seq_len * cfg.n_embd
    return 6 * n + 12 * cfg.n_layer * cfg.seq_len * cfg.n_embd, n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build", help="tandem's build directory (holds tandem and bench/tandem_step_bench)")
    ap.add_argument("--corpus", default=CORPUS, help=f"the fortunes folder (default {CORPUS})")
    ap.add_argument("--steps", type=int, default=40, help="timed steps per run")
    ap.add_argument("--warmup", type=int, default=10, help="untimed steps first")
    ap.add_argument("--reps", type=int, default=3, help="alternating runs of every engine")
    ap.add_argument("--tandem-override", action="append", default=[], metavar="KEY=VALUE",
                    help="one more tandem override (repeatable), replacing this script's for the same key")
    ap.add_argument("--out", help="also write the JSON result here")
    args = ap.parse_args()

    core = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {core})
    torch.set_num_threads(1)
    cfg = Config()
    files = corpus_files(args.corpus)
    raw = b"".join(open(f, "rb").read() for f in files)
    train = raw[: len(raw) - int(len(raw) * 0.1)]  # gpt.lua's split: the last tenth is validation
    data = torch.frombuffer(bytearray(train), dtype=torch.uint8)
    overrides = tandem_overrides(cfg, files, args.steps, args.warmup,
                                 {"device": "cpu", "data.validation": VALIDATION}, args.tandem_override)
    has_sdpa = hasattr(F, "scaled_dot_product_attention")
    peers = [("torch_eager", False)] + ([("torch_eager_sdpa", True)] if has_sdpa else [])
    print(f"core {core}, torch {torch.__version__}; corpus: {len(files)} files, {len(raw)} bytes; "
          f"scaled_dot_product_attention: {'yes' if has_sdpa else 'not in this torch, skipped'}", file=sys.stderr)
    peak = sgemm_peak_flops(args.build)
    params = sum(p.numel() for p in torch_gpt(cfg, False).parameters())
    fpt, n_flop_params = flops_per_token(cfg, params)

    results = {"tandem": [], **{name: [] for name, _ in peers}}
    phases = []
    with tempfile.TemporaryDirectory(prefix="gpt_cpu_vs_torch.") as root:
        for rep in range(args.reps):
            results["tandem"].append(tandem_tokens_per_s(args.build, root, f"tandem{rep}", cfg, overrides,
                                                         args.warmup))
            phases.append(tandem_phases(root, f"tandem{rep}", args.warmup))
            for name, sdpa in peers:
                results[name].append(torch_tokens_per_s(data, cfg, args.steps, args.warmup, sdpa))
            print(f"rep {rep}: " + ", ".join(f"{k} {v[-1]:.0f}" for k, v in results.items()) + " tokens/s",
                  file=sys.stderr)

    rows = {}
    for k, v in results.items():
        tps = statistics.median(v)
        rows[k] = {"tokens_per_s": tps, "runs": v, "gflops": tps * fpt / 1e9,
                   "fraction_of_sgemm_peak": tps * fpt / peak}
    ours = rows["tandem"]["tokens_per_s"]
    ratios = {f"tandem_over_{name}": ours / rows[name]["tokens_per_s"] for name, _ in peers}
    tandem_ms = {k: statistics.median(p[k] for p in phases) for k in phases[0]}
    for name, _ in peers:
        print(f"tandem {ours:8.0f} tokens/s, {name} {rows[name]['tokens_per_s']:8.0f} tokens/s, "
              f"ratio {ratios['tandem_over_' + name]:.2f}x", file=sys.stderr)
    for k, r in rows.items():
        print(f"{k}: {r['gflops']:.1f} GFLOP/s = {r['fraction_of_sgemm_peak']:.2f} of the one-core SGEMM peak "
              f"({peak / 1e9:.1f} GFLOP/s), at {fpt / 1e6:.3f} MFLOP per token (nanoGPT's estimate)", file=sys.stderr)
    print("tandem ms per step: " + ", ".join(f"{k} {v:.1f}" for k, v in tandem_ms.items()), file=sys.stderr)
    result = {"benchmark": "gpt_cpu_vs_torch", "core": core, "torch": torch.__version__,
              "scaled_dot_product_attention": "measured" if has_sdpa else "skipped: not in this torch",
              "model": {k: getattr(cfg, k) for k in ("n_layer", "n_head", "n_embd", "seq_len", "vocab", "batch")},
              "parameters": params,
              "flops_per_token": {"value": fpt, "estimate": "nanoGPT: 6 N + 12 n_layer seq n_embd",
                                  "N": n_flop_params},
              "sgemm_peak_gflops": peak / 1e9, "steps": args.steps, "warmup": args.warmup, "reps": args.reps,
              "rows": rows, "ratios": ratios, "tandem_ms_per_step": tandem_ms}
    write_result(result, args.out)


if __name__ == "__main__":
    main()
