#!/usr/bin/env python3
"""Relaxed synchronisation against stragglers (issue 6): time to accuracy of BSP,
the balancing policy lbb, and the modes that stop waiting for a straggler (grouped,
star, local SGD, ASGD), on 8 emulated workers.

Emulation: speed factors (docs/heterogeneity.md), the speed-1 device at
--reference of a core (default 0.03: 8 ranks' real compute is then about a quarter
of one of the 2 cores, so the numbers measure synchronisation, not CPU contention;
any "oversubscribed" warning of any rank is caught and reported per run). One
calibration for every run. MLP 784-256-256-10 on Fashion-MNIST, global batch 512
(64 a worker in the equal split), lr 0.1 (--lr; at bsp's 0.2 grouped and asgd diverge) with
momentum 0.9, cosine over 4 epochs,
a fixed budget of --iterations global batches' worth of samples, a test evaluation
every 10 (in the relaxed modes evaluations wait for the next meeting of all
workers: every sync_every = 10 global batches, or local_steps).

Scenarios:
  none       8 workers at speed 1: the no-straggler reference (bsp only);
  stalls     8 workers at speed 1, each stalling at random: with probability 5% per
             iteration a worker's step runs at 0.25-0.5 of its speed (2-4x as long)
             for one iteration (seeded: the same draw in every run);
  straggler  8 workers, one persistent 3x straggler: speeds 1 x 7, 0.33.
Configs: bsp (the equal split, no policy), and policy.file = lbb (balancing),
grouped (Basu et al.), star (STAR), local_sgd, asgd.

Per run: training seconds until the first evaluation at >= 85% test accuracy
(evaluations excluded), that time over the no-straggler bsp run's, the final test
accuracy, samples/s, and from summary.sync (relaxed modes only) server updates/s,
staleness mean/max and gradients dropped; the synchronisation modes the run went
through (the trace's iteration lines: a bsp iteration has a line of its own, a
relaxed segment one line with sync.mode and sync.iterations) and each one's share
of the iterations. The check lines print what the papers lead one to expect
(grouped and star within 20% of the no-straggler time where bsp is not; asgd not
reliably better than bsp); nothing is asserted.

Part 2, the accuracy cost of staleness: scenario none, fixed grouped mode
(sync.mode=grouped, no policy) with 1, 2, 4, 8 groups of contiguous ranks and the
staleness bound S = groups - 1 (the steady state of G groups at the same pace: a
group's update is G - 1 versions old, so S = G - 1 bounds without making anyone
wait; 1 group with S = 0 is bsp's mathematics through the parameter server).

usage: tools/bench/sync_modes.py BUILD_DIR [--iterations 450] [--reference 0.03] [--lr 0.1]
         [--configs bsp,lbb,grouped,star,local_sgd,asgd] [--scenarios stalls,straggler]
         [--groups 1,2,4,8] [--out FILE]
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter

from bench_common import Runner, calibration_overrides, write_result
from hetero_policies import time_to_target

N = 8
B = 512
CONFIGS = ["bsp", "lbb", "grouped", "star", "local_sgd", "asgd"]
SCENARIOS = {
    "none": [f"emulation.speeds={','.join(['1'] * N)}"],
    "stalls": [f"emulation.speeds={','.join(['1'] * N)}", "emulation.random.probability=0.05",
               "emulation.random.duration=1,1", "emulation.random.speed=0.25,0.5"],
    "straggler": [f"emulation.speeds={','.join(['1'] * (N - 1))},0.33"],
}
WITHIN = 1.2  # "within 20% of the no-straggler time"


def trace(root, name):
    """The run's trace; a diverged run writes its NaN losses as -nan, which JSON lacks."""
    with open(os.path.join(root, name, "trace.jsonl")) as f:
        return [json.loads(re.sub(r"(?<=[:\[,])-?nan\b", "NaN", line)) for line in f]


def mode_shares(records):
    """Iterations per synchronisation mode: a bsp iteration is a line without "sync",
    a relaxed segment one line covering sync.iterations iterations."""
    spent = Counter()
    for r in records:
        if r["event"] == "iteration":
            spent[r["sync"]["mode"] if "sync" in r else "bsp"] += r["sync"]["iterations"] if "sync" in r else 1
    total = sum(spent.values()) or 1
    return {mode: n / total for mode, n in spent.items()}


def kind_shares(modes):
    """The shares by kind of mode (bsp, grouped, ksync, local), the groups left out."""
    kinds = Counter()
    for mode, share in modes.items():
        kinds[mode.split()[0]] += share
    return dict(kinds)


def captured(go, name, args):
    """go(name, args) with every rank's stderr caught: the run's summary (None when it
    failed), the oversubscription warnings, and the tail of stderr when it failed."""
    with tempfile.TemporaryFile() as err:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(err.fileno(), 2)
        try:
            summary, failure = go(name, args), None
        except subprocess.CalledProcessError as e:
            summary, failure = None, f"exit status {e.returncode}"
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        text = err.read().decode(errors="replace")
    sys.stderr.write(text)
    warnings = [line.strip() for line in text.splitlines() if "oversubscribed" in line]
    if failure:
        lines = text.strip().splitlines()
        failure += ": " + next((l.strip() for l in lines if "critical" in l or "error" in l), " | ".join(lines[-2:]))
    return summary, warnings, failure


def measure(go, root, name, args):
    start = time.monotonic()
    s, warnings, failure = captured(go, name, args)
    r = {"wall_s": time.monotonic() - start, "oversubscribed": warnings}
    if failure:
        r["failed"] = failure
        return r
    records = trace(root, name)
    sync, policy = s.get("sync", {}), s.get("policy", {})
    modes = mode_shares(records)
    r.update({"time_to_85_s": time_to_target(records), "final_test_accuracy": s["test_accuracy"],
              "best_test_accuracy": s.get("best_test_accuracy"), "samples_per_s": s["samples_per_s"],
              "train_s": s["train_s"], "iterations": s["iterations"], "stop_reason": s.get("stop_reason"),
              "updates_per_s": sync.get("updates_per_s"), "staleness_mean": sync.get("staleness_mean"),
              "staleness_max": sync.get("staleness_max"), "gradients_applied": sync.get("gradients_applied"),
              "gradients_dropped": sync.get("gradients_dropped"), "server_busy_share": sync.get("server_busy_share"),
              "modes": modes, "mode_kinds": kind_shares(modes),
              "policy_plan_changes": policy.get("plan_changes"), "policy_failures": policy.get("failures")})
    if not math.isfinite(s.get("final_loss") or math.nan):
        r["diverged"] = True
    return r


def fmt(x, spec, missing="-"):
    return missing if x is None else format(x, spec)


def line(label, r):
    if "failed" in r:
        return f"{label:28s} FAILED ({r['failed']})"
    kinds = " ".join(f"{k} {100 * v:.0f}%" for k, v in sorted(r["mode_kinds"].items(), key=lambda kv: -kv[1]))
    return (f"{label:28s} 85% after {fmt(r['time_to_85_s'], '6.2f', '     -')} s "
            f"({fmt(r.get('vs_no_straggler'), '5.2f', '    -')}x)  final {r['final_test_accuracy']:.4f}  "
            f"{r['samples_per_s']:6.0f} samples/s  updates/s {fmt(r['updates_per_s'], '5.1f'):>5s}  "
            f"staleness {fmt(r['staleness_mean'], '.2f')}/{fmt(r['staleness_max'], '.0f')}  "
            f"dropped {fmt(r['gradients_dropped'], 'd')}  [{kinds}]"
            + ("  DIVERGED" if r.get("diverged") else "")
            + (f"  OVERSUBSCRIBED ({len(r['oversubscribed'])} rank(s))" if r["oversubscribed"] else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--iterations", type=int, default=450)
    ap.add_argument("--reference", type=float, default=0.03)
    ap.add_argument("--lr", type=float, default=0.1,
                    help="peak learning rate (bsp takes 0.2; the relaxed modes diverge there, momentum 0.9 plus "
                         "the momentum asynchrony adds)")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--scenarios", default="stalls,straggler")
    ap.add_argument("--groups", default="1,2,4,8", help="part 2: numbers of groups (dividing 8); empty: skip")
    ap.add_argument("--out")
    args = ap.parse_args()
    started = time.monotonic()
    root = tempfile.mkdtemp(prefix="tandem-sync-modes-")
    go = Runner(args.build, root, [f"emulation.reference={args.reference}"])
    go.common += calibration_overrides(go, B)
    base = [f"stop.max_iterations={args.iterations}", "stop.epochs=4", f"global_batch={B}", f"lr={args.lr}",
            "eval_every=10", "stop.target_accuracy=1", "--workers", str(N)]

    def config_args(config):
        return [] if config == "bsp" else [f"policy.file={config}"]

    runs = {}  # label -> result, in the order run

    def record(label, scenario, name, extra):
        r = measure(go, root, name, base + SCENARIOS[scenario] + extra)
        reference = runs.get("none/bsp", r).get("time_to_85_s")
        if r.get("time_to_85_s") and reference:
            r["vs_no_straggler"] = r["time_to_85_s"] / reference
        runs[label] = r
        print(line(label, r), file=sys.stderr, flush=True)

    record("none/bsp", "none", "none-bsp", [])
    for scenario in args.scenarios.split(","):
        for config in args.configs.split(","):
            record(f"{scenario}/{config}", scenario, f"{scenario}-{config}", config_args(config))
    groups = [int(g) for g in args.groups.split(",") if g]
    for g in groups:
        blocks = ",".join(str(1 + rank * g // N) for rank in range(N))
        record(f"none/grouped fixed G={g} S={g - 1}", "none", f"groups{g}",
               ["sync.mode=grouped", f"sync.groups={blocks}", f"sync.staleness={g - 1}"])

    checks = []
    for scenario in args.scenarios.split(","):
        def ratio(config):
            return runs.get(f"{scenario}/{config}", {}).get("vs_no_straggler")
        bsp, grouped, star, asgd = ratio("bsp"), ratio("grouped"), ratio("star"), ratio("asgd")
        within = lambda x: "never reached 85%" if x is None else f"{x:.2f}x: {'within' if x <= WITHIN else 'not within'} 20%"
        checks.append(f"check {scenario}: expected grouped/star within 20% of the no-straggler time where bsp is "
                      f"not; bsp {within(bsp)}, grouped {within(grouped)}, star {within(star)}")
        if asgd is not None and bsp is not None:
            checks.append(f"check {scenario}: expected asgd not reliably better than bsp; asgd {asgd / bsp:.2f} "
                          f"of bsp's time to 85% ({'faster' if asgd < bsp else 'not faster'})")
        else:
            checks.append(f"check {scenario}: expected asgd not reliably better than bsp; time to 85%: asgd "
                          f"{fmt(asgd, '.2f')}x, bsp {fmt(bsp, '.2f')}x of the no-straggler time")

    elapsed = time.monotonic() - started
    print(f"\nsync_modes: {N} workers, reference {args.reference} of a core, {args.iterations} iterations, lr {args.lr}, "
          f"B = {B}, {elapsed / 60:.1f} min; time to 85% over the no-straggler bsp run's "
          f"({fmt(runs['none/bsp'].get('time_to_85_s'), '.2f')} s)", file=sys.stderr)
    for label, r in runs.items():
        print(line(label, r), file=sys.stderr)
    for label, r in runs.items():
        for mode, share in sorted(r.get("modes", {}).items(), key=lambda kv: -kv[1]):
            if len(r["modes"]) > 1 or mode != "bsp":
                print(f"  {label:28s} {100 * share:5.1f}% {mode}", file=sys.stderr)
    for c in checks:
        print(c, file=sys.stderr)

    result = {"benchmark": "sync_modes", "workers": N, "global_batch": B,
              "emulation": f"speed factors, reference {args.reference} of a core",
              "scenarios": {k: SCENARIOS[k] for k in ["none"] + args.scenarios.split(",")},
              "iterations": args.iterations, "lr": args.lr, "staleness_part": "fixed grouped mode, contiguous groups, S = groups - 1",
              "wall_s": elapsed, "runs": runs, "checks": checks}
    write_result(result, args.out)


if __name__ == "__main__":
    main()
