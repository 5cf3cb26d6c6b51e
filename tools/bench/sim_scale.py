#!/usr/bin/env python3
"""How fast `tandem sim` runs a large cluster (issue: simulator). The simulated
cluster: N workers of four device types in equal numbers (speeds 1, 0.7, 0.5, 0.25),
an explicit linear calibration (0.02 ms a sample + 1 ms: nothing measured, so the
numbers do not depend on this machine's load), 32 samples a worker (fewer where
Fashion-MNIST's 60000 samples cannot hold 32 N: 14 a worker at 4096), 1000 iterations,
the lbb policy, a trace line every 100 iterations. The simulator and the policy
thread are pinned to one core. Reported: wall seconds, the policy's share of them,
simulated efficiency against the ideal.

usage: tools/bench/sim_scale.py BUILD_DIR [--workers 1024,4096] [--iterations 1000] [--policy lbb] [--out FILE]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from bench_common import write_result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--workers", default="1024,4096")
    ap.add_argument("--iterations", type=int, default=1000)
    ap.add_argument("--policy", default="lbb")
    ap.add_argument("--out")
    args = ap.parse_args()
    core = max(os.sched_getaffinity(0))
    root = tempfile.mkdtemp(prefix="tandem-sim-scale-")
    rows = []
    for n in [int(w) for w in args.workers.split(",")]:
        # Four device types in equal numbers, as a mixed GPU cluster has.
        speeds = ",".join(str([1.0, 0.7, 0.5, 0.25][4 * i // n]) for i in range(n))
        out = os.path.join(root, f"n{n}")
        cmd = [f"{args.build}/tandem", "sim", "scripts/experiments/quickstart.lua", "--workers", str(n),
               f"global_batch={min(32, 60000 // n) * n}", "stop.epochs=100000", f"stop.max_iterations={args.iterations}",
               f"emulation.speeds={speeds}", "emulation.reference=0.5", "emulation.calibration.batch=1,64,512",
               "emulation.calibration.ms=1.02,2.28,11.24", "emulation.calibration.host_ms=0.1,0.1,0.1",
               # History tables of thousands of workers outgrow the default 64 MB cap.
               f"policy.file={args.policy}", "policy.memory_mb=1024", "sim.trace_every=100", "log_level=warn",
               "--out", out]
        start = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=lambda: os.sched_setaffinity(0, {core}))
        if r.returncode != 0:
            sys.exit(f"sim_scale: tandem sim of {n} workers exited {r.returncode}:\n{r.stderr[-2000:]}")
        wall = time.perf_counter() - start
        with open(os.path.join(out, "summary.json")) as f:
            s = json.load(f)
        row = {"workers": n, "iterations": s["iterations"], "wall_s": wall, "sim_wall_s": s["wall_s"],
               "policy_s": s["policy_ms_total"] / 1000.0, "efficiency": s["efficiency"],
               "plan_changes": s["plan_changes"]}
        rows.append(row)
        print(f"{n:5d} workers, {s['iterations']} iterations, {args.policy}: {wall:.2f} s on one core "
              f"(process; {s['wall_s']:.2f} s simulating, {row['policy_s']:.2f} s in the policy); "
              f"efficiency {s['efficiency']:.3f}, {s['plan_changes']} plan changes", file=sys.stderr)
    write_result({"benchmark": "sim_scale", "core": core, "policy": args.policy, "rows": rows}, args.out)


if __name__ == "__main__":
    main()
