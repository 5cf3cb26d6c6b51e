#!/usr/bin/env python3
"""tandem across hosts, with the hosts network namespaces on this machine
(tools/multihost/netns-hosts.sh: a veth link each into one bridge, OpenMPI over TCP
only, its daemons started through an rsh agent that enters the namespace) and the
user's own `mpirun --hostfile`, as a real cluster is run:

  - ranks on several hosts turn the shared-memory all-reduce off (rank 0 says so)
    and train to the parameters of one worker: a skewed fixed plan and a changing
    one over 4 ranks on 3 hosts, against 1 rank (scaled difference < 1e-5), their
    gradients summed in two levels (the 2 ranks of host 0 through its shared
    memory, then one rank per host across the network);
  - grouped sync across hosts (the group all-reduce and the parameter server's
    channel over MPI messages): one group trains what bsp trains;
  - a slow link is real: with host 1's link limited by tc (tbf, 40 Mbit/s each way)
    every iteration's comm_ms is at least the time the gradient takes to cross it
    (bytes * 8 / rate, a physical bound that load can only lengthen), far above the
    unlimited link's; with netem, where the kernel has it, a 20 ms delay shows the
    same way; lbb over the limited link still plans validly and gives the faster
    (emulated) worker more;
  - a rank on another host killed, and one stopped (SIGSTOP), is named within the
    collective deadline plus a margin: the stopped one by every waiting rank
    ("missing rank(s): 1"), the killed one by mpirun ("process rank 1").

Exits 77 (skipped) where the namespaces cannot be made (not root, no iproute2, no
mpirun, a kernel without veth or bridges). The namespaces are removed on exit, and
leftovers of a crashed run before the first start.

usage: test_multihost.py TANDEM_BINARY SCRATCH_DIR   (from the source tree)
"""
import atexit
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

from cluster_support import HOSTS, fail, hosts, params, scaled_difference

TANDEM, SCRATCH = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
# The user's own mpirun, as docs/hosts.md has it: PMIx's native security, since munge
# (installed for the Slurm test) without its daemon costs every start 2.3 s.
os.environ.setdefault("PMIX_MCA_psec", "native")
HOST_DIR = os.path.join(SCRATCH, "hosts")
DEADLINE_S = 3
# As in test_reliability.py: the abort and mpirun's teardown on a loaded 2-core
# machine, counted from the fault's log line to the job's last one.
NOTICE_WITHIN_S = DEADLINE_S + 40
RATE_MBIT = 40
MLP = "scripts/experiments/quickstart.lua"
# As tests/integration/test_plan_equivalence.cpp trains it.
COMMON = ["model_args.hidden=64", "model_args.dropout=0.2", "global_batch=128", "stop.target_accuracy=1",
          "eval_every=1000", "save_params=true", "log_level=warn", "console=false"]


def mpirun_cmd(ranks, args):
    with open(os.path.join(HOST_DIR, "mpirun-flags")) as f:
        flags = f.read().split()
    cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(ranks), "--hostfile",
           os.path.join(HOST_DIR, "hostfile"), "--map-by", "node", "-x", "OPENBLAS_NUM_THREADS=1"] + flags
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    return cmd + [TANDEM, "run"] + args


def run(name, args, ranks=1, expect_ok=True, timeout=300):
    """tandem run, on one rank here or on `ranks` ranks spread over the hosts round
    robin (rank r on host r mod 3, so rank 1 is never on rank 0's host). Returns the
    run directory, the output and when the job ended (time.time())."""
    out_dir = os.path.join(SCRATCH, name)
    shutil.rmtree(out_dir, ignore_errors=True)
    args = args + ["--out", out_dir]
    cmd = mpirun_cmd(ranks, args) if ranks > 1 else [TANDEM, "run"] + args
    # A session of its own, so that a hang ends with mpirun and all it started here
    # (what runs in the namespaces ends with them, at `down`).
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        fail(f"{' '.join(cmd)} did not end within {timeout} s: a hang")
    r = p
    if expect_ok and r.returncode != 0:
        fail(f"{' '.join(cmd)} exited {r.returncode}:\n{out[-3000:]}")
    if not expect_ok and r.returncode == 0:
        fail(f"{' '.join(cmd)} succeeded but should have failed:\n{out[-3000:]}")
    return out_dir, out, time.time()


def iterations(run_dir):
    with open(os.path.join(run_dir, "trace.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r for r in rows if r.get("event") == "iteration"]


def slowest_comm_ms(rows):
    """Per iteration, the largest comm_ms of any worker (past the first iteration)."""
    return [max(w["comm_ms"] for w in r["workers"]) for r in rows[1:]]


def noticed_after(out, ended):
    """Seconds from the injected fault's log line (lines start HH:MM:SS.mmm, local
    time) to the end of the job (`ended`, a time.time()): the killed rank is named by
    mpirun, whose lines carry no time."""
    fault = None
    for line in out.splitlines():
        head = line[:12]
        if "fault injection" in line and len(head) == 12 and head[2] == ":" and head[5] == ":" and head[8] == ".":
            fault = int(head[:2]) * 3600 + int(head[3:5]) * 60 + float(head[6:12])
            break
    if fault is None:
        fail(f"no fault injection line in the output:\n{out[-3000:]}")
    t = time.localtime(ended)
    end = t.tm_hour * 3600 + t.tm_min * 60 + t.tm_sec + ended % 1
    after = end - fault
    return after + 86400 if after < -1 else after  # past midnight


def expect(out, *parts, what):
    for p in parts:
        if p not in out:
            fail(f"{what}: the output lacks '{p}':\n{out[-3000:]}")


def fault_experiment(name, kind):
    path = os.path.join(SCRATCH, name + ".lua")
    with open(path, "w") as f:
        f.write(f"""local e = dofile('{MLP}')
e.stop = {{ epochs = 1, max_iterations = 40 }}
e.console = false
e.collective_timeout_s = {DEADLINE_S}
e.faults = {{ {{ rank = 1, iteration = 5, kind = '{kind}' }} }}
return e
""")
    return path


os.makedirs(SCRATCH, exist_ok=True)
if not os.path.exists(TANDEM):
    fail(f"no tandem binary at {TANDEM}")
if shutil.which("mpirun") is None:
    print("skipped: no mpirun")
    sys.exit(77)
atexit.register(lambda: subprocess.run([HOSTS, "down"], capture_output=True))
signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # through atexit: the namespaces go
hosts("up", "3", HOST_DIR)

# ---- ranks on several hosts train as one worker does --------------------------------
one_dir, _, _ = run("one", [MLP] + COMMON + ["stop.max_iterations=10"])
one = params(one_dir)
skewed_dir, out, _ = run("skewed", [MLP] + COMMON + ["stop.max_iterations=10", "--workers", "4", "plan.kind=fixed",
                                                      "plan.batches=1,3,40,84"], ranks=4)
expect(out, "ranks on several hosts (2 of 4 on rank 0's): gradients go over MPI, not shared memory",
       "gradients are summed in two levels: the ranks of a host through its shared memory, then one rank per host "
       "across the 3 hosts", what="4 ranks on 3 hosts")
changing_dir, _, _ = run("changing", [MLP] + COMMON + ["stop.max_iterations=10", "--workers", "4",
                                                        "plan.kind=random"], ranks=4)
# The same in gradient buckets (each of the 2 layers its own), summed in two levels
# by the buckets' thread, then with the bf16 wire across hosts (the one training
# that is not one worker's: the wire rounds).
buckets_dir, out, _ = run("skewed_buckets", [MLP] + COMMON + ["stop.max_iterations=10", "--workers", "4",
                                                              "plan.kind=fixed", "plan.batches=1,3,40,84",
                                                              "comm.bucket_mb=0.002", "log_level=info"], ranks=4)
expect(out, "in 2 bucket(s) summed during the backward pass", "gradients are summed in two levels",
       what="buckets over 4 ranks on 3 hosts")
bf16_dir, out, _ = run("skewed_bf16", [MLP] + COMMON + ["stop.max_iterations=10", "--workers", "4", "plan.kind=fixed",
                                                        "plan.batches=1,3,40,84", "comm.bucket_mb=0.002",
                                                        "comm.dtype=bf16", "log_level=info"], ranks=4)
expect(out, "in 2 bucket(s) summed during the backward pass, in bfloat16 on the wire", what="the bf16 wire")
d_skewed, d_changing = scaled_difference(one, params(skewed_dir)), scaled_difference(one, params(changing_dir))
d_buckets, d_bf16 = scaled_difference(one, params(buckets_dir)), scaled_difference(one, params(bf16_dir))
print(f"scaled differences from one worker, 4 ranks on 3 hosts: skewed {d_skewed:.3g}, changing {d_changing:.3g}, "
      f"in buckets {d_buckets:.3g}, bf16 wire {d_bf16:.3g}")
if not (d_skewed < 1e-5 and d_changing < 1e-5 and d_buckets < 1e-5):
    fail(f"the parameters differ from one worker's: skewed {d_skewed}, changing {d_changing}, buckets {d_buckets}")
if not 0 < d_bf16 < 1e-2:
    fail(f"the bf16 wire should round (and no more than bfloat16 does over 10 steps): {d_bf16}")
if sum(r["workers"][1]["local_batch"] for r in iterations(skewed_dir)) != 3 * 10:
    fail("rank 1 (on host 1) did not train its fixed local batch of 3")

# Grouped sync across hosts (the group's all-reduce and the parameter server's
# channel over MPI messages): one group of all 4 trains what bsp trains, as
# test_sync_modes checks on one host.
grouped = [MLP, "--workers", "4", "global_batch=128", "stop.max_iterations=40", "eval_every=20",
           "save_params=true", "log_level=warn", "console=false"]
bsp_dir, _, _ = run("bsp", grouped, ranks=4)
group_dir, _, _ = run("one_group", grouped + ["sync.mode=grouped", "sync.groups=1,1,1,1", "sync.sync_every=7"],
                      ranks=4)
d_group = scaled_difference(params(bsp_dir), params(group_dir))
print(f"one group of 4 ranks on 3 hosts vs bsp, 40 iterations: scaled difference {d_group:.3g}")
if not d_group < 1e-4:
    fail(f"grouped sync (one group) across hosts differs from bsp: {d_group}")
with open(os.path.join(group_dir, "summary.json")) as f:
    updates = json.load(f)["sync"]["updates"]
if updates != 40:
    fail(f"grouped sync across hosts made {updates} updates, not 40")

# ---- a killed and a stopped rank on another host are named -------------------------
for kind, did, named in (("kill", "killed", "process rank 1 with PID"), ("stop", "stopped", "missing rank(s): 1")):
    _, out, ended = run(did, [fault_experiment(kind, kind), "log_level=warn"], ranks=4, expect_ok=False)
    expect(out, f"rank 1 {kind}s", named, what=f"rank 1 on host 1 {did}")
    if kind == "kill":
        expect(out, "on node 10.77.0.2", what="rank 1 on host 1 killed")
    after = noticed_after(out, ended)
    print(f"rank 1 on host 1 {did} at iteration 5: the job ended {after:.1f} s later, naming it "
          f"(collective_timeout_s {DEADLINE_S})")
    if after > NOTICE_WITHIN_S:
        fail(f"the job ended {after:.1f} s after rank 1 was {did} (> {NOTICE_WITHIN_S} s)")

# ---- a slow link shows in comm_ms --------------------------------------------------
# Two ranks: rank 0 on host 0, rank 1 on host 1, whose link the tests slow down.
link = [MLP] + COMMON + ["stop.max_iterations=12", "--workers", "2"]
base_dir, _, _ = run("link_unlimited", link, ranks=2)
base = slowest_comm_ms(iterations(base_dir))
gradient_bytes = 4 * len(params(base_dir))
hosts("rate", "1", f"{RATE_MBIT}mbit")
try:
    slow_dir, _, _ = run("link_limited", link, ranks=2)
    slow = slowest_comm_ms(iterations(slow_dir))
    # The gradient crosses host 1's link at least once each way, each direction
    # limited to the rate: no iteration's all-reduce can be faster than one crossing
    # (less the token bucket's 16 kB burst).
    bound_ms = (gradient_bytes - 16 * 1024) * 8 / (RATE_MBIT * 1e6) * 1000
    print(f"comm_ms (slowest worker), median over iterations 1-11: unlimited {statistics.median(base):.1f}, "
          f"{RATE_MBIT} Mbit/s {statistics.median(slow):.1f} (min {min(slow):.1f}; the gradient, "
          f"{gradient_bytes} bytes, takes {bound_ms:.1f} ms to cross)")
    if min(slow) < 0.9 * bound_ms:
        fail(f"an iteration's comm_ms ({min(slow):.1f}) is below the link's bound ({bound_ms:.1f} ms): "
             f"the all-reduce did not cross the limited link")
    if statistics.median(slow) < statistics.median(base) + 0.5 * bound_ms:
        fail(f"comm_ms over the limited link (median {statistics.median(slow):.1f}) is not clearly above the "
             f"unlimited link's ({statistics.median(base):.1f})")

    # lbb over the limited link, with emulated speeds 1 and 0.25 and the fixed
    # calibration of test_policy_runs (so the compute lbb sees is the emulation's):
    # every plan is valid and the faster worker ends with more.
    lbb_dir, _, _ = run("lbb_limited", [MLP] + COMMON + [
        "stop.max_iterations=40", "--workers", "2", "policy.file=lbb", "policy.budget_ms=2000",
        "emulation.speeds=1,0.25", "emulation.reference=0.25", "emulation.calibration.batch=1,256",
        "emulation.calibration.ms=2.1,27.6", "emulation.calibration.host_ms=0.1,0.1"], ranks=2)
    rows = iterations(lbb_dir)
    for r in rows:
        b = [w["local_batch"] for w in r["workers"]]
        if sum(b) != 128 or min(b) < 0:
            fail(f"iteration {r['iteration']}: plan {b} is not a split of the global batch 128")
    last = [w["local_batch"] for w in rows[-1]["workers"]]
    print(f"lbb over the limited link: last plan {last}")
    if not last[0] > last[1]:
        fail(f"lbb's last plan {last} does not give the 4x faster worker (rank 0) more")
finally:
    hosts("clear-netem", "1", check=False)

r = subprocess.run([HOSTS, "netem", "1", "20ms"], capture_output=True, text=True)
if r.returncode == 77:
    print("netem delay: not checked,", r.stderr.strip().replace("netns-hosts: ", ""))
else:
    if r.returncode != 0:
        fail(f"netns-hosts.sh netem 1 20ms exited {r.returncode}: {r.stderr}")
    try:
        delay_dir, _, _ = run("link_delayed", link, ranks=2)
        delayed = slowest_comm_ms(iterations(delay_dir))
        print(f"comm_ms (slowest worker) with 20 ms each way on host 1's link: median "
              f"{statistics.median(delayed):.1f}, min {min(delayed):.1f}")
        # After the barrier one rank still waits for the other's gradient, sent when
        # that one left the barrier: at least one crossing, 20 ms.
        if min(delayed) < 18 or statistics.mean(delayed) < 10:
            fail(f"comm_ms with a 20 ms delay: min {min(delayed):.1f}, mean {statistics.mean(delayed):.1f}")
    finally:
        hosts("clear-netem", "1", check=False)

print("PASS")
