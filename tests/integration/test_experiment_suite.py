#!/usr/bin/env python3
"""The experiment suite stays runnable: every study's base.lua says which paper and
what it expects, and every variant resolves and runs two simulated iterations (tandem
sim, with a fixed calibration so nothing is measured); the runner knows every study.
The studies themselves are not tests (make experiments runs them).

usage: test_experiment_suite.py TANDEM_BINARY SCRATCH_DIR
"""
import os
import re
import shutil
import subprocess
import sys

TANDEM, SCRATCH = sys.argv[1], sys.argv[2]
SUITE = os.path.join("scripts", "experiments", "suite")
CAL = ["emulation.calibration.batch=1,64,512", "emulation.calibration.ms=1.02,2.28,11.24",
       "emulation.calibration.host_ms=0.1,0.1,0.1"]


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


os.makedirs(SCRATCH, exist_ok=True)
studies = sorted(d for d in os.listdir(SUITE) if os.path.isdir(os.path.join(SUITE, d)))
if len(studies) < 6:
    fail(f"the suite has {len(studies)} studies: {studies}")
count = 0
for study in studies:
    with open(os.path.join(SUITE, study, "base.lua")) as f:
        head = f.read()
    for part in ("-- Study:", "Expected", "Emulation"):
        if part not in head:
            fail(f"{study}/base.lua does not say '{part}'")
    if not re.search(r"^-- Papers?: ", head, re.M):
        fail(f"{study}/base.lua does not name its paper")
    for name in sorted(os.listdir(os.path.join(SUITE, study))):
        if not name.endswith(".lua") or name.startswith("base"):  # base*.lua: shared by the variants
            continue
        out = os.path.join(SCRATCH, study, name[:-4])
        shutil.rmtree(out, ignore_errors=True)
        r = subprocess.run([TANDEM, "sim", os.path.join(SUITE, study, name), "stop.max_iterations=2",
                            "log_level=warn", "--out", out] + CAL, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            fail(f"{study}/{name} does not run: {r.stderr[-2000:]}")
        count += 1
r = subprocess.run([sys.executable, os.path.join("tools", "experiments", "run.py"), "no_such_study"],
                   capture_output=True, text=True)
if r.returncode == 0 or not all(s in r.stderr for s in studies):
    fail(f"the runner should refuse an unknown study and list the known ones: {r.stderr}")
print(f"ok: {len(studies)} studies, {count} variants run")
