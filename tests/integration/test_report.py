#!/usr/bin/env python3
"""tandem report (tools/report/report.py) end to end: two short real runs on 2 emulated
workers (lbb and equal, a few seconds each) and one simulated run of 24 workers (past
the 16 where per-worker panels give way to heatmaps); the report of one run and of all
three. Checks: the HTML lands where it should, is self-contained (figures as data
URIs, nothing fetched: no http(s) address, no src or href to a file), has the expected
figures and section titles, a comparison row per run (in the HTML, on stdout and in
--json) with plausible values; a missing and an empty run directory fail with a
message naming the path. Skipped (exit 77) where matplotlib cannot be imported.

usage: test_report.py TANDEM_BINARY SCRATCH_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time

TANDEM, SCRATCH = sys.argv[1], sys.argv[2]
ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
REPORT = os.path.join(ROOT, "tools", "report", "report.py")
SECTIONS = ["Comparison", "Throughput against the ideal", "Loss and test accuracy against training time",
            "Compute, communication and idle per worker", "Local batch per worker and policy decisions",
            "How each quantity is computed"]
TARGET = 0.6
# A fixed linear calibration for the simulated run: no timing of this machine.
CAL = ["emulation.calibration.batch=1,64,512", "emulation.calibration.ms=1.02,2.28,11.24",
       "emulation.calibration.host_ms=0.1,0.1,0.1"]


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def report(args, timeout=180):
    t = time.monotonic()
    r = subprocess.run([sys.executable, REPORT] + args, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    return r, time.monotonic() - t


def tandem(cmd, name, args):
    out = os.path.join(SCRATCH, name)
    shutil.rmtree(out, ignore_errors=True)
    t = time.monotonic()
    r = subprocess.run([TANDEM, cmd, "scripts/experiments/quickstart.lua", "log_level=warn"] + args + ["--out", out],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    if r.returncode != 0:
        fail(f"tandem {cmd} {name} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    print(f"tandem {cmd} {name}: {time.monotonic() - t:.1f} s")
    return out


def check_html(path, images, rows, labels):
    if not os.path.isfile(path) or os.path.getsize(path) == 0:
        fail(f"no report at {path}")
    with open(path, encoding="utf-8") as f:
        page = f.read()
    for bad in ("http://", "https://", "<script", "<link", "@import", "url("):
        if bad in page:
            fail(f"{path} is not self-contained: it holds '{bad}'")
    for src in re.findall(r'src\s*=\s*["\']([^"\']*)', page):
        if not src.startswith("data:image/png;base64,"):
            fail(f"{path}: a src that is not an embedded image: {src[:80]}")
    for href in re.findall(r'href\s*=\s*["\']([^"\']*)', page):
        if not href.startswith("#"):
            fail(f"{path}: a link out of the page: {href}")
    n = page.count('src="data:image/png;base64,')
    if n != images:
        fail(f"{path}: {n} embedded images, {images} expected")
    for s in SECTIONS:
        if f">{s}</h2>" not in page:
            fail(f"{path}: no section '{s}'")
    n = page.count('class="run-row"')
    if n != rows:
        fail(f"{path}: {n} comparison rows, {rows} expected")
    for label in labels:
        if label not in page:
            fail(f"{path}: run '{label}' is not named")
    return page


def check_rows(rows, expected):
    if [r["run"] for r in rows] != expected:
        fail(f"comparison rows {[r['run'] for r in rows]}, expected {expected}")
    for r in rows:
        name = r["run"]
        if not 0 < r["efficiency"] <= 1.0:
            fail(f"{name}: efficiency {r['efficiency']} is not in (0, 1]")
        if not 0 < r["samples_per_s"] <= r["ideal_samples_per_s"]:
            fail(f"{name}: samples/s {r['samples_per_s']} against an ideal of {r['ideal_samples_per_s']}")
        if abs(r["efficiency"] - r["samples_per_s"] / r["ideal_samples_per_s"]) > 1e-9:
            fail(f"{name}: efficiency is not samples/s over the ideal")
        if not 0 <= r["idle_share"] <= 1:
            fail(f"{name}: idle share {r['idle_share']}")
        if r["policy_cost_ms_mean"] is None or not 0 <= r["policy_cost_ms_mean"] <= r["policy_cost_ms_max"]:
            fail(f"{name}: policy cost {r['policy_cost_ms_mean']} / {r['policy_cost_ms_max']}")
        if r["simulated"]:
            if r["final_test_accuracy"] is not None or r["time_to_target_s"] is not None:
                fail(f"{name}: a simulated run with an accuracy: {r}")
            if r["ideal_from"] != "summary":
                fail(f"{name}: a simulated run's ideal should be its summary's")
        else:
            if not 0.5 < r["final_test_accuracy"] <= 1:
                fail(f"{name}: final test accuracy {r['final_test_accuracy']}")
            t = r["time_to_target_s"]
            if t is None or not 0 < t <= r["train_s"] + 1e-6:
                fail(f"{name}: time to {r['target_accuracy']} is {t} (training took {r['train_s']} s)")


def main():
    os.makedirs(SCRATCH, exist_ok=True)
    r, _ = report(["--check"])
    if r.returncode == 3:
        print("SKIP: matplotlib cannot be imported, so there is no report to test:", r.stderr.strip())
        sys.exit(77)
    if r.returncode != 0:
        fail(f"report.py --check exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    print(r.stdout.strip())

    real = ["--workers", "2", "emulation.speeds=1,0.5", "emulation.reference=0.25", "global_batch=128",
            "stop.max_iterations=60", "eval_every=20", "stop.target_accuracy=0.99", "console=false"]
    lbb = tandem("run", "lbb", real + ["policy.file=lbb"])
    equal = tandem("run", "equal", real + ["policy.file=equal"])
    speeds = ",".join(str([1.0, 0.7, 0.5, 0.25][4 * i // 24]) for i in range(24))
    sim = tandem("sim", "sim24", ["--workers", "24", f"emulation.speeds={speeds}", "emulation.reference=0.5",
                                  "global_batch=768", "stop.max_iterations=200", "policy.file=lbb",
                                  "sim.noise=0.05"] + CAL)

    # One run: the report goes into the run directory.
    one_json = os.path.join(SCRATCH, "one.json")
    r, secs = report([lbb, "--target", str(TARGET), "--json", one_json])
    if r.returncode != 0:
        fail(f"report of one run exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    print(f"report of one run: {secs:.1f} s")
    out = os.path.join(lbb, "report.html")
    if os.path.abspath(out) not in r.stdout:
        fail(f"report did not say it wrote {out}:\n{r.stdout}")
    check_html(out, images=5, rows=1, labels=["lbb"])
    with open(one_json) as f:
        check_rows(json.load(f)["rows"], ["lbb"])

    # Three runs: overlaid figures, a row each.
    all_html, all_json = os.path.join(SCRATCH, "all.html"), os.path.join(SCRATCH, "all.json")
    r, secs = report([lbb, equal, sim, "--out", all_html, "--target", str(TARGET), "--json", all_json,
                      "--title", "report test"])
    if r.returncode != 0:
        fail(f"report of three runs exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    print(f"report of three runs: {secs:.1f} s")
    labels = ["lbb", "equal", "sim24 [lbb]"]
    page = check_html(all_html, images=3 + 2 * 3, rows=3, labels=labels)
    if "<title>report test</title>" not in page:
        fail("--title was not used")
    with open(all_json) as f:
        data = json.load(f)
    if data["target_accuracy"] != TARGET:
        fail(f"target {data['target_accuracy']}, {TARGET} asked")
    rows = data["rows"]
    check_rows(rows, labels)
    if rows[0]["plan_changes"] < 1 or "class='decisions'" not in page:
        fail(f"lbb on workers at speeds 1 and 0.5 changed no plan, or its decisions are not listed: {rows[0]}")
    if rows[1]["plan_changes"] != 0:
        fail(f"equal changed the plan: {rows[1]}")
    printed = r.stdout.splitlines()
    for label in labels:
        if not any(line.startswith(label + " ") for line in printed):
            fail(f"the table on stdout has no row for {label}:\n{r.stdout}")
    if not any(f"time to {TARGET:g} (s)" in line for line in printed):
        fail(f"the table on stdout does not name the target:\n{r.stdout}")

    # Bad run directories: a clear message naming the path, a non-zero exit.
    missing = os.path.join(SCRATCH, "no-such-run")
    r, _ = report([missing])
    if r.returncode == 0 or missing not in r.stderr or "does not exist" not in r.stderr:
        fail(f"a missing run directory: exit {r.returncode}, stderr {r.stderr!r}")
    empty = os.path.join(SCRATCH, "empty-run")
    shutil.rmtree(empty, ignore_errors=True)
    os.makedirs(empty)
    r, _ = report([lbb, empty])
    if r.returncode == 0 or empty not in r.stderr or "trace.jsonl" not in r.stderr:
        fail(f"an empty run directory: exit {r.returncode}, stderr {r.stderr!r}")
    print("PASS")


if __name__ == "__main__":
    main()
