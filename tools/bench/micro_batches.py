#!/usr/bin/env python3
"""Per-worker micro-batches chosen by the min-max (issue 37): time to the target of
lbb when a worker's memory cap bounds its micro-batch (it may take more samples than
fit at once, in micro-batches) against today's capped plans (the cap bounds its
local batch: lbb's params.micro_batches = false), side by side in one script.

Emulation: 4 workers at speed factors --speeds of a reference device (default 1, 0.5,
0.25, 0.25: worker 0 is the fastest, half the cluster's throughput; --reference of this
machine's core: 0.25 for the MLP, 0.5 for the GPT), the fastest with the least memory:
worker 0 holds --cap samples at once (policy.max_batch: a given cap; by default 16 for the MLP
and 6 for the GPT, about a sixth of its share), the others the whole global batch.
One calibration of this machine for every run. Two models:
  - mlp: scripts/experiments/quickstart.lua (MLP 784-256-256-10, Fashion-MNIST) at a
    global batch of 256 (lr 0.1), to 85% test accuracy;
  - gpt: scripts/experiments/gpt.lua (2 layers, 64 wide, 32-byte windows of
    fortunes) at a global batch of 64, to a validation loss of 2.7.
For each, the cap that binds (--cap) and one that does not (the global batch): the
second shows what micro-batching costs where it is not needed (nothing: the plans
are the same). The bound is what free micro-batches would give: the samples/s where
the cap does not bind over the capped plans' (a micro-batch costs more per sample than
a whole local batch: an MLP's weight gradients are read and written once per
micro-batch, so the bound is not reached). Each variant runs --repeats times; the medians of the time to target
(training time, evaluations excluded) are compared, with each run's samples/s.

usage: tools/bench/micro_batches.py BUILD_DIR [--models mlp,gpt] [--cap N] [--reference R] [--speeds 1,0.5,0.25,0.25]
                                     [--repeats 1] [--out FILE]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import Runner, calibration_overrides, write_result  # noqa: E402

MODELS = {
    "mlp": dict(experiment="scripts/experiments/quickstart.lua", batch=256, cap=16, reference=0.25,
                args=["lr=0.1", "stop.epochs=4", "eval_every=25"], target="stop.target_accuracy=0.85"),
    "gpt": dict(experiment="scripts/experiments/gpt.lua", batch=64, cap=6, reference=0.5,
                args=["model_args.n_embd=64", "model_args.n_head=2", "data.seq_len=32", "data.validation=0.02",
                      "stop.max_iterations=3000", "eval_every=25", "eval_batch=256"],
                target="stop.target_loss=2.7"),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--models", default="mlp,gpt")
    ap.add_argument("--cap", type=int, help="worker 0's largest micro-batch where the cap binds (default: mlp 16, "
                                            "gpt 6)")
    ap.add_argument("--reference", type=float, help="the reference device's share of a core (default: mlp 0.25, "
                                                    "gpt 0.5)")
    ap.add_argument("--speeds", default="1,0.5,0.25,0.25", help="the workers' speed factors; worker 0 is capped")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out")
    a = ap.parse_args()
    speeds = [float(v) for v in a.speeds.split(",")]
    root = tempfile.mkdtemp(prefix="tandem-micro-")
    result = {"emulation": f"speed factors {speeds} of a reference at --reference of this machine's core; "
                           f"worker 0 holds --cap samples at once (policy.max_batch)",
              "models": {}}
    for name in a.models.split(","):
        m = MODELS[name]
        B = m["batch"]
        reference = a.reference or m["reference"]
        common = ["--workers", str(len(speeds)), f"global_batch={B}", f"emulation.reference={reference}",
                  "emulation.speeds=" + ",".join(str(s) for s in speeds), "policy.file=lbb", "console=false"]
        go = Runner(a.build, os.path.join(root, name), common, m["experiment"])
        calibration = calibration_overrides(
            Runner(a.build, os.path.join(root, name), [], m["experiment"]), B)
        rows = {"reference": reference, "cap": a.cap or m["cap"], "global_batch": B}
        for cap_name, cap in (("binds", a.cap or m["cap"]), ("does not bind", B)):
            caps = "policy.max_batch=" + ",".join(str(c) for c in [cap] + [B] * (len(speeds) - 1))
            for variant, micro in (("capped plans (today)", "false"), ("micro-batches", "true")):
                times, rates = [], []
                for rep in range(a.repeats):
                    s = go(f"{cap_name.replace(' ', '_')}-{micro}-{rep}",
                           calibration + m["args"] + [m["target"], caps, f"policy.params.micro_batches={micro}",
                                                      f"seed={rep + 1}"])
                    if s.get("time_to_target_s") is None:
                        print(f"{name} {cap_name} {variant}: no target reached ({s['stop_reason']})", file=sys.stderr)
                        continue
                    times.append(s["time_to_target_s"])
                    rates.append(s["samples_per_s"])
                key = f"cap {cap_name}: {variant}"
                rows[key] = {"time_to_target_s": statistics.median(times) if times else None, "runs": times,
                             "samples_per_s": rates}
                print(f"{name} {key}: {rows[key]['time_to_target_s']} s to target", file=sys.stderr)
        for cap_name in ("binds", "does not bind"):
            before = rows[f"cap {cap_name}: capped plans (today)"]["time_to_target_s"]
            after = rows[f"cap {cap_name}: micro-batches"]["time_to_target_s"]
            rows[f"speed-up where the cap {cap_name}"] = before / after if before and after else None
        capped = rows["cap binds: capped plans (today)"]["samples_per_s"]
        free = rows["cap does not bind: micro-batches"]["samples_per_s"]
        if capped and free:
            rows["bound: free micro-batches"] = statistics.median(free) / statistics.median(capped)
        result["models"][name] = rows
    write_result(result, a.out)


if __name__ == "__main__":
    main()
