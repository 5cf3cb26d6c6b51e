#!/usr/bin/env python3
"""tandem vs PyTorch on one GPU: tokens/s of one worker training a GPT.

The model is a byte-level GPT (nanoGPT's shape): 6 pre-norm blocks of causal
self-attention (6 heads) and a GELU (tanh) MLP, 384 wide, sequence 256, vocabulary
256 (bytes), learned positions, token embedding tied to the output projection, no
dropout. Training: batch 64 sequences, cross-entropy over every position, AdamW
(lr 6e-4, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on the matrices and embeddings
only) with the gradient norm clipped to 1.0. --precision (default fp32) sets the
arithmetic of both engines: fp32; tf32 (TF32 tensor cores for float32 matmuls; --tf32
is the same); bf16 (tandem: GEMM inputs rounded to bfloat16, float32 storage and
accumulation, engine/core/precision.hpp; PyTorch: torch.autocast(bfloat16), its usual
mixed precision, which also keeps activations in bfloat16: the stronger peer).

Peers, each timed over the same steps after the same warm-up:
  - tandem: `tandem run scripts/experiments/gpt.lua` with overrides (device=cuda, the
    sizes and optimizer above); tokens/s from the run's trace.jsonl, the iterations
    after the warm-up (sum of step_ms), as the trainer runs them: batches sampled
    and uploaded by the host every step, the loss read back every step;
  - torch eager, attention as tandem computes it (q k^T, masked softmax, att v);
  - torch eager with F.scaled_dot_product_attention (what users run: a fused,
    flash-style kernel);
  - both again with the whole step (forward, backward, clipping, AdamW with
    capturable=True) captured in one CUDA graph (torch.cuda.graph) and replayed; the
    batch is gathered on the device from the token tensor into static input buffers
    before each replay.
PyTorch is given its best case: the corpus already on the GPU as one byte tensor,
batches gathered there at random offsets, no host read of the loss inside the timed
loop. Runs alternate tandem / PyTorch variants --reps times in this one script; the
median of each is reported, and each ratio is tandem / that peer.

The corpus is the Debian `fortunes` package's text files (the files of
/usr/share/games/fortunes without .dat or .u8 suffix, concatenated as bytes). The GPU
machines have no fortunes package: the caller copies /usr/share/games/fortunes into
the packed folder (../shared/device/pack.sh does, as KIT/fortunes, when the package is
installed where it packs; otherwise `cp -rL /usr/share/games/fortunes KIT/fortunes`)
and passes --corpus KIT/fortunes there (KIT/env.sh also links
/usr/share/games/fortunes to it when that path is free, so the default works after
sourcing it). Both engines read the same files.

scripts/experiments/gpt.lua and models/gpt.lua are the GPT's definition on the
tandem side; --tandem-override KEY=VALUE (repeatable) adds or replaces an override
should their keys move.

Run from the repository root:
usage: tools/bench/gpt_vs_torch.py BUILD_DIR [--corpus DIR] [--steps 100] [--warmup 20]
                                   [--reps 3] [--precision fp32|tf32|bf16] [--out FILE]
"""
import argparse
import json
import math
import os
import statistics
import sys
import tempfile

from bench_common import run as tandem_run_dir, torch_step_runner, write_result

EXPERIMENT = "scripts/experiments/gpt.lua"
CORPUS = "/usr/share/games/fortunes"


class Config:
    n_layer, n_head, n_embd, seq_len, vocab = 6, 6, 384, 256, 256
    batch = 64
    lr, beta1, beta2, eps, weight_decay, clip = 6e-4, 0.9, 0.95, 1e-8, 0.1, 1.0


def corpus_files(root):
    """The fortune text files under root (not the .dat indexes or .u8 links), sorted."""
    names = sorted(n for n in os.listdir(root) if not n.endswith((".dat", ".u8")))
    files = [os.path.join(root, n) for n in names
             if os.path.isfile(os.path.join(root, n)) and not os.path.islink(os.path.join(root, n))]
    if not files:
        sys.exit(f"gpt_vs_torch: no corpus files under {root} (pass --corpus DIR)")
    return files


# ---- tandem -------------------------------------------------------------------------

def tandem_overrides(cfg, files, steps, warmup, device, extra):
    """tandem run's overrides for the benchmark's GPT; `device`: the keys that place it
    (gpt_cpu_vs_torch.py passes its own)."""
    o = dict(device)
    o.update({
        "global_batch": cfg.batch,
        "model_args.n_layer": cfg.n_layer,
        "model_args.n_head": cfg.n_head,
        "model_args.n_embd": cfg.n_embd,
        "model_args.seq_len": cfg.seq_len,
        "model_args.dropout": 0,
        "data.files": ",".join(os.path.abspath(f) for f in files),
        "data.seq_len": cfg.seq_len,
        "optimizer": "adamw",
        "lr": cfg.lr,
        "beta1": cfg.beta1,
        "beta2": cfg.beta2,
        "eps": cfg.eps,
        "weight_decay": cfg.weight_decay,
        "clip_grad_norm": cfg.clip,
        "stop.max_iterations": warmup + steps,
        "stop.target_loss": 0.001,  # never reached: the run stops at max_iterations
        "eval_every": 100000,  # no evaluation inside the timed iterations
    })
    for kv in extra:
        key, _, value = kv.partition("=")
        o[key] = value
    return [f"{k}={v}" for k, v in o.items()]


def tandem_tokens_per_s(build, root, name, cfg, overrides, warmup):
    """tokens/s over the iterations after the warm-up, from the run's trace."""
    tandem_run_dir(build, root, name, overrides, EXPERIMENT)
    with open(os.path.join(root, name, "trace.jsonl")) as f:
        records = [json.loads(line) for line in f]
    steps = [r for r in records if r.get("event") == "iteration" and r["iteration"] >= warmup]
    if not steps:
        sys.exit(f"gpt_vs_torch: tandem's trace in {root}/{name} has no iteration after the warm-up")
    tokens = sum(r["global_batch"] for r in steps) * cfg.seq_len
    return tokens / (sum(r["step_ms"] for r in steps) / 1000.0)


# ---- PyTorch ------------------------------------------------------------------------

def torch_gpt(cfg, sdpa):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
            self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)
            mask = torch.tril(torch.ones(cfg.seq_len, cfg.seq_len, dtype=torch.bool))
            self.register_buffer("mask", mask.view(1, 1, cfg.seq_len, cfg.seq_len), persistent=False)

        def forward(self, x):
            B, T, C = x.shape
            hd = C // cfg.n_head
            q, k, v = self.c_attn(x).split(C, dim=2)
            q, k, v = (t.view(B, T, cfg.n_head, hd).transpose(1, 2) for t in (q, k, v))
            if sdpa:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
                att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
                y = F.softmax(att, dim=-1) @ v
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn = nn.LayerNorm(cfg.n_embd), Attention()
            self.ln_2 = nn.LayerNorm(cfg.n_embd)
            self.c_fc, self.c_proj = nn.Linear(cfg.n_embd, 4 * cfg.n_embd), nn.Linear(4 * cfg.n_embd, cfg.n_embd)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(cfg.vocab, cfg.n_embd), nn.Embedding(cfg.seq_len, cfg.n_embd)
            self.blocks = nn.ModuleList(Block() for _ in range(cfg.n_layer))
            self.ln_f = nn.LayerNorm(cfg.n_embd)
            self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab, bias=False)
            self.lm_head.weight = self.wte.weight  # tied
            self.register_buffer("pos", torch.arange(cfg.seq_len), persistent=False)
            for name, p in self.named_parameters():
                if p.dim() >= 2:
                    nn.init.normal_(p, 0.0, 0.02)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(self.pos[: idx.shape[1]])
            for b in self.blocks:
                x = b(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))

    return GPT()


def torch_optimizer(model, cfg, capturable):
    import torch
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps, capturable=capturable)


def torch_tokens_per_s(data, cfg, steps, warmup, sdpa, graph, precision="fp32"):
    """data: the corpus as a uint8 tensor on the GPU."""
    import contextlib
    import time
    import torch
    torch.manual_seed(1)
    model = torch_gpt(cfg, sdpa).cuda()
    opt = torch_optimizer(model, cfg, capturable=graph)
    gen = torch.Generator(device="cuda").manual_seed(1)
    span = torch.arange(cfg.seq_len + 1, device="cuda")
    static_x = torch.empty(cfg.batch, cfg.seq_len, dtype=torch.long, device="cuda")
    static_y = torch.empty_like(static_x)

    def gather():  # on the device, into the static buffers (what a graph replay reads)
        starts = torch.randint(0, data.numel() - cfg.seq_len - 1, (cfg.batch, 1), device="cuda", generator=gen)
        window = data[starts + span].long()
        static_x.copy_(window[:, :-1])
        static_y.copy_(window[:, 1:])

    def autocast():
        # No weight cache: a graph's captured casts must be redone at every replay.
        if precision == "bf16":
            return torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False)
        return contextlib.nullcontext()

    def step():
        with autocast():
            loss = model(static_x, static_y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
        opt.step()
        return loss

    run_once = torch_step_runner(step, opt, lambda t: gather(), graph)

    for t in range(warmup + steps):
        if t == warmup:
            torch.cuda.synchronize()
            start = time.perf_counter()
        gather()
        run_once()
    torch.cuda.synchronize()
    return steps * cfg.batch * cfg.seq_len / (time.perf_counter() - start)


# ---- main ---------------------------------------------------------------------------

PEERS = [  # (name, sdpa, graph)
    ("torch_eager", False, False),
    ("torch_eager_sdpa", True, False),
    ("torch_graph", False, True),
    ("torch_graph_sdpa", True, True),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build", help="tandem's build directory (holds the tandem executable)")
    ap.add_argument("--corpus", default=CORPUS, help=f"the fortunes folder (default {CORPUS})")
    ap.add_argument("--steps", type=int, default=100, help="timed steps per run")
    ap.add_argument("--warmup", type=int, default=20, help="untimed steps first")
    ap.add_argument("--reps", type=int, default=3, help="alternating runs of every engine")
    ap.add_argument("--precision", choices=["fp32", "tf32", "bf16"], default="fp32",
                    help="both engines' arithmetic (see above)")
    ap.add_argument("--tf32", action="store_true", help="the same as --precision tf32")
    ap.add_argument("--tandem-override", action="append", default=[], metavar="KEY=VALUE",
                    help="one more tandem override (repeatable), replacing this script's for the same key")
    ap.add_argument("--out", help="also write the JSON result here")
    args = ap.parse_args()

    try:
        import torch
    except ImportError:
        sys.exit("gpt_vs_torch: needs PyTorch (with CUDA) in this python3")
    if not torch.cuda.is_available():
        sys.exit("gpt_vs_torch: PyTorch sees no GPU")
    precision = "tf32" if args.tf32 else args.precision
    torch.backends.cuda.matmul.allow_tf32 = precision != "fp32"
    torch.backends.cudnn.allow_tf32 = precision != "fp32"
    cfg = Config()
    files = corpus_files(args.corpus)
    raw = b"".join(open(f, "rb").read() for f in files)
    data = torch.frombuffer(bytearray(raw), dtype=torch.uint8).cuda()
    overrides = tandem_overrides(cfg, files, args.steps, args.warmup,
                                 {"device": "cuda", "precision": precision}, args.tandem_override)
    print(f"corpus: {len(files)} files, {len(raw)} bytes; tandem overrides: {' '.join(overrides)}", file=sys.stderr)

    results = {"tandem": [], **{name: [] for name, _, _ in PEERS}}
    with tempfile.TemporaryDirectory(prefix="gpt_vs_torch.") as root:
        for rep in range(args.reps):
            results["tandem"].append(
                tandem_tokens_per_s(args.build, root, f"tandem{rep}", cfg, overrides, args.warmup))
            for name, sdpa, graph in PEERS:
                results[name].append(torch_tokens_per_s(data, cfg, args.steps, args.warmup, sdpa, graph, precision))
                torch.cuda.empty_cache()  # each peer starts from the same free memory
            print(f"rep {rep}: " + ", ".join(f"{k} {v[-1]:.0f}" for k, v in results.items()) + " tokens/s",
                  file=sys.stderr)

    ours = statistics.median(results["tandem"])
    rows = {k: {"tokens_per_s": statistics.median(v), "runs": v} for k, v in results.items()}
    ratios = {f"tandem_over_{name}": ours / rows[name]["tokens_per_s"] for name, _, _ in PEERS}
    for name, _, _ in PEERS:
        print(f"tandem {ours:10.0f} tokens/s, {name:17s} {rows[name]['tokens_per_s']:10.0f} tokens/s, "
              f"ratio {ratios['tandem_over_' + name]:.2f}x", file=sys.stderr)
    result = {"benchmark": "gpt_vs_torch", "device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "precision": precision, "model": {k: getattr(cfg, k) for k in ("n_layer", "n_head", "n_embd", "seq_len",
                                                                        "vocab", "batch")},
              "steps": args.steps, "warmup": args.warmup, "reps": args.reps, "rows": rows, "ratios": ratios}
    write_result(result, args.out)


if __name__ == "__main__":
    main()
