#!/usr/bin/env python3
"""tandem sim end to end, on a cluster model with no timing noise from this machine
(an explicit linear calibration, 0.02 ms a sample + 1 ms): 4 workers at speeds 1, 1,
0.5, 0.25 under lbb. The run directory has the files a real run has; the summary
says simulated, its throughput is the iterations' samples over the simulated time;
lbb balances the simulated cluster (the slowest compute within 15% of the fastest
at the end, efficiency above 0.85 of the ideal); the equal split does not (the
straggler's compute 4x the fastest's); a policy's plan applies two iterations after
the stats it was decided on, as in real runs; ksync and grouped segments simulate
with their counts and staleness bound; 64 workers run too; a worker's memory cap
bounds the batches the policy gives it; tandem profile's output works as a measured
worker, calibration and memory model in an experiment; each noise distribution has
mean 1, the asked spread, and its shape; a proportional plan starts where `tandem
run` starts it (Plan::initial), refined until balanced.

usage: test_sim.py TANDEM_BINARY SCRATCH_DIR
"""
import json
import os
import shutil
import subprocess
import sys

TANDEM, SCRATCH = sys.argv[1], sys.argv[2]
CAL = ["emulation.calibration.batch=1,64,512", "emulation.calibration.ms=1.02,2.28,11.24",
       "emulation.calibration.host_ms=0.1,0.1,0.1"]
COMMON = ["scripts/experiments/quickstart.lua", "global_batch=512", "stop.max_iterations=200",
          "emulation.reference=0.5", "log_level=warn"] + CAL


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def sim(name, args, experiment=None):
    """tandem sim of the common setup with args, or of an experiment file of its own."""
    out = os.path.join(SCRATCH, name)
    shutil.rmtree(out, ignore_errors=True)
    setup = COMMON if experiment is None else [experiment]
    r = subprocess.run([TANDEM, "sim"] + setup + args + ["--out", out], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        fail(f"tandem sim {name} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    for f in ("config.json", "trace.jsonl", "trace.perfetto.json", "summary.json"):
        if not os.path.getsize(os.path.join(out, f)):
            fail(f"{name}: the run directory lacks {f}")
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    with open(os.path.join(out, "trace.jsonl")) as f:
        rows = [json.loads(l) for l in f if '"event":"iteration"' in l]
    return summary, rows


def spread(row):
    ms = [w["compute_ms"] for w in row["workers"] if w["local_batch"] > 0]
    return max(ms) / min(ms)


os.makedirs(SCRATCH, exist_ok=True)
speeds = ["--workers", "4", "emulation.speeds=1,1,0.5,0.25"]
s, rows = sim("lbb", speeds + ["policy.file=lbb"])
if not s.get("simulated"):
    fail("the summary does not say simulated")
if s["iterations"] != 200 or len(rows) != 200:
    fail(f"200 iterations asked, {s['iterations']} simulated, {len(rows)} traced")
total_ms = sum(r["step_ms"] for r in rows)
if abs(s["samples_per_s"] - 512 * 200 / (total_ms / 1000)) > 1e-3 * s["samples_per_s"]:
    fail(f"samples/s {s['samples_per_s']} is not the traced steps' {512 * 200 / (total_ms / 1000)}")
if spread(rows[-1]) > 1.15:
    fail(f"lbb left the compute times {spread(rows[-1]):.2f}x apart: {rows[-1]['workers']}")
if s["efficiency"] < 0.85:
    fail(f"lbb reached only {s['efficiency']:.2f} of the ideal")
# The timing contract: a plan decided on iteration t's stats is in force from t+2.
for r in rows:
    p = r.get("policy", {})
    if p.get("event") == "plan":
        if p["from_iteration"] != r["iteration"] - 1 or p["applies_from"] != r["iteration"] + 1:
            fail(f"decision at iteration {r['iteration']}: {p}")
        nxt = rows[r["iteration"] + 1] if r["iteration"] + 1 < len(rows) else None
        if nxt and [w["local_batch"] for w in nxt["workers"]] != p["plan"]:
            fail(f"the plan of iteration {r['iteration']} did not apply at {r['iteration'] + 1}")

e, erows = sim("equal", speeds)
if spread(erows[-1]) < 3.5:
    fail(f"with the equal split the 4x slower worker should compute ~4x longer, got {spread(erows[-1]):.2f}")
if not e["efficiency"] < s["efficiency"]:
    fail(f"equal ({e['efficiency']:.2f}) should be less efficient than lbb ({s['efficiency']:.2f})")

# The relaxed modes: ksync drops the straggler's gradients and beats the equal split
# of bsp; grouped with the straggler alone runs segments with bounded staleness.
k, krows = sim("ksync", speeds + ["sync.mode=ksync", "sync.k=3"])
if not (k["sync"]["gradients_dropped"] > 0 and k["efficiency"] > e["efficiency"]):
    fail(f"ksync k=3: dropped {k['sync']['gradients_dropped']}, efficiency {k['efficiency']:.2f} vs equal's "
         f"{e['efficiency']:.2f}")
g, grows = sim("grouped", speeds + ["sync.mode=grouped", "sync.groups=1,1,1,2", "sync.staleness=1"])
if not all("sync" in r for r in grows) or g["sync"]["staleness_max"] > 1 + 2 - 1:
    fail(f"grouped: staleness {g['sync']['staleness_max']} past S + G - 1 = 2, or a line without its sync record")
if g["iterations"] < 200:
    fail(f"grouped covered {g['iterations']} of 200 iterations")

big, _ = sim("lbb64", ["--workers", "64", "emulation.speeds=" + ",".join(["1"] * 48 + ["0.5"] * 16),
                        "policy.file=lbb", "global_batch=4096", "stop.epochs=10", "stop.max_iterations=100"])
if big["efficiency"] < 0.8:
    fail(f"64 workers: lbb at {big['efficiency']:.2f} of the ideal")
# A memory cap: worker 0 (the fastest) has 6 MB, the model 5 MB + 0.01 MB a sample:
# its local batch can never pass 100 once the policy plans.
capped = os.path.join(SCRATCH, "capped.lua")
with open(capped, "w") as f:
    f.write("return { model = 'mlp', data = { name = 'fashion-mnist' }, global_batch = 512, workers = 4,\n"
            "  stop = { epochs = 10, max_iterations = 100 }, log_level = 'warn', policy = { file = 'lbb' },\n"
            "  emulation = { reference = 0.5, calibration = { batch = {1, 64, 512}, ms = {1.02, 2.28, 11.24},\n"
            "                host_ms = {0.1, 0.1, 0.1} }, memory = { batch = {1, 512}, mb = {5.01, 10.12} },\n"
            "    workers = { { speed = 1, memory_mb = 6 }, { speed = 1 }, { speed = 0.5 }, { speed = 0.25 } } } }\n")
_, mrows = sim("memory", [], capped)
planned = [r["workers"][0]["local_batch"] for r in mrows[3:]]
if max(planned) > 100:
    fail(f"worker 0's memory holds 100 samples, the policy gave it {max(planned)}")

# tandem profile writes a measured device an experiment can use.
prof = os.path.join(SCRATCH, "cpu_profile.lua")
r = subprocess.run([TANDEM, "profile", "scripts/experiments/quickstart.lua", "global_batch=64", "log_level=warn",
                    "--out", prof], capture_output=True, text=True, timeout=300)
if r.returncode != 0:
    fail(f"tandem profile exited {r.returncode}: {r.stderr[-1500:]}")
exp = os.path.join(SCRATCH, "profiled.lua")
with open(exp, "w") as f:
    f.write(f"local p = dofile({prof!r})\n"
            "return { model = 'mlp', data = { name = 'fashion-mnist' }, global_batch = 64, workers = 2,\n"
            "  stop = { epochs = 1, max_iterations = 10 }, log_level = 'warn',\n"
            "  emulation = { calibration = { batch = p.batch, ms = p.ms, host_ms = p.host_ms },\n"
            "    memory = { batch = p.batch, mb = p.memory_mb },\n"
            "    workers = { { speed = 1 }, { profile = { batch = p.batch, ms = p.ms }, memory_mb = 4096 } } } }\n")
sim("profiled", [], exp)

# Noise: each distribution multiplies the noiseless compute by a factor of mean 1 and
# the asked spread; spikes has its long tail on the slow side only.
_, base = sim("noise_none", speeds + ["stop.max_iterations=400"])
for dist in ("lognormal", "normal", "uniform", "spikes"):
    _, nrows = sim(f"noise_{dist}", speeds + ["stop.max_iterations=400", "sim.noise=0.2",
                                             f"sim.noise_distribution={dist}"])
    f = [n["workers"][r]["compute_ms"] / b["workers"][r]["compute_ms"]
         for n, b in zip(nrows, base) for r in range(4)]
    mean = sum(f) / len(f)
    sd = (sum((x - mean) ** 2 for x in f) / len(f)) ** 0.5
    if abs(mean - 1) > 0.03 or not 0.15 < sd < 0.25:
        fail(f"sim.noise_distribution={dist}: factor mean {mean:.3f} sd {sd:.3f}, want 1 and ~0.2")
    skew = sum((x - mean) ** 3 for x in f) / len(f) / sd ** 3
    if dist == "spikes" and (skew < 1.0 or min(f) < 0.79):
        fail(f"spikes: skew {skew:.2f}, smallest factor {min(f):.3f}; want a right tail over a floor at 0.8")
    if dist in ("normal", "uniform") and abs(skew) > 0.3:
        fail(f"{dist}: skew {skew:.2f}, want symmetric")

# The first plan is the one a real run starts from: proportional to the emulated
# throughput at the batch each worker gets, refined until balanced (the fixed cost
# of a step gives the slow worker less than a quarter).
start = ["--workers", "2", "emulation.speeds=1,0.25", "plan.kind=proportional", "stop.max_iterations=1"]
_, prow = sim("proportional", start)
run_dir = os.path.join(SCRATCH, "proportional_run")
shutil.rmtree(run_dir, ignore_errors=True)
r = subprocess.run([TANDEM, "run"] + COMMON + start + ["--out", run_dir], capture_output=True, text=True, timeout=300)
if r.returncode != 0:
    fail(f"tandem run of the proportional plan exited {r.returncode}: {r.stderr[-1500:]}")
with open(os.path.join(run_dir, "trace.jsonl")) as f:
    run_row = next(json.loads(l) for l in f if '"event":"iteration"' in l)
sim_plan = [w["local_batch"] for w in prow[0]["workers"]]
run_plan = [w["local_batch"] for w in run_row["workers"]]
if sim_plan != run_plan:
    fail(f"tandem sim starts from {sim_plan}, tandem run from {run_plan}")
if not (sum(sim_plan) == 512 and sim_plan[1] < 512 // 5):
    fail(f"the proportional plan {sim_plan} is not the balanced split of 512 over speeds 1 and 0.25")

print(f"ok: lbb {s['efficiency']:.3f} of ideal (equal {e['efficiency']:.3f}, ksync {k['efficiency']:.3f}, grouped "
      f"{g['efficiency']:.3f}); 64 workers {big['efficiency']:.3f}")
