#!/usr/bin/env python3
"""Balancing policies on an emulated heterogeneous cluster (issue: Lua policies).

Emulation: speed factors, as in hetero_balance.py: 4 workers at 1, 1, 0.5, 0.25 of a
reference device running at an eighth of a core (--reference), so the 4 ranks'
real compute fits in the 2 cores and the numbers measure balancing. MLP
784-256-256-10 on Fashion-MNIST, global batch 512, lr 0.2 (cosine over 6 epochs).

1. For each policy (equal, proportional, boa, lbb): one run of --iterations
   iterations with a test evaluation every 10. Reported: samples/s as a fraction of
   the ideal (the sum of each worker's own samples/s, measured alone in this
   script), training time until the test accuracy first reaches 85% (evaluations
   excluded), that time as a fraction of equal's, the final test accuracy (every
   policy trains on the same samples: they must agree within 0.5 points), and the
   policy's cost per decision.
2. The straggler scenario (tools/bench/experiments/straggler.lua): worker 0 drops
   to 0.3 of its speed at iteration 150 and recovers at 350. For each change: the
   best achievable step time is the policy's steady state in that phase (median
   step time over the phase's last 50 iterations); recovery is the number of
   iterations from the change until the step time is first within 10% of it, and
   until it is within 10% and stays there for 5 iterations (stricter: a single
   all-reduce hiccup of the shared machine resets it); the same for the slowest worker's compute time (the
   balance itself, without the all-reduce's noise).

On a GPU (--device cuda) the speed-1 device is this machine's GPU as calibrated
(reference 1 = the GPU's own speed); the 4 ranks share it.

usage: tools/bench/hetero_policies.py BUILD_DIR [--iterations 240] [--device cpu|cuda] [--out FILE]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

from bench_common import Runner, alone_throughputs, calibration_overrides, write_result

SPEEDS = [1, 1, 0.5, 0.25]
B = 512
POLICIES = ["equal", "proportional", "boa", "lbb"]
TARGET = 0.85
CHANGES = [150, 350]  # the straggler experiment's event boundaries


def trace(root, name):
    with open(os.path.join(root, name, "trace.jsonl")) as f:
        return [json.loads(line) for line in f]


def time_to_target(records):
    for r in records:
        if r["event"] == "eval" and r["test_accuracy"] >= TARGET:
            return r["train_s"]
    return None


def recovery(records, changes, end):
    """Per change: iterations until the step time (and, apart, the slowest worker's
    compute time, which leaves out the all-reduce's noise) is within 10% of the
    phase's best and stays there for 5 iterations."""
    rows = {r["iteration"]: r for r in records if r["event"] == "iteration"}
    step = {t: r["step_ms"] for t, r in rows.items()}
    compute = {t: max(w["compute_ms"] for w in r["workers"]) for t, r in rows.items()}
    out = []
    bounds = changes + [end]
    for i, change in enumerate(changes):
        phase_end = bounds[i + 1]
        entry = {"change_at": change}
        for name, series in (("step", step), ("max_compute", compute)):
            best = statistics.median(series[t] for t in range(phase_end - 50, phase_end) if t in series)
            first = [t for t in range(change, phase_end) if series.get(t, 1e9) <= 1.1 * best]
            within = [t for t in range(change, phase_end)
                      if all(series.get(u, 1e9) <= 1.1 * best for u in range(t, t + 5))]
            entry[f"best_{name}_ms"] = best
            entry[f"{name}_iterations_to_first_within_10pct"] = first[0] - change if first else None
            entry[f"{name}_iterations_to_within_10pct"] = within[0] - change if within else None
        out.append(entry)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--iterations", type=int, default=240)
    ap.add_argument("--reference", type=float, default=0.125)
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--straggler-policies", default="lbb,boa,proportional")
    ap.add_argument("--device", default="cpu",
                    help="where the ranks compute: cpu, or cuda (every rank on this host's GPU(s); several ranks "
                         "sharing one GPU all-reduce through MPI)")
    ap.add_argument("--out")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="tandem-policies-")
    go = Runner(args.build, root, [f"emulation.reference={args.reference}", f"device={args.device}"])
    go.common += calibration_overrides(go, B)
    ideal = sum(alone_throughputs(go, SPEEDS, B // len(SPEEDS), 300))
    speeds = ",".join(str(s) for s in SPEEDS)

    results = {}
    for policy in args.policies.split(","):
        s = go(policy, [f"stop.max_iterations={args.iterations}", "stop.epochs=6", f"global_batch={B}", "lr=0.2",
                        "eval_every=10", "stop.target_accuracy=1", "--workers", str(len(SPEEDS)),
                        f"emulation.speeds={speeds}", f"policy.file={policy}"])
        p = s.get("policy", {})
        results[policy] = {
            "samples_per_s": s["samples_per_s"], "fraction_of_ideal": s["samples_per_s"] / ideal,
            "time_to_85_s": time_to_target(trace(root, policy)), "final_test_accuracy": s["test_accuracy"],
            "idle_share": s["idle_share"], "comm_share": s["comm_share"],
            "policy_cost_ms_mean": p.get("cost_ms_mean"), "policy_cost_ms_max": p.get("cost_ms_max"),
            "policy_wait_ms_mean": p.get("wait_ms_mean"), "plan_changes": p.get("plan_changes"),
            "policy_failures": p.get("failures")}
    base = results.get("equal", {}).get("time_to_85_s")
    for policy, r in results.items():
        r["time_to_85_vs_equal"] = r["time_to_85_s"] / base if base and r["time_to_85_s"] else None
        print(f"{policy:12s}: {r['fraction_of_ideal']:.2f} of ideal ({r['samples_per_s']:.0f} of {ideal:.0f} "
              f"samples/s); 85% after {r['time_to_85_s'] or float('nan'):.2f} s "
              f"({r['time_to_85_vs_equal'] or float('nan'):.2f} of equal's); final accuracy "
              f"{r['final_test_accuracy']:.4f}; idle {100 * r['idle_share']:.0f}%, comm {100 * r['comm_share']:.1f}%; "
              f"policy {r['policy_cost_ms_mean'] or 0:.3f} ms/decision (max {r['policy_cost_ms_max'] or 0:.2f})",
              file=sys.stderr)

    straggler = {}
    for policy in args.straggler_policies.split(","):
        s = go(f"straggler-{policy}", [f"policy.file={policy}"], experiment="tools/bench/experiments/straggler.lua")
        straggler[policy] = {"recovery": recovery(trace(root, f"straggler-{policy}"), CHANGES, s["iterations"]),
                             "samples_per_s": s["samples_per_s"]}
        for c in straggler[policy]["recovery"]:
            print(f"straggler, {policy:12s}: change at {c['change_at']}: step time within 10% of the phase's best "
                  f"({c['best_step_ms']:.1f} ms) after {c['step_iterations_to_first_within_10pct']} iteration(s), "
                  f"staying there after {c['step_iterations_to_within_10pct']}; slowest compute within 10% "
                  f"({c['best_max_compute_ms']:.1f} ms) after {c['max_compute_iterations_to_first_within_10pct']}, "
                  f"staying after {c['max_compute_iterations_to_within_10pct']}", file=sys.stderr)

    result = {"benchmark": "hetero_policies", "device": args.device,
              "emulation": f"speed factors, reference {args.reference} of a core",
              "speeds": SPEEDS, "global_batch": B, "ideal_samples_per_s": ideal, "policies": results,
              "straggler": straggler}
    write_result(result, args.out)


if __name__ == "__main__":
    main()
