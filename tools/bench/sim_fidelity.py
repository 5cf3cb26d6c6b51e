#!/usr/bin/env python3
"""The simulator against real emulated runs (issue: simulator, fidelity). For 4 and
8 workers: a real run (tandem run, MLP on Fashion-MNIST, global batch 512, speeds
spread over 1..0.25, the lbb policy, emulation.reference small enough for the ranks
to fit in this machine's cores), then `tandem sim` of the same experiment with the
real run's own calibration (its calibration.json) and the same emulation. The ring
model's link is set from what the real run measured (its mean comm_ms per step: the
simulator is told the network, as a user would tell it theirs). Compared over the
iterations after the first 30 (policies settling): the mean step time, and the
plans: the mean over those iterations of each worker's local batch, as the largest
relative error over the workers (and the mean absolute difference in samples).

usage: tools/bench/sim_fidelity.py BUILD_DIR [--workers 4,8] [--iterations 200] [--out FILE]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from bench_common import calibration_args, iteration_rows, write_result

B = 512


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--workers", default="4,8")
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--skip", type=int, default=30)
    ap.add_argument("--out")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="tandem-sim-fidelity-")
    rows = []
    for n in [int(w) for w in args.workers.split(",")]:
        speeds = ",".join(f"{1 - 0.75 * i / (n - 1):.3f}" for i in range(n))
        reference = 0.25 / n * 2  # n ranks at most this fraction of a core each: they fit in 2 cores
        common = ["scripts/experiments/quickstart.lua", f"global_batch={B}", f"stop.max_iterations={args.iterations}",
                  "stop.epochs=100", "stop.target_accuracy=1", "eval_every=100000", f"emulation.speeds={speeds}",
                  f"emulation.reference={reference}", "policy.file=lbb", "log_level=warn"]
        real_dir, sim_dir = os.path.join(root, f"real{n}"), os.path.join(root, f"sim{n}")
        subprocess.run([f"{args.build}/tandem", "run"] + common + ["--workers", str(n), "--out", real_dir],
                       check=True, capture_output=True)
        real = iteration_rows(real_dir, args.skip)
        comm_ms = sum(max(w["comm_ms"] for w in r["workers"]) for r in real) / len(real)
        # Ring: 2(n-1)/n of the gradient's bytes over the link, latency set to 0.
        with open(os.path.join(real_dir, "summary.json")) as f:
            params = json.load(f)["parameters"]
        bandwidth = 2 * (n - 1) / n * params * 4 / (comm_ms / 1000) / 1e9
        calibration = calibration_args(real_dir)
        subprocess.run([f"{args.build}/tandem", "sim"] + common + calibration +
                       ["--workers", str(n), "sim.latency_us=0", f"sim.bandwidth_gb_s={bandwidth:.6f}",
                        "--out", sim_dir], check=True, capture_output=True)
        sim = iteration_rows(sim_dir, args.skip)
        step = lambda rows: sum(r["step_ms"] for r in rows) / len(rows)
        mean_plan = lambda rows: [sum(r["workers"][i]["local_batch"] for r in rows) / len(rows) for i in range(n)]
        rp, sp = mean_plan(real), mean_plan(sim)
        row = {"workers": n, "real_step_ms": step(real), "sim_step_ms": step(sim),
               "step_error": abs(step(sim) - step(real)) / step(real),
               "real_mean_plan": rp, "sim_mean_plan": sp,
               "plan_error_max": max(abs(s - r) / r for s, r in zip(sp, rp)),
               "plan_mean_abs_samples": sum(abs(s - r) for s, r in zip(sp, rp)) / n,
               "comm_ms_real": comm_ms}
        rows.append(row)
        print(f"{n} workers: step {row['real_step_ms']:.2f} ms real, {row['sim_step_ms']:.2f} simulated "
              f"({100 * row['step_error']:.1f}% off); mean plans real {[round(x) for x in rp]}, simulated "
              f"{[round(x) for x in sp]}: largest error {100 * row['plan_error_max']:.1f}%, "
              f"{row['plan_mean_abs_samples']:.1f} samples on average", file=sys.stderr)
    write_result({"benchmark": "sim_fidelity", "rows": rows, "skip": args.skip}, args.out)


if __name__ == "__main__":
    main()
