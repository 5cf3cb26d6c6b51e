#!/usr/bin/env python3
"""Gradient buckets against one all-reduce after the backward pass (issue 36): two hosts
(network namespaces on this machine, tools/multihost/netns-hosts.sh; OpenMPI over TCP),
one rank each, host 1's link limited by tc (tbf) to --rate so that the one all-reduce
takes at least half of the step. For each model, comm.bucket_mb = 0 (one all-reduce)
then --bucket-mb, then --bucket-mb with comm.dtype = 'bf16', side by side in one script, --iterations steps each (the first
--skip left out: start-up, the first buckets' connections):

  - step_ms: the median step;
  - exposed_ms: the median of the workers' comm_ms, the part of the sum that the
    backward pass did not hide (after every rank arrived; idle, the wait for the
    slowest, apart);
  - allreduce_ms (buckets): the median span from the first bucket's start to the last
    one's end, as the trace records them, the whole sum's time;
  - fraction: samples/s achieved over the sum of the workers' own throughputs (each
    worker's local batch over its compute_ms in the run without buckets, where
    nothing competes with it), the cluster's physical limit.

On this machine both "hosts" share its two cores with the two ranks' compute: the
kernel's TCP work for the buckets (about 80 ms of CPU for a 13 MB gradient each way)
then runs beside the compute and lengthens it (compute_ms rises with buckets), where
hosts of their own would do it on a core BLAS does not use. Each rate is a setting of
its own: one where the all-reduce takes at least half of the step, one where it takes
no longer than the backward pass (the exposed-share target holds there).

Models: the MLP with wide layers (784-1024x4-10, 3.9 M parameters, a 15.7 MB
gradient) and a GPT (4 layers, 256 wide, 128-byte windows of fortunes, 3.3 M
parameters). No emulated heterogeneity: both ranks compute at this machine's speed,
one core each. Then two levels: 4 ranks on the 2 hosts (2 a host) over a
--two-level-rate link, every rank across the network against a host's ranks summing
through its shared memory first (the bytes across hosts those of one rank a host):
the quickstart MLP's one all-reduce, and the GPT in buckets.

Needs root, iproute2 and mpirun (exits 77 otherwise, as the tests do).

usage: tools/bench/gradient_overlap.py BUILD_DIR [--rates 500mbit,10gbit] [--bucket-mb 1] [--iterations 30]
                                      [--models mlp,gpt] [--out FILE]
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

MODELS = {
    "mlp": ["scripts/experiments/quickstart.lua", "model_args.hidden={1024,1024,1024,1024}", "global_batch=1024",
            "stop.target_accuracy=1"],
    "gpt": ["scripts/experiments/gpt.lua", "model_args.n_layer=4", "model_args.n_embd=256", "model_args.n_head=4",
            "data.seq_len=128", "global_batch=16", "data.validation=0.002"],
}


def measure(tandem, host_dir, out, model, bucket_mb, iterations, skip, own=None, dtype="fp32", ranks=2, env=()):
    cmd = (mpirun_on_hosts(host_dir, ranks) + [x for e in env for x in ("-x", e)] + [tandem, "run"] + MODELS[model] +
           [f"stop.max_iterations={iterations}", "eval_every=100000",
            "log_level=warn", "console=false", f"comm.bucket_mb={bucket_mb}", f"comm.dtype={dtype}", "--workers", str(ranks), "--out", out])
    subprocess.run(cmd, check=True, capture_output=True)
    rows = iteration_rows(out, skip)
    step = statistics.median(r["step_ms"] for r in rows)
    exposed, idle, compute = (worker_median(rows, key) for key in ("comm_ms", "idle_ms", "compute_ms"))
    if own is None:
        own = statistics.median(sum(w["local_batch"] / (w["compute_ms"] / 1000.0) for w in r["workers"])
                                for r in rows)
    achieved = statistics.median(sum(w["local_batch"] for w in r["workers"]) / (r["step_ms"] / 1000.0) for r in rows)
    res = {"bucket_mb": bucket_mb, "dtype": dtype, "step_ms": round(step, 2), "compute_ms": round(compute, 2),
           "exposed_ms": round(exposed, 2), "idle_ms": round(idle, 2),
           "exposed_share": round(exposed / step, 3), "fraction_of_own_throughputs": round(achieved / own, 3),
           "own_throughputs": round(own, 1)}
    if rows[0]["workers"][0].get("buckets"):
        res["allreduce_ms"] = round(worker_median(rows, "allreduce_ms"), 2)
        res["buckets"] = rows[0]["workers"][0]["buckets"]
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--rates", default="500mbit,10gbit")
    ap.add_argument("--bucket-mb", type=float, default=1.0)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--skip", type=int, default=5)
    ap.add_argument("--models", default="mlp,gpt")
    ap.add_argument("--two-level-rate", default="200mbit", help="the link for the two-level comparison ('' skips it)")
    ap.add_argument("--out")
    a = ap.parse_args()
    tandem = os.path.abspath(os.path.join(a.build, "tandem"))
    scratch = tempfile.mkdtemp(prefix="gradient-overlap-")
    host_dir = hosts_up(2, scratch)
    result = {"link": "host 1's link limited by tc (tbf) to each rate", "emulation": "none: 2 ranks, one a host, "
              "this machine's speed", "bucket_mb": a.bucket_mb, "rates": {}}
    try:
        for rate in [r for r in a.rates.split(",") if r]:
            if not hosts("rate", "1", rate):
                sys.exit(f"tc cannot limit the link to {rate} here")
            for model in [m for m in a.models.split(",") if m]:
                at = os.path.join(scratch, f"{rate}-{model}")
                one = measure(tandem, host_dir, at + "-0", model, 0, a.iterations, a.skip)
                buckets = measure(tandem, host_dir, at + "-b", model, a.bucket_mb, a.iterations, a.skip,
                                  one["own_throughputs"])
                bf16 = measure(tandem, host_dir, at + "-h", model, a.bucket_mb, a.iterations, a.skip,
                               one["own_throughputs"], "bf16")
                row = {"one all-reduce": one, "buckets": buckets, "buckets, bf16 wire": bf16,
                       "step speed-up": round(one["step_ms"] / buckets["step_ms"], 3),
                       "step speed-up, bf16 wire": round(one["step_ms"] / bf16["step_ms"], 3)}
                result["rates"].setdefault(rate, {})[model] = row
                print(json.dumps({rate: {model: row}}), flush=True)
            hosts("clear-netem", "1")
        if a.two_level_rate:
            # Two levels (engine/dist/mpi_comm.cpp): 4 ranks on the 2 hosts, the one
            # all-reduce of the quickstart MLP (1.08 MB, under two buckets), every rank
            # across the network (TANDEM_TWO_LEVEL_ALLREDUCE=0) against a host's ranks
            # summing through its shared memory first.
            hosts("rate", "1", a.two_level_rate)
            MODELS["quickstart"] = ["scripts/experiments/quickstart.lua", "global_batch=256", "stop.target_accuracy=1"]
            result["two levels"] = {"link": a.two_level_rate, "ranks": "4 on 2 hosts"}
            for model, mb in (("quickstart", 0), ("gpt", a.bucket_mb)):
                at = os.path.join(scratch, f"two-level-{model}")
                flat = measure(tandem, host_dir, at + "-flat", model, mb, a.iterations, a.skip, ranks=4,
                               env=["TANDEM_TWO_LEVEL_ALLREDUCE=0"])
                two = measure(tandem, host_dir, at + "-two", model, mb, a.iterations, a.skip, flat["own_throughputs"],
                              ranks=4)
                row = {"flat": flat, "two levels": two, "step speed-up": round(flat["step_ms"] / two["step_ms"], 3),
                       "exposed comm ratio": round(flat["exposed_ms"] / max(two["exposed_ms"], 1e-9), 3)}
                result["two levels"][model] = row
                print(json.dumps({"two levels": {model: row}}), flush=True)
            hosts("clear-netem", "1")
    finally:
        hosts("clear-netem", "1")
        hosts("down")
        shutil.rmtree(scratch, ignore_errors=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
