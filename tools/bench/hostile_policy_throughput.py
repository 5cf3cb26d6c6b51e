#!/usr/bin/env python3
"""What a hostile policy costs training: the same run under a benign policy and
under policies that misbehave on every call, alternating in one script, with the
median samples/s of each and its ratio to the benign one (1.0: no cost). The
misbehaving policies fail their first calls; with the default policy.max_failures
(3) they are dropped after three and the last good plan stays (what a user gets);
with --perpetual (max_failures = 100000) every decision meets them (the worst
case: each failure costs a fresh worker process and training's wait, up to the
budget, for the decision):
  hangs       xpcall(loop, loop): past the budget's reach; its worker is killed at
              the deadline and a fresh one started for the next decision;
  times_out   a plain loop, interrupted by the budget's hook; a fresh worker next;
  crashes     a C stack overflow in the worker (signal 11); a fresh worker next;
  raises      error('x') at once: the cheapest failure.
4 ranks, MLP on Fashion-MNIST, equal split of 256, real compute (no emulation);
evaluations off. Also the summary's policy wait: what training waited for decisions.

usage: tools/bench/hostile_policy_throughput.py BUILD_DIR [--reps 3] [--iterations 300] [--perpetual] [--out FILE]
"""
import argparse
import os
import statistics
import tempfile

from bench_common import run, write_result

STEP = {
    "benign": "return nil",
    "hangs": "xpcall(function() while true do end end, function() while true do end end)",
    "times_out": "while true do end",
    "crashes": "local function g() return (string.gsub('x', 'x', g)) end g()",
    "raises": "error('x')",
}


def policy_file(root, name):
    path = os.path.join(root, name + ".lua")
    with open(path, "w") as f:
        f.write(f"local P = {{}}\nfunction P.init(c) end\nfunction P.step(stats) {STEP[name]} end\nreturn P\n")
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--perpetual", action="store_true", help="never drop the failing policies")
    ap.add_argument("--out")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="tandem-hostile-throughput-")
    common = ["--workers", "4", f"stop.max_iterations={args.iterations}", "global_batch=256", "eval_every=100000",
              "stop.target_accuracy=1", "policy.budget_ms=20", "policy.watch=false"]
    if args.perpetual:
        common.append("policy.max_failures=100000")
    samples = {name: [] for name in STEP}
    waits = {name: [] for name in STEP}
    for rep in range(args.reps):
        for name in STEP:
            s = run(args.build, root, f"{name}-{rep}", common + ["policy.file=" + policy_file(root, name)])
            samples[name].append(s["samples_per_s"])
            waits[name].append(s.get("policy", {}).get("wait_ms_max", 0.0))
    benign = statistics.median(samples["benign"])
    result = {"benchmark": "hostile_policy_throughput", "iterations": args.iterations, "reps": args.reps,
              "budget_ms": 20, "perpetual": args.perpetual, "policies": {}}
    for name in STEP:
        med = statistics.median(samples[name])
        result["policies"][name] = {"samples_per_s": med, "of_benign": med / benign,
                                    "max_wait_ms": max(waits[name])}
    write_result(result, args.out)


if __name__ == "__main__":
    main()
