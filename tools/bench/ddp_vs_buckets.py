#!/usr/bin/env python3
"""tandem's gradient buckets against PyTorch DistributedDataParallel between hosts
(issue 36: DDP is what users compare with). Two namespace hosts
(tools/multihost/netns-hosts.sh), one rank each, host 1's link limited by tc (tbf) to
--rate; both engines' ranks started by the same mpirun, one thread each
(OPENBLAS_NUM_THREADS=1, torch.set_num_threads(1)), no emulation: this machine's
speed on both. Side by side in this one script, alternating tandem and PyTorch:

  - tandem `comm.bucket_mb = --bucket-mb` (buckets summed over MPI during the backward
    pass, tools/bench/gradient_overlap.py's runs), float32 and `comm.dtype = 'bf16'`;
  - DDP over gloo (TCP), `bucket_cap_mb = --bucket-mb` (its all-reduces started during
    the backward pass by its autograd hooks), float32 and with the bf16 compression
    hook (torch.distributed.algorithms.ddp_comm_hooks.default_hooks: each bucket
    rounded to bfloat16, summed in bfloat16 by gloo, divided and widened back); where
    this torch refuses it on gloo (1.13 wants NCCL), fp16_compress_hook, the same
    bytes on the wire, and the row says so.

The same models: the MLP 784-1024x4-10 (SGD with momentum, global batch 1024 of
synthetic 28x28 images for PyTorch, Fashion-MNIST for tandem), and the GPT of 4 layers,
256 wide, 4 heads, 128-byte windows (tools/bench/gpt_vs_torch.py's PyTorch model, AdamW;
global batch 16). A step is the data, forward, backward with its sums, and the update;
the median over the steps after --skip of the ranks' mean. The ratio is PyTorch's step
over tandem's: above 1, tandem is faster.

Needs root, iproute2, mpirun and Debian's python3-torch (exits 77 otherwise).

usage: tools/bench/ddp_vs_buckets.py BUILD_DIR [--rate 500mbit] [--models mlp,gpt] [--bucket-mb 1]
                                     [--iterations 30] [--skip 5] [--reps 1] [--out FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_common import mpirun_on_hosts  # noqa: E402
ROOT = os.path.dirname(os.path.dirname(HERE))
TORCH_PYTHON = "/usr/bin/python3"  # Debian's, with python3-torch


class GptConfig:
    n_layer, n_head, n_embd, seq_len, vocab = 4, 4, 256, 128, 256
    lr, beta1, beta2, eps, weight_decay = 2e-3, 0.9, 0.99, 1e-8, 0.1


def rank_main(a):
    """One DDP rank (under mpirun): times --iterations steps, writes its step times."""
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    rank, world = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
    dist.init_process_group("gloo", init_method=f"tcp://{a.master}:{a.port}", rank=rank, world_size=world)
    torch.manual_seed(1)
    local = a.global_batch // world
    if a.model == "mlp":
        widths = [784, 1024, 1024, 1024, 1024]
        layers = []
        for i in range(len(widths) - 1):
            layers += [nn.Linear(widths[i], widths[i + 1]), nn.ReLU()]
        model = nn.Sequential(nn.Flatten(), *layers, nn.Linear(widths[-1], 10))
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
        x = torch.rand(local, 1, 28, 28)
        y = torch.randint(0, 10, (local,))
        loss_of = lambda m: F.cross_entropy(m(x), y)  # noqa: E731
    else:
        from gpt_vs_torch import torch_gpt, torch_optimizer
        cfg = GptConfig()
        model = torch_gpt(cfg, sdpa=False)
        opt = torch_optimizer(model, cfg, capturable=False)
        data = torch.randint(0, 256, (local, cfg.seq_len + 1))
        idx, targets = data[:, :-1].contiguous(), data[:, 1:].contiguous()
        loss_of = lambda m: m(idx, targets)  # noqa: E731
    # gloo cannot broadcast the attention's boolean mask (a constant buffer): DDP leaves it.
    DDP._set_params_and_buffers_to_ignore_for_model(model, [n for n, b in model.named_buffers()
                                                            if b.dtype == torch.bool])
    ddp = DDP(model, bucket_cap_mb=a.bucket_mb)
    hook = ""
    if a.wire == "bf16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        try:
            ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)
            hook = "bf16_compress_hook"
        except (AttributeError, TypeError) as e:  # torch 1.13 allows it on NCCL only
            ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
            hook = f"fp16_compress_hook, the same bytes (the bf16 hook: {e})"
    steps = []
    for _ in range(a.iterations):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_of(ddp)
        loss.backward()
        if a.model == "gpt":
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        steps.append((time.perf_counter() - start) * 1000.0)
    with open(os.path.join(a.rank_out, f"rank{rank}.json"), "w") as f:
        json.dump({"step_ms": steps, "hook": hook, "params": sum(p.numel() for p in model.parameters())}, f)
    dist.destroy_process_group()


def ddp_step(host_dir, out, model, bucket_mb, wire, iterations, skip, port):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(host_dir, "hostfile")) as f:
        master = f.readline().split()[0]
    cmd = mpirun_on_hosts(host_dir, 2) + [
        "-x", "GLOO_SOCKET_IFNAME=eth0", TORCH_PYTHON, os.path.abspath(__file__), "--rank", "--model", model,
        "--bucket-mb", str(bucket_mb), "--wire", wire, "--iterations", str(iterations), "--global-batch",
        str(1024 if model == "mlp" else 16), "--master", master, "--port", str(port), "--rank-out", out]
    subprocess.run(cmd, check=True, capture_output=True, cwd=HERE)
    ranks = [json.load(open(os.path.join(out, f"rank{r}.json"))) for r in range(2)]
    per_step = [statistics.mean(r["step_ms"][i] for r in ranks) for i in range(skip, iterations)]
    return {"step_ms": round(statistics.median(per_step), 2), "hook": ranks[0]["hook"],
            "params": ranks[0]["params"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build", nargs="?")
    ap.add_argument("--rate", default="500mbit")
    ap.add_argument("--models", default="mlp,gpt")
    ap.add_argument("--bucket-mb", type=float, default=1.0)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--skip", type=int, default=5)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--out")
    # One DDP rank (this script under mpirun).
    ap.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--wire", default="fp32", help=argparse.SUPPRESS)
    ap.add_argument("--global-batch", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--master", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--rank-out", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.rank:
        return rank_main(a)
    if not a.build:
        ap.error("BUILD_DIR is needed")
    if subprocess.run([TORCH_PYTHON, "-c", "import torch.distributed as d; assert d.is_gloo_available()"],
                      capture_output=True).returncode != 0:
        print(f"{TORCH_PYTHON} has no torch with gloo (Debian's python3-torch)")
        sys.exit(77)
    from bench_common import limited_hosts, write_result
    from gradient_overlap import measure
    tandem = os.path.abspath(os.path.join(a.build, "tandem"))
    result = {"benchmark": "ddp_vs_buckets", "link": f"host 1's link limited by tc (tbf) to {a.rate}",
              "emulation": "none: 2 ranks, one a host, this machine's speed, one thread each",
              "bucket_mb": a.bucket_mb, "models": {}}
    port = 29500
    os.chdir(ROOT)  # tandem's experiments are named from the repository's root
    with limited_hosts(2, "ddp-vs-buckets-", a.rate) as (host_dir, scratch):
        for model in [m for m in a.models.split(",") if m]:
            rows = {"fp32": {"tandem": [], "ddp": []}, "bf16": {"tandem": [], "ddp": []}}
            hook = ""
            for rep in range(a.reps):
                for wire in ("fp32", "bf16"):
                    at = os.path.join(scratch, f"{model}-{wire}-{rep}")
                    t = measure(tandem, host_dir, at + "-tandem", model, a.bucket_mb, a.iterations, a.skip,
                                dtype=wire)
                    port += 1
                    d = ddp_step(host_dir, at + "-ddp", model, a.bucket_mb, wire, a.iterations, a.skip, port)
                    rows[wire]["tandem"].append(t["step_ms"])
                    rows[wire]["ddp"].append(d["step_ms"])
                    hook = d["hook"] or hook
                    print(f"{model} {wire} rep {rep}: tandem {t['step_ms']:.1f} ms ({t.get('buckets', 1)} buckets), "
                          f"DDP {d['step_ms']:.1f} ms", file=sys.stderr, flush=True)
            out = {}
            for wire, r in rows.items():
                tm, dm = statistics.median(r["tandem"]), statistics.median(r["ddp"])
                out[wire] = {"tandem_step_ms": tm, "ddp_step_ms": dm, "ddp_over_tandem": round(dm / tm, 3),
                             "reps": r}
            out["bf16"]["ddp_hook"] = hook
            result["models"][model] = out
    write_result(result, a.out)


if __name__ == "__main__":
    sys.exit(main())
