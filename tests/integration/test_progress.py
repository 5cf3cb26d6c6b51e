#!/usr/bin/env python3
"""What a run says about itself: the progress lines, the summary's numbers, the
Perfetto trace and the log's wording (engine/train/record/progress_line.hpp).

- The progress line has elapsed time, the estimated total and the share done, the
  epoch as iterations done over iterations per epoch, the same in the evaluation
  lines and trace.jsonl; it and the workers' balance line fit 120 columns with 4 and
  8 workers.
- stop.max_seconds binds: the share counts against it, and the summary's
  test_accuracy is null (the final line says "not evaluated").
- tandem sim: no loss or learning rate in its lines, null final_loss and
  test_accuracy; plan_changes counts what policy.plan_changes counts.
- trace.perfetto.json: on every track, any two spans nest or do not overlap (3
  workers at emulated speeds, and one worker).
- The start lines: "1 worker on this machine", "N workers over MPI"; the warning on
  steps that overran their emulated time comes once, from rank 0; --log-level debug
  adds decisions with their inputs, checkpoints, the all-reduce and per-worker times.

usage: test_progress.py TANDEM_BINARY SCRATCH_DIR
"""
import collections
import json
import os
import re
import shutil
import subprocess
import sys

TANDEM, SCRATCH = sys.argv[1], sys.argv[2]
QUICK = "scripts/experiments/quickstart.lua"
PER_EPOCH = 60000 // 64  # quickstart: Fashion-MNIST, global batch 64 (the last partial batch dropped)
# "[0:01/~0:12  33%] epoch 0.02 iter 20/60 loss 1.0552 acc 0.608 19530 samples/s lr 0.039"
PROGRESS = re.compile(r"\[r0\] info \[(\d+:)?\d+:\d\d/(~(\d+:)?\d+:\d\d|\?) +(\d+)%\] epoch (\d+\.\d\d) "
                      r"iter (\d+)/(\d+)( loss \S+ acc \S+)? \d+ (samples|tokens)/s( lr \S+)?$")
BALANCE = re.compile(r"\[r0\] info   (\d+) batches: ")
EVAL = re.compile(r"info epoch (\d+\.\d\d) iter (\d+) test loss")
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def run(name, args, command="run"):
    out = os.path.join(SCRATCH, name)
    shutil.rmtree(out, ignore_errors=True)
    r = subprocess.run([TANDEM, command] + args + ["--out", out], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        print(r.stdout, r.stderr)
        sys.exit(f"FAIL: tandem {command} {name} exited {r.returncode}")
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    with open(os.path.join(out, "trace.jsonl")) as f:
        trace = [json.loads(l) for l in f]
    return r.stderr, summary, trace, out


def progress_lines(name, log):
    rows = [m for m in (PROGRESS.search(l) for l in log.splitlines()) if m]
    if not rows:
        fail(f"{name}: no progress line in\n{log}")
    for l in log.splitlines():
        if ("iter " in l or " batches: " in l) and len(l) > 120:
            fail(f"{name}: a line of {len(l)} columns: {l}")
    return rows


def check_epochs(name, rows, trace, log):
    traced = {r["iteration"]: r["epoch"] for r in trace if r["event"] == "iteration"}
    for m in rows:
        done = int(m.group(6))
        if abs(float(m.group(5)) - done / PER_EPOCH) > 0.006:
            fail(f"{name}: epoch {m.group(5)} at iteration {done} ({PER_EPOCH} iterations an epoch)")
        if done - 1 in traced and abs(traced[done - 1] - done / PER_EPOCH) > 1e-4:
            fail(f"{name}: the trace's epoch {traced[done - 1]} after iteration {done}")
    evals = [r for r in trace if r["event"] == "eval"]
    for m, e in zip([m for m in (EVAL.search(l) for l in log.splitlines()) if m], evals):
        if int(m.group(2)) != e["iteration"] or abs(float(m.group(1)) - e["epoch"]) > 0.006 or \
                abs(e["epoch"] - e["iteration"] / PER_EPOCH) > 1e-4:
            fail(f"{name}: evaluation line epoch {m.group(1)} iter {m.group(2)} against the trace's {e}")


def check_nesting(name, out):
    with open(os.path.join(out, "trace.perfetto.json")) as f:
        events = json.load(f)["traceEvents"]
    tracks = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X":  # times in tenths of a microsecond: exact integers
            start = round(e["ts"] * 10)
            tracks[(e["pid"], e["tid"])].append((start, start + round(e["dur"] * 10), e["name"], e["args"]))
    if not tracks:
        fail(f"{name}: no spans in trace.perfetto.json")
    for track, spans in tracks.items():
        spans.sort(key=lambda s: (s[0], -s[1]))
        open_ = []  # the spans enclosing the current one
        for s in spans:
            while open_ and open_[-1][1] <= s[0]:
                open_.pop()
            if open_ and s[1] > open_[-1][1]:
                fail(f"{name}: on track {track} span {s} overlaps {open_[-1]} without nesting")
                break
            open_.append(s)
    return tracks


os.makedirs(SCRATCH, exist_ok=True)
tiny = ["stop.max_iterations=20", "log_every=5"]

# 4 and 8 workers: line format and width, epochs, and one overrun warning (a
# calibration of a microsecond a step: every real step outlasts its emulated time).
for n in (4, 8):
    name = f"workers{n}"
    log, s, trace, out = run(name, [QUICK, "--workers", str(n), "policy.file=lbb", "emulation.calibration.batch=1,64",
                                    "emulation.calibration.ms=0.001,0.001", "emulation.calibration.host_ms=0,0",
                                    "emulation.speeds=" + ",".join(["1", "0.5"] * (n // 2))] + tiny)
    rows = progress_lines(name, log)
    if [int(m.group(6)) for m in rows] != [5, 10, 15, 20] or any(int(m.group(7)) != 20 for m in rows):
        fail(f"{name}: progress at iterations {[m.group(6) for m in rows]}, not every 5 of 20")
    if [int(m.group(4)) for m in rows] != [25, 50, 75, 100]:
        fail(f"{name}: shares done {[m.group(4) for m in rows]}, not 25 50 75 100 (%)")
    if any(m.group(8) is None or m.group(10) is None for m in rows):
        fail(f"{name}: a progress line without loss, accuracy or lr")
    balance = [m for m in (BALANCE.search(l) for l in log.splitlines()) if m]
    if len(balance) != len(rows) or any(int(m.group(1)) != n for m in balance):
        fail(f"{name}: {len(balance)} balance lines for {len(rows)} progress lines")
    check_epochs(name, rows, trace, log)
    warned = [l for l in log.splitlines() if "longer than their emulated time" in l]
    if len(warned) != 1 or "[r0]" not in warned[0]:
        fail(f"{name}: the overrun warning {len(warned)} times: {warned}")
    if f"{n} workers over MPI" not in log:
        fail(f"{name}: no '{n} workers over MPI' start line")
    if re.search(r"\d\.\d{8,}", log):
        fail(f"{name}: a number printed with float noise")
    if s["test_accuracy"] is None or "not evaluated" in log:
        fail(f"{name}: evaluated at its end, yet the summary says {s['test_accuracy']}")
print("ok: progress and balance lines for 4 and 8 workers: format, width, share done, epochs; one overrun warning")

# Emulated speeds on 3 workers, and a single worker: spans on a track nest.
_, _, _, out = run("nest3", [QUICK, "--workers", "3", "emulation.speeds=1,0.5,0.25", "stop.max_iterations=40",
                             "log_every=20"])
tracks = check_nesting("nest3", out)
if len({t[0] for t in tracks}) != 3 or sum(len(v) for v in tracks.values()) < 3 * 40 * 4:
    fail(f"nest3: tracks {sorted(tracks)} with {sum(len(v) for v in tracks.values())} spans")
log, s, trace, out = run("nest1", [QUICK, "stop.max_iterations=40", "log_every=20"])
check_nesting("nest1", out)
if "1 worker on this machine" not in log or "computing on the CPU)" in log:
    fail("nest1: the start lines do not say '1 worker on this machine' plainly")
if BALANCE.search(log):
    fail("nest1: a balance line for one worker")
print("ok: Perfetto spans nest on every track (3 emulated workers, 1 worker)")

# --log-level debug adds lines a user can use: each decision with its inputs, each
# checkpoint with its size and time, the all-reduce, every worker's times.
# (Workers of different emulated speeds, so that lbb surely moves the plan, and
# iterations enough for a decision not to be late on a loaded machine.)
log, _, _, _ = run("debug", [QUICK, "--workers", "2", "policy.file=lbb", "emulation.speeds=1,0.25",
                             "stop.max_iterations=30", "log_every=5", "checkpoint.every=5", "--log-level", "debug"])
for pattern in (r"debug iteration \d+: policy lbb decided on iteration \d+'s batches \[\d+, \d+\] and compute ms",
                r"debug checkpoint after iteration 5: \d+\.\d\d MB written in \d+ ms",
                r"debug the gradient all-reduce: \d+ floats", r"debug   r1: batch \d+, per iteration: data "):
    if not re.search(pattern, log):
        fail(f"debug: no line like {pattern!r}")
print("ok: --log-level debug: decisions with their inputs, checkpoints, the all-reduce, per-worker times")

# stop.max_seconds binds first: the share counts against it; nothing evaluated.
# (log_every=1: however slow this machine, the stop's iteration has its line.)
log, s, trace, out = run("seconds", [QUICK, "stop.epochs=5", "stop.max_seconds=0.3", "log_every=1"])
rows = progress_lines("seconds", log)
if s["stop_reason"] != "max_seconds" or s["test_accuracy"] is not None or s["best_test_accuracy"] is not None:
    fail(f"seconds: stop {s['stop_reason']}, test_accuracy {s['test_accuracy']}, best {s['best_test_accuracy']}")
if not re.search(r"done \(max_seconds\): \d+ iterations, not evaluated", log):
    fail("seconds: the final line does not say 'not evaluated'")
last = rows[-1] if rows else None
# Time binds: at the stop the share is training time over 0.3 s, 100%, whatever share
# of 5 epochs' iterations was done.
if last and (int(last.group(4)) != 100 or int(last.group(6)) >= 5 * PER_EPOCH):
    fail(f"seconds: share {last.group(4)}% at iteration {last.group(6)} of {last.group(7)}: not against the time")
print("ok: stop.max_seconds: share against time, test_accuracy null, 'not evaluated'")

# tandem sim with a policy that decides a new plan every iteration: nothing trained,
# and plan_changes agree (the last decision never applies: plans_applied is one less).
flip = os.path.join(SCRATCH, "flip.lua")
with open(flip, "w") as f:
    f.write("local P = {}\nfunction P.init(c) P.n = c.workers; P.k = 0 end\n"
            "function P.step(s)\n  P.k = P.k + 1\n  local b = {}\n  for i = 1, P.n do b[i] = 16 end\n"
            "  b[1 + P.k % P.n] = 15; b[1 + (P.k + 1) % P.n] = 17\n  return { local_batch = b }\nend\nreturn P\n")
log, s, trace, out = run("sim", [QUICK, "--workers", "4", "emulation.speeds=1,1,0.5,0.25", "policy.file=" + flip,
                                 "stop.max_iterations=30", "log_every=10", "emulation.calibration.batch=1,64",
                                 "emulation.calibration.ms=1,2", "emulation.calibration.host_ms=0.1,0.1"], "sim")
rows = progress_lines("sim", log)
if any(m.group(8) or m.group(10) for m in rows) or "loss 0.0000" in log:
    fail("sim: a progress line with a loss or learning rate")
if s["final_loss"] is not None or s["test_accuracy"] is not None:
    fail(f"sim: final_loss {s['final_loss']}, test_accuracy {s['test_accuracy']}: nothing was trained")
if any(r.get("loss") is not None or r.get("lr") is not None for r in trace if r["event"] == "iteration"):
    fail("sim: a trace line with a loss or learning rate")
traced = sum(1 for r in trace if r.get("policy", {}).get("plan"))
# (A decision still late at the last iteration leaves none unapplied.)
if not (s["plan_changes"] == s["policy"]["plan_changes"] == traced) or s["plans_applied"] not in (traced - 1, traced):
    fail(f"sim: plan_changes {s['plan_changes']}, policy.plan_changes {s['policy']['plan_changes']}, traced "
         f"{traced}, applied {s['plans_applied']}")
check_nesting("sim", out)
print(f"ok: tandem sim: no loss or lr, nulls in the summary, {traced} plan changes counted alike")

if failures:
    sys.exit(f"{len(failures)} failure(s)")
