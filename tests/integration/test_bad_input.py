#!/usr/bin/env python3
"""Bad input is rejected before any worker starts, with a message that says what
failed, names the setting and its valid range, and says what to do: experiments
(syntax errors, wrong types, unknown keys, impossible values such as a negative
batch, a global batch smaller than the number of workers, a fixed plan that does not
add up or passes a worker's memory cap, lists of the wrong length, missing data
files), models (syntax errors, wrong argument types, unknown model_args, layers that
do not fit the data, models too big for the machine, model and experiment files
that never finish loading) and policies (syntax errors, wrong return types, failing
init). Each case runs `tandem run`, most with several workers, and must exit non-zero
before mpirun starts a rank or training begins, without a crash or an internal
traceback. Then a running job's console gets malformed commands: each is answered
with the error, and the run goes on until stop(); a policy's overlong reasons and a
sync mode with a NUL inside are cut and refused while the run goes on; a full disk
stops a run naming the file; a job that fails before its first checkpoint says so.

usage: test_bad_input.py TANDEM_BINARY SCRATCH_DIR
"""
import json
import os
import resource
import shutil
import subprocess
import sys
import time

from console_client import socket_command

TANDEM, SCRATCH = sys.argv[1], sys.argv[2]
QUICKSTART = "scripts/experiments/quickstart.lua"
failures = []


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def write(name, text):
    path = os.path.join(SCRATCH, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def expect_rejected(name, args, wants, experiment=QUICKSTART, traceback_ok=False, env=None):
    """tandem run EXPERIMENT ARGS must fail before any worker starts, saying each of wants."""
    out_dir = os.path.join(SCRATCH, "runs", name)
    start, before = time.time(), resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([TANDEM, "run", experiment] + args + ["--out", out_dir, "log_level=info"],
                       capture_output=True, text=True, timeout=120, env=dict(os.environ, **(env or {})))
    took, after = time.time() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out = r.stdout + r.stderr
    problems = []
    if r.returncode == 0:
        problems.append("exited 0")
    for w in wants + ["what to do:"]:
        if w not in out:
            problems.append(f"the output lacks {w!r}")
    # Nothing started: no rank, no training, no run directory, no mpirun.
    for sign, what in (("iter ", "training started"), ("[r1]", "a second rank started"),
                       ("MPI_ABORT", "mpirun had started the ranks"), ("ORTE", "mpirun had started the ranks"),
                       ("workers over", "a worker started"), ("worker on this machine", "a worker started"), ("unprotected Lua error", "a crash"),
                       ("unexpected error", "an unexpected exception")):
        if sign in out:
            problems.append(f"{what} ({sign!r} in the output)")
    # The message itself (not a traceback's frames) never points into the validating library.
    message = "\n".join(l for l in out.splitlines() if not l.startswith(("\t", " ")))
    if "scripts/tandem/experiment.lua:" in message:
        problems.append("an internal error of experiment.lua")
    if os.path.exists(out_dir):
        problems.append("a run directory was made")
    if not traceback_ok and "stack traceback" in out:
        problems.append("a traceback for a user error")
    # Rejected before any heavy work: judged by the CPU time it took (DESIGN.md habit
    # 13: a loaded machine stretches the wall clock), with a margin of many times.
    if cpu > 30:
        problems.append(f"took {cpu:.0f} s of CPU to reject ({took:.0f} s on the clock)")
    if problems:
        failures.append(name)
        print(f"FAIL {name}: " + "; ".join(problems) + f"\n--- output of tandem run {' '.join(args)}:\n{out[-3000:]}")
    else:
        first = next((l for l in out.splitlines() if " error " in l or "error:" in l), out.splitlines()[0])
        print(f"ok {name}: {first.split(' error ', 1)[-1][:200]}")


os.makedirs(SCRATCH, exist_ok=True)
shutil.rmtree(os.path.join(SCRATCH, "runs"), ignore_errors=True)
os.makedirs(os.path.join(SCRATCH, "empty-data"), exist_ok=True)

# Experiments: impossible values and mistakes of type and name.
expect_rejected("global_batch_below_workers", ["global_batch=2", "--workers", "4"],
                ["'global_batch' must be >= the number of workers (4), got 2", "set global_batch to 4 or more"])
expect_rejected("negative_global_batch", ["global_batch=-5", "--workers", "2"], ["'global_batch' must be >= 1, got -5"])
expect_rejected("global_batch_past_the_data", ["global_batch=100000", "--workers", "2"],
                ["'global_batch' must be <= 60000, the training samples of fashion-mnist"])
expect_rejected("no_workers", ["--workers", "0"], ["'workers' must be >= 1, got 0"])
expect_rejected("workers_not_a_number", ["--workers", "many"], ["'workers' must be an integer, got 'many'"])
expect_rejected("unknown_key", ["global_bach=64", "--workers", "2"], ["unknown key 'global_bach'",
                                                                     "did you mean 'global_batch'"])
expect_rejected("wrong_type", ["lr=fast", "--workers", "2"], ["'lr' must be a number, got 'fast'"])
expect_rejected("out_of_range", ["momentum=1", "--workers", "2"], ["'momentum' must be < 1, got 1"])
expect_rejected("bad_choice", ["sync.mode=fast", "--workers", "2"],
                ["'sync.mode' must be one of bsp, grouped, ksync, local, got 'fast'"])
expect_rejected("huge_epochs", ["stop.epochs=1e300"], ["'stop.epochs' must be <= 1000000000"])
expect_rejected("fixed_plan_wrong_count", ["plan.kind=fixed", "plan.batches=1,2"],
                ["plan.batches has 2 local batches (summing to 3) for 1 workers", "one local batch per worker (1)"])
expect_rejected("fixed_plan_wrong_sum", ["plan.kind=fixed", "plan.batches=10,20", "--workers", "2"],
                ["plan.batches sums to 30, not global_batch = 64", "add up to 64"])
expect_rejected("fixed_plan_negative", ["plan.kind=fixed", "plan.batches=-1,65", "--workers", "2"],
                ["'plan.batches[1]' must be >= 0, got -1"])
expect_rejected("fixed_plan_over_max_batch", ["plan.kind=fixed", "plan.batches=60,4", "--workers", "2",
                                              "policy.max_batch=50,64"],
                ["'plan.batches[1]' must be <= 50, worker 0's largest local batch in 1 micro-batch(es) (policy.max_batch), got 60"])
expect_rejected("fixed_plan_over_memory", ["plan.kind=fixed", "plan.batches=60,4", "--workers", "2",
                                           "emulation.memory.batch=1,64", "emulation.memory.mb=10,20",
                                           "emulation.workers={{memory_mb = 15}, {speed = 1}}"],
                ["'plan.batches[1]' must be <= 32", "emulation.workers[1].memory_mb = 15 MB with emulation.memory"])
expect_rejected("memory_too_small", ["--workers", "2", "emulation.memory.batch=1,64", "emulation.memory.mb=10,20",
                                     "emulation.workers={{memory_mb = 5}, {speed = 1}}"],
                ["worker 0's 5 MB holds no sample of this model"])
expect_rejected("ksync_idle_worker", ["plan.kind=fixed", "plan.batches=64,0", "--workers", "2", "sync.mode=ksync"],
                ["sync.mode = 'ksync' needs samples on every worker, but plan.batches gives worker 1 none"])
expect_rejected("group_gap", ["sync.mode=grouped", "sync.groups=1,3,3", "--workers", "3"],
                ["sync.groups has no worker in group 2"])
expect_rejected("speeds_per_worker", ["emulation.speeds=1,1", "--workers", "4"],
                ["emulation.speeds has 2 entries for 4 workers"])
expect_rejected("event_worker", ["emulation.events={{worker = 5, speed = 0.5}}", "--workers", "2"],
                ["'emulation.events[1].worker' must be a worker from 0 to 1, got 5"])
expect_rejected("random_range", ["emulation.random.probability=0.1", "emulation.random.duration=5,1"],
                ["'emulation.random.duration' must be {min, max} with min <= max, got {5, 1}"])
expect_rejected("proportional_without_emulation", ["plan.kind=proportional", "--workers", "2"],
                ["plan.kind = 'proportional' divides the global batch by emulated speeds"])
expect_rejected("missing_speed_trace", ["emulation.speed_trace=no-such-trace.txt", "--workers", "2"],
                ["emulation.speed_trace 'no-such-trace.txt' not found"])
expect_rejected("list_of_records_override", ["faults={{rank = 0, iteration = 1}", "--workers", "2"],
                ["override 'faults={{rank = 0, iteration = 1}': 'faults' is not a Lua table"])
expect_rejected("list_of_records_wrong_count", ["emulation.workers={{speed = 1}}", "--workers", "2"],
                ["emulation.workers has 1 entries for 2 workers"])
expect_rejected("record_given_a_word", ["sync=bsp"], ["'sync' is a table, got 'bsp'", "sync.groups=..."])

# Bounds (issue 18, item 7): each refusal names the setting, the value and the range.
expect_rejected("global_batch_past_2_53", ["global_batch=1e308", "--workers", "2"],
                ["'global_batch' must be an integer from 1 to 9007199254740992, got 1e+308"])
expect_rejected("local_steps_huge", ["sync.mode=local", "sync.local_steps=1e9", "--workers", "2"],
                ["'sync.local_steps' must be <= 10000, got 1000000000"])
expect_rejected("reference_tiny", ["emulation.reference=1e-300", "--workers", "2"],
                ["'emulation.reference' must be >= 0.001, got 1e-300"])
expect_rejected("speed_tiny", ["emulation.speeds=1e-9,1", "--workers", "2"],
                ["'emulation.speeds[1]' must be >= 1e-06, got 1e-09"])
expect_rejected("budget_ms_huge", ["policy.file=equal", "policy.budget_ms=1e9", "--workers", "2"],
                ["'policy.budget_ms' must be <= 60000, got 1000000000"])
expect_rejected("memory_mb_huge", ["policy.file=equal", "policy.memory_mb=1e12", "--workers", "2"],
                ["'policy.memory_mb' must be <= 65536"])
expect_rejected("workers_past_int", ["workers=1e10"], ["'workers' must be <= 2147483647, got 10000000000"])
nul_mode = write("nul_mode.lua", "return { model = 'mlp', workers = 2, sync = { mode = 'bsp\\0evil' } }\n")
expect_rejected("mode_with_nul", [], ["'sync.mode' holds a NUL byte at position 4: 'bsp\\0evil'"], experiment=nul_mode)

# Missing data files: named with the path and how to get them.
expect_rejected("data_dir_missing", ["data.dir=" + os.path.join(SCRATCH, "nowhere"), "--workers", "2"],
                ["data.dir = '" + os.path.join(SCRATCH, "nowhere") + "' is not a folder",
                 "apt-get install dataset-fashion-mnist"])
expect_rejected("data_file_missing", ["data.dir=" + os.path.join(SCRATCH, "empty-data"), "--workers", "2"],
                ["data file '" + os.path.join(SCRATCH, "empty-data", "train-images-idx3-ubyte.gz") + "' does not exist",
                 "t10k-labels-idx1-ubyte.gz"])

# Experiment files.
syntax = write("syntax.lua", "return {\n  model = 'mlp',\n  global_batch = 64 +,\n}\n")
expect_rejected("experiment_syntax", ["--workers", "2"], ["syntax.lua:3"], experiment=syntax)
number = write("number.lua", "return 42\n")
expect_rejected("experiment_not_a_table", ["--workers", "2"], ["returned number 42, not a table"], experiment=number)

# Models: syntax, argument types, unknown arguments, layers that do not fit.
bad_model = write("bad_model.lua", "local nn = require 'tandem.nn'\nreturn function(a)\n"
                                   "  return nn.model{name = 'x' layers = {}}\nend\n")
expect_rejected("model_syntax", ["model=" + bad_model, "--workers", "2"],
                ["syntax error in model", "bad_model.lua:3"])
expect_rejected("model_argument_type", ["model_args.hidden=wide", "--workers", "2"],
                ["models/mlp.lua:13", "model_args.hidden must be a list of layer widths"], traceback_ok=True)
expect_rejected("model_argument_range", ["model_args.hidden=-5", "--workers", "2"],
                ["models/mlp.lua:20", "nn.linear: 'out' must be a positive integer, got -5"], traceback_ok=True)
expect_rejected("model_unknown_argument", ["model_args.hiden=32", "--workers", "2"],
                ["unknown key 'model_args.hiden'", "did you mean 'model_args.hidden'", "model_args.dropout"])
expect_rejected("model_of_another_experiment", ["model=lenet", "--workers", "2"],
                ["unknown key 'model_args.hidden': model models/lenet.lua does not read it"])
conv = write("conv_model.lua", "local nn = require 'tandem.nn'\nreturn function(a)\n"
                               "  return nn.model{name = 'x', layers = {nn.conv2d(4, 50), nn.flatten(), "
                               "nn.linear(a.classes)}}\nend\n")
expect_rejected("model_does_not_fit", ["model=" + conv, "model_args={}", "--workers", "2"],
                ["does not fit the data's samples [1,28,28]", "conv2d kernel 50 does not fit input [1,28,28]"])
expect_rejected("model_missing", ["model=nosuch", "--workers", "2"], ["model 'nosuch' not found"])
# Too big for the machine: refused at once, before anything is allocated, with the
# numbers. 60000 x 60000 is 3.6 billion parameters, ~41 GiB with gradients and
# momentum; four CPU ranks share the host's memory, so no machine with less than
# ~165 GiB free takes it. 250000 x 250000 (~700 GiB) no machine takes.
expect_rejected("model_too_big", ["model_args.hidden=60000,60000", "--workers", "4", "device=cpu"],
                ["model 'mlp' needs ~41.2 GiB on worker 0 (parameters 13.6 GiB, gradients 13.6 GiB, "
                 "optimizer state 13.6 GiB", "shared by 4 ranks", "refused before allocating it",
                 "model_args (now {\"hidden\":[60000,60000]}, read by models/mlp.lua)"])
expect_rejected("model_far_too_big", ["model_args.hidden=250000,250000"],
                ["model 'mlp' needs ~70", "(parameters 233.", "refused before allocating it"])
# Files that never finish loading: stopped at the load deadline, naming the file and
# where it looped.
loop_model = write("loop_model.lua", "local nn = require 'tandem.nn'\nreturn function(a)\n"
                                     "  while true do end\nend\n")
expect_rejected("model_loops", ["model=" + loop_model, "model_args={}", "--workers", "2"],
                ["loop_model.lua did not finish loading within 2 s (it was at ", "loop_model.lua:3)",
                 "TANDEM_LOAD_TIMEOUT_S"], traceback_ok=True, env={"TANDEM_LOAD_TIMEOUT_S": "2"})
loop_experiment = write("loop_experiment.lua", "local n = 0\nwhile true do n = n + 1 end\nreturn { model = 'mlp' }\n")
expect_rejected("experiment_loops", ["--workers", "2"],
                ["experiment file " + loop_experiment + " did not finish loading within 2 s"],
                experiment=loop_experiment, traceback_ok=True, env={"TANDEM_LOAD_TIMEOUT_S": "2"})

# Policies: found, parsed, returning the right table, initialised, all before the ranks.
bad_policy = write("bad_policy.lua", "return { init = function(c) end, step = function(s) return nil end")
expect_rejected("policy_syntax", ["policy.file=" + bad_policy, "--workers", "2"], ["bad_policy.lua:1"])
wrong_policy = write("wrong_policy.lua", "return 42\n")
expect_rejected("policy_wrong_type", ["policy.file=" + wrong_policy, "--workers", "2"],
                ["must return a table with init(cluster) and step(stats) functions; it returned 42"])
init_policy = write("init_policy.lua", "return { init = function(c) return c.workers.count end,\n"
                                       "  step = function(s) end }\n")
expect_rejected("policy_init_error", ["policy.file=" + init_policy, "--workers", "2"],
                ["init_policy.lua:1", "attempt to index field 'workers'"], traceback_ok=True)
expect_rejected("policy_params_wrong_type", ["policy.file=lbb", "policy.params={ft = 'fast'}", "--workers", "2"],
                ["lbb"], traceback_ok=True)
expect_rejected("policy_missing", ["policy.file=nonexist", "--workers", "2"], ["policy 'nonexist' not found"])
expect_rejected("policy_bounds", ["policy.file=lbb", "policy.max_batch=1,1", "global_batch=5000", "--workers", "2"],
                ["no plan can satisfy the policy's bounds"])


# The console: malformed commands are answered with the error; the run goes on.


def console_scenario():
    run_dir = os.path.join(SCRATCH, "console")
    shutil.rmtree(run_dir, ignore_errors=True)
    job = subprocess.Popen([TANDEM, "run", QUICKSTART, "--out", run_dir, "policy.file=equal", "model_args.hidden=16",
                            "stop.max_iterations=1000000", "stop.epochs=1000", "stop.target_accuracy=1",
                            "eval_every=1000000", "log_level=warn", "device=cpu"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    sock = os.path.join(run_dir, "repl.sock")
    for _ in range(600):
        if os.path.exists(sock) or job.poll() is not None:
            break
        time.sleep(0.05)
    if not os.path.exists(sock):
        job.kill()
        fail(f"the job made no console socket:\n{job.communicate()[0].decode()[-2000:]}")
    cases = [
        ("plan(", "'<eof>'"),
        ("nosuch()", "attempt to call global 'nosuch'"),
        ("swap()", "swap('name') takes a policy name or a path"),
        ("swap('nonexistent')", "no policy file"),
        ("swap(42)", "swap('name') takes a policy name or a path"),
        ("emulate(5)", "emulate{worker = 2, speed = 0.3, iterations = 50}"),
        ("emulate{worker = 7, speed = 0.5}", "no worker 7 in a run of 1"),
        ("emulate{worker = 0, speed = 0/0}", "out of range (0, 100]"),
        ("emulate{worker = 0, speed = -1}", "out of range (0, 100]"),
        ("emulate{speed = 0.5}", "needs a worker"),
        ("history('x')", "bad argument #1 to 'history'"),
        ("set()", "set(key, value): key is a parameter name"),
        ("set('threshold', print)", "requested"),  # a function becomes a descriptive string
        ("error({})", "the run is untouched"),
        ("while true do end", ""),  # interrupted by the console's budget, or answered; the run must go on
    ]
    for line, want in cases:
        reply = socket_command(sock, line)
        if want and want not in reply:
            failures.append("console " + line)
            print(f"FAIL console {line!r}: the reply lacks {want!r}:\n{reply}")
        elif job.poll() is not None:
            failures.append("console " + line)
            print(f"FAIL console {line!r}: the job ended:\n{job.communicate()[0].decode()[-2000:]}")
        else:
            print(f"ok console {line!r}: {reply.strip().splitlines()[0][:160] if reply.strip() else '(no reply)'}")
    if "[128]" not in socket_command(sock, "plan()") and "[64]" not in socket_command(sock, "plan()"):
        failures.append("console plan() after the errors")
    socket_command(sock, "stop()")
    out, _ = job.communicate(timeout=60)
    if job.returncode != 0:
        failures.append("console job")
        print(f"FAIL the console's job exited {job.returncode} after stop():\n{out.decode()[-2000:]}")
    else:
        print("ok console: every malformed command answered, the run went on until stop()")


def run_to_end(name, args, timeout=180):
    """tandem run ARGS, to its end: (exit status, output)."""
    r = subprocess.run([TANDEM, "run", QUICKSTART] + args, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def check(name, ok, detail):
    if ok:
        print(f"ok {name}")
    else:
        failures.append(name)
        print(f"FAIL {name}: {detail}")


def policy_answers_scenario():
    """Overlong reasons are cut to 256 bytes in the trace; a mode with a NUL inside is
    refused as itself, not taken for bsp; the run goes on."""
    run_dir = os.path.join(SCRATCH, "policy-answers")
    shutil.rmtree(run_dir, ignore_errors=True)
    policy = write("chatty_policy.lua", "local n = 0\nreturn {\n  init = function(cluster) end,\n"
                                        "  step = function(stats)\n    n = n + 1\n"
                                        "    if n % 2 == 0 then return { local_batch = { stats.global_batch }, "
                                        "mode = 'bsp\\0evil' } end\n"
                                        "    return { local_batch = { stats.global_batch }, "
                                        "reason = string.rep('why ', 250000) }\n  end,\n}\n")
    status, out = run_to_end("policy-answers", ["--out", run_dir, "policy.file=" + policy, "stop.max_iterations=12",
                                                "eval_every=1000", "device=cpu", "console=false"])
    reasons = []
    if status == 0:
        with open(os.path.join(run_dir, "trace.jsonl")) as f:
            for line in f:
                reason = json.loads(line).get("policy", {}).get("reason")
                if reason is not None:
                    reasons.append(reason)
    longest = max((len(r.encode()) for r in reasons), default=0)
    check("policy_long_reason", status == 0 and reasons and longest <= 256 and
          any(r.endswith("\u2026") for r in reasons),
          f"exit {status}, {len(reasons)} reasons, the longest {longest} bytes:\n{out[-2000:]}")
    check("policy_mode_with_nul", any("returned mode 'bsp\\000evil', not one of" in r for r in reasons),
          f"no reason names the mode 'bsp\\000evil': {[r[:120] for r in reasons]}")


def disk_full_scenario():
    """A write that fails (/dev/full answers ENOSPC) stops the run naming the file."""
    run_dir = os.path.join(SCRATCH, "disk-full")
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    os.symlink("/dev/full", os.path.join(run_dir, "trace.jsonl"))
    # --overwrite: the planted trace.jsonl makes the directory look like an earlier run's.
    status, out = run_to_end("disk-full", ["--out", run_dir, "--overwrite", "stop.max_iterations=40", "log_every=10",
                                           "device=cpu", "console=false"])
    want = f"cannot write the run's file '{run_dir}/trace.jsonl': No space left on device"
    check("disk_full", status != 0 and want in out and "free space on that disk" in out,
          f"exit {status}, the output lacks {want!r}:\n{out[-2000:]}")


def failed_job_scenario():
    """A job that fails before its first checkpoint says so, not 'set checkpoint.every'."""
    run_dir = os.path.join(SCRATCH, "failed-job")
    shutil.rmtree(run_dir, ignore_errors=True)
    status, out = run_to_end("failed-job", ["--out", run_dir, "--workers", "2", "faults={{rank = 1, iteration = 3}}",
                                            "checkpoint.every=1000", "stop.max_iterations=50", "device=cpu",
                                            "console=false"])
    want = "no checkpoint was written: the job failed before its first one was due (at iteration 1000"
    check("failed_before_first_checkpoint", status != 0 and want in out and "set checkpoint.every" not in out,
          f"exit {status}, the output lacks {want!r}:\n{out[-2000:]}")


console_scenario()
policy_answers_scenario()
disk_full_scenario()
failed_job_scenario()
if failures:
    fail(f"{len(failures)} case(s) failed: {', '.join(failures)}")
print("all bad-input checks passed")
