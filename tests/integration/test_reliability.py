#!/usr/bin/env python3
"""Reliability end to end, with real signals (the experiment's `faults` make a rank
SIGKILL or SIGSTOP itself at a chosen point, or put a NaN in its gradient):

  - resume is exact: a run killed at iteration 25 and resumed from its checkpoint at
    20 has the same losses, bit for bit, at every iteration as an uninterrupted run,
    and the same final parameters;
  - a worker killed or stopped in its compute, in the all-reduce, or while rank 0
    writes a checkpoint: the job ends within the deadline (collective_timeout_s = 3),
    non-zero, naming the rank, with every checkpoint on disk whole (magic, version,
    CRC) and the last one usable; never a hang;
  - rank 0 killed half-way through a checkpoint: the torn file never takes a
    checkpoint's name and resume continues from the one before;
  - the job goes on with the workers that are left (--resume --workers N-1);
  - in grouped sync, checkpoints at the meetings past each multiple of `every`,
    and resume from one;
  - a corrupted newest checkpoint is rejected by name and the previous one used;
  - a NaN on one rank skips that step on every rank (in grouped sync the server skips
    the update, in local SGD the worker its local step); repeated, the run stops;
  - an unwritable run directory or a disk too small for the checkpoints is reported
    at start.

usage: test_reliability.py TANDEM_BINARY SCRATCH_DIR [resume | deadlines | all]
(ctest runs the two parts as integration.reliability_resume and _deadlines, side by side)
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import time
import zlib

TANDEM, SCRATCH = sys.argv[1], sys.argv[2]
DEADLINE_S = 3
# Generous: the abort and mpirun's teardown on a loaded 2-core machine. Counted from
# the fault to the job's last log line (noticed_after), not over the whole command:
# mpirun's start alone took 50-70 s on a loaded machine.
NOTICE_WITHIN_S = DEADLINE_S + 40


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def experiment(name, workers, faults="", extra=""):
    path = os.path.join(SCRATCH, name + ".lua")
    with open(path, "w") as f:
        f.write(f"""local e = dofile('scripts/experiments/quickstart.lua')
e.workers = {workers}
e.plan = {{ kind = 'random' }}  -- uneven splits: resume must restore them exactly
e.stop = {{ epochs = 1, max_iterations = 40 }}
e.eval_every = 15
e.console = false
e.save_params = true
e.collective_timeout_s = {DEADLINE_S}
e.checkpoint = {{ every = 10, keep = 3 }}
e.faults = {{ {faults} }}
{extra}
return e
""")
    return path


def tandem(args, expect_ok, timeout=300, env=None):
    start = time.monotonic()
    try:
        r = subprocess.run([TANDEM] + args, capture_output=True, text=True, timeout=timeout,
                           env=dict(os.environ, **env) if env else None)
    except subprocess.TimeoutExpired:
        fail(f"tandem {' '.join(args)} did not end within {timeout} s: a hang")
    elapsed = time.monotonic() - start
    out = r.stdout + r.stderr
    if expect_ok and r.returncode != 0:
        fail(f"tandem {' '.join(args)} exited {r.returncode}:\n{out[-3000:]}")
    if not expect_ok and r.returncode == 0:
        fail(f"tandem {' '.join(args)} succeeded but should have failed:\n{out[-3000:]}")
    return out, elapsed


def noticed_after(out, elapsed):
    """Seconds from the injected fault's log line to the job's last log line (lines
    start HH:MM:SS.mmm); the whole command's time when the output has no fault line."""
    stamps, fault = [], None
    for line in out.splitlines():
        head = line[:12]
        if len(head) == 12 and head[2] == ":" and head[5] == ":" and head[8] == ".":
            try:
                t = int(head[:2]) * 3600 + int(head[3:5]) * 60 + float(head[6:12])
            except ValueError:
                continue
            stamps.append(t)
            if fault is None and "fault injection" in line:
                fault = t
    if fault is None:
        return elapsed
    after = stamps[-1] - fault
    return after + 86400 if after < 0 else after  # past midnight


def run(name, workers, faults="", extra="", expect_ok=True, args=(), env=None):
    out_dir = os.path.join(SCRATCH, name)
    shutil.rmtree(out_dir, ignore_errors=True)
    out, elapsed = tandem(["run", experiment(name, workers, faults, extra), "--out", out_dir] + list(args), expect_ok,
                          env=env)
    # A failing run: how long the job took to end after its fault (noticed_after).
    return out_dir, out, elapsed if expect_ok else noticed_after(out, elapsed)


def checkpoints(run_dir):
    d = os.path.join(run_dir, "checkpoints")
    return sorted(f for f in os.listdir(d) if f.startswith("ckpt-") and f.endswith(".tdm")) if os.path.isdir(d) else []


def check_whole(path):
    """The file format's own checks: magic, version, length, CRC-32."""
    with open(path, "rb") as f:
        b = f.read()
    if b[:8] != b"TANDEMCK":
        fail(f"{path}: no magic")
    version, header_len = struct.unpack("<II", b[8:16])
    header = json.loads(b[16:16 + header_len])
    payload = 4 * header["param_count"] + 4 * header["velocity_count"] + 8 * header["layer_state_count"] \
        + header["stats_bytes"]
    if version != 1 or len(b) != 16 + header_len + payload + 4:
        fail(f"{path}: version {version}, {len(b)} bytes, the header says {16 + header_len + payload + 4}")
    if zlib.crc32(b[:-4]) != struct.unpack("<I", b[-4:])[0]:
        fail(f"{path}: checksum mismatch")
    return header


def all_whole(run_dir):
    names = checkpoints(run_dir)
    for n in names:
        check_whole(os.path.join(run_dir, "checkpoints", n))
    return names


def losses(run_dir):
    rows = {}
    with open(os.path.join(run_dir, "trace.jsonl")) as f:
        for line in f:
            j = json.loads(line)
            if j["event"] == "iteration":
                if j["iteration"] in rows:
                    fail(f"{run_dir}: the trace has iteration {j['iteration']} twice")
                rows[j["iteration"]] = (j["loss"], [w["loss_sum"] for w in j["workers"]],
                                        [w["local_batch"] for w in j["workers"]])
    return rows


def summary(run_dir):
    with open(os.path.join(run_dir, "summary.json")) as f:
        return json.load(f)


def expect(out, *parts, what):
    for p in parts:
        if p not in out:
            fail(f"{what}: the output lacks '{p}':\n{out[-3000:]}")


PART = sys.argv[3] if len(sys.argv) > 3 else "all"
if PART not in ("all", "resume", "deadlines"):
    fail(f"unknown part {PART!r}: resume, deadlines or all")


def resume_part():
    """Resume exact (SGD, AdamW, a policy, a changing B), a corrupted checkpoint, NaN
    steps, the disk at start."""
    # 1. Resume is exact.
    full, _, _ = run("full", 2)
    killed, out, elapsed = run("killed", 2, "{ rank = 1, iteration = 25, kind = 'kill' }", expect_ok=False)
    expect(out, "rank 1", "the last good checkpoint is", "ckpt-0000000020", "--resume", what="a worker killed in compute")
    if elapsed > NOTICE_WITHIN_S:
        fail(f"the job took {elapsed:.1f} s to end after a worker died")
    all_whole(killed)
    out, _ = tandem(["run", "--resume", killed], expect_ok=True)
    expect(out, "resuming from", "ckpt-0000000020", what="resume")
    a, b = losses(full), losses(killed)
    if sorted(a) != list(range(40)) or sorted(b) != list(range(40)):
        fail(f"traces hold iterations {sorted(a)[:3]}..{len(a)} and {sorted(b)[:3]}..{len(b)}, not 0..39 each")
    diff = [t for t in range(40) if a[t] != b[t]]
    if diff:
        fail(f"the resumed run differs from the uninterrupted one at iterations {diff[:5]}: {a[diff[0]]} vs {b[diff[0]]}")
    with open(os.path.join(full, "params.f32"), "rb") as f1, open(os.path.join(killed, "params.f32"), "rb") as f2:
        if f1.read() != f2.read():
            fail("the final parameters of the resumed run differ from the uninterrupted run's")
    if summary(killed)["iterations"] != 40:
        fail(f"the resumed run's summary says {summary(killed)['iterations']} iterations")

    # 1a. Exact with AdamW too (its two moments and step count in the checkpoint: the
    # bias correction must go on where it was), on a small GPT with clipping.
    GPT = """e.model = 'gpt'
    e.model_args = { n_layer = 1, n_head = 2, n_embd = 16 }
    e.data = { name = 'text', seq_len = 16, validation = 0.02 }
    e.optimizer = 'adamw'
    e.lr = 3e-3
    e.clip_grad_norm = 0.5
    e.eval_batch = 256"""
    gfull, _, _ = run("gpt_full", 2, extra=GPT)
    gkilled, out, _ = run("gpt_killed", 2, "{ rank = 0, iteration = 25, kind = 'kill' }", extra=GPT, expect_ok=False)
    out, _ = tandem(["run", "--resume", gkilled], expect_ok=True)
    expect(out, "resuming from", "ckpt-0000000020", what="resume with AdamW")
    a, b = losses(gfull), losses(gkilled)
    diff = [t for t in range(40) if a.get(t) != b.get(t)]
    if diff:
        fail(f"with AdamW, the resumed run differs from the uninterrupted one at iterations {diff[:5]}")
    with open(os.path.join(gfull, "params.f32"), "rb") as f1, open(os.path.join(gkilled, "params.f32"), "rb") as f2:
        if f1.read() != f2.read():
            fail("with AdamW, the final parameters of the resumed run differ from the uninterrupted run's")

    # 1b. Exact with a policy too, when its decisions do not depend on timing: this one
    #     reads what a resumed run must restore (stats.history, the global gradient's
    #     norm, its own saved state) and plans from it.
    policy_file = os.path.join(SCRATCH, "deterministic_policy.lua")
    with open(policy_file, "w") as f:
        f.write('''-- Decides from stats.history, global_grad_sq and its own counter, never from times.
    local P, calls = {}, 0
    function P.init(cluster) end
    function P.step(stats)
      calls = calls + 1
      local h, g = #stats.history, stats.global_grad_sq or 0
      local shift = (h + calls + math.floor(g * 1e4)) % 17
      return { local_batch = { 24 + shift, 40 - shift }, reason = 'deterministic' }
    end
    function P.save() return { calls = calls } end
    function P.restore(s) calls = s.calls end
    return P
    ''')
    # A patient budget: a decision that comes later than the budget leaves the plan in
    # force, which on a loaded machine made the two runs differ before any kill (the
    # policy's timing, not the resume).
    extra = f"e.plan = {{ kind = 'equal' }}\ne.policy = {{ file = '{policy_file}', history = 8, budget_ms = 5000 }}"
    pfull, _, _ = run("policy_full", 2, extra=extra)
    pkilled, _, _ = run("policy_killed", 2, "{ rank = 1, iteration = 25, kind = 'kill' }", extra=extra, expect_ok=False)
    out, _ = tandem(["run", "--resume", pkilled], expect_ok=True)
    expect(out, "its state and stats history restored", what="resume with a policy")
    a, b = losses(pfull), losses(pkilled)
    diff = [t for t in range(40) if a.get(t) != b.get(t)]
    if diff or len(set(tuple(r[2]) for r in a.values())) < 3:
        fail(f"with a policy, the resumed run differs at iterations {diff[:5]} (or the policy never moved the plan)")

    # 1c. Exact when plans change the global batch too (policy.global_batch, with
    #     AdaScale's learning-rate gain: the sampler's cursor, the samples drawn and the
    #     noise-scale estimate come back from the checkpoint).
    batch_policy = os.path.join(SCRATCH, "batch_policy.lua")
    with open(batch_policy, "w") as f:
        f.write('''-- A new global batch from its own counter and the history's length, never from times.
    local P, calls = {}, 0
    function P.init(cluster) end
    function P.step(stats)
      calls = calls + 1
      local shift = (#stats.history + calls) % 5
      local b = 48 + 16 * shift
      return { local_batch = { b / 2 - shift, b / 2 + shift }, reason = 'B ' .. b, metrics = { b = b } }
    end
    function P.save() return { calls = calls } end
    function P.restore(s) calls = s.calls end
    return P
    ''')
    # The patient budget of 1b, for the same reason (a late decision made these runs
    # differ at iteration 17 with twelve tests on 2 cores).
    extra = (f"e.plan = {{ kind = 'equal' }}\ne.policy = {{ file = '{batch_policy}', history = 8, budget_ms = 5000, "
             "global_batch = { min = 48, max = 112 } }\ne.lr_scaling = 'adascale'")
    bfull, _, _ = run("batch_full", 2, extra=extra)
    bkilled, _, _ = run("batch_killed", 2, "{ rank = 1, iteration = 25, kind = 'kill' }", extra=extra, expect_ok=False)
    out, _ = tandem(["run", "--resume", bkilled], expect_ok=True)
    a, b = losses(bfull), losses(bkilled)
    diff = [t for t in range(40) if a.get(t) != b.get(t)]
    sizes = set(sum(r[2]) for r in a.values())
    if diff or len(sizes) < 3:
        fail(f"with B changing, the resumed run differs at iterations {diff[:5]} (or B never changed: {sorted(sizes)})")
    with open(os.path.join(bfull, "params.f32"), "rb") as f1, open(os.path.join(bkilled, "params.f32"), "rb") as f2:
        if f1.read() != f2.read():
            fail("with B changing, the final parameters of the resumed run differ from the uninterrupted run's")

    # 5. A corrupted newest checkpoint: rejected by name, the previous one used.
    newest = os.path.join(full, "checkpoints", checkpoints(full)[-1])
    with open(newest, "r+b") as f:
        f.seek(-40, os.SEEK_END)
        byte = f.read(1)
        f.seek(-40, os.SEEK_END)
        f.write(bytes([byte[0] ^ 0xFF]))
    out, _ = tandem(["run", "--resume", full, "stop.max_iterations=40"], expect_ok=True)
    expect(out, "checksum mismatch", "trying the one before it", "resuming from", "set aside", what="a corrupted checkpoint")
    # Set aside, it no longer counts among the newest `keep`: the good ones stay.
    if not os.path.exists(newest + ".rejected") or len(all_whole(full)) < 2:
        fail(f"after a rejected checkpoint: {os.listdir(os.path.dirname(newest))}")

    # 6. NaN: once skipped on every rank; repeated, the run stops.
    d, out, _ = run("nan_once", 2, "{ rank = 1, iteration = 5, kind = 'nan' }", extra="e.checkpoint = nil")
    expect(out, "rank(s) 1", "skips this step", what="a NaN once")
    if summary(d)["skipped_steps"] != 1:
        fail(f"nan_once: skipped_steps {summary(d)['skipped_steps']}")
    # A resumed run goes on counting: the NaN skipped before the checkpoint it resumes
    # from is in its summary.
    d, out, _ = run("nan_resumed", 2, "{ rank = 1, iteration = 5, kind = 'nan' }, { rank = 1, iteration = 25, kind = 'kill' }",
                    expect_ok=False)
    out, _ = tandem(["run", "--resume", d], expect_ok=True)
    expect(out, "resuming from", "ckpt-0000000020", what="resume after a skipped step")
    if summary(d)["skipped_steps"] != 1 or summary(d)["iterations"] != 40:
        fail(f"nan_resumed: {summary(d)['iterations']} iterations, skipped_steps {summary(d)['skipped_steps']} "
             "(the step skipped before the checkpoint must be counted)")
    for mode, extra in [("grouped", "e.sync = { mode = 'grouped', groups = { 1, 1, 2, 2 }, sync_every = 5 }"),
                        ("local", "e.sync = { mode = 'local', local_steps = 4 }")]:
        d, out, _ = run("nan_" + mode, 4, "{ rank = 1, iteration = 12, kind = 'nan' }",
                        extra="e.checkpoint = nil\ne.plan = { kind = 'equal' }\n" + extra)
        expect(out, "not finite" if mode == "local" else "holds a NaN or Inf", what=f"a NaN in {mode} sync")
        s = summary(d)
        if s["iterations"] < 40 or (mode == "grouped" and s["skipped_steps"] != 1):
            fail(f"nan_{mode}: {s['iterations']} iterations, skipped_steps {s['skipped_steps']}")
    d, out, _ = run("nan_repeated", 2, ", ".join(f"{{ rank = 0, iteration = {t}, kind = 'nan' }}" for t in (5, 6, 7)),
                    extra="e.checkpoint = nil\ne.max_nonfinite_steps = 3", expect_ok=False)
    expect(out, "3 steps in a row", "diverged", what="NaN repeated")

    # 7. The disk, at start: unwritable, and too small for the checkpoints asked for.
    out, elapsed = tandem(["run", experiment("unwritable", 1), "--out", "/dev/null/run"], expect_ok=False, timeout=60)
    expect(out, "/dev/null/run", what="an unwritable run directory")
    d, out, elapsed = run("disk_full", 1, extra="e.checkpoint = { every = 10, keep = 100000000 }", expect_ok=False)
    expect(out, "not enough free space", "checkpoint.keep", what="a disk too small")
    if os.path.exists(os.path.join(d, "trace.jsonl")) and losses(d):
        fail("the run trained before finding the disk too small")

    print("ok: resume bitwise over 40 iterations (SGD, and AdamW on a GPT); corruption, NaN and disk handled")


def deadlines_part():
    """Kills and stops in compute, the all-reduce and checkpoint writes; grouped sync."""
    # 2. Kills and stops in compute and in the all-reduce: noticed, named, checkpoints whole.
    #    The same with gradient buckets (comm.bucket_mb, each layer a bucket; over MPI's
    #    messages, as between hosts): a rank stopped or killed while the others' buckets
    #    are summing is named as without them.
    buckets = ("e.comm = { bucket_mb = 0.002 }", {"TANDEM_SHM_ALLREDUCE": "0"},
               "in 3 bucket(s) summed during the backward pass")
    plain = ("", None, "fault injection")
    for name, workers, fault, names, (extra, env, shows) in [
            ("stop_compute", 2, "{ rank = 1, iteration = 12, kind = 'stop', during = 'compute' }", "missing rank(s): 1",
             plain),
            ("kill_allreduce", 3, "{ rank = 2, iteration = 15, kind = 'kill', during = 'allreduce' }", "rank 2", plain),
            ("stop_allreduce", 3, "{ rank = 2, iteration = 15, kind = 'stop', during = 'allreduce' }",
             "missing rank(s): 2", plain),
            ("stop_buckets", 2, "{ rank = 1, iteration = 12, kind = 'stop', during = 'compute' }", "missing rank(s): 1",
             buckets),
            ("kill_buckets", 2, "{ rank = 1, iteration = 12, kind = 'kill', during = 'compute' }", "rank 1", buckets)]:
        d, out, elapsed = run(name, workers, fault, extra, expect_ok=False, env=env)
        expect(out, "fault injection", names, "ckpt-0000000010", shows, what=name)
        if "stop" in name:
            expect(out, "collective_timeout_s", what=name + " (the deadline)")
        if elapsed > NOTICE_WITHIN_S:
            fail(f"{name}: the job took {elapsed:.1f} s to end (deadline {DEADLINE_S} s)")
        if all_whole(d) != ["ckpt-0000000010.tdm"]:
            fail(f"{name}: checkpoints {checkpoints(d)}, want ckpt-0000000010.tdm")
        print(f"ok: {name} ended after {elapsed:.1f} s")

    # 3. Continue with the workers that are left: kill_allreduce lost rank 2 of 3.
    out, _ = tandem(["run", "--resume", os.path.join(SCRATCH, "kill_allreduce"), "--workers", "2"], expect_ok=True)
    expect(out, "resumed on 2 workers", what="resume on fewer workers")
    s = summary(os.path.join(SCRATCH, "kill_allreduce"))
    if s["workers"] != 2 or s["iterations"] != 40 or s["global_batch"] != 64:
        fail(f"resumed on 2 workers: summary {s['workers']} workers, {s['iterations']} iterations, B {s['global_batch']}")
    rows = losses(os.path.join(SCRATCH, "kill_allreduce"))
    if any(len(rows[t][2]) != 2 or sum(rows[t][2]) != 64 for t in range(10, 40)):
        fail("after the resume the trace should show 2 workers splitting 64 samples")

    # 4. Rank 0 killed half-way through writing the checkpoint of iteration 20; another
    #    rank killed while rank 0 writes one.
    d, out, _ = run("kill_writer", 2, "{ rank = 0, iteration = 19, kind = 'kill', during = 'checkpoint' }",
                    expect_ok=False)
    if all_whole(d) != ["ckpt-0000000010.tdm"]:
        fail(f"kill_writer: checkpoints {checkpoints(d)}: the torn one must not take a checkpoint's name")
    out, _ = tandem(["run", "--resume", d], expect_ok=True)
    expect(out, "ckpt-0000000010", what="resume after a torn checkpoint")
    d, out, _ = run("kill_while_writing", 2, "{ rank = 1, iteration = 19, kind = 'kill', during = 'checkpoint' }",
                    expect_ok=False)
    names = all_whole(d)
    if names[:1] != ["ckpt-0000000010.tdm"] or len(names) > 2:
        fail(f"kill_while_writing: checkpoints {names}")
    d, out, elapsed = run("stop_while_writing", 2, "{ rank = 1, iteration = 19, kind = 'stop', during = 'checkpoint' }",
                          expect_ok=False)
    expect(out, "waiting for rank 0 to write a checkpoint", "missing rank(s): 1", what="a worker stopped at a checkpoint")
    if all_whole(d) != ["ckpt-0000000010.tdm", "ckpt-0000000020.tdm"] or elapsed > NOTICE_WITHIN_S:
        fail(f"stop_while_writing: checkpoints {checkpoints(d)} after {elapsed:.1f} s")

    # Relaxed sync: checkpoints at the meetings past each multiple of checkpoint.every
    # (segments end where the server's updates take them), and resume from one.
    d, out, _ = run("grouped_killed", 4, "{ rank = 3, iteration = 33, kind = 'kill' }", expect_ok=False,
                    extra="e.plan = { kind = 'equal' }\ne.sync = { mode = 'grouped', groups = { 1, 1, 2, 2 }, sync_every = 5 }")
    names = all_whole(d)
    if len(names) != 3 or any(int(n[5:15]) // 10 != k for n, k in zip(names, (1, 2, 3))):
        fail(f"grouped: checkpoints {names}, want one past each of 10, 20 and 30")
    out, _ = tandem(["run", "--resume", d], expect_ok=True)
    if summary(d)["iterations"] < 40:
        fail(f"grouped resume: {summary(d)['iterations']} iterations")
    # A worker stopped inside a grouped segment: its group's partner waits in the
    # group's shared-memory all-reduce and names it (by world rank), no hang.
    d, out, elapsed = run("grouped_stopped", 4, "{ rank = 3, iteration = 13, kind = 'stop' }", expect_ok=False,
                          extra="e.plan = { kind = 'equal' }\ne.sync = { mode = 'grouped', groups = { 1, 1, 2, 2 }, sync_every = 5 }")
    expect(out, "missing rank(s): 3", what="a worker stopped in a grouped segment")
    if elapsed > NOTICE_WITHIN_S:
        fail(f"grouped_stopped: noticed after {elapsed:.1f} s")

    print("ok: kills and stops in compute, all-reduce and checkpoint writes noticed, named and whole")


os.makedirs(SCRATCH, exist_ok=True)
if PART in ("all", "resume"):
    resume_part()
if PART in ("all", "deadlines"):
    deadlines_part()
