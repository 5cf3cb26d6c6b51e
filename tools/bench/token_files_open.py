#!/usr/bin/env python3
"""What opening token files costs: `tandem run --dry-run` of a GPT on a 17 GB nanoGPT
train.bin (OpenWebText's size, a sparse file here: no disk used) against the same run
on a 1 MB file, side by side, alternating --reps times. --dry-run resolves the
experiment and opens both splits as the launcher does before any rank starts
(engine/data/token_files.hpp: mmap, headers and sizes checked, nothing read), so the
difference is what the file's size costs: nothing, if the files are mapped and not
read. Prints the medians, their ratio and the peak resident memory of each run.

usage: tools/bench/token_files_open.py BUILD_DIR [--reps 5] [--scratch DIR] [--out FILE]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import write_result  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def dry_run(build, train, val):
    """Seconds and peak resident MB of one --dry-run (its own rusage, from wait4)."""
    cmd = [os.path.join(build, "tandem"), "run", "scripts/experiments/gpt2.lua", "--dry-run", "log_level=warn",
           f"data.train={train}", f"data.validation={val}"]
    start = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    elapsed = time.perf_counter() - start
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"token_files_open: {' '.join(cmd)} exited {p.returncode}:\n{err.decode()[-2000:]}")
    return elapsed, usage.ru_maxrss / 1024.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--scratch", default=None, help="folder for the files (default: a temporary one)")
    ap.add_argument("--out")
    args = ap.parse_args()
    scratch = args.scratch or tempfile.mkdtemp(prefix="tandem-token-open-")
    os.makedirs(scratch, exist_ok=True)
    big, small = os.path.join(scratch, "big_train.bin"), os.path.join(scratch, "small_train.bin")
    with open(big, "wb") as f:
        f.truncate(17 << 30)  # sparse: zeros, a valid token
    with open(small, "wb") as f:
        f.write(bytes(1 << 20))
    times = {"17GB": [], "1MB": []}
    rss = {"17GB": 0.0, "1MB": 0.0}
    try:
        for _ in range(args.reps):
            for name, path in (("17GB", big), ("1MB", small)):
                t, mb = dry_run(args.build, path, small)
                times[name].append(t)
                rss[name] = max(rss[name], mb)
    finally:
        os.remove(big)
        os.remove(small)
    med = {k: statistics.median(v) for k, v in times.items()}
    result = {"reps": args.reps, "median_s": med, "ratio_17GB_to_1MB": med["17GB"] / med["1MB"],
              "peak_rss_mb": rss,
              "note": "tandem run scripts/experiments/gpt2.lua --dry-run with data.train at each file (the 17 GB one "
                      "sparse), data.validation at the 1 MB one; peak RSS the largest of a file's runs"}
    write_result(result, args.out)


if __name__ == "__main__":
    main()
