#!/usr/bin/env python3
"""The experiment suite: each study under scripts/experiments/suite/<study>/ reproduces
one result of the papers behind tandem (its base.lua says which paper, what result,
what is expected and from which emulation); each other .lua file there is one
variant (a policy, a sync mode, a cluster size), run with `tandem run`, or with
`tandem sim` when it says "-- runs with: tandem sim".

For each study: every variant runs into OUT/<study>/<variant> (a finished variant,
one with a summary.json, is not run again unless --force: an interrupted suite goes
on where it stopped), then `tools/report/report.py` writes OUT/<study>/report.html
over all of them and prints its comparison table; the study's own numbers follow
(recovery after each speed change, accuracy against the number of groups, the
simulator against the emulator, policy cost by cluster size).

usage: tools/experiments/run.py [--build build] [--out runs/experiments] [--force] [STUDY ...]
       (no STUDY: all of them; `make experiments` runs this)
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUITE = os.path.join("scripts", "experiments", "suite")


def studies():
    return sorted(d for d in os.listdir(os.path.join(ROOT, SUITE)) if os.path.isdir(os.path.join(ROOT, SUITE, d)))


def natural(name):
    """n64 before n256 before n1024."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def variants(study):
    d = os.path.join(SUITE, study)
    return [os.path.join(d, f) for f in sorted(os.listdir(os.path.join(ROOT, d)), key=natural)
            if f.endswith(".lua") and not f.startswith("base")]  # base*.lua: what variants share


def command_of(path):
    with open(os.path.join(ROOT, path)) as f:
        return "sim" if re.search(r"^-- runs with: tandem sim\s*$", f.read(), re.M) else "run"


def load_trace(run_dir):
    iterations, evals = [], []
    with open(os.path.join(run_dir, "trace.jsonl")) as f:
        for line in f:
            j = json.loads(line)
            (iterations if j["event"] == "iteration" else evals).append(j)
    return iterations, evals


def summary(run_dir):
    with open(os.path.join(run_dir, "summary.json")) as f:
        return json.load(f)


def efficiency(run_dir):
    """Achieved samples/s over the ideal (each worker's own samples/s at its batch,
    summed), both over the whole run; the simulator's own number where it has one."""
    s = summary(run_dir)
    if "efficiency" in s:
        return s["efficiency"]
    rows, _ = load_trace(run_dir)
    samples = sum(r["global_batch"] for r in rows)
    seconds = sum(r["step_ms"] for r in rows) / 1000.0
    ideal = [sum(w["local_batch"] / w["compute_ms"] * 1000.0 for w in r["workers"] if w["compute_ms"] > 0)
             for r in rows]
    return (samples / seconds) / statistics.mean(ideal) if seconds > 0 and ideal else float("nan")


def fallback_table(dirs):
    print(f"{'variant':28s} {'samples/s':>10s} {'efficiency':>10s} {'to target s':>11s} {'final acc':>9s}")
    for d in dirs:
        s = summary(d)
        ttt = s.get("time_to_target_s")
        print(f"{os.path.basename(d):28s} {s['samples_per_s']:10.0f} {efficiency(d):10.3f} "
              f"{(f'{ttt:.1f}' if ttt else '-'):>11s} {acc_text(s.get('test_accuracy')):>9s}")


def acc_text(acc):
    """A summary's test accuracy: null where the run was never evaluated (a simulation)."""
    return "-" if acc is None else f"{acc:.4f}"


def steady_and_recovery(rows, changes, end):
    """Per change: the steady step time of the phase it starts (median of the phase's
    last 50 iterations) and the iterations until the step time is within 10% of it
    for 5 iterations in a row."""
    out = []
    bounds = changes + [end]
    for i, c in enumerate(changes):
        phase = [r for r in rows if c <= r["iteration"] < bounds[i + 1]]
        if len(phase) < 60:
            continue
        steady = statistics.median(r["step_ms"] for r in phase[-50:])
        run, rec = 0, None
        for r in phase:
            run = run + 1 if r["step_ms"] <= 1.1 * steady else 0
            if run == 5:
                rec = r["iteration"] - 4 - c
                break
        out.append((c, steady, rec))
    return out


def extra_dynamic(out_dir, dirs):
    print("\nrecovery after each scheduled speed change (iterations until the step time is within 10% of the "
          "phase's steady state for 5 iterations):")
    for d in dirs:
        if "scheduled" not in os.path.basename(d):
            continue
        rows, _ = load_trace(d)
        parts = [f"at {c}: {('never' if r is None else r):>5} (steady {s:.1f} ms)"
                 for c, s, r in steady_and_recovery(rows, [150, 300], len(rows))]
        print(f"  {os.path.basename(d):24s} " + "; ".join(parts))


def extra_grouped(out_dir, dirs):
    print("\nthe accuracy cost of staleness (fixed groups, no policy):")
    for d in dirs:
        name = os.path.basename(d)
        if name.startswith("groups_"):
            s = summary(d)
            st = s.get("sync", {})
            print(f"  {name[7:]:>2s} group(s): final test accuracy {acc_text(s.get('test_accuracy'))}, staleness mean "
                  f"{st.get('staleness_mean', 0):.2f}, {s['samples_per_s']:.0f} samples/s")


def tail_step_and_plan(run_dir, last):
    """The mean step ms and the mean plan (local batch per worker) over a run's last
    `last` iterations; None for a run with none."""
    rows, _ = load_trace(run_dir)
    tail = rows[-last:]
    if not tail:
        return None
    step = statistics.mean(r["step_ms"] for r in tail)
    plan = [round(statistics.mean(r["workers"][w]["local_batch"] for r in tail)) for w in range(len(tail[0]["workers"]))]
    return step, plan


def extra_gpu(out_dir, dirs):
    print("\nthe simulator against the emulator (mean step ms and mean plan over the last 100 iterations):")
    by = {os.path.basename(d): d for d in dirs}
    for policy in ("equal", "lbb"):
        e, s = by.get(f"emulated_{policy}"), by.get(f"simulated_{policy}")
        if not e or not s:
            continue
        stats = [tail_step_and_plan(d, 100) for d in (e, s)]
        if None in stats:
            continue
        err = abs(stats[1][0] - stats[0][0]) / stats[0][0]
        print(f"  {policy:6s} emulated {stats[0][0]:.2f} ms {stats[0][1]}, simulated {stats[1][0]:.2f} ms "
              f"{stats[1][1]}: step time {100 * err:.1f}% off")


def extra_scale(out_dir, dirs):
    print("\npolicy cost by cluster size (real time of the Lua policy per decision):")
    for d in dirs:
        s = summary(d)
        p = s.get("policy", {})
        print(f"  {os.path.basename(d):14s} efficiency {efficiency(d):.3f}, cost {p.get('cost_ms_mean', 0):.2f} ms mean, "
              f"{p.get('cost_ms_max', 0):.2f} ms max")


def extra_adaptive(out_dir, dirs):
    print("\nglobal batch over the run (adaptive_batch): B at the start, a quarter, half, the end; "
          "time to target against lbb at B = 64:")
    times = {os.path.basename(d): summary(d).get("time_to_target_s") for d in dirs}
    base = times.get("lbb_b64")
    for d in dirs:
        rows, _ = load_trace(d)
        batches = [r["global_batch"] for r in rows]
        at = [batches[min(int(f * len(batches)), len(batches) - 1)] for f in (0, 0.25, 0.5, 1)] if batches else []
        t = times[os.path.basename(d)]
        ratio = f", {base / t:.2f}x of lbb_b64's speed" if t and base else ""
        print(f"  {os.path.basename(d):10s} B {at}, mean {statistics.mean(batches) if batches else 0:.0f}; "
              f"to target {f'{t:.2f} s' if t else 'not reached'}{ratio}")


LBB_PAPER_MS = (81.8, 81.5, 85.4, 392.9)  # the equal split's step times, local batch 128 each
LBB_PAPER_SPLIT, LBB_PAPER_STEP_MS = (167, 167, 158, 20), 104


def minmax_optimum(times_ms, at_batch, total):
    """The exact integer min-max split of `total` samples over workers whose step is
    t * b / at_batch: the least T at which the batches that fit in T add up to total."""
    candidates = sorted({t * b / at_batch for t in times_ms for b in range(1, total + 1)})
    lo, hi = 0, len(candidates) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if sum(int(candidates[mid] * at_batch / t + 1e-9) for t in times_ms) >= total:
            hi = mid
        else:
            lo = mid + 1
    fits = [int(candidates[lo] * at_batch / t + 1e-9) for t in times_ms]
    extra = sum(fits) - total  # more fit than needed: take them from the workers with most slack
    for i in sorted(range(len(fits)), key=lambda i: fits[i] * times_ms[i])[:extra]:
        fits[i] -= 1
    return candidates[lo], fits


def lbb_slowest_ms(split):
    """The slowest worker's compute for a split, under the paper's times as profiles."""
    return max(b * t / 128 for b, t in zip(split, LBB_PAPER_MS))


def extra_lbb(out_dir, dirs):
    opt_ms, opt_split = minmax_optimum(LBB_PAPER_MS, 128, 512)
    paper_max = lbb_slowest_ms(LBB_PAPER_SPLIT)
    print(f"\nLBB's workload (ResNet-18, CIFAR-10, B = 512; the paper's equal-split times {list(LBB_PAPER_MS)} ms as "
          f"profiles proportional to the batch):\n  exact min-max optimum {opt_ms:.2f} ms, split {opt_split}; the "
          f"paper's split {list(LBB_PAPER_SPLIT)} reported at about {LBB_PAPER_STEP_MS} ms ({paper_max:.2f} ms under "
          f"these profiles)")
    for d in dirs:
        name = os.path.basename(d)
        stats = tail_step_and_plan(d, 100 if name.startswith("simulated_") else 5)  # emulated: 12 steps, the last 5
        if not stats:
            continue
        step, plan = stats
        if name.startswith("simulated_"):
            compute = lbb_slowest_ms(plan)
            print(f"  {name:24s} step {step:7.2f} ms (compute {compute:7.2f} ms, {compute / opt_ms:.3f} of the optimum, "
                  f"{step / LBB_PAPER_STEP_MS:.2f} of the paper's), plan {plan}")
        else:
            print(f"  {name:24s} step {step:7.2f} ms over its last 5 steps, plan {plan} (CPU workers at the GPUs' "
                  f"relative speeds)")


EXTRAS = {"dynamic_stragglers": extra_dynamic, "lbb_resnet18_cifar10": extra_lbb, "grouped_stalls": extra_grouped,
          "gpu_profiles": extra_gpu, "scale": extra_scale, "adaptive_batch": extra_adaptive}


def plotting_python():
    """An interpreter that has matplotlib: this one, or Debian's (python3-matplotlib
    installs into /usr/bin/python3's packages; a pyenv or venv python3 first on PATH
    does not see them)."""
    for exe in (sys.executable, "/usr/bin/python3"):
        if os.path.exists(exe) and subprocess.run([exe, "-c", "import matplotlib"], capture_output=True).returncode == 0:
            return exe
    return sys.executable


def run_study(study, args):
    out_dir = os.path.join(args.out, study)
    os.makedirs(out_dir, exist_ok=True)
    dirs = []
    files = variants(study)
    print(f"== {study}: {len(files)} variants (base: {os.path.join(SUITE, study, 'base.lua')})", flush=True)
    for i, f in enumerate(files, 1):
        name = os.path.splitext(os.path.basename(f))[0]
        d = os.path.join(out_dir, name)
        dirs.append(d)
        if not args.force and os.path.exists(os.path.join(d, "summary.json")):
            print(f"   [{i}/{len(files)}] {name}: done before, kept ({d})", flush=True)
            continue
        # --force, or a variant that stopped before its summary: its directory is ours to reuse.
        cmd = [os.path.join(args.build, "tandem"), command_of(f), f, "--out", d, "--overwrite", "log_level=warn"]
        start = time.monotonic()
        print(f"   [{i}/{len(files)}] {name}: tandem {cmd[1]} {f} ...", end="", flush=True)
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if r.returncode != 0:
            print(" FAILED")
            sys.exit(f"experiments: {' '.join(cmd)} exited {r.returncode}:\n{r.stderr[-3000:]}")
        print(f" {time.monotonic() - start:.0f} s", flush=True)
    report = os.path.join(ROOT, "tools", "report", "report.py")
    html = os.path.join(out_dir, "report.html")
    shown = False
    if os.path.exists(report):
        r = subprocess.run([plotting_python(), report] + dirs + ["--out", html, "--title", study, "--png-dir",
                            os.path.join(out_dir, "figures"), "--json", os.path.join(out_dir, "comparison.json")],
                           cwd=ROOT,
                           capture_output=True, text=True)
        if r.returncode == 0:
            print(r.stdout, end="")
            print(f"report: {html}")
            shown = True
        else:
            print(f"(the report failed: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}; "
                  "the plain table follows)")
    if not shown:
        fallback_table(dirs)
    if study in EXTRAS:
        EXTRAS[study](out_dir, dirs)
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("studies", nargs="*")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "runs", "experiments"))
    ap.add_argument("--force", action="store_true", help="run finished variants again")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    args.out = os.path.abspath(args.out)
    known = studies()
    for s in args.studies:
        if s not in known:
            sys.exit(f"experiments: no study '{s}' (known: {', '.join(known)})")
    if not os.path.exists(os.path.join(args.build, "tandem")):
        sys.exit(f"experiments: no tandem binary in {args.build}; run `make build` first")
    for s in args.studies or known:
        run_study(s, args)


if __name__ == "__main__":
    main()
