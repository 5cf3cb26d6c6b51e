#!/usr/bin/env python3
"""Adaptive global batch (issue 23): time to a target accuracy of the goodput policy
against lbb at the default global batch and at the best fixed one.

Emulation: speed factors 1, 1, 0.5, 0.25 of a reference device running at an eighth
of a core (--reference), 4 workers; MLP 784-256-256-10 on Fashion-MNIST, SGD with
momentum 0.9, a constant learning rate, test accuracy evaluated every ~2048 samples
(evaluations are not training time), target 87% (at 85%, reached within the first
epoch while the noise scale is still small, B = 64 is close to the best B).
--comm-delay-ms adds an emulated link's time to every all-reduce (a slower network).
One calibration of this machine for every run.

Variants, each with the same learning-rate search budget (the same three base
learning rates, given for B0 = 64):
  - lbb at B = 64 (tandem's default global batch), 128, 256, 512: lr = base * B / 64
    (the linear rule); "lbb at the default B" is B = 64, "lbb at the best fixed B"
    the B whose best learning rate reaches the target soonest;
  - goodput: B chosen by the policy within [64, 1024], lr = base scaled by AdaScale's
    gain (lr_scaling = 'adascale').
Each variant's best learning rate is then run again with --repeats seeds; the
medians of the time to target are compared. Then each variant's best configuration
trains a fixed --epochs without a target, with the same seeds, for the median final
test accuracy.

usage: tools/bench/goodput_tta.py BUILD_DIR [--reference 0.125] [--repeats 3] [--epochs 4] [--comm-delay-ms 0] [--out FILE]
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile

from bench_common import Runner, calibration_overrides, write_result

SPEEDS = "{1,1,0.5,0.25}"
B0 = 64
FIXED = [64, 128, 256, 512]
BASE_LRS = [0.0125, 0.025, 0.05]
TARGET = 0.87  # late enough in training for the noise scale to grow (at 0.85 B = 64 is near the best)
RANGE = (64, 1024)


def lbb(batch, base_lr):
    return ["policy.file=lbb", f"global_batch={batch}", f"lr={base_lr * batch / B0:g}",
            f"eval_every={max(1, 2048 // batch)}"]


def goodput(base_lr):
    # B changes: an evaluation every 4 iterations is every 256..4096 samples.
    return ["policy.file=goodput", f"global_batch={B0}", f"policy.global_batch={{min={RANGE[0]},max={RANGE[1]}}}",
            "lr_scaling=adascale", f"lr={base_lr:g}", "eval_every=4"]


def attempt(go, name, args):
    """A run's summary; {} when it failed (a learning rate too high diverges: the
    run stops with an error, and counts as not reaching the target)."""
    try:
        return go(name, args)
    except subprocess.CalledProcessError:
        print(f"{name}: failed (diverged?)", file=sys.stderr)
        return {}


def variants():
    out = {f"lbb_b{b}": (lambda lr, b=b: lbb(b, lr)) for b in FIXED}
    out["goodput"] = goodput
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--reference", type=float, default=0.125)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--epochs", type=float, default=4)
    ap.add_argument("--comm-delay-ms", type=float, default=0.0,
                    help="emulated link: added to every worker's all-reduce (0: the machine's shared memory)")
    ap.add_argument("--out")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="tandem-goodput-")
    go = Runner(args.build, root, ["--workers", "4", f"emulation.reference={args.reference}",
                                   f"emulation.speeds={SPEEDS}", "schedule.kind=constant", "console=false",
                                   "emulation.comm_delay_ms={" + ",".join([f"{args.comm_delay_ms:g}"] * 4) + "}"])
    go.common += calibration_overrides(go, RANGE[1])  # every local batch a variant may run
    search = f"stop.epochs=8 stop.target_accuracy={TARGET}"

    # 1. The learning-rate search: the same three base rates for every variant.
    found = {}
    for name, make in variants().items():
        tried = {}
        for lr in BASE_LRS:
            s = attempt(go, f"{name}_lr{lr:g}", make(lr) + search.split())
            tried[lr] = s.get("time_to_target_s")
            print(f"{name} lr {lr:g}: time to {TARGET:.0%} {tried[lr]} s", file=sys.stderr)
        reached = {lr: t for lr, t in tried.items() if t is not None}
        found[name] = {"search": tried, "best_lr": min(reached, key=reached.get) if reached else None}

    # 2. Each variant's best rate again, with other seeds: medians.
    for name, make in variants().items():
        lr = found[name]["best_lr"]
        if lr is None:
            continue
        times = []
        for seed in range(1, args.repeats + 1):
            s = attempt(go, f"{name}_best_seed{seed}", make(lr) + search.split() + [f"seed={seed}"])
            if s.get("time_to_target_s") is not None:
                times.append(s["time_to_target_s"])
        found[name]["times"] = times
        found[name]["median_s"] = statistics.median(times) if times else None

    # 3. Final accuracy after a fixed number of epochs, no target: the median over
    #    the seeds (one run's accuracy moves by half a point from seed to seed).
    for name, make in variants().items():
        lr = found[name]["best_lr"]
        if lr is None:
            continue
        finals, batches = [], []
        for seed in range(1, args.repeats + 1):
            s = attempt(go, f"{name}_final_seed{seed}",
                        make(lr) + [f"stop.epochs={args.epochs:g}", "stop.target_accuracy=1", f"seed={seed}"])
            if s.get("test_accuracy") is not None:
                finals.append(s["test_accuracy"])
                batches.append(s["samples_per_s"] * s["train_s"] / max(s["iterations"], 1))
        found[name]["final_accuracies"] = finals
        found[name]["final_accuracy"] = statistics.median(finals) if finals else None
        if batches:
            found[name]["mean_batch"] = statistics.median(batches)

    timed = {n: v for n, v in found.items() if v.get("median_s")}
    fixed = {n: v for n, v in timed.items() if n.startswith("lbb_")}
    best_fixed = min(fixed, key=lambda n: fixed[n]["median_s"]) if fixed else None
    result = {"emulation": f"speed factors 1, 1, 0.5, 0.25, reference {args.reference} of a core, "
                           f"{args.comm_delay_ms:g} ms added to each all-reduce",
              "target_accuracy": TARGET, "variants": found, "best_fixed": best_fixed}
    g, d = timed.get("goodput"), timed.get("lbb_b64")
    if g and d:
        result["speedup_vs_lbb_default_b"] = d["median_s"] / g["median_s"]
    if g and best_fixed:
        result["speedup_vs_lbb_best_fixed_b"] = timed[best_fixed]["median_s"] / g["median_s"]
    if g and d and g.get("final_accuracy") is not None and d.get("final_accuracy") is not None:
        result["final_accuracy_points_vs_default_b"] = 100 * (g["final_accuracy"] - d["final_accuracy"])
    write_result(result, args.out)


if __name__ == "__main__":
    main()
