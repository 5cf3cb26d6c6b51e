#!/usr/bin/env python3
"""Elastic runs (tandem run --elastic, engine/train/elastic.hpp): the launching
process restarts a failed job from its newest good checkpoint by itself.

  - a rank killed at iteration 25 (checkpoints every 10): the job restarts from
    iteration 20 on the same 3 workers (one host: the dead rank's slot is reused),
    the run finishes with status 0, its trace holds every iteration once and a
    restart mark (cause, checkpoint, 5 iterations lost, what the restart cost),
    summary.json lists the restart, and the final parameters are bitwise those of
    an uninterrupted run (resume is exact);
  - a rank stopped (SIGSTOP, a hang): the others name it after collective_timeout_s,
    the job ends, and it restarts the same way;
  - the same kill with gradient buckets (comm.bucket_mb, ranks over MPI's messages as
    between hosts): restarted, bitwise the uninterrupted run with buckets;
  - elastic.max_restarts = 0: the failure ends the run, saying why;
  - --elastic without checkpoints: refused before anything starts.

usage: test_elastic.py TANDEM_BINARY SCRATCH_DIR
"""
import json
import os
import shutil
import subprocess
import sys

TANDEM, SCRATCH = sys.argv[1], sys.argv[2]
TIMEOUT_S = 300
BASE = ["scripts/experiments/quickstart.lua", "--workers", "3", "stop.max_iterations=60", "checkpoint.every=10",
        "log_every=1", "eval_every=1000", "save_params=true", "collective_timeout_s=5", "console=false"]


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def run(name, extra, elastic=True, env=None):
    out = os.path.join(SCRATCH, name)
    shutil.rmtree(out, ignore_errors=True)
    cmd = [TANDEM, "run"] + BASE + (["--elastic"] if elastic else []) + extra + ["--out", out]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S,
                       env=dict(os.environ, **env) if env else None)
    return p.returncode, p.stdout + p.stderr, out


def params(out):
    with open(os.path.join(out, "params.f32"), "rb") as f:
        return f.read()


def trace(out):
    rows, restarts = [], []
    with open(os.path.join(out, "trace.jsonl")) as f:
        for line in f:
            j = json.loads(line)
            if j["event"] == "iteration":
                rows.append(j["iteration"])
            elif j["event"] == "restart":
                restarts.append(j)
    return rows, restarts


def check_restarted(name, fault, lost, extra=(), env=None, reference=None):
    status, text, out = run(name, [f"faults={{{{rank = 1, iteration = 25, kind = '{fault}'}}}}"] + list(extra),
                            env=env)
    if status != 0:
        fail(f"{name}: status {status}; output ends:\n{text[-2000:]}")
    if "elastic: the job failed" not in text or "resuming from" not in text:
        fail(f"{name}: no restart in the output:\n{text[-2000:]}")
    rows, restarts = trace(out)
    if rows != list(range(60)):
        fail(f"{name}: the trace holds iterations {rows[:3]}..{rows[-3:]} ({len(rows)}), not 0..59 once each")
    if len(restarts) != 1 or restarts[0]["iteration"] != 20 or restarts[0]["lost_iterations"] != lost:
        fail(f"{name}: restart marks {restarts}")
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    r = s.get("elastic", {}).get("restarts", [])
    if len(r) != 1 or not r[0].get("restart_s", 0) > 0 or s["iterations"] != 60:
        fail(f"{name}: summary.json elastic {s.get('elastic')}, iterations {s['iterations']}")
    if params(out) != params(reference or whole):
        fail(f"{name}: the final parameters differ from the uninterrupted run's")
    print(f"ok: {name}: restarted from iteration 20 ({lost} iterations lost), restart {r[0]['restart_s']:.2f} s "
          f"(relaunch + reload), final parameters bitwise those of an uninterrupted run")


os.makedirs(SCRATCH, exist_ok=True)
status, text, whole = run("uninterrupted", [], elastic=False)
if status != 0:
    fail(f"the uninterrupted run failed:\n{text[-2000:]}")
check_restarted("killed", "kill", 5)
check_restarted("stopped", "stop", 5)
# Gradient buckets (each of the 3 layers its own) over MPI's messages.
buckets, over_mpi = ["comm.bucket_mb=0.002", "log_level=info"], {"TANDEM_SHM_ALLREDUCE": "0"}
status, text, whole_buckets = run("uninterrupted_buckets", buckets, elastic=False, env=over_mpi)
if status != 0 or "in 3 bucket(s) summed during the backward pass" not in text:
    fail(f"the uninterrupted run with buckets: status {status}:\n{text[-2000:]}")
check_restarted("killed_buckets", "kill", 5, buckets, over_mpi, whole_buckets)

status, text, _ = run("no_restarts", ["elastic.max_restarts=0", "faults={{rank = 2, iteration = 15, kind = 'kill'}}"])
if status == 0 or "elastic.max_restarts = 0" not in text:
    fail(f"max_restarts=0: status {status}, output ends:\n{text[-1500:]}")
print("ok: elastic.max_restarts = 0: the failure ends the run, saying why")

status, text, out = run("no_checkpoints", ["checkpoint.every=0"])
if status == 0 or "--elastic restarts a failed job from its newest checkpoint" not in text or os.path.exists(
        os.path.join(out, "trace.jsonl")):
    fail(f"--elastic without checkpoints: status {status}, output:\n{text[-1500:]}")
print("ok: --elastic without checkpoints is refused before any rank starts")
