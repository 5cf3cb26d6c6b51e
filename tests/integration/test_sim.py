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
run` starts it (Plan::initial), refined until balanced; a policy that doubles the
global batch once (policy.global_batch) runs at 64 workers: each iteration traced at
its B, epochs counting samples, the run ending once stop.epochs' samples are drawn,
samples/s, mean B and goodput as the trace gives them; with sim.noise_scale the
policy's two-batch estimate of the gradient noise scale is the model's (exactly
without sim.noise, on average with it).

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
# it holds 100 samples at once, and the policy gives it more in micro-batches of at
# most 100 (issue 37), each paying a pass's fixed cost.
capped = os.path.join(SCRATCH, "capped.lua")
with open(capped, "w") as f:
    f.write("return { model = 'mlp', data = { name = 'fashion-mnist' }, global_batch = 512, workers = 4,\n"
            "  stop = { epochs = 10, max_iterations = 100 }, log_level = 'warn', policy = { file = 'lbb' },\n"
            "  emulation = { reference = 0.5, calibration = { batch = {1, 64, 512}, ms = {1.02, 2.28, 11.24},\n"
            "                host_ms = {0.1, 0.1, 0.1} }, memory = { batch = {1, 512}, mb = {5.01, 10.12} },\n"
            "    workers = { { speed = 1, memory_mb = 6 }, { speed = 1 }, { speed = 0.5 }, { speed = 0.25 } } } }\n")
_, mrows = sim("memory", [], capped)
planned = [(r["workers"][0]["local_batch"], r["workers"][0]["micro_batches"]) for r in mrows[3:]]
held = max(-(-b // k) for b, k in planned)
if held > 100 or max(b for b, _ in planned) <= 100:
    fail(f"worker 0's memory holds 100 samples: the policy should give it more in micro-batches of at most 100, "
         f"gave (batch, micro-batches) {sorted(set(planned))[-3:]}")

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

# Adaptive global batch (policy.global_batch, issue 23): a policy that doubles B once
# runs at 64 workers. With sim.noise_scale the workers' grad_sq and the cluster's
# global_grad_sq follow the gradient model, |G|^2 + B_noise / b with |G|^2 = 1 and
# B_noise = 1000 (1 + e) after e epochs: the policy's two-batch estimate of it, sent
# back as a metric, is the model's. Everything is checked against the trace.
doubling = os.path.join(SCRATCH, "double_b.lua")
with open(doubling, "w") as f:
    f.write("""local policy, C, state = {}, nil, { doubled = false }
function policy.init(cluster) C = cluster end
-- McCandlish et al.'s two-batch estimate (unsmoothed): B_small = B / n, B_big = B.
local function b_noise(stats)
  local big = stats.global_grad_sq
  if type(big) ~= 'number' then return nil end
  local sum_b, sum_bg, n = 0, 0, 0
  for i = 1, C.workers do
    local w = stats.workers[i]
    if w.local_batch > 0 then sum_b, sum_bg, n = sum_b + w.local_batch, sum_bg + w.local_batch * w.grad_sq, n + 1 end
  end
  local b_small, small = sum_b / n, sum_bg / sum_b
  local g2 = (sum_b * big - b_small * small) / (sum_b - b_small)
  return (small - big) / (1 / b_small - 1 / sum_b) / g2
end
function policy.step(stats)
  local b = {}
  for i = 1, C.workers do b[i] = stats.workers[i].local_batch end
  local metrics = { observed_batch = stats.global_batch, b_noise = b_noise(stats),
                    range = C.global_batch_max - C.global_batch_min }
  if not state.doubled and stats.iteration >= 3 then
    state.doubled = true
    for i = 1, C.workers do b[i] = 2 * b[i] end
    return { local_batch = b, reason = 'double B', metrics = metrics }
  end
  return { local_batch = b, metrics = metrics }  -- the plan in force: kept, the metrics traced
end
return policy
""")
B0, PER_EPOCH = 2048, 60000 // 2048  # Fashion-MNIST's 60000 training samples in batches of B0
adaptive = ["--workers", "64", "global_batch=2048", "policy.file=" + doubling, "policy.global_batch.min=1024",
            "policy.global_batch.max=4096", "stop.epochs=2"]


def noise_scale_at(samples, start=1000.0, growth=1.0):
    return start * (1 + growth * samples / (PER_EPOCH * B0))


a, arows = sim("adaptive", adaptive + ["sim.noise_scale=1000", "sim.noise_growth=1"])
plans = [r for r in arows if r.get("policy", {}).get("event") == "plan"]
if len(plans) != 1:
    fail(f"the doubling policy decided {len(plans)} plans, not 1")
switch = plans[0]["policy"]["applies_from"]
if switch != plans[0]["iteration"] + 1 or len(arows) != a["iterations"]:
    fail(f"the doubled plan applies from {switch}, decided at {plans[0]['iteration']}; {len(arows)} rows traced")
for r in arows:
    want = B0 if r["iteration"] < switch else 2 * B0
    if r["global_batch"] != want or sum(w["local_batch"] for w in r["workers"]) != want:
        fail(f"iteration {r['iteration']} ran a global batch of {r['global_batch']}, not {want}")
# Epochs count samples; with B adaptive the run ends once stop.epochs' samples are drawn.
drawn, before = 0, []
for r in arows:
    before.append(drawn)
    drawn += r["global_batch"]
    if abs(r["epoch"] - drawn / (PER_EPOCH * B0)) > 1e-4:
        fail(f"iteration {r['iteration']}: epoch {r['epoch']}, but {drawn} samples are {drawn / (PER_EPOCH * B0)}")
want_samples = 2 * PER_EPOCH * B0
if not (drawn >= want_samples > before[-1]) or a["stop_reason"] != "epochs":
    fail(f"{drawn} samples drawn ({before[-1]} before the last iteration), stop {a['stop_reason']}: the run should "
         f"end at the iteration that reaches {want_samples}")
if abs(a["epochs"] - drawn / (PER_EPOCH * B0)) > 1e-9:
    fail(f"the summary's epochs {a['epochs']} are not the samples' {drawn / (PER_EPOCH * B0)}")
# Throughput, mean B and goodput, from the trace: goodput counts each iteration's
# samples at Pollux's efficiency (B_noise + B0) / (B_noise + B), B_noise the model's
# before the iteration.
train_s = sum(r["step_ms"] for r in arows) / 1000
progress = sum(r["global_batch"] * (noise_scale_at(s) + B0) / (noise_scale_at(s) + r["global_batch"])
               for r, s in zip(arows, before))
for key, want in (("samples_per_s", drawn / train_s), ("mean_global_batch", drawn / len(arows)),
                  ("goodput", progress / train_s), ("statistical_efficiency", progress / drawn)):
    if abs(a[key] - want) > 1e-3 * want:
        fail(f"the summary's {key} {a[key]} is not the trace's {want}")
if not a["goodput"] < a["samples_per_s"] or abs(a["sim"]["noise_scale_end"] - noise_scale_at(drawn)) > 1e-6:
    fail(f"goodput {a['goodput']} not below samples/s {a['samples_per_s']} at twice B0, or the final noise scale "
         f"{a['sim']['noise_scale_end']} is not {noise_scale_at(drawn)}")
# What the policy saw: the B of the stats it decided on, its range, and grad_sq the
# model's (no noise here: the two-batch estimate is exact, to rounding).
seen = 0
for r in arows:
    m = r.get("policy", {}).get("metrics")
    if m is None:
        continue
    at = r["policy"]["from_iteration"]
    if m["observed_batch"] != arows[at]["global_batch"] or m["range"] != 4096 - 1024:
        fail(f"the policy saw stats.global_batch {m['observed_batch']} for iteration {at} of "
             f"{arows[at]['global_batch']}, range {m['range']}")
    if abs(m["b_noise"] - noise_scale_at(before[at])) > 1e-6 * noise_scale_at(before[at]):
        fail(f"the policy estimated B_noise {m['b_noise']} on iteration {at}, the model has {noise_scale_at(before[at])}")
    seen += 1
if seen != len(arows) - 1:
    fail(f"{seen} iterations carry the policy's metrics, want every one after the first ({len(arows) - 1})")

# With gradient noise (sim.noise: each norm times a mean-1 factor) the single
# estimates scatter, and their mean stays the model's; B_noise constant here.
_, nrows = sim("adaptive_noisy", adaptive + ["sim.noise_scale=1000", "sim.noise=0.05", "stop.epochs=10"])
ratios = [r["policy"]["metrics"]["b_noise"] / 1000 for r in nrows
          if "b_noise" in r.get("policy", {}).get("metrics", {})]
spread_b = (sum((x - 1) ** 2 for x in ratios) / len(ratios)) ** 0.5
if len(ratios) < 100 or abs(sum(ratios) / len(ratios) - 1) > 0.05 or not 0.01 < spread_b < 0.5:
    fail(f"noisy gradient norms: {len(ratios)} estimates, mean {sum(ratios) / len(ratios):.3f} of the model's, "
         f"spread {spread_b:.3f}")
# Without sim.noise_scale no gradient norms reach the policy (no estimate), and the
# summary gives the mean B but no goodput; a fixed-B run's summary neither.
u, urows = sim("adaptive_unmodelled", adaptive)
if any("b_noise" in r.get("policy", {}).get("metrics", {}) for r in urows):
    fail("without sim.noise_scale the policy still got gradient norms")
mean_b = sum(r["global_batch"] for r in urows) / len(urows)
if u.get("goodput", 0) is not None or abs(u["mean_global_batch"] - mean_b) > 1e-6:
    fail(f"unmodelled noise: goodput {u.get('goodput')}, mean B {u.get('mean_global_batch')}")
if "mean_global_batch" in s or "goodput" in s:
    fail("a fixed-B run without sim.noise_scale reports a mean B or goodput")
f_, _ = sim("fixed_noise", adaptive[:3] + ["sim.noise_scale=1000", "stop.max_iterations=20"])
if abs(f_["goodput"] - f_["samples_per_s"]) > 1e-9 * f_["samples_per_s"] or f_["mean_global_batch"] != B0:
    fail(f"at B0 throughout goodput {f_['goodput']} should be samples/s {f_['samples_per_s']}")

# Gradient buckets (comm.bucket_mb; engine/sim/network_model.hpp): on a link slow
# enough that the one all-reduce (1.08 MB at 0.1 GB/s: some 16 ms among 4) is a large
# part of the step, buckets of 0.1 MB (the last two layers, then the first) start during the
# backward pass: the exposed comm_ms and the step shrink. comm.dtype = 'bf16' halves
# the one all-reduce's bytes (and its time, but for the rings' latency).
link = speeds + ["stop.max_iterations=20", "sim.bandwidth_gb_s=0.1"]
one, one_rows = sim("one_allreduce", link + ["comm.bucket_mb=0"])
half, half_rows = sim("one_allreduce_bf16", link + ["comm.bucket_mb=0", "comm.dtype=bf16"])
bk, bk_rows = sim("buckets", link + ["comm.bucket_mb=0.1"])
w1, wh, wb = one_rows[-1]["workers"][0], half_rows[-1]["workers"][0], bk_rows[-1]["workers"][0]
if "buckets" in w1 or wb.get("buckets") != 2:
    fail(f"buckets in the trace: none for one all-reduce, 2 with buckets: {w1}, {wb}")
if not (wb["comm_ms"] < w1["comm_ms"] and bk_rows[-1]["step_ms"] < one_rows[-1]["step_ms"]):
    fail(f"buckets should hide comm: exposed {wb['comm_ms']} vs {w1['comm_ms']} ms, step {bk_rows[-1]['step_ms']} vs "
         f"{one_rows[-1]['step_ms']} ms")
latency_ms = 2 * 3 * 5 / 1000  # the ring's 6 messages of sim.latency_us
if abs((wh["comm_ms"] - latency_ms) - (w1["comm_ms"] - latency_ms) / 2) > 1e-3:
    fail(f"bf16 should halve the all-reduce's bytes: {wh['comm_ms']} vs {w1['comm_ms']} ms")

# The example (scripts/experiments/sim_goodput.lua) simulates as written but for its
# policy (goodput is tested with its own file): the noise model is on, at 64 workers
# and, with sweep.py's speeds, at 256.
for n in (64, 256):
    mix = ",".join(str([1.0, 0.7, 0.5, 0.25][4 * i // n]) for i in range(n))
    x, _ = sim(f"example_{n}", ["policy.file=lbb", "stop.max_iterations=5", "workers=%d" % n,
                                "emulation.speeds=" + mix], "scripts/experiments/sim_goodput.lua")
    if x["workers"] != n or x["sim"]["noise_scale"] <= 0 or x["goodput"] is None or x["iterations"] != 5:
        fail(f"sim_goodput.lua at {n} workers: {x['workers']} workers, {x['iterations']} iterations, noise scale "
             f"{x['sim']['noise_scale']}, goodput {x.get('goodput')}")

print(f"ok: lbb {s['efficiency']:.3f} of ideal (equal {e['efficiency']:.3f}, ksync {k['efficiency']:.3f}, grouped "
      f"{g['efficiency']:.3f}); 64 workers {big['efficiency']:.3f}; B doubled: mean B {a['mean_global_batch']:.0f}, "
      f"goodput {a['goodput']:.0f} of {a['samples_per_s']:.0f} samples/s")
