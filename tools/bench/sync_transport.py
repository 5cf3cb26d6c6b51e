#!/usr/bin/env python3
"""The relaxed modes' transport on one host: shared memory against MPI messages, side
by side in one script (alternating, --repeats times), with bsp as the reference.

On one host a sync group's all-reduce and broadcast go through a shared window of the
group's own and the parameter server's pushes and replies through shared-memory slots
(engine/dist/shm_channel.*); TANDEM_SHM_ALLREDUCE=0 makes the same run use MPI
messages, as ranks on several hosts do.

Emulation: 8 workers, speed factors (docs/heterogeneity.md), the speed-1
device at --reference of a core, one calibration for every run. MLP 784-256-256-10 on
Fashion-MNIST, B = 512, lr 0.05 (the learning rate does not change the transport's
cost), --iterations global batches, no evaluation. Cases:
  two_groups     speeds 1 x 8, groups {1,1,1,1,2,2,2,2}, S = 1;
  straggler_7_1  speeds 1 x 7 and 0.33, groups of the 7 and the straggler, batches
                 70 x 6, 69 and 23 (the straggler's share at its speed), S = 1;
  asgd           speeds 1 x 8, the asgd policy (one group per worker).
Per run: samples/s, the mean communication ms of a step, and for the straggler case
the fraction of the ideal (the workers' speeds over 8 times one worker's samples/s
alone at 64 samples, measured in the same script).

usage: tools/bench/sync_transport.py BUILD_DIR [--iterations 200] [--repeats 2] [--reference 0.03] [--out FILE]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

from bench_common import Runner, calibration_overrides, write_result

N, B = 8, 512
CASES = {
    "two_groups": ["emulation.speeds=" + ",".join(["1"] * N), "sync.mode=grouped",
                   "sync.groups=1,1,1,1,2,2,2,2", "sync.staleness=1"],
    "straggler_7_1": ["emulation.speeds=" + ",".join(["1"] * (N - 1)) + ",0.33", "sync.mode=grouped",
                      "sync.groups=1,1,1,1,1,1,1,2", "sync.staleness=1", "plan.kind=fixed",
                      "plan.batches=70,70,70,70,70,70,69,23"],
    "asgd": ["emulation.speeds=" + ",".join(["1"] * N), "policy.file=asgd"],
}
STRAGGLER_SPEEDS = [1] * (N - 1) + [0.33]


def comm_ms(root, name):
    with open(os.path.join(root, name, "trace.jsonl")) as f:
        rows = [json.loads(line.replace("-nan", "NaN")) for line in f]
    steps = [w["comm_ms"] for r in rows[3:] if r["event"] == "iteration" for w in r["workers"]]
    return statistics.mean(steps) if steps else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--reference", type=float, default=0.03)
    ap.add_argument("--out")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="tandem-sync-transport-")
    go = Runner(args.build, root, [f"emulation.reference={args.reference}"])
    go.common += calibration_overrides(go, B)
    base = [f"stop.max_iterations={args.iterations}", "stop.epochs=100", f"global_batch={B}", "lr=0.05",
            "eval_every=100000", "stop.target_accuracy=1", "--workers", str(N)]
    alone = go("alone", [f"stop.max_iterations={args.iterations}", "global_batch=64", "emulation.speeds=1",
                         "eval_every=100000", "stop.target_accuracy=1"])["samples_per_s"]
    ideal_straggler = alone * sum(STRAGGLER_SPEEDS)
    runs = {}

    def measure(label, extra, transport):
        name = f"{label}-{transport}-{len(runs.get((label, transport), []))}"
        saved = os.environ.get("TANDEM_SHM_ALLREDUCE")
        if transport == "mpi":
            os.environ["TANDEM_SHM_ALLREDUCE"] = "0"
        try:
            s = go(name, base + extra)
        finally:
            if saved is None:
                os.environ.pop("TANDEM_SHM_ALLREDUCE", None)
            else:
                os.environ["TANDEM_SHM_ALLREDUCE"] = saved
        r = {"samples_per_s": s["samples_per_s"], "comm_ms": comm_ms(root, name)}
        if label == "straggler_7_1":
            r["fraction_of_ideal"] = s["samples_per_s"] / ideal_straggler
        runs.setdefault((label, transport), []).append(r)
        print(f"{label:14s} {transport:4s} {r['samples_per_s']:8.0f} samples/s  comm {r['comm_ms']:.2f} ms"
              + (f"  {r['fraction_of_ideal']:.2f} of ideal" if "fraction_of_ideal" in r else ""),
              file=sys.stderr, flush=True)

    for _ in range(args.repeats):
        measure("bsp", ["emulation.speeds=" + ",".join(["1"] * N)], "shm")
        for label, extra in CASES.items():
            for transport in ("shm", "mpi"):
                measure(label, extra, transport)
    result = {"emulation": f"8 workers, speed factors, reference {args.reference} of a core",
              "alone_samples_per_s": alone, "runs": {}}
    for (label, transport), rs in runs.items():
        result["runs"][f"{label}/{transport}"] = rs
    for label in CASES:
        shm = statistics.median(r["samples_per_s"] for r in runs[(label, "shm")])
        mpi = statistics.median(r["samples_per_s"] for r in runs[(label, "mpi")])
        result["runs"][f"{label}/shm_over_mpi"] = shm / mpi
        print(f"{label}: shared memory {shm:.0f} vs MPI {mpi:.0f} samples/s: {shm / mpi:.2f}x", file=sys.stderr)
    write_result(result, args.out)


if __name__ == "__main__":
    main()
