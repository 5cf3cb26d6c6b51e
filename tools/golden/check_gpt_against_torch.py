#!/usr/bin/python3
"""Replays tests/unit/test_golden_gpt.cpp's run in PyTorch and compares the losses.

The golden GPT test, run with TANDEM_GOLDEN_DUMP=DIR, writes the model's size
(config.txt), its initial parameters (params.f32, tandem's flat layout, below) and
every step's batch (batches.txt: per step one line of input tokens and one of
targets). This script builds the same GPT in PyTorch from those parameters, trains
the same steps with torch.optim.AdamW (two parameter groups: no weight decay for
biases and layer norms) and torch.nn.utils.clip_grad_norm_, and prints both loss
lists. The largest difference must stay below 1e-4.

tandem's flat layout (engine/nn/embedding.hpp, transformer_block.hpp):
  wte [vocab, C], wpe [seq_len, C],
  per block: ln1.weight [C], ln1.bias [C], c_attn.weight [3C, C], c_attn.bias [3C],
             attn c_proj.weight [C, C], c_proj.bias [C], ln2.weight [C], ln2.bias [C],
             c_fc.weight [4C, C], c_fc.bias [4C], mlp c_proj.weight [C, 4C], c_proj.bias [C],
  ln_f.weight [C], ln_f.bias [C]; the output projection is tied to wte.

usage (Debian's python3 with python3-torch):
  TANDEM_GOLDEN_DUMP=/tmp/g build/tests/unit_tests --run_test=test_golden_gpt && /usr/bin/python3 tools/golden/check_gpt_against_torch.py /tmp/g
"""
import math
import re
import sys

import numpy as np
import torch
import torch.nn.functional as F


class CausalSelfAttention(torch.nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.heads = heads
        self.c_attn = torch.nn.Linear(c, 3 * c)
        self.c_proj = torch.nn.Linear(c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        shape = (b, t, self.heads, c // self.heads)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y)


class MLP(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = torch.nn.Linear(c, 4 * c)
        self.c_proj = torch.nn.Linear(4 * c, c)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(torch.nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.ln_1 = torch.nn.LayerNorm(c)
        self.attn = CausalSelfAttention(c, heads)
        self.ln_2 = torch.nn.LayerNorm(c)
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(torch.nn.Module):
    """nanoGPT's module names (its state_dict keys are tandem's params.safetensors
    names: engine/train/record/safetensors.hpp), the output projection tied to wte."""

    def __init__(self, vocab, seq_len, c, heads, layers):
        super().__init__()
        self.transformer = torch.nn.ModuleDict(dict(
            wte=torch.nn.Embedding(vocab, c), wpe=torch.nn.Embedding(seq_len, c),
            h=torch.nn.ModuleList(Block(c, heads) for _ in range(layers)), ln_f=torch.nn.LayerNorm(c)))
        self.lm_head = torch.nn.Linear(c, vocab, bias=False)
        self.lm_head.weight = self.transformer.wte.weight

    def ordered(self):
        """The parameters in tandem's flat order."""
        t = self.transformer
        out = [t.wte.weight, t.wpe.weight]
        for b in t.h:
            for m in (b.ln_1, b.attn.c_attn, b.attn.c_proj, b.ln_2, b.mlp.c_fc, b.mlp.c_proj):
                out += [m.weight, m.bias]
        return out + [t.ln_f.weight, t.ln_f.bias]

    def forward(self, idx):
        t = self.transformer
        x = t.wte(idx) + t.wpe(torch.arange(idx.shape[1]))
        for b in t.h:
            x = b(x)
        return self.lm_head(t.ln_f(x))


def main(dump):
    cfg = dict(line.split() for line in open(f"{dump}/config.txt"))
    vocab, seq_len, c = int(cfg["vocab"]), int(cfg["seq_len"]), int(cfg["n_embd"])
    heads, layers, batch = int(cfg["n_head"]), int(cfg["n_layer"]), int(cfg["batch"])
    lr, wd, clip = float(cfg["lr"]), float(cfg["weight_decay"]), float(cfg["clip_grad_norm"])
    betas = (float(cfg["beta1"]), float(cfg["beta2"]))
    torch.manual_seed(0)
    model = GPT(vocab, seq_len, c, heads, layers)
    flat = torch.from_numpy(np.fromfile(f"{dump}/params.f32", dtype=np.float32))
    offset = 0
    with torch.no_grad():
        for p in model.ordered():
            p.copy_(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
    assert offset == flat.numel(), f"parameter layout mismatch: {offset} read, {flat.numel()} written"
    decay = [p for p in model.ordered() if p.dim() >= 2]
    no_decay = [p for p in model.ordered() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=betas, eps=float(cfg["eps"]))
    lines = open(f"{dump}/batches.txt").read().split("\n")
    losses = []
    for step in range(len(lines) // 2):
        x = torch.tensor([int(v) for v in lines[2 * step].split()]).view(batch, -1)
        y = torch.tensor([int(v) for v in lines[2 * step + 1].split()]).view(batch, -1)
        opt.zero_grad()
        loss = F.cross_entropy(model(x).view(-1, vocab), y.view(-1))
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        losses.append(loss.item())
    print("torch losses: " + ", ".join(f"{v:.6f}" for v in losses))
    src = open("tests/unit/test_golden_gpt.cpp").read()
    recorded = [float(v) for v in re.search(r"expected = \{([^}]*)\}", src).group(1).split(",")]
    worst = max(abs(a - b) for a, b in zip(losses, recorded))
    print("recorded:     " + ", ".join(f"{v:.6f}" for v in recorded))
    print(f"largest difference {worst:.2e}")
    sys.exit(0 if worst < 1e-4 and len(losses) == len(recorded) else 1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/golden-gpt")
