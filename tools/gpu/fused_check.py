#!/usr/bin/env python3
"""On a GPU: whole runs with the fused step (CUDA graphs) against the step op by op.

For the MLP (quickstart), LeNet and the GPT (scripts/experiments/gpt.lua, with
dropout 0.1 so that the graphs take the seed from device memory), one worker on the
GPU, the same seed: a run with fused_step = 'always' and one with 'never'. Passes
when both finish, the fused run replayed graphs (its log's "fused steps: N replays
..." with N above half its steps), and the two test accuracies (the GPT's: token
accuracy) agree within 0.5 points, the GPT's validation losses within 1% (a GPU's
float sums differ in the last bits between the ways, so the runs are not bit for bit
alike). --quick: shorter runs (tools/gpu/check.sh triage). Prints each run's
samples/s from its "done" line and the ratio: whole runs, evaluations included, a
check rather than a benchmark (tools/bench/gpu_vs_torch.py measures the step).

usage: tools/gpu/fused_check.py BUILD_DIR OUT_DIR [--cases mlp,lenet,gpt] [--quick]
       (from the source folder)
"""
import argparse
import json
import os
import re
import subprocess
import sys

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("build")
ap.add_argument("out")
ap.add_argument("--cases", default="mlp,lenet,gpt", help="which runs, comma-separated")
ap.add_argument("--quick", action="store_true", help="shorter runs (about a minute for all)")
args = ap.parse_args()
BUILD, OUT = args.build, args.out
GPT = ["model_args.dropout=0.1", "data.validation=0.02", "stop.target_loss=0.001"]
CASES = {  # name: (experiment, overrides, overrides with --quick)
    "mlp": ("scripts/experiments/quickstart.lua", ["stop.epochs=2"], ["stop.epochs=1"]),
    "lenet": ("scripts/experiments/lenet.lua", ["stop.epochs=1"], ["stop.epochs=0.5"]),
    "gpt": ("scripts/experiments/gpt.lua", GPT + ["stop.max_iterations=1000", "eval_every=500"],
            GPT + ["stop.max_iterations=300", "eval_every=300"]),
}
unknown = [c for c in args.cases.split(",") if c not in CASES]
if unknown:
    sys.exit(f"fused_check: unknown case {', '.join(unknown)} (mlp, lenet, gpt)")


def run(name, experiment, mode, extra):
    out = os.path.join(OUT, f"fused-{name}-{mode}")
    cmd = [f"{BUILD}/tandem", "run", experiment, "--out", out, "device=cuda", f"fused_step={mode}", "seed=1",
           "stop.target_accuracy=1", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True)
    with open(out + ".log", "w") as f:
        f.write(r.stderr)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}:\n{r.stderr[-3000:]}")
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    done = re.search(r"done \(.*?\): (\d+) iterations.*?, ([\d.]+) samples/s", r.stderr)
    replays = re.search(r"fused steps: (\d+) replays of (\d+) captured graphs, (\d+) op by op", r.stderr)
    return summary, done, replays, r.stderr


os.makedirs(OUT, exist_ok=True)
failed = False
for name in args.cases.split(","):
    experiment, full, quick = CASES[name]
    extra = quick if args.quick else full
    fused, done_f, replays, log = run(name, experiment, "always", extra)
    plain, done_p, _, _ = run(name, experiment, "never", extra)
    iterations = int(done_f.group(1)) if done_f else 0
    speed_f, speed_p = (float(done_f.group(2)) if done_f else 0.0), (float(done_p.group(2)) if done_p else 0.0)
    acc_f, acc_p = fused["test_accuracy"], plain["test_accuracy"]
    print(f"{name}: fused {speed_f:.0f} samples/s, op by op {speed_p:.0f} "
          f"({speed_f / speed_p if speed_p else 0:.2f}x); test accuracy {acc_f:.4f} fused, {acc_p:.4f} op by op; "
          f"{replays.group(0) if replays else 'no fused-steps line'}")
    if not replays or int(replays.group(1)) * 2 < iterations:
        print(f"FAIL: {name}: the fused run replayed graphs for under half of its {iterations} steps "
              f"(see {OUT}/fused-{name}-always.log)")
        failed = True
    if abs(acc_f - acc_p) > 0.005:
        print(f"FAIL: {name}: test accuracy {acc_f:.4f} fused against {acc_p:.4f} op by op: over 0.5 points apart")
        failed = True
    loss_f, loss_p = fused.get("test_loss"), plain.get("test_loss")
    if name == "gpt":
        print(f"{name}: validation loss {loss_f:.4f} fused, {loss_p:.4f} op by op")
        if abs(loss_f - loss_p) > 0.01 * loss_p:
            print(f"FAIL: {name}: validation loss {loss_f:.4f} fused against {loss_p:.4f} op by op: over 1% apart")
            failed = True
sys.exit(1 if failed else 0)
