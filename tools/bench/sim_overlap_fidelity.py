#!/usr/bin/env python3
"""tandem sim against measured steps with gradient buckets, the bf16 wire and two
levels (issue 36 item 4). Real runs on namespace hosts (tools/multihost/netns-hosts.sh,
OpenMPI over TCP), host 1's link limited by tc (tbf) to --rate, then `tandem sim` of
each run's experiment, given what a user would give it:

  - the compute: the real run's own calibration (its calibration.json: this machine's
    step by local batch, the emulation's starting point);
  - the network: one all-reduce's bandwidth, measured once per model by a run that
    sums in one all-reduce after the backward pass (its median comm_ms; the ring's
    2(m-1)/m of the gradient's bytes over it, latency 0).

Then, per model, the simulator predicts the steps it was not told: the gradients in
buckets during the backward pass (comm.bucket_mb), in buckets with the bf16 wire, and
4 ranks on the 2 hosts in two levels (sim.ranks_per_host = 2). Each row gives the
median step, real and simulated, the simulated one's error, and the exposed
communication (comm_ms) of both.

Emulation: the workers are emulated devices (emulation.speeds, a fraction
--reference of a core at speed 1), so their compute is the calibrated time stretched,
whatever else the machine runs. Without it, on this 2-core machine the namespace
hosts share the cores that compute, and the kernel's TCP work for the buckets slows
the compute by half again (the compute the simulator was calibrated with is measured
alone): that is this machine, not the model of the overlap. With emulation, the
buckets start when the emulated device's backward pass finishes them
(engine/train/sync/bsp_step.cpp), as the simulator starts them.

Needs root, iproute2 and mpirun (exits 77 otherwise, as the tests do).

usage: tools/bench/sim_overlap_fidelity.py BUILD_DIR [--rate 500mbit] [--models mlp,gpt] [--bucket-mb 1]
                                          [--iterations 30] [--out FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (calibration_args, iteration_rows, limited_hosts, mpirun_on_hosts,  # noqa: E402
                          worker_median, write_result)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the experiments' paths
MODELS = {
    "mlp": ["scripts/experiments/quickstart.lua", "model_args.hidden={1024,1024,1024,1024}", "global_batch=1024",
            "stop.target_accuracy=1"],
    "gpt": ["scripts/experiments/gpt.lua", "model_args.n_layer=4", "model_args.n_embd=256", "model_args.n_head=4",
            "data.seq_len=128", "global_batch=16", "data.validation=0.002"],
}


def summary(rows):
    return {"step_ms": round(statistics.median(r["step_ms"] for r in rows), 2),
            "compute_ms": round(worker_median(rows, "compute_ms"), 2),
            "exposed_ms": round(worker_median(rows, "comm_ms"), 2),
            "allreduce_ms": round(worker_median(rows, "allreduce_ms"), 2),
            "buckets": rows[0]["workers"][0].get("buckets", 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--rate", default="500mbit")
    ap.add_argument("--models", default="mlp,gpt")
    ap.add_argument("--bucket-mb", type=float, default=1.0)
    ap.add_argument("--speeds", default="1,0.5", help="two ranks' emulated speeds (four ranks: each twice)")
    ap.add_argument("--reference", type=float, default=0.3, help="speed 1 as a fraction of a core (2 ranks)")
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--skip", type=int, default=5)
    ap.add_argument("--no-two-levels", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args()
    tandem = os.path.abspath(os.path.join(a.build, "tandem"))
    speeds2 = a.speeds.split(",")
    result = {"benchmark": "sim_overlap_fidelity", "link": f"host 1's link limited by tc (tbf) to {a.rate}",
              "emulation": f"speeds {a.speeds} (4 ranks: each twice), reference {a.reference} of a core (2 ranks), "
                           f"{a.reference / 2} (4 ranks); plan.kind = proportional", "bucket_mb": a.bucket_mb,
              "models": {}}
    with limited_hosts(2, "sim-overlap-fidelity-", a.rate) as (host_dir, scratch):
        def run_both(model, name, ranks, settings, bandwidth=None, sim_only=()):
            speeds = ",".join(speeds2 * (ranks // 2))
            reference = a.reference * 2 / ranks
            common = MODELS[model] + [f"stop.max_iterations={a.iterations}", "eval_every=100000", "log_level=warn",
                                      f"emulation.speeds={speeds}", f"emulation.reference={reference}",
                                      "plan.kind=proportional"] + settings
            real_dir = os.path.join(scratch, f"{model}-{name}-real")
            cmd = mpirun_on_hosts(host_dir, ranks) + [tandem, "run"] + common + ["console=false", "--workers",
                                                                                  str(ranks), "--out", real_dir]
            subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
            real = summary(iteration_rows(real_dir, a.skip))
            if bandwidth is None:
                with open(os.path.join(real_dir, "summary.json")) as f:
                    params = json.load(f)["parameters"]
                members = 2  # the ring runs among the 2 hosts (one rank each here)
                bandwidth = 2 * (members - 1) / members * params * 4 / (real["exposed_ms"] / 1000) / 1e9
            sim_dir = os.path.join(scratch, f"{model}-{name}-sim")
            subprocess.run([tandem, "sim"] + common + calibration_args(real_dir) + list(sim_only) +
                           ["sim.latency_us=0", f"sim.bandwidth_gb_s={bandwidth:.6f}", "--workers", str(ranks),
                            "--out", sim_dir], check=True, capture_output=True, cwd=ROOT)
            sim = summary(iteration_rows(sim_dir, a.skip))
            row = {"real": real, "sim": sim, "step_error": round(sim["step_ms"] / real["step_ms"] - 1, 4)}
            print(f"{model} {name}: step {real['step_ms']:.1f} ms real, {sim['step_ms']:.1f} simulated "
                  f"({100 * row['step_error']:+.1f}%); exposed {real['exposed_ms']:.1f} ms real, "
                  f"{sim['exposed_ms']:.1f} simulated", file=sys.stderr, flush=True)
            return row, bandwidth

        for model in [m for m in a.models.split(",") if m]:
            rows = {}
            rows["one all-reduce (tells the bandwidth)"], bw = run_both(model, "one", 2, ["comm.bucket_mb=0"])
            rows["buckets"], _ = run_both(model, "buckets", 2, [f"comm.bucket_mb={a.bucket_mb}"], bw)
            rows["buckets, bf16 wire"], _ = run_both(model, "bf16", 2,
                                                     [f"comm.bucket_mb={a.bucket_mb}", "comm.dtype=bf16"], bw)
            if not a.no_two_levels:
                rows["4 ranks on 2 hosts, two levels, buckets"], _ = run_both(
                    model, "two-levels", 4, [f"comm.bucket_mb={a.bucket_mb}"], bw, ["sim.ranks_per_host=2"])
            result["models"][model] = {"bandwidth_gb_s": round(bw, 6), "rows": rows}
    write_result(result, a.out)


if __name__ == "__main__":
    main()
