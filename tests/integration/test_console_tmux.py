#!/usr/bin/env python3
"""The console's screen as a person sees it: `tandem run --repl` with two workers (the
prompt beside mpirun) and with one (the prompt on a thread of the training process),
a progress line every iteration, in a detached tmux session of fixed size. A command is
typed one key at a time, each key only after a new progress line has come (so every
key races a log line), and the screen (tmux capture-pane) is checked after each: no
line holds both the prompt and log text, and the prompt line holds exactly what was
typed so far. Then the command runs, stop() ends the job, and no dead prompt is left
on the screen. Exits 77 (skipped) without tmux.

usage: test_console_tmux.py TANDEM_BINARY SCRATCH_DIR
"""
import atexit
import os
import re
import shutil
import subprocess
import sys
import time

TANDEM, SCRATCH = os.path.abspath(sys.argv[1]), sys.argv[2]
if shutil.which("tmux") is None:
    print("SKIP: tmux is not installed (tools/install-deps.sh installs it)")
    sys.exit(77)

SOCKET = f"tandem-console-test-{os.getpid()}"  # a tmux server of this test's own
WIDTH, HEIGHT = 220, 40  # wide enough that no progress line wraps
START_S = 240  # mpirun, the data and the calibration on a loaded 2-core machine
KEY_S = 120  # how long one progress line may take to come
SESSION = [""]  # the tmux session of the scenario running
ITER = re.compile(r"iter +(\d+)")


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def tmux(*args, check=True):
    return subprocess.run(["tmux", "-L", SOCKET] + list(args), check=check, capture_output=True, text=True).stdout


@atexit.register
def end_server():
    tmux("kill-server", check=False)


def screen(scrollback=False):
    """The pane's lines; with scrollback, those scrolled off it too (an answer the
    log pushed up)."""
    return tmux("capture-pane", "-p", "-t", SESSION[0], *(["-S", "-"] if scrollback else [])).splitlines()


def wait_for(what, test, timeout, scrollback=False):
    end = time.time() + timeout
    while time.time() < end:
        lines = screen(scrollback)
        if test(lines):
            return lines
        time.sleep(0.05)
    fail(f"waited {timeout} s for {what}; the screen shows:\n" + "\n".join(screen()))


def newest_iteration(lines):
    found = [int(m.group(1)) for line in lines for m in ITER.finditer(line)]
    return max(found) if found else -1


def check_screen(lines, typed):
    """No line holds both the prompt and log text; the prompt line is what was typed."""
    prompts = [line for line in lines if "tandem>" in line]
    for line in prompts:
        if "[r0]" in line or ITER.search(line) or "info" in line:
            fail(f"the prompt and the log share a line: {line!r}\nthe screen:\n" + "\n".join(lines))
    if not prompts or prompts[-1].rstrip() != ("tandem> " + typed).rstrip():
        fail(f"the prompt line should read {'tandem> ' + typed!r}; the screen:\n" + "\n".join(lines))
    last = [line for line in lines if line.strip()][-1]
    if last != prompts[-1]:
        fail("the prompt is not the last line on the screen:\n" + "\n".join(lines))


def scenario(workers):
    command = f"status().workers == {workers}"
    session = SESSION[0] = f"console{workers}"
    run_dir = os.path.abspath(os.path.join(SCRATCH, f"tmux{workers}"))
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(SCRATCH, exist_ok=True)
    cmd = [TANDEM, "run", "scripts/experiments/quickstart.lua", "--repl", "--workers", str(workers), "--out", run_dir,
           "model_args.hidden=64", "global_batch=128", "stop.max_iterations=1000000", "stop.epochs=1000",
           "stop.target_accuracy=1", "eval_every=1000000", "log_every=1", "log_level=info", "device=cpu"]
    # The history goes to the scratch folder, not the home of whoever runs the tests.
    env = f"XDG_DATA_HOME={os.path.abspath(SCRATCH)}/xdg TERM=xterm"
    shell = f"cd {os.getcwd()} && env {env} " + " ".join(cmd) + "; echo EXITED $?; sleep 600"
    # The scrollback is set before the session's window exists (it takes it then).
    tmux("-f", "/dev/null", "start-server", ";", "set-option", "-g", "history-limit", "200000", ";",
         "new-session", "-d", "-s", session, "-x", str(WIDTH), "-y", str(HEIGHT), shell)
    tmux("set-option", "-t", session, "remain-on-exit", "on")
    wait_for("the prompt", lambda l: any("tandem>" in x for x in l), START_S)
    wait_for("progress lines", lambda l: newest_iteration(l) >= 0, START_S)

    typed = ""
    for key in command:
        before = newest_iteration(screen())
        tmux("send-keys", "-t", session, "-l", key)
        typed += key
        # The key is on the screen, and a progress line came after it.
        lines = wait_for(f"{typed!r} and a new progress line",
                         lambda l: newest_iteration(l) > before
                         and any(x.rstrip().endswith("tandem> " + typed.rstrip()) for x in l), KEY_S)
        check_screen(lines, typed)
    tmux("send-keys", "-t", session, "Enter")
    wait_for("the answer", lambda l: any(x.strip() == "true" for x in l), 60, scrollback=True)
    tmux("send-keys", "-t", session, "-l", "stop()")
    tmux("send-keys", "-t", session, "Enter")
    lines = wait_for("the job's end", lambda l: any(x.startswith("EXITED") for x in l), START_S)
    if "EXITED 0" not in lines:
        fail("tandem run --repl did not exit 0:\n" + "\n".join(lines))
    end = lines.index("EXITED 0")
    dead = [x for x in lines[:end] if x.rstrip() == "tandem>"]
    if dead:
        fail("a dead prompt is left on the screen:\n" + "\n".join(lines))
    print(f"ok, {workers} worker(s): {len(command)} keys typed against progress lines; prompt and log never "
          "shared a line; no prompt left at the end")


scenario(2)
scenario(1)
