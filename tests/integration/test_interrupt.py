#!/usr/bin/env python3
"""Ctrl-C stops a run the same way with one worker and with several, and a run
killed outright still leaves files that tools can read.

A terminal's Ctrl-C sends SIGINT to its foreground process group: here the
launching tandem process is started in a session of its own and the signal goes to
its whole group, as a terminal would send it. Checked:
  - several workers (3 ranks through tandem's own mpirun): every rank finishes the
    iteration, the exit status is 130 (interrupted), summary.json says
    stop_reason "interrupted" and its iteration count matches the trace, every
    trace.jsonl line parses, trace.perfetto.json is valid JSON, the console's
    socket is gone;
  - one worker: the same;
  - a job killed outright (SIGKILL to every process of it) after its first
    progress lines: trace.perfetto.json parses as it was at the last flush (or is
    recovered by cutting its last event, if the kill fell inside a flush), and every
    complete trace.jsonl line parses.
Waits are on the trace's progress, never on wall-clock guesses, with generous
deadlines.

usage: test_interrupt.py TANDEM_BINARY SCRATCH_DIR
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

TANDEM, SCRATCH = sys.argv[1], sys.argv[2]
DEADLINE_S = 120


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def start(name, workers):
    out = os.path.join(SCRATCH, name)
    shutil.rmtree(out, ignore_errors=True)
    cmd = [TANDEM, "run", "scripts/experiments/quickstart.lua", "--workers", str(workers), "stop.epochs=1000",
           "stop.target_accuracy=1", "log_every=20", "eval_every=100000", "--out", out]
    log = open(os.path.join(SCRATCH, name + ".log"), "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, out, log


def trace_lines(out):
    try:
        with open(os.path.join(out, "trace.jsonl")) as f:
            return f.read().count("\n")
    except OSError:
        return 0


def wait_for_progress(proc, out, lines):
    end = time.monotonic() + DEADLINE_S
    while trace_lines(out) < lines:
        if proc.poll() is not None:
            fail(f"{out}: the run ended (status {proc.returncode}) before it was interrupted")
        if time.monotonic() > end:
            fail(f"{out}: no {lines} trace lines within {DEADLINE_S} s")
        time.sleep(0.2)


def wait_exit(proc, what):
    try:
        return proc.wait(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        fail(f"{what}: still running {DEADLINE_S} s after the interrupt")


def iterations_in_trace(out):
    rows = []
    with open(os.path.join(out, "trace.jsonl")) as f:
        for n, line in enumerate(f):
            try:
                j = json.loads(line)
            except ValueError:
                fail(f"{out}: trace.jsonl line {n + 1} does not parse: {line[:80]!r}")
            if j["event"] == "iteration":
                rows.append(j["iteration"])
    return rows


def check_interrupted(name, workers):
    proc, out, log = start(name, workers)
    wait_for_progress(proc, out, 60)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    status = wait_exit(proc, name)
    log.close()
    text = open(os.path.join(SCRATCH, name + ".log")).read()
    if status != 130:
        fail(f"{name}: exit status {status}, not 130 (interrupted); its log ends:\n{text[-1500:]}")
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    if s["stop_reason"] != "interrupted":
        fail(f"{name}: stop_reason {s['stop_reason']!r}")
    rows = iterations_in_trace(out)
    if not rows or rows[-1] + 1 != s["iterations"] or len(rows) != s["iterations"]:
        fail(f"{name}: the trace holds {len(rows)} iterations (last {rows[-1] if rows else None}), the summary "
             f"{s['iterations']}")
    with open(os.path.join(out, "trace.perfetto.json")) as f:
        events = json.load(f)["traceEvents"]
    if sum(e.get("ph") == "X" for e in events) < workers * len(rows):
        fail(f"{name}: trace.perfetto.json holds {len(events)} events for {len(rows)} iterations")
    if os.path.exists(os.path.join(out, "repl.sock")):
        fail(f"{name}: the console's socket repl.sock is left behind")
    print(f"ok: {name}: Ctrl-C after {s['iterations']} iterations, status 130, summary, trace and Perfetto file "
          f"complete")


def perfetto_recovered(path):
    """The Perfetto file's events: as they are if it parses, else cut at the last
    complete event and closed (a kill during a flush)."""
    text = open(path).read()
    try:
        return json.loads(text)["traceEvents"], "parsed"
    except ValueError:
        cut = text.rfind(",\n{")
        return json.loads(text[:cut] + "\n]}\n")["traceEvents"], "recovered"


def descendants(pid):
    """Every process below pid (mpirun puts each rank in a process group of its own)."""
    table = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True).stdout.split()
    children = {}
    for child, parent in zip(table[0::2], table[1::2]):
        children.setdefault(int(parent), []).append(int(child))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def check_killed():
    proc, out, log = start("killed", 3)
    wait_for_progress(proc, out, 100)  # past several flushes (a progress line every 20 iterations)
    for pid in [proc.pid] + descendants(proc.pid):  # all at once, as a dead host or the OOM killer would
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=DEADLINE_S)
    log.close()
    time.sleep(1)  # the ranks' last writes land (their kill is asynchronous)
    events, how = perfetto_recovered(os.path.join(out, "trace.perfetto.json"))
    if sum(e.get("ph") == "X" for e in events) < 3 * 60:
        fail(f"killed: trace.perfetto.json ({how}) holds {len(events)} events after 100 trace lines")
    with open(os.path.join(out, "trace.jsonl")) as f:
        lines = f.read().split("\n")
    for n, line in enumerate(lines[:-1]):  # the text after the last newline may be cut
        json.loads(line)
    print(f"ok: killed outright: trace.perfetto.json {how} with {len(events)} events, {len(lines) - 1} whole "
          "trace.jsonl lines")


os.makedirs(SCRATCH, exist_ok=True)
check_interrupted("interrupted_3_workers", 3)
check_interrupted("interrupted_1_worker", 1)
check_killed()
