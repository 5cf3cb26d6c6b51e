#!/usr/bin/env python3
"""CIFAR-10 end to end on files written here in the binary version's format (the real
set does not ship): scripts/experiments/cifar10_resnet18.lua (LBB's setting) runs its
CIFAR ResNet-18 a few steps on 2 workers; then a small ResNet with the augmentation on
trains the same on a skewed fixed split as on one worker (the crops and flips follow
the sample and the epoch, not the split), and differently with data.augment = false.

usage: test_cifar10.py TANDEM_BINARY SCRATCH_DIR
"""
import json
import os
import random
import shutil
import subprocess
import sys

TANDEM, SCRATCH = sys.argv[1], sys.argv[2]
ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def run(name, extra):
    out = os.path.join(SCRATCH, "runs", name)
    cmd = [TANDEM, "run", "scripts/experiments/cifar10_resnet18.lua", "--out", out, "--overwrite", "log_level=warn",
           f"data.dir={DATA}", "eval_batch=20", "schedule.warmup_iterations=2"] + extra
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=280, cwd=ROOT)
    if r.returncode != 0:
        fail(f"{name} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    with open(os.path.join(out, "trace.jsonl")) as f:
        losses = [json.loads(line)["loss"] for line in f if '"event":"iteration"' in line]
    return summary, losses


shutil.rmtree(SCRATCH, ignore_errors=True)
DATA = os.path.join(SCRATCH, "cifar-10-batches-bin")
os.makedirs(DATA)
rng = random.Random(5)
for name, n in [(f"data_batch_{k}.bin", 32) for k in range(1, 6)] + [("test_batch.bin", 40)]:
    with open(os.path.join(DATA, name), "wb") as f:
        for r in range(n):  # a label, then 3072 pixel bytes
            f.write(bytes([r % 10]) + bytes(rng.randrange(256) for _ in range(3072)))

s, losses = run("resnet18", ["workers=2", "global_batch=8", "stop.max_iterations=2", "lr=0.05"])
if s["parameters"] != 11173962 or s["iterations"] != 2 or len(losses) != 2:
    fail(f"the CIFAR ResNet-18: {s['parameters']} parameters, {s['iterations']} iterations")
print(f"ResNet-18 on 2 workers: {s['parameters']} parameters, losses {losses}")

small = ["model_args={width = 8, blocks = 1}", "global_batch=16", "stop.max_iterations=12", "lr=0.05"]
_, split = run("split", small + ["workers=2", "plan.kind=fixed", "plan.batches=5,11"])
_, one = run("one", small + ["workers=1"])
_, plain = run("plain", small + ["workers=1", "data.augment=false"])
if len(split) != 12 or any(abs(a - b) > 1e-4 * max(1.0, abs(a)) for a, b in zip(split, one)):
    fail(f"augmented training differs between a 5 + 11 split and one worker:\n{split}\n{one}")
if all(abs(a - b) < 1e-6 for a, b in zip(one, plain)):
    fail("data.augment = false trains exactly as the augmented run: the augmentation did nothing")
print(f"augmented: a 5 + 11 split and one worker agree over 12 steps (last loss {one[-1]:.5f}); without "
      f"augmentation {plain[-1]:.5f}")
print("PASS")
