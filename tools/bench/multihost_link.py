#!/usr/bin/env python3
"""What a slower link between hosts costs: the quickstart MLP (784-256-256-10, 269,322
parameters, a 1.08 MB gradient) on --ranks ranks spread round robin over --hosts hosts
(network namespaces on this machine, tools/multihost/netns-hosts.sh; OpenMPI over TCP),
with host 1's link unlimited, then limited by tc to each of --rates (tbf; or netem
delays, "20ms", where the kernel has netem). B = 256, --iterations global batches, the
equal plan, no evaluation. Per setting: the median over iterations 1.. of the workers'
mean comm_ms and of step_ms, and the gradient's crossing time at that rate.

Needs root, iproute2 and mpirun (exits 77 otherwise, as the tests do).

usage: tools/bench/multihost_link.py BUILD_DIR [--hosts 2] [--ranks 4] [--iterations 40]
                                    [--rates 100mbit,40mbit,20ms] [--out FILE]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import hosts, hosts_up, iteration_rows, mpirun_on_hosts, worker_median  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--hosts", type=int, default=2)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--rates", default="100mbit,40mbit,20ms")
    ap.add_argument("--out")
    a = ap.parse_args()
    tandem = os.path.abspath(os.path.join(a.build, "tandem"))
    scratch = tempfile.mkdtemp(prefix="multihost-link-")
    host_dir = hosts_up(a.hosts, scratch)
    results = []
    try:
        for setting in ["unlimited"] + a.rates.split(","):
            if setting != "unlimited":
                ok = hosts("netem", "1", setting) if setting.endswith("ms") else hosts("rate", "1", setting)
                if not ok:
                    print(f"{setting}: not measured (tc cannot do it here)")
                    continue
            out = os.path.join(scratch, setting)
            cmd = (mpirun_on_hosts(host_dir, a.ranks) +
                   [tandem, "run", "scripts/experiments/quickstart.lua", "global_batch=256",
                    f"stop.max_iterations={a.iterations}", "stop.target_accuracy=1", "eval_every=0",
                    "log_level=warn", "console=false", "--workers", str(a.ranks), "--out", out])
            subprocess.run(cmd, check=True, capture_output=True)
            hosts("clear-netem", "1")
            rows = iteration_rows(out, 1)
            comm = worker_median(rows, "comm_ms")
            step = statistics.median(r["step_ms"] for r in rows)
            res = {"link": setting, "comm_ms": round(comm, 2), "step_ms": round(step, 2)}
            if setting.endswith("bit"):
                unit = {"k": 1e3, "m": 1e6, "g": 1e9}[setting[-4].lower()]
                res["gradient_crossing_ms"] = round(269322 * 4 * 8 / (float(setting[:-4]) * unit) * 1000, 1)
            print(json.dumps(res))
            results.append(res)
    finally:
        hosts("down")
        shutil.rmtree(scratch, ignore_errors=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"hosts": a.hosts, "ranks": a.ranks, "iterations": a.iterations, "results": results}, f,
                      indent=1)


if __name__ == "__main__":
    main()
