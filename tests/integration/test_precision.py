#!/usr/bin/env python3
"""precision = 'bf16' and 'tf32' train as well as fp32 (engine/core/precision.hpp).

On the CPU the GEMMs' and convolutions' inputs are rounded as a GPU's tensor cores
round them, so these runs show the arithmetic's effect on training, not the GPU's
speed. Each model trains with the same seed in fp32 and in bf16 (and the MLP in tf32):
the MLP its experiment's full length, LeNet its first epoch (its three take most of a
minute each in bf16, and one epoch shows the same effect: 0.36 points apart at one
epoch, 0.43 at two, measured 2026-11-29). The test accuracies agree within 0.5 points
and bf16 still reaches the accuracy promised for that length (the MLP's in
docs/testing.md, 0.85 for LeNet's first epoch). One worker on the CPU, one BLAS
thread: the runs are deterministic, so the margins are not luck. The parameters differ
between fp32 and bf16 (the rounding happened), and an experiment with the old
`tf32 = true` is refused, naming what replaced it.

usage: test_precision.py TANDEM_BINARY SCRATCH_DIR [mlp | lenet | all]
(ctest runs the two models as integration.precision_mlp and _lenet, side by side)
"""
import json
import os
import shutil
import struct
import subprocess
import sys

TANDEM, SCRATCH = sys.argv[1], sys.argv[2]
PART = sys.argv[3] if len(sys.argv) > 3 else "all"
MARGIN = 0.005  # 0.5 points of test accuracy


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def train(experiment, precision, *overrides):
    out = os.path.abspath(os.path.join(SCRATCH, f"{os.path.basename(experiment)[:-4]}-{precision}"))
    shutil.rmtree(out, ignore_errors=True)
    cmd = [TANDEM, "run", experiment, "--out", out, "device=cpu", f"precision={precision}", "seed=1",
           "stop.target_accuracy=1", "save_params=true", "log_level=warn", *overrides]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stderr[-3000:]}")
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    with open(os.path.join(out, "config.json")) as f:
        if json.load(f)["precision"] != precision:
            fail(f"{out}/config.json does not record precision {precision}")
    with open(os.path.join(out, "params.f32"), "rb") as f:
        blob = f.read()
    return summary["test_accuracy"], struct.unpack(f"<{len(blob) // 4}f", blob)


os.makedirs(SCRATCH, exist_ok=True)
for part, experiment, promised, extra, length in (
        ("mlp", "scripts/experiments/quickstart.lua", 0.85, ["tf32"], []),
        ("lenet", "scripts/experiments/lenet.lua", 0.85, [], ["stop.epochs=1"])):
    if PART not in ("all", part):
        continue
    acc32, p32 = train(experiment, "fp32", *length)
    for precision in ["bf16"] + extra:
        acc, p = train(experiment, precision, *length)
        print(f"{experiment}: test accuracy fp32 {acc32:.4f}, {precision} {acc:.4f} ({100 * (acc - acc32):+.2f} points)")
        if abs(acc - acc32) > MARGIN:
            fail(f"{experiment}: {precision} reached {acc:.4f}, fp32 {acc32:.4f}: more than 0.5 points apart")
        if acc < promised:
            fail(f"{experiment}: {precision} reached {acc:.4f}, below the {promised} promised")
        if p == p32:
            fail(f"{experiment}: {precision} trained the same parameters as fp32: nothing was rounded")

if PART in ("all", "mlp"):
    r = subprocess.run([TANDEM, "run", "scripts/experiments/quickstart.lua", "tf32=true", "--dry-run"],
                       capture_output=True, text=True)
    if r.returncode == 0 or "replaced by 'precision'" not in r.stderr or "precision = 'tf32'" not in r.stderr:
        fail(f"tf32=true should be refused, naming precision = 'tf32'; exit {r.returncode}, stderr:\n{r.stderr}")
    print("ok: bf16 and tf32 within 0.5 points of fp32; the old tf32 key names its replacement")
if PART not in ("all", "mlp", "lenet"):
    fail(f"unknown part {PART!r}: mlp, lenet or all")
if PART == "lenet":
    print("ok: LeNet in bf16 within 0.5 points of fp32")
