#!/usr/bin/env python3
"""Balancing on an emulated heterogeneous cluster, as a fraction of the ideal.

Emulation: speed factors. 4 workers at 1, 1, 0.5, 0.25 of a reference device that
runs at an eighth of a core by default (--reference 0.125): the 4 ranks together
need about a third of one of the 2 cores, so the numbers measure balancing, not CPU
contention. (Synchronising 4 processes that share 2 cores costs 1.5 to 3 ms a step
here whatever the step; a slower reference keeps that small next to compute, as
it is between real devices. --reference 0.5 and 0.25 show how it weighs.)
MLP 784-256-256-10 on Fashion-MNIST, global batch 512.

The ideal is the physical limit of the cluster: the sum of each worker's own
samples/s, each measured alone (1 rank, the same speed, the equal-split batch 128)
in this same script. Then the 4-worker cluster runs with the equal split and with a
fixed plan proportional to speed; both are reported as achieved / ideal. Finally the
communication share of the step (comm_ms / step_ms, mean over workers) for 1, 2 and
4 ranks of equal speed.

usage: tools/bench/hetero_balance.py BUILD_DIR [--iterations 200] [--out FILE]
"""
import argparse
import os
import sys
import tempfile

from bench_common import Runner, alone_throughputs, calibration_overrides, write_result

SPEEDS = [1, 1, 0.5, 0.25]
B = 512
REFERENCE = 0.125  # the speed-1 device, as a fraction of one core (--reference)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--reference", type=float, default=REFERENCE)
    ap.add_argument("--out")
    args = ap.parse_args()
    iters = f"stop.max_iterations={args.iterations}"
    root = tempfile.mkdtemp(prefix="tandem-hetero-")
    go = Runner(args.build, root, [f"emulation.reference={args.reference}", "eval_every=100000",
                                   "stop.target_accuracy=1"])
    go.common += calibration_overrides(go, B)
    alone = alone_throughputs(go, SPEEDS, B // len(SPEEDS), args.iterations)
    ideal = sum(alone)

    speeds = ",".join(str(s) for s in SPEEDS)
    results = {}
    for plan in ("equal", "proportional"):
        s = go(plan, [iters, f"global_batch={B}", "--workers", str(len(SPEEDS)),
                                         f"emulation.speeds={speeds}", f"plan.kind={plan}"])
        results[plan] = {"samples_per_s": s["samples_per_s"], "fraction_of_ideal": s["samples_per_s"] / ideal,
                         "idle_share": s["idle_share"], "comm_share": s["comm_share"],
                         "stats_ms_per_iteration": s["stats_ms_per_iteration"],
                         "step_ms": 1000.0 * B / s["samples_per_s"]}
        print(f"4 workers, {plan:12s} plan: {s['samples_per_s']:.0f} samples/s = "
              f"{s['samples_per_s'] / ideal:.2f} of ideal ({ideal:.0f}); idle {100 * s['idle_share']:.0f}%, "
              f"comm {100 * s['comm_share']:.1f}%, stats {s['stats_ms_per_iteration']:.3f} ms/iteration",
              file=sys.stderr)

    comm = {}
    for n in (1, 2, 4):
        s = go(f"comm{n}", [iters, f"global_batch={B}", "--workers", str(n),
                                               "emulation.speeds=" + ",".join(["1"] * n)])
        step_ms = 1000.0 * B / s["samples_per_s"]
        comm[n] = {"comm_share": s["comm_share"], "step_ms": step_ms,
                   "stats_ms_per_iteration": s["stats_ms_per_iteration"],
                   "stats_share": s["stats_ms_per_iteration"] / step_ms}
        print(f"{n} rank(s), equal speeds: comm {100 * s['comm_share']:.1f}% of the step "
              f"({step_ms:.1f} ms); stats gathering {s['stats_ms_per_iteration']:.3f} ms/iteration", file=sys.stderr)

    result = {"benchmark": "hetero_balance", "emulation": f"speed factors, reference {args.reference} of a core",
              "speeds": SPEEDS, "global_batch": B, "iterations": args.iterations,
              "alone_samples_per_s": alone, "ideal_samples_per_s": ideal, "plans": results,
              "comm_share_by_ranks": comm}
    write_result(result, args.out)


if __name__ == "__main__":
    main()
