#!/usr/bin/env python3
"""Two builds of tandem side by side: the whole training loop's cost, before and after
a change to it (the loop, the boundary, the control message, the gradient sync).

The same runs alternate between the two builds in this one script, so a noisy
neighbour hits both; the median samples/s of each is reported with the ratio
B / A (above 1: B is faster). Scenarios, MLP 784-256-256-10 on Fashion-MNIST:
  one_worker   one rank, batch 64, real compute (no emulation), pinned to one core:
               the loop's own cost is largest against a small step;
  four_ranks   4 ranks, equal split of 256, real compute: the gradient all-reduce
               with the control message, the stats reports, rank 0's bookkeeping;
  lbb_emulated 4 ranks at emulated speeds 1, 1, 0.5, 0.25 of a reference at 1/8 of
               a core, B = 512, the lbb policy deciding every iteration (the
               hetero_policies.py cluster), one calibration shared by every run;
and the GPT of scripts/experiments/gpt.lua (2 blocks, 128 wide, sequence 64, AdamW):
  gpt_one_worker one rank, batch 32 sequences, device=cpu, pinned to one core.
Evaluations are off; samples/s counts training time only (sequences for the GPT).
A change to how the engine is compiled (optimisation levels, unity builds) is
checked with one_worker and gpt_one_worker: the CPU step's own speed, no emulation.

usage: tools/bench/builds_side_by_side.py BUILD_A BUILD_B [--reps 3] [--iterations 300]
           [--scenarios one_worker,gpt_one_worker,...] [--out FILE]
"""
import argparse
import os
import statistics
import sys
import tempfile

from bench_common import calibration_from, run, write_result

QUIET = ["eval_every=100000", "stop.target_accuracy=1", "collective_timeout_s=120"]
GPT = "scripts/experiments/gpt.lua"
PINNED = ("one_worker", "gpt_one_worker")


def scenarios(iterations):
    return {
        "one_worker": [f"stop.max_iterations={iterations * 4}", "global_batch=64"],
        "gpt_one_worker": ["device=cpu", f"stop.max_iterations={iterations // 2}", "global_batch=32",
                           "data.validation=0.005"],
        "four_ranks": ["--workers", "4", f"stop.max_iterations={iterations}", "global_batch=256"],
        "lbb_emulated": ["--workers", "4", f"stop.max_iterations={iterations}", "global_batch=512",
                         "emulation.speeds=1,1,0.5,0.25", "emulation.reference=0.125",
                         "policy.file=scripts/policies/lbb.lua"],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build_a")
    ap.add_argument("build_b")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--scenarios", default="one_worker,four_ranks,lbb_emulated,gpt_one_worker",
                    help="comma-separated scenario names")
    ap.add_argument("--out")
    args = ap.parse_args()
    wanted = args.scenarios.split(",")
    unknown = [w for w in wanted if w not in scenarios(1)]
    if unknown:
        sys.exit(f"builds_side_by_side: unknown scenario {unknown}; known: {', '.join(scenarios(1))}")
    root = tempfile.mkdtemp(prefix="tandem-side-by-side-")
    # One calibration (from build A) for every emulated run of both builds.
    run(args.build_a, root, "calibrate", ["stop.max_iterations=1", "global_batch=512", "emulation.speeds=1"] + QUIET)
    calibration = calibration_from(root)
    result = {"build_a": args.build_a, "build_b": args.build_b, "reps": args.reps}
    for name, extra in scenarios(args.iterations).items():
        if name not in wanted:
            continue
        if name == "lbb_emulated":
            extra = extra + calibration
        samples = {"a": [], "b": []}
        for rep in range(args.reps):
            for key, build in (("a", args.build_a), ("b", args.build_b)):
                pin = name in PINNED
                if pin:
                    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
                s = run(build, root, f"{name}-{key}{rep}", extra + QUIET,
                        experiment=GPT if name.startswith("gpt") else "scripts/experiments/quickstart.lua")
                if pin:
                    os.sched_setaffinity(0, range(os.cpu_count()))
                samples[key].append(s["samples_per_s"])
        a, b = statistics.median(samples["a"]), statistics.median(samples["b"])
        result[name] = {"a_samples_per_s": a, "b_samples_per_s": b, "ratio_b_over_a": b / a,
                        "a_runs": samples["a"], "b_runs": samples["b"]}
        print(f"{name:13s} A {a:9.0f}  B {b:9.0f} samples/s  B/A {b / a:.3f}", file=sys.stderr)
    write_result(result, args.out)


if __name__ == "__main__":
    main()
