#!/usr/bin/env python3
"""TensorBoard event files (tensorboard = true) read back by an independent reader.

A short run on 2 workers writes <run dir>/tensorboard/events.out.tfevents.*. The reader
here shares no code with the writer: it checks every TFRecord frame's masked CRC32C
(of the length and of the data), decodes the protobuf wire format by hand (Debian has
no python3-tensorboard, and python3-protobuf would still need TensorFlow's .proto
files), and checks: the first event is file_version "brain.Event:2"; one event per
iteration of trace.jsonl, step = the iteration, whose train/loss, train/accuracy,
train/lr, throughput/samples_per_s, throughput/efficiency and workers/<r>/compute_ms,
idle_ms, local_batch equal the trace's numbers for it (as float32); test/loss and
test/accuracy at each evaluation of the trace; nothing after the last whole frame.
A run killed outright (SIGKILL, injected in iteration 45) keeps every iteration up to
its last progress line (iteration 39). A run without the setting writes no
tensorboard folder.

usage: test_tensorboard.py TANDEM_BINARY SCRATCH_DIR
"""
import glob
import json
import os
import shutil
import struct
import subprocess
import sys

TANDEM, SCRATCH = sys.argv[1], sys.argv[2]
ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
ITERATIONS, LOG_EVERY, EVAL_EVERY = 60, 20, 30


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


# CRC-32C, bit by bit (the writer uses a table): the reflected Castagnoli polynomial.
def crc32c(data):
    c = 0xFFFFFFFF
    for byte in data:
        c ^= byte
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frames(blob, torn_ok=False):
    """The records of a file; torn_ok: a killed writer's last record may be cut short
    (TensorBoard's reader waits for the rest of such a record)."""
    at = 0
    while at < len(blob):
        if len(blob) - at < 12 or len(blob) - at < 16 + struct.unpack_from("<Q", blob, at)[0]:
            if torn_ok:
                return
            fail(f"{len(blob) - at} stray bytes after the last frame")
        (n,) = struct.unpack_from("<Q", blob, at)
        (len_crc,) = struct.unpack_from("<I", blob, at + 8)
        if masked(blob[at:at + 8]) != len_crc:
            fail(f"frame at byte {at}: the length's CRC does not match")
        data = blob[at + 12:at + 12 + n]
        (data_crc,) = struct.unpack_from("<I", blob, at + 12 + n)
        if masked(data) != data_crc:
            fail(f"frame at byte {at}: the data's CRC does not match")
        yield data
        at += 16 + n


def varint(b, at):
    v = shift = 0
    while True:
        byte = b[at]
        at += 1
        v |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return v, at


def fields(b):
    """(field number, wire type, value) of a protobuf message."""
    at = 0
    while at < len(b):
        key, at = varint(b, at)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, at = varint(b, at)
        elif wire == 1:
            v, at = b[at:at + 8], at + 8
        elif wire == 5:
            v, at = b[at:at + 4], at + 4
        elif wire == 2:
            n, at = varint(b, at)
            v, at = b[at:at + n], at + n
        else:
            fail(f"unexpected wire type {wire}")
        yield field, wire, v


def event(data):
    """Event{wall_time 1, step 2, file_version 3, summary 5{value 1{tag 1, simple_value 2}}}."""
    e = {"scalars": {}}
    for f, _, v in fields(data):
        if f == 1:
            (e["wall_time"],) = struct.unpack("<d", v)
        elif f == 2:
            e["step"] = v
        elif f == 3:
            e["file_version"] = v.decode()
        elif f == 5:
            for vf, _, value in fields(v):
                if vf != 1:
                    continue
                tag, x = None, None
                for tf, _, tv in fields(value):
                    if tf == 1:
                        tag = tv.decode()
                    elif tf == 2:
                        (x,) = struct.unpack("<f", tv)
                e["scalars"][tag] = x
    return e


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def within(tag, step, got, lo, hi):
    if got is None:
        fail(f"iteration {step}: {tag} missing")
    slack = 1e-6 * max(1.0, abs(lo), abs(hi))  # float32
    if not lo - slack <= got <= hi + slack:
        fail(f"iteration {step}: {tag} is {got}, the trace says [{lo}, {hi}]")


def same(tag, step, got, want):
    within(tag, step, got, want, want)


# The trace prints times in ms to 4 decimals: a time t there stands for [t - H, t + H].
H = 0.5e-4


def g6(tag, step, got, want):  # printed with 6 significant digits
    within(tag, step, got, want - 5e-6 * abs(want), want + 5e-6 * abs(want))


def near(tag, step, got, ms):
    within(tag, step, got, ms - H, ms + H)


def run(name, extra, expect_ok=True):
    out = os.path.join(SCRATCH, name)
    shutil.rmtree(out, ignore_errors=True)
    cmd = [TANDEM, "run", "scripts/experiments/quickstart.lua", "log_level=warn", "model_args.hidden=32",
           f"stop.max_iterations={ITERATIONS}", f"log_every={LOG_EVERY}", f"eval_every={EVAL_EVERY}",
           "--out", out] + extra
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    if (r.returncode == 0) != expect_ok:
        fail(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return out


def main():
    os.makedirs(SCRATCH, exist_ok=True)
    out = run("tb", ["--workers", "2", "tensorboard=true"])
    files = glob.glob(os.path.join(out, "tensorboard", "events.out.tfevents.*"))
    if len(files) != 1:
        fail(f"expected one event file in {out}/tensorboard, found {files}")
    events = [event(d) for d in frames(open(files[0], "rb").read())]
    if events[0].get("file_version") != "brain.Event:2":
        fail(f"the first event is {events[0]}, not the file version")
    trace = [json.loads(line) for line in open(os.path.join(out, "trace.jsonl"))]
    iters = [t for t in trace if t.get("event") == "iteration"]
    evals = [t for t in trace if t.get("event") == "eval"]
    train = [e for e in events[1:] if "train/loss" in e["scalars"]]
    tests = [e for e in events[1:] if "test/accuracy" in e["scalars"]]
    if len(iters) != ITERATIONS or [e["step"] for e in train] != [t["iteration"] for t in iters]:
        fail(f"events at steps {[e['step'] for e in train]}, trace iterations {[t['iteration'] for t in iters]}")
    for e, t in zip(train, iters):
        s, ws, step = e["scalars"], t["workers"], t["iteration"]
        if len(ws) != 2:
            fail(f"iteration {step}: {len(ws)} workers in the trace")
        same("train/loss", step, s.get("train/loss"), t["loss"])
        same("train/accuracy", step, s.get("train/accuracy"), t["correct"] / t["global_batch"])
        g6("train/lr", step, s.get("train/lr"), t["lr"])
        b, step_ms = t["global_batch"], t["step_ms"]
        within("throughput/samples_per_s", step, s.get("throughput/samples_per_s"), b / ((step_ms + H) / 1000.0),
               b / ((step_ms - H) / 1000.0))
        active = [w for w in ws if w["local_batch"] > 0 and w["compute_ms"] > 0]
        ideal_lo = sum(w["local_batch"] / (w["compute_ms"] + H) * 1000.0 for w in active)
        ideal_hi = sum(w["local_batch"] / (w["compute_ms"] - H) * 1000.0 for w in active)
        within("throughput/efficiency", step, s.get("throughput/efficiency"), b / ideal_hi / ((step_ms + H) / 1000.0),
               b / ideal_lo / ((step_ms - H) / 1000.0))
        for w in ws:
            r = w["rank"]
            near(f"workers/{r}/compute_ms", step, s.get(f"workers/{r}/compute_ms"), w["compute_ms"])
            near(f"workers/{r}/idle_ms", step, s.get(f"workers/{r}/idle_ms"), w["idle_ms"])
            same(f"workers/{r}/local_batch", step, s.get(f"workers/{r}/local_batch"), w["local_batch"])
        if not 0 < s["throughput/efficiency"] <= 1.0 + 1e-6:
            fail(f"iteration {step}: efficiency {s['throughput/efficiency']} is not in (0, 1]")
    if len(evals) < 2 or [e["step"] for e in tests] != [t["iteration"] for t in evals]:
        fail(f"test events at {[e['step'] for e in tests]}, trace evaluations at {[t['iteration'] for t in evals]}")
    for e, t in zip(tests, evals):
        g6("test/accuracy", t["iteration"], e["scalars"]["test/accuracy"], t["test_accuracy"])
        g6("test/loss", t["iteration"], e["scalars"]["test/loss"], t["test_loss"])
    if sorted(e["wall_time"] for e in events) != [e["wall_time"] for e in events]:
        fail("wall times go backwards")

    # Killed outright (SIGKILL) in iteration 45: the events up to the progress line after
    # iteration 39 were flushed and stay readable.
    killed = run("killed", ["tensorboard=true", "faults={{rank = 0, iteration = 45, kind = 'kill'}}"], expect_ok=False)
    files = glob.glob(os.path.join(killed, "tensorboard", "events.out.tfevents.*"))
    steps = [e["step"] for e in map(event, frames(open(files[0], "rb").read(), torn_ok=True))
             if "train/loss" in e["scalars"]] if len(files) == 1 else []
    if not (len(steps) >= 2 * LOG_EVERY and steps == list(range(len(steps))) and steps[-1] < 45):
        fail(f"a run killed in iteration 45 left events {files} at steps {steps}")

    plain = run("no_tb", [])
    if os.path.exists(os.path.join(plain, "tensorboard")):
        fail("a run without tensorboard = true wrote a tensorboard folder")
    print(f"ok: {len(train)} iteration events and {len(tests)} evaluations match the trace, CRCs intact")


main()
