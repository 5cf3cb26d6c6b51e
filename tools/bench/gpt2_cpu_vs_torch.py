#!/usr/bin/env python3
"""GPT-2 (124M) on CPU workers: tandem against PyTorch, tokens/s of one training step,
one thread each and two threads each.

The model is GPT-2's smallest (models/gpt.lua's preset 'gpt2': 12 layers, 12 heads,
768 wide, vocabulary 50257, tied head, no dropout; tandem pads its token table and
logits to 50304 as its default vocab_multiple = 64 does, PyTorch's model keeps 50257
as Hugging Face's) at a context of --seq
tokens (512 by default) and --batch windows a step (1), AdamW as
scripts/experiments/gpt2.lua (lr 6e-4, betas 0.9/0.95, weight decay 0.1 on matrices
and embeddings, clipping at 1); float32. The data: Debian's fortunes written as
nanoGPT token files (tools/data/text_to_tokens.py, byte tokens, all below 50257).

  - tandem: `tandem run scripts/experiments/gpt2.lua device=cpu` on the token files,
    blas_threads = THREADS; tokens/s from the trace over the steps after the warm-up.
  - PyTorch (Debian's python3-torch), eager, torch.set_num_threads(THREADS), the model
    of tools/bench/gpt_vs_torch.py (the same layout and parameter count), windows
    drawn from the same tokens inside the timed loop.

Pinned to one core for 1 thread, to two for 2 (as many as the machine has). Runs
alternate tandem / PyTorch --reps times per thread count in this one script; the
medians and their ratio are printed. A step takes tens of seconds on one core of a
2-core machine: the defaults (1 warm-up step, 2 timed, 2 reps) take about a quarter
of an hour.

Run from the repository root:
usage: tools/bench/gpt2_cpu_vs_torch.py BUILD_DIR [--seq 512] [--batch 1] [--steps 2]
                                        [--warmup 1] [--reps 2] [--threads 1,2] [--out FILE]
"""
import os
import sys

# Threads are fixed per measurement below; libraries loaded before then must not
# start their own pools at the machine's size.
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402

import torch  # noqa: E402

from bench_common import run as tandem_run_dir, write_result  # noqa: E402
from gpt_cpu_vs_torch import torch_tokens_per_s as eager_tokens_per_s  # noqa: E402
from gpt_vs_torch import CORPUS  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Config:  # scripts/experiments/gpt2.lua's model and optimizer
    n_layer, n_head, n_embd, vocab = 12, 12, 768, 50257
    seq_len, batch = 512, 1
    lr, beta1, beta2, eps, weight_decay, clip = 6e-4, 0.9, 0.95, 1e-8, 0.1, 1.0


def tandem_tokens_per_s(build, root, name, cfg, tokens_dir, threads, steps, warmup):
    overrides = ["device=cpu", f"blas_threads={threads}", f"global_batch={cfg.batch}", f"data.seq_len={cfg.seq_len}",
                 f"data.train={tokens_dir}/train.bin", f"data.validation={tokens_dir}/val.bin",
                 "data.validation_windows=1", "eval_batch=1", "eval_every=100000",
                 f"stop.max_iterations={warmup + steps}", "schedule.warmup_iterations=1", "log_every=1"]
    tandem_run_dir(build, root, name, overrides, "scripts/experiments/gpt2.lua")
    with open(os.path.join(root, name, "trace.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    timed = [r for r in rows if r.get("event") == "iteration" and r["iteration"] >= warmup]
    if not timed:
        sys.exit(f"gpt2_cpu_vs_torch: tandem's trace in {root}/{name} has no step after the warm-up")
    return sum(r["global_batch"] for r in timed) * cfg.seq_len / (sum(r["step_ms"] for r in timed) / 1000.0)


def torch_tokens_per_s(data, cfg, threads, steps, warmup):
    torch.set_num_threads(threads)
    return eager_tokens_per_s(data, cfg, steps, warmup, False)  # gpt_cpu_vs_torch.py's loop


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--threads", default="1,2", help="thread counts to measure (default 1,2)")
    ap.add_argument("--out")
    args = ap.parse_args()
    cfg = Config()
    cfg.seq_len, cfg.batch = args.seq, args.batch
    cores = sorted(os.sched_getaffinity(0))
    result = {"benchmark": "gpt2_cpu_vs_torch", "torch": torch.__version__,
              "model": {"preset": "gpt2", "vocab": cfg.vocab, "seq_len": cfg.seq_len, "batch": cfg.batch},
              "steps": args.steps, "warmup": args.warmup, "reps": args.reps, "rows": {}}
    with tempfile.TemporaryDirectory(prefix="gpt2_cpu_vs_torch.") as root:
        tokens_dir = os.path.join(root, "tokens")
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "data", "text_to_tokens.py"), CORPUS, "--out",
                        tokens_dir], check=True, capture_output=True)
        raw = open(os.path.join(tokens_dir, "train.bin"), "rb").read()
        data = torch.frombuffer(bytearray(raw), dtype=torch.int16).to(torch.int64)  # byte tokens: no sign issue
        for threads in (int(t) for t in args.threads.split(",")):
            if threads > len(cores):
                print(f"{threads} threads: skipped, {len(cores)} cores here", file=sys.stderr)
                continue
            os.sched_setaffinity(0, set(cores[-threads:]))  # the tandem child inherits the mask
            runs = {"tandem": [], "torch_eager": []}
            for rep in range(args.reps):
                runs["tandem"].append(tandem_tokens_per_s(args.build, root, f"t{threads}-{rep}", cfg, tokens_dir,
                                                          threads, args.steps, args.warmup))
                runs["torch_eager"].append(torch_tokens_per_s(data, cfg, threads, args.steps, args.warmup))
                print(f"{threads} thread(s), rep {rep}: tandem {runs['tandem'][-1]:.1f}, torch "
                      f"{runs['torch_eager'][-1]:.1f} tokens/s", file=sys.stderr)
            med = {k: statistics.median(v) for k, v in runs.items()}
            result["rows"][f"{threads}_threads"] = {"tokens_per_s": med, "runs": runs,
                                                    "tandem_over_torch": med["tandem"] / med["torch_eager"]}
    write_result(result, args.out)


if __name__ == "__main__":
    main()
