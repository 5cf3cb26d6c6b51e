#!/usr/bin/env python3
"""The command line as a newcomer meets it (engine/cli): -h/--help on every subcommand
(exit 0, its own usage), --opt=value, "did you mean" for a misspelled subcommand or
option (exit 2, one line and a pointer to --help, not the whole usage), --version,
--dry-run/--print-config (the resolved experiment as JSON, the mpirun line of a job,
no run directory made), --out onto an earlier run refused unless --overwrite (run and
sim, one worker and a job of two), and experiments found from anywhere: dofile
relative to the calling file, policies and require()d modules beside the experiment
or in TANDEM_PATH. Every run is two iterations; the whole test takes seconds.

usage: test_cli.py TANDEM_BINARY SCRATCH_DIR
"""
import json
import os
import shutil
import subprocess
import sys

TANDEM, SCRATCH = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
QUICK = os.path.join(ROOT, "scripts", "experiments", "quickstart.lua")
SHORT = ["stop.max_iterations=2", "eval_every=0"]
COMMANDS = ["run", "sim", "profile", "attach", "report", "test", "version"]
# A fixed linear calibration for sim: no timing of this machine.
CAL = ["emulation.calibration.batch=1,64,512", "emulation.calibration.ms=1.02,2.28,11.24",
       "emulation.calibration.host_ms=0.1,0.1,0.1"]
failures = []


def tandem(*args, cwd=ROOT, env=None, timeout=300):
    return subprocess.run([TANDEM, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)


def check(name, ok, r=None):
    if ok:
        print("ok", name)
        return
    failures.append(name)
    print("FAIL", name)
    if r is not None:
        print(f"  exit {r.returncode}\n  stdout: {r.stdout[-2000:]}\n  stderr: {r.stderr[-2000:]}")


def help_and_version():
    for cmd in COMMANDS:
        for flag in ("--help", "-h"):
            r = tandem(cmd, flag)
            check(f"{cmd} {flag}", r.returncode == 0 and r.stdout.startswith(f"usage: tandem {cmd}")
                  and "--help" in r.stdout, r)
    r = tandem("--help")
    check("top-level --help", r.returncode == 0 and all(f"  {c} " in r.stdout for c in COMMANDS)
          and "tandem COMMAND --help" in r.stdout and "130" in r.stdout, r)
    r = tandem()
    check("no command: exit 2", r.returncode == 2 and "tandem COMMAND --help" in r.stderr, r)
    r = tandem("--version")
    check("--version", r.returncode == 0 and r.stdout.startswith("tandem "), r)


def did_you_mean():
    r = tandem("rnu")
    check("rnu -> run", r.returncode == 2 and "did you mean 'run'" in r.stderr and "usage:" not in r.stderr
          and "tandem --help" in r.stderr, r)
    r = tandem("run", QUICK, "--worker", "4")
    check("--worker -> --workers", r.returncode == 2 and "did you mean '--workers'" in r.stderr
          and "tandem run --help" in r.stderr and len(r.stderr.strip().splitlines()) == 2, r)
    r = tandem("--verison")
    check("--verison -> --version", r.returncode == 2 and "did you mean '--version'" in r.stderr, r)
    r = tandem("run", QUICK, "--repl=yes")
    check("a flag given a value", r.returncode == 2 and "--repl takes no value" in r.stderr, r)
    r = tandem("run", QUICK, "--workers")
    check("an option without its value", r.returncode == 2 and "--workers needs a value" in r.stderr, r)


def dry_run():
    out = os.path.join(SCRATCH, "dry")
    r = tandem("run", QUICK, "--workers=2", "--dry-run", "--out", out, *SHORT)
    cfg = json.loads(r.stdout) if r.returncode == 0 else {}
    check("--workers=2 --dry-run: the resolved experiment", r.returncode == 0 and cfg.get("workers") == 2
          and cfg.get("stop", {}).get("max_iterations") == 2, r)
    mpirun = [line for line in r.stderr.splitlines() if line.startswith("mpirun ")]
    check("--dry-run: the mpirun line", len(mpirun) == 1 and "-np 2" in mpirun[0] and " run " in mpirun[0]
          and "--dry-run" not in mpirun[0], r)
    check("--dry-run: no run directory", not os.path.exists(out))
    r = tandem("run", QUICK, "--print-config", "--out", out)
    check("--print-config: one worker, no mpirun", r.returncode == 0 and json.loads(r.stdout)["workers"] == 1
          and "mpirun" not in r.stderr and not os.path.exists(out), r)
    r = tandem("run", QUICK, "--host", "nodea:2,nodeb:2", "--dry-run")
    mpirun = [line for line in r.stderr.splitlines() if line.startswith("mpirun ")]
    check("--host: workers from the slots, hosts in the mpirun line", r.returncode == 0
          and json.loads(r.stdout)["hosts"] == "nodea:2,nodeb:2" and len(mpirun) == 1
          and "-np 4" in mpirun[0] and "nodea:2,nodeb:2" in mpirun[0], r)
    r = tandem("sim", QUICK, "--workers", "3", "--dry-run", "--out", out, *CAL)
    check("sim --dry-run", r.returncode == 0 and json.loads(r.stdout)["workers"] == 3 and not os.path.exists(out), r)
    r = tandem("run", QUICK, "bogus_key=1", "--dry-run")
    check("--dry-run of a bad experiment: exit 1", r.returncode == 1 and "bogus_key" in r.stderr, r)


def run_directories():
    out = os.path.join(SCRATCH, "run")
    r = tandem("run", QUICK, "--out", out, *SHORT)
    check("a first run", r.returncode == 0 and os.path.isfile(os.path.join(out, "summary.json")), r)
    for args, name in (([], "one worker"), (["--workers", "2"], "a job of two")):
        r = tandem("run", QUICK, "--out", out, *args, *SHORT)
        check(f"--out onto an earlier run is refused ({name})", r.returncode == 1 and out in r.stderr
              and "--overwrite" in r.stderr and "iter " not in r.stderr + r.stdout, r)
    r = tandem("run", QUICK, "--out", out, "--overwrite", *SHORT)
    check("--overwrite", r.returncode == 0, r)
    empty = os.path.join(SCRATCH, "empty")
    os.makedirs(empty)
    r = tandem("run", QUICK, "--out", empty, *SHORT)
    check("an empty directory is fine", r.returncode == 0 and os.path.isfile(os.path.join(empty, "summary.json")), r)
    sim = os.path.join(SCRATCH, "sim")
    r1 = tandem("sim", QUICK, "--out", sim, "--workers", "2", *SHORT, *CAL)
    r2 = tandem("sim", QUICK, "--out", sim, "--workers", "2", *SHORT, *CAL)
    r3 = tandem("sim", QUICK, "--out", sim, "--workers", "2", "--overwrite", *SHORT, *CAL)
    check("sim --out: refused onto an earlier run, --overwrite accepted",
          r1.returncode == 0 and r2.returncode == 1 and sim in r2.stderr and r3.returncode == 0, r2)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def search_path():
    # The static-heterogeneity suite experiment and its parts, copied with a scripts/
    # folder of their own, run from another working directory.
    copy, elsewhere = os.path.join(SCRATCH, "copy"), os.path.join(SCRATCH, "elsewhere")
    suite = os.path.join("scripts", "experiments", "suite")
    for rel in ("common.lua", "static_heterogeneity/base.lua", "static_heterogeneity/lbb.lua"):
        os.makedirs(os.path.dirname(os.path.join(copy, suite, rel)), exist_ok=True)
        shutil.copy(os.path.join(ROOT, suite, rel), os.path.join(copy, suite, rel))
    exp_dir = os.path.join(copy, suite, "static_heterogeneity")
    for folder, name in ((os.path.join(copy, "scripts", "policies"), "mine.lua"),
                         (os.path.join(exp_dir, "policies"), "near.lua")):
        os.makedirs(folder, exist_ok=True)
        shutil.copy(os.path.join(ROOT, "scripts", "policies", "equal.lua"), os.path.join(folder, name))
    shutil.copy(os.path.join(ROOT, "scripts", "policies", "lbb.lua"), os.path.join(copy, "scripts", "policies"))
    os.makedirs(elsewhere)
    exp = os.path.join(exp_dir, "lbb.lua")
    env = dict(os.environ)
    env.pop("TANDEM_PATH", None)

    def policy(r):
        return json.loads(r.stdout)["policy"]["file"] if r.returncode == 0 else None

    r = tandem("run", exp, "--dry-run", cwd=elsewhere, env=env)
    check("dofile relative to the calling file, from another directory",
          r.returncode == 0 and policy(r).endswith("/scripts/policies/lbb.lua") and not policy(r).startswith(copy), r)
    r = tandem("run", exp, "policy.file=near", "--dry-run", cwd=elsewhere, env=env)
    check("a policy in policies/ beside the experiment", policy(r) == os.path.join(exp_dir, "policies", "near.lua"), r)
    r = tandem("run", exp, "policy.file=mine", "--dry-run", cwd=elsewhere, env=env)
    check("a policy of the copy: not found without TANDEM_PATH", r.returncode == 1 and "TANDEM_PATH" in r.stderr, r)
    env["TANDEM_PATH"] = os.path.join(SCRATCH, "nowhere") + ":" + copy
    r = tandem("run", exp, "policy.file=mine", "--dry-run", cwd=elsewhere, env=env)
    check("TANDEM_PATH: the copy's policy", policy(r) == os.path.join(copy, "scripts", "policies", "mine.lua"), r)
    r = tandem("run", exp, "--dry-run", cwd=elsewhere, env=env)
    check("TANDEM_PATH: a policy by name, the copy's before tandem's",
          policy(r) == os.path.join(copy, "scripts", "policies", "lbb.lua"), r)
    # require() and dofile() through TANDEM_PATH; a real two-iteration run from elsewhere.
    lib = os.path.join(SCRATCH, "lib")
    write(os.path.join(lib, "mysettings.lua"), "return { global_batch = 32 }\n")
    write(os.path.join(lib, "parts", "base.lua"), f"return dofile({QUICK!r})\n")
    write(os.path.join(SCRATCH, "exp", "e.lua"), "local e = dofile('parts/base.lua')\n"
          "e.global_batch = require('mysettings').global_batch\nreturn e\n")
    env["TANDEM_PATH"] = lib
    out = os.path.join(SCRATCH, "from-elsewhere")
    r = tandem("run", os.path.join(SCRATCH, "exp", "e.lua"), "--out", out, *SHORT, cwd=elsewhere, env=env)
    ok = r.returncode == 0 and json.load(open(os.path.join(out, "config.json")))["global_batch"] == 32
    check("TANDEM_PATH: dofile and require, a run from another directory", ok, r)
    env.pop("TANDEM_PATH")
    r = tandem("run", os.path.join(SCRATCH, "exp", "e.lua"), "--dry-run", cwd=elsewhere, env=env)
    check("a missing dofile names the places tried", r.returncode == 1 and "parts/base.lua' not found" in r.stderr
          and "TANDEM_PATH" in r.stderr, r)


def main():
    shutil.rmtree(SCRATCH, ignore_errors=True)
    os.makedirs(SCRATCH)
    help_and_version()
    did_you_mean()
    dry_run()
    run_directories()
    search_path()
    if failures:
        print(f"{len(failures)} check(s) failed: {', '.join(failures)}")
        return 1
    print("all command-line checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
