#!/usr/bin/env python3
"""Runs one experiment through `tandem sim` over a grid of settings and writes a CSV
table: for every combination of the --set values (cluster size, heterogeneity mix,
policy, policy parameters: any experiment key), the simulated throughput, the ideal
(every worker's own samples/s, summed), their ratio (efficiency), the mean step time,
the plan churn (plan changes per 100 iterations) and the policy's real cost; where a
policy changes the global batch or sim.noise_scale models the gradient noise, the
mean global batch, goodput and statistical efficiency too (empty otherwise).

usage: tools/sim/sweep.py BUILD_DIR EXPERIMENT.lua --set KEY=V1,V2,... [--set ...]
         [--fixed KEY=VALUE ...] [--out table.csv]
A value list is split on ';' when it holds commas itself (a per-worker list):
  --set 'emulation.speeds=1,1,0.5,0.25;1,0.5,0.5,0.25'
example:
  tools/sim/sweep.py build scripts/experiments/quickstart.lua --set workers=4,16,64 \\
      --set policy.file=equal,proportional,lbb --fixed global_batch=1024 stop.max_iterations=300
(with workers, give emulation.speeds through --fixed only if it fits every size; a
mix of speeds for any size: --set mix=uniform,two_speeds,four_types.)
"""
import argparse
import csv
import itertools
import json
import os
import subprocess
import sys
import tempfile

# Heterogeneity mixes by name, for any number of workers.
MIXES = {
    "uniform": lambda n: [1.0] * n,
    "two_speeds": lambda n: [1.0 if i < n // 2 else 0.5 for i in range(n)],
    "four_types": lambda n: [[1.0, 0.7, 0.5, 0.25][4 * i // n] for i in range(n)],
    "one_straggler": lambda n: [1.0] * (n - 1) + [0.33],
}


def parse_set(text):
    key, _, values = text.partition("=")
    if not key or not values:
        sys.exit(f"sweep: --set needs KEY=V1,V2,..., got {text!r}")
    return key, values.split(";") if ";" in values else values.split(",")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("experiment")
    ap.add_argument("--set", action="append", default=[], dest="sets")
    ap.add_argument("--fixed", nargs="*", default=[])
    ap.add_argument("--out", default="sweep.csv")
    args = ap.parse_args()
    grid = [parse_set(s) for s in args.sets]
    keys = [k for k, _ in grid]
    root = tempfile.mkdtemp(prefix="tandem-sweep-")
    rows = []
    for n, combo in enumerate(itertools.product(*[v for _, v in grid])):
        setting = dict(zip(keys, combo))
        overrides = list(args.fixed)
        workers = None
        for k, v in setting.items():
            if k == "workers":
                workers = int(v)
                overrides.append(f"workers={v}")
            elif k != "mix":
                overrides.append(f"{k}={v}")
        if "mix" in setting:
            if setting["mix"] not in MIXES:
                sys.exit(f"sweep: unknown mix {setting['mix']!r}; known: {', '.join(MIXES)}")
            count = workers or int(next((o.split("=")[1] for o in overrides if o.startswith("workers=")), 1))
            overrides.append("emulation.speeds=" + ",".join(str(s) for s in MIXES[setting["mix"]](count)))
        out = os.path.join(root, f"run{n}")
        r = subprocess.run([f"{args.build}/tandem", "sim", args.experiment, "log_level=warn", "--out", out] + overrides,
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f"sweep: {setting} failed:\n{r.stderr[-1500:]}", file=sys.stderr)
            rows.append({**setting, "error": r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "failed"})
            continue
        with open(os.path.join(out, "summary.json")) as f:
            s = json.load(f)
        it = max(s["iterations"], 1)
        row = {**setting, "efficiency": round(s["efficiency"], 4), "samples_per_s": round(s["samples_per_s"], 1),
               "ideal_samples_per_s": round(s["ideal_samples_per_s"], 1),
               "step_ms": round(1000.0 * s["train_s"] / it, 4),
               "plan_changes_per_100": round(100.0 * s["plan_changes"] / it, 2),
               "policy_ms_per_iteration": round(s["policy_ms_total"] / it, 4), "error": ""}
        # A policy that changes the global batch, or gradient noise modelled (sim.noise_scale).
        for key in ("mean_global_batch", "goodput", "statistical_efficiency"):
            if s.get(key) is not None:
                row[key] = round(s[key], 4)
        rows.append(row)
        print(", ".join(f"{k}={v}" for k, v in setting.items()) +
              f": efficiency {row['efficiency']:.3f}, step {row['step_ms']:.2f} ms, "
              f"{row['plan_changes_per_100']:.1f} plan changes / 100 iterations", file=sys.stderr)
    columns = keys + ["efficiency", "samples_per_s", "ideal_samples_per_s", "step_ms", "plan_changes_per_100",
                      "policy_ms_per_iteration", "mean_global_batch", "goodput", "statistical_efficiency", "error"]
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    print(f"sweep: {len(rows)} runs -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
