#!/usr/bin/env python3
"""The console driven as a person would: a running 2-rank job (policy equal, worker 1
emulated at half speed), `tandem attach RUN_DIR` in a pseudo-terminal: read
workers(), swap in the proportional policy, detach with Ctrl-D; a second client on
the socket sees the plan change and stops the job, which ends normally with the
swap and the new plan in its trace. Then `tandem run --repl` in a pseudo-terminal, with
one worker and with two (policy lbb): the prompt answers; Tab completes a built-in;
Ctrl-C clears the line and the job goes on; pause() and status() name the same
iteration; policy() shows lbb's parameters with their defaults; the history is
written (owner-only) and the second session recalls the first's; stop() ends the run.

usage: test_repl.py TANDEM_BINARY SCRATCH_DIR
"""
import atexit
import json
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import time

from console_client import socket_command

TANDEM, SCRATCH = sys.argv[1], sys.argv[2]
EXPERIMENT = "scripts/experiments/quickstart.lua"
COMMON = ["model_args.hidden=64", "global_batch=128", "stop.max_iterations=100000", "stop.epochs=1000",
          "stop.target_accuracy=1", "eval_every=100000", "log_level=warn", "device=cpu"]

# A fixed calibration (10 ms + 0.1 ms a sample, dozens of times this model's real
# compute): the emulated times, not this machine's load, decide that worker 1 is the
# straggler and what the proportional policy plans. Stretching the measured
# calibration (tenths of a ms) at reference 0.5, a loaded core could outlast both
# workers' emulated times alike, and neither would show.
CAL = ["emulation.calibration.batch=1,128", "emulation.calibration.ms=10.1,22.8",
       "emulation.calibration.host_ms=0.1,0.1"]
# How long a job may take to start (mpirun, the data, the calibration): over a minute
# on a loaded 2-core machine. Waits bounded by it end as soon as what they wait for
# shows, so only a hang ever waits it out.
START_S = 240
# The process groups of the jobs and terminals started here: whatever ends this
# script (a failed check, a time-out) ends them too, so that a failure leaves no job
# running on to load the machine and write into the next attempt's run directory.
STARTED = []
# The prompt's history goes here, not into the home of whoever runs the tests.
XDG = os.path.abspath(os.path.join(SCRATCH, "xdg"))


@atexit.register
def end_started():
    for pgid in STARTED:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass  # ended already


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


class Terminal:
    """A command in a pseudo-terminal, read until an expected text appears."""

    def __init__(self, argv):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.environ["TERM"] = "dumb"
            os.environ["XDG_DATA_HOME"] = XDG
            os.execv(argv[0], argv)
        STARTED.append(self.pid)  # pty.fork made it a session (and group) leader
        self.seen = ""

    def expect(self, text, timeout=30):
        end = time.time() + timeout
        while text not in self.seen:
            left = end - time.time()
            if left <= 0:
                fail(f"waited {timeout} s for {text!r}; the terminal shows:\n{self.seen[-2000:]}")
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    data = b""
                if not data:
                    fail(f"the program ended before {text!r}; it showed:\n{self.seen[-2000:]}")
                self.seen += data.decode(errors="replace")
        at = self.seen.index(text) + len(text)
        before, self.seen = self.seen[:at], self.seen[at:]
        return before

    def send(self, text):
        os.write(self.fd, text.encode())

    def wait(self, timeout=60):
        end = time.time() + timeout
        while time.time() < end:
            try:
                os.read(self.fd, 65536)  # drain, so the child never blocks writing
            except OSError:
                pass
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            time.sleep(0.05)
        fail("the program did not end")


def plans(run_dir):
    out = []
    with open(os.path.join(run_dir, "trace.jsonl")) as f:
        for line in f:
            row = json.loads(line)
            if row.get("event") == "iteration":
                out.append(([w["local_batch"] for w in row["workers"]], row.get("policy", {}).get("event")))
    return out


def attach_scenario():
    run_dir = os.path.join(SCRATCH, "attached")
    shutil.rmtree(run_dir, ignore_errors=True)
    job = subprocess.Popen([TANDEM, "run", EXPERIMENT, "--workers", "2", "--out", run_dir, "policy.file=equal",
                            "emulation.speeds=1,0.5", "emulation.reference=0.5"] + CAL + COMMON,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    STARTED.append(job.pid)
    sock = os.path.join(run_dir, "repl.sock")
    end = time.time() + START_S
    while not os.path.exists(sock) and job.poll() is None and time.time() < end:
        time.sleep(0.05)
    if not os.path.exists(sock):
        job.kill()
        fail(f"the job made no console socket:\n{job.communicate()[0].decode()[-2000:]}")
    mode = os.stat(sock).st_mode & 0o777
    if mode != 0o600:
        fail(f"the socket is mode {oct(mode)}, not owner-only 0600")

    term = Terminal([TANDEM, "attach", run_dir])
    term.expect("tandem console:", timeout=START_S)
    term.expect("tandem> ")
    # Until an iteration has finished (the greeting comes at start-up) and shows the
    # straggler: the first iterations' real compute (cold caches, a loaded machine)
    # can exceed the emulated time of both workers alike, as a person looking again
    # a moment later would find.
    for _ in range(100):
        term.send("workers()\n")
        table = term.expect("tandem> ")
        if "no iteration has finished yet" not in table and "straggler" in table:
            break
        time.sleep(0.2)
    for word in ("rank", "compute_ms", "samples/s", "class"):
        if word not in table:
            fail(f"workers() shows no {word!r}:\n{table}")
    if "straggler" not in table:
        fail(f"worker 1 runs at half speed but workers() classes no straggler:\n{table}")
    term.send("swap('proportional')\n")
    term.expect("requested")
    term.send("error('on purpose')\n")
    term.expect("the run is untouched")
    term.expect("tandem> ")  # the prompt is back, as a person would wait for it
    term.send("\x04")  # Ctrl-D
    term.expect("detached")
    if term.wait() != 0:
        fail("tandem attach did not exit 0 after Ctrl-D")

    # Another client: the plan has changed; stop the job. Only a plan counts as an
    # answer (a reply that shows none, say while the first client is still leaving,
    # must not end the wait before the swap has taken effect).
    end = time.time() + START_S
    reply = ""
    while time.time() < end:
        reply = socket_command(sock, "plan()")
        shown = re.search(r"\[\d+, \d+\]", reply)
        if shown and shown.group(0) != "[64, 64]":
            break
        time.sleep(0.1)
    else:
        fail(f"the plan never changed after swap('proportional'); plan() said:\n{reply}")
    socket_command(sock, "stop()")
    out, _ = job.communicate(timeout=START_S)
    if job.returncode != 0:
        fail(f"the job exited {job.returncode}:\n{out.decode()[-2000:]}")
    rows = plans(run_dir)
    events = [e for _, e in rows if e]
    if "swapped" not in events:
        fail(f"no swap in the trace's policy events: {sorted(set(events))}")
    if not any(b != [64, 64] for b, _ in rows):
        fail("the trace never shows a plan other than the equal split")
    with open(os.path.join(run_dir, "summary.json")) as f:
        reason = json.load(f)["stop_reason"]
    if reason != "console":
        fail(f"stop reason {reason}, not console")
    if os.path.exists(sock):
        fail("the socket is still there after the run")
    print("ok: attach, workers(), swap, detach; the plan changed, stop() ended the job normally")


def completed(term):
    """status().completed, read at the prompt."""
    term.send("status().completed\n")
    m = re.search(r"(\d+)\s*$", term.expect("tandem> ").replace("tandem> ", "").strip())
    if not m:
        fail("status().completed printed no number")
    return int(m.group(1))


def recall_last_session(term):
    """Up at the first prompt: the previous session's last command, from the history file."""
    term.send("\x1b[A")
    term.expect("stop()")
    term.send("\x03")
    term.expect("^C")
    term.expect("tandem> ")


def prompt_keys(term):
    """Tab and Ctrl-C; the job goes on through them."""
    term.send("wor\t")
    term.expect("workers(")
    term.send("\x03")  # Ctrl-C: the half-typed line goes, the job stays
    term.expect("^C")
    term.expect("tandem> ")  # the fresh prompt
    term.send("'ab' .. 'cd'\n")
    if "abcd" not in term.expect("tandem> "):
        fail("after Ctrl-C the next line did not run on its own")
    first = completed(term)
    end = time.time() + START_S
    while completed(term) <= first:
        if time.time() > end:
            fail("the job made no progress after Ctrl-C at the prompt")
        time.sleep(0.1)


def pause_agrees(term):
    """pause()'s message and status() name the same iteration, the last completed."""
    term.send("pause()\n")
    m = re.search(r"paused after iteration (\d+) \((\d+) completed\)", term.expect("completed)", timeout=60))
    if not m:
        fail("pause() logged no 'paused after iteration N (M completed)'")
    term.expect("tandem> ")
    term.send("status().iteration .. ' ' .. status().completed .. ' ' .. tostring(status().paused)\n")
    want = f"{m.group(1)} {m.group(2)} true"
    if want not in term.expect("tandem> "):
        fail(f"paused after iteration {m.group(1)}, but status() does not say {want!r}")
    if int(m.group(2)) != int(m.group(1)) + 1:
        fail(f"iteration {m.group(1)} is the last completed, so {int(m.group(1)) + 1} completed, not {m.group(2)}")
    term.send("resume()\n")
    term.expect("tandem> ")


def lbb_params(term):
    term.send("policy()\n")
    text = term.expect("swaps")
    for name, value in (("ft", "0.05"), ("rt", "0.3"), ("window", "20"), ("allow_drop", "false")):
        if not re.search(rf"{name}\s+= {re.escape(value)}\s+\(default\)", text):
            fail(f"policy() shows no {name} = {value} (default):\n{text}")
    if not re.search(r"confirm\s+= 3\s*$", text, re.M):
        fail(f"policy() does not show confirm = 3, set by policy.params:\n{text}")


def history_file():
    path = os.path.join(XDG, "tandem", "history")
    if not os.path.exists(path):
        fail(f"no history file at {path}")
    mode = os.stat(path).st_mode & 0o777
    if mode != 0o600:
        fail(f"the history file is mode {oct(mode)}, not owner-only 0600")
    with open(path) as f:
        lines = f.read().splitlines()
    for want in ("'ab' .. 'cd'", "stop()"):
        if want not in lines:
            fail(f"the history file lacks {want!r}: {lines[-10:]}")


def repl_scenario(workers, recall):
    """One worker: the prompt runs beside training in the same process; two: beside mpirun."""
    run_dir = os.path.join(SCRATCH, f"repl{workers}")
    shutil.rmtree(run_dir, ignore_errors=True)
    policy = ["policy.file=lbb", "policy.params.confirm=3"] if workers > 1 else []
    # Info lines (the pause message) through the prompt, but no progress lines.
    quiet = ["log_level=info", "log_every=100000000"]
    term = Terminal([TANDEM, "run", EXPERIMENT, "--repl", "--workers", str(workers), "--out", run_dir] + COMMON +
                    policy + quiet)
    term.expect("tandem> ", timeout=START_S)
    if recall:
        recall_last_session(term)
    term.send("plan()\n")
    shown = term.expect("tandem> ")
    batches = re.search(r"\[([\d, ]+)\]", shown)
    local = [int(b) for b in batches.group(1).split(",")] if batches else []
    if len(local) != workers or sum(local) != 128:
        fail(f"plan() shows no plan of {workers} local batches summing to 128:\n{shown}")
    term.send(f"status().workers == {workers}\n")
    term.expect("true")
    term.expect("tandem> ")
    prompt_keys(term)
    pause_agrees(term)
    if policy:
        lbb_params(term)
        term.expect("tandem> ")
    term.send("stop()\n")
    term.expect("run finished (console)")
    code = term.wait()
    if code != 0:
        fail(f"tandem run --repl exited {code}")
    history_file()
    print(f"ok: run --repl with {workers} worker(s) answers at its prompt, completes, clears the line on Ctrl-C, "
          f"{'recalls the last session, ' if recall else ''}agrees on the paused iteration"
          f"{', shows lbb parameters' if policy else ''}; stop() ends it")


os.makedirs(SCRATCH, exist_ok=True)
shutil.rmtree(XDG, ignore_errors=True)
attach_scenario()
repl_scenario(1, recall=False)
repl_scenario(2, recall=True)
