"""What the heterogeneity benchmarks share: running tandem, one calibration of this
machine's compute for every run of a script (so all runs stretch the same numbers;
a calibration per run would add its noise), and the ideal throughput of an emulated
cluster (the sum of each worker's own samples/s, each measured alone)."""
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile


def write_result(result, out=None):
    """Prints a benchmark's result as JSON, and writes it to `out` when given."""
    text = json.dumps(result, indent=2)
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")


def run(build, out_root, name, args, experiment="scripts/experiments/quickstart.lua"):
    """One tandem run; returns its summary.json."""
    out = os.path.join(out_root, name)
    cmd = [f"{build}/tandem", "run", experiment, "--out", out, "--overwrite", "log_level=warn"] + args
    subprocess.run(cmd, check=True)
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f)


def calibration_overrides(go, global_batch):
    """Calibrates once (a 1-iteration run) and returns the overrides that make every
    later run use those numbers."""
    go("calibrate", ["stop.max_iterations=1", f"global_batch={global_batch}", "emulation.speeds=1",
                     "eval_every=100000", "stop.target_accuracy=1"])
    return calibration_from(go.root)


def calibration_from(root):
    """The overrides of calibration_overrides' run under root."""
    return calibration_args(os.path.join(root, "calibrate"))


def alone_throughputs(go, speeds, local_batch, iterations):
    """Each worker's own samples/s: one rank at that worker's speed."""
    alone = []
    for rank, speed in enumerate(speeds):
        s = go(f"alone{rank}", [f"stop.max_iterations={iterations}", f"global_batch={local_batch}",
                                f"emulation.speeds={speed}", "eval_every=100000", "stop.target_accuracy=1"])
        alone.append(s["samples_per_s"])
        print(f"worker {rank} alone (speed {speed}): {s['samples_per_s']:.0f} samples/s", file=sys.stderr)
    return alone


class Runner:
    """go(name, args): a run under one root, with the common overrides appended."""

    def __init__(self, build, root, common, experiment="scripts/experiments/quickstart.lua"):
        self.build, self.root, self.common, self.experiment = build, root, common, experiment

    def __call__(self, name, args, experiment=None):
        return run(self.build, self.root, name, args + self.common, experiment or self.experiment)


def versus_torch(ours, theirs, flops, peak):
    """One row of a tandem-vs-PyTorch table: the medians of alternating runs (samples/s
    of each, the FLOP/s tandem's steps executed), their ratio, and tandem's FLOP/s as a
    fraction of the peak measured on the same device."""
    return {"tandem_samples_per_s": statistics.median(ours), "torch_samples_per_s": statistics.median(theirs),
            "ratio": statistics.median(ours) / statistics.median(theirs),
            "tandem_gflops": statistics.median(flops) / 1e9,
            "fraction_of_sgemm_peak": statistics.median(flops) / peak}


def torch_step_runner(step, optimizer, fill_inputs, graph):
    """run_once() for PyTorch's training step: eager (zero the gradients, then step()),
    or the whole step captured in one CUDA graph and replayed. step() reads its inputs
    from static buffers that fill_inputs(t) fills on the device (what a replay reads).
    For the capture, three warm-up steps on a side stream first make the optimizer's
    state and the allocator's pools exist outside it; the gradients are left
    unallocated, so backward allocates them from the graph's private pool."""
    import torch
    if not graph:
        def run_once():
            optimizer.zero_grad(set_to_none=True)
            step()
        return run_once
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for t in range(3):
            fill_inputs(t)
            optimizer.zero_grad(set_to_none=True)
            step()
    torch.cuda.current_stream().wait_stream(side)
    cuda_graph = torch.cuda.CUDAGraph()
    optimizer.zero_grad(set_to_none=True)
    with torch.cuda.graph(cuda_graph):
        step()
    return cuda_graph.replay


# Hosts as network namespaces on this machine (tools/multihost/netns-hosts.sh): the
# benchmarks across hosts. They need root, iproute2 and mpirun.
HOSTS = os.path.abspath("tools/multihost/netns-hosts.sh")


def calibration_args(run_dir):
    """A run's calibration.json as the emulation.calibration overrides a `tandem sim`
    (or another run) takes: the same compute without measuring it again."""
    with open(os.path.join(run_dir, "calibration.json")) as f:
        cal = json.load(f)
    return ["emulation.calibration.batch=" + ",".join(str(b) for b in cal["batch"]),
            "emulation.calibration.ms=" + ",".join(f"{m:.6f}" for m in cal["ms"]),
            "emulation.calibration.host_ms=" + ",".join(f"{m:.6f}" for m in cal["host_ms"])]


def iteration_rows(run_dir, skip=0):
    """A run's trace.jsonl iteration lines, in order, after the first `skip`."""
    with open(os.path.join(run_dir, "trace.jsonl")) as f:
        return [json.loads(line) for line in f if '"event":"iteration"' in line][skip:]


def worker_median(rows, key):
    """The median over iterations of the workers' mean `key` (0 where a worker has none)."""
    return statistics.median(statistics.mean(w.get(key, 0.0) for w in r["workers"]) for r in rows)


def hosts(*args):
    """netns-hosts.sh ARGS: True when done, False when this machine cannot (exit 77)."""
    r = subprocess.run([HOSTS] + list(args), capture_output=True, text=True)
    if r.returncode not in (0, 77):
        sys.exit(f"netns-hosts.sh {' '.join(args)}: {r.stderr}")
    return r.returncode == 0


def mpirun_on_hosts(host_dir, ranks):
    """mpirun's words for `ranks` ranks spread over the namespace hosts (one a host
    first), one BLAS thread each; the command to run follows."""
    flags = open(os.path.join(host_dir, "mpirun-flags")).read().split()
    return (["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", str(ranks),
             "--hostfile", os.path.join(host_dir, "hostfile"), "--map-by", "node", "-x", "OPENBLAS_NUM_THREADS=1"]
            + flags)


@contextlib.contextmanager
def limited_hosts(count, prefix, rate):
    """`count` namespace hosts with host 1's link limited to `rate` (tbf); yields
    (hosts folder, a scratch folder); clears the link, takes the hosts down and
    removes the scratch folder after, however the block ends."""
    scratch = tempfile.mkdtemp(prefix=prefix)
    host_dir = hosts_up(count, scratch)
    try:
        if not hosts("rate", "1", rate):
            sys.exit(f"tc cannot limit the link to {rate} here")
        yield host_dir, scratch
    finally:
        hosts("clear-netem", "1")
        hosts("down")
        shutil.rmtree(scratch, ignore_errors=True)


def hosts_up(count, scratch):
    """Starts `count` hosts under scratch/hosts and returns that folder; exits with
    netns-hosts.sh's status (77: cannot here) when they cannot start."""
    host_dir = os.path.join(scratch, "hosts")
    r = subprocess.run([HOSTS, "up", str(count), host_dir], capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stderr.strip())
        sys.exit(r.returncode)
    return host_dir

