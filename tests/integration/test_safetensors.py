#!/usr/bin/env python3
"""params.safetensors (save_params = true) loads into PyTorch's equivalent model, which
then gets tandem's test accuracy.

Three short runs on Fashion-MNIST: the MLP 784-256-256-10 on 2 workers, LeNet with
batch norm (conv2d, batchnorm with running statistics, maxpool2d, linear) and a ResNet
(residual blocks, their body and strided shortcut named "<i>.body.<j>." and
"<i>.shortcut.<j>."). For each:
the header is a multiple of 8 bytes and names every tensor once, with no gap or
overlap in the data; the parameters, in file order, are params.f32; the nn.Sequential
built from the file's layer list (tools/golden/safetensors_model.py) takes the tensors
with load_state_dict(strict=True), and evaluated on the 10,000 test images (normalised
as tandem does) gets the count of correct predictions tandem's summary says, exactly
but for samples whose two best logits lie within float rounding of each other (both
engines sum in float32 in different orders; such a sample may go either way, and the
test allows at most that many). Then a tiny GPT on Debian's fortunes: its tensors,
named as nanoGPT's, load into tools/golden's GPT (the tied head given wte), which gets
tandem's validation loss (to 1e-4 relative) and token accuracy (as above).

Runs under Debian's /usr/bin/python3 (python3-torch); skipped (exit 77) without torch.

usage: test_safetensors.py TANDEM_BINARY SCRATCH_DIR
"""
import gzip
import json
import os
import shutil
import subprocess
import sys

from torch_or_skip import ROOT, torch  # first: it may run the test again under Debian's python3
import numpy as np

TANDEM, SCRATCH = sys.argv[1], sys.argv[2]
from safetensors_model import read_safetensors, sequential  # noqa: E402
from check_gpt_against_torch import GPT  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"
TEXT = "/usr/share/games/fortunes/fortunes"  # Debian's fortunes, as the GPT experiments read
SEQ, VALIDATION = 32, 0.1
MEAN, STD = np.float32(0.2860), np.float32(0.3530)  # engine/data/fashion_mnist.hpp
TIE = 1e-4  # two logits closer than this (relative to the larger) may order either way


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def test_set():
    with gzip.open(f"{DATA}/t10k-images-idx3-ubyte.gz") as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(f"{DATA}/t10k-labels-idx1-ubyte.gz") as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    x = (images.astype(np.float32) / np.float32(255.0) - MEAN) / STD
    return torch.from_numpy(x), torch.from_numpy(labels.astype(np.int64))


def run(name, experiment, extra):
    out = os.path.join(SCRATCH, name)
    shutil.rmtree(out, ignore_errors=True)
    cmd = [TANDEM, "run", experiment, "log_level=warn", "save_params=true", "--out", out] + extra
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return out


def check_layout(out):
    path = os.path.join(out, "params.safetensors")
    blob = open(path, "rb").read()
    n = int.from_bytes(blob[:8], "little")
    if n % 8:
        fail(f"{path}: header of {n} bytes, not a multiple of 8")
    header = json.loads(blob[8:8 + n])
    spans = sorted(tuple(t["data_offsets"]) for k, t in header.items() if k != "__metadata__")
    if spans[0][0] != 0 or spans[-1][1] != len(blob) - 8 - n or any(a[1] != b[0] for a, b in zip(spans, spans[1:])):
        fail(f"{path}: the tensors' data leave gaps or overlap: {spans}")
    tensors, _ = read_safetensors(path)
    params = [k for k in sorted(tensors, key=lambda k: header[k]["data_offsets"][0])
              if k.endswith(".weight") or k.endswith(".bias")]
    flat = np.concatenate([tensors[k].ravel() for k in params])
    if not np.array_equal(flat, np.fromfile(os.path.join(out, "params.f32"), dtype=np.float32)):
        fail(f"{path}: the parameters in file order are not params.f32")
    return tensors


def check_accuracy(name, out, x, y):
    model, _ = sequential(os.path.join(out, "params.safetensors"))
    model.eval()
    with torch.no_grad():
        logits = model(x)  # [N, 1, 28, 28]: the MLP begins with its flatten
    correct = int((logits.argmax(dim=1) == y).sum())
    top2 = logits.topk(2, dim=1).values
    ties = int(((top2[:, 0] - top2[:, 1]) <= TIE * top2[:, 0].abs().clamp(min=1.0)).sum())
    summary = json.load(open(os.path.join(out, "summary.json")))
    want = round(summary["test_accuracy"] * len(y))
    print(f"{name}: torch {correct} correct of {len(y)}, tandem {want} ({ties} near-ties)")
    if abs(correct - want) > ties:
        fail(f"{name}: PyTorch's model gets {correct} of {len(y)} right, tandem's summary {want}")
    return model


def check_gpt(out):
    """nanoGPT's names: the GPT of tools/golden/check_gpt_against_torch.py loads them, the
    tied head given wte; on the validation windows (engine/data/text_corpus.hpp: the last
    10% of the text, windows of SEQ bytes without overlap) it gets tandem's loss and token
    accuracy."""
    tensors, meta = read_safetensors(os.path.join(out, "params.safetensors"))
    if "lm_head.weight" in tensors:
        fail("the tied lm_head was written beside wte")
    layers = json.loads(meta["layers"])
    c, heads = int(layers[0]["args"]["n_embd"]), int(layers[1]["args"]["n_head"])
    vocab, seq_len = tensors["transformer.wte.weight"].shape[0], tensors["transformer.wpe.weight"].shape[0]
    model = GPT(vocab, seq_len, c, heads, len(layers) - 3)
    state = {k: torch.from_numpy(v) for k, v in tensors.items()}
    state["lm_head.weight"] = state["transformer.wte.weight"]  # tied: the same tensor
    model.load_state_dict(state, strict=True)
    model.eval()
    text = np.frombuffer(open(TEXT, "rb").read(), np.uint8).astype(np.int64)
    train_tokens = len(text) - int(np.floor(len(text) * VALIDATION))
    windows = (len(text) - train_tokens - 1) // SEQ
    starts = train_tokens + SEQ * np.arange(windows)
    x = torch.from_numpy(np.stack([text[s:s + SEQ] for s in starts]))
    y = torch.from_numpy(np.stack([text[s + 1:s + SEQ + 1] for s in starts]))
    with torch.no_grad():
        logits = model(x).view(-1, vocab)
    loss = float(torch.nn.functional.cross_entropy(logits, y.view(-1)))
    correct = int((logits.argmax(dim=1) == y.view(-1)).sum())
    top2 = logits.topk(2, dim=1).values
    ties = int(((top2[:, 0] - top2[:, 1]) <= TIE * top2[:, 0].abs().clamp(min=1.0)).sum())
    summary = json.load(open(os.path.join(out, "summary.json")))
    want = round(summary["test_accuracy"] * y.numel())
    print(f"gpt: torch loss {loss:.6f}, {correct} of {y.numel()} tokens; tandem {summary['test_loss']:.6f}, {want} "
          f"({ties} near-ties)")
    if abs(loss - summary["test_loss"]) > 1e-4 * summary["test_loss"]:
        fail(f"gpt: PyTorch's validation loss {loss} against tandem's {summary['test_loss']}")
    if abs(correct - want) > ties:
        fail(f"gpt: PyTorch's model gets {correct} tokens right, tandem's summary {want}")


def main():
    os.makedirs(SCRATCH, exist_ok=True)
    x, y = test_set()
    mlp = run("mlp", "scripts/experiments/quickstart.lua",
              ["--workers", "2", "stop.max_iterations=150", "eval_every=150"])
    tensors = check_layout(mlp)
    shapes = {k: list(v.shape) for k, v in tensors.items()}
    want = {"1.weight": [256, 784], "1.bias": [256], "3.weight": [256, 256], "3.bias": [256],
            "5.weight": [10, 256], "5.bias": [10]}
    if shapes != want:
        fail(f"MLP tensors {shapes}, expected {want}")
    check_accuracy("mlp", mlp, x, y)

    lenet = run("lenet_bn", "scripts/experiments/lenet.lua",
                ["model_args.batchnorm=true", "stop.max_iterations=60", "eval_every=60"])
    tensors = check_layout(lenet)
    if tensors["1.num_batches_tracked"].item() != 60 or tensors["1.running_var"].shape != (6,):
        fail(f"LeNet's batch norm: num_batches_tracked {tensors['1.num_batches_tracked']}, running_var "
             f"{tensors['1.running_var'].shape}")
    if not np.all(tensors["1.running_var"] > 0) or np.all(tensors["1.running_var"] == 1.0):
        fail("LeNet's batch norm running variance was not trained")
    check_accuracy("lenet-bn", lenet, x, y)

    # A ResNet (residual blocks: body and shortcut, batch norm throughout).
    resnet = run("resnet", "scripts/experiments/resnet.lua",
                 ["model_args.width=4", "stop.max_iterations=40", "eval_every=40", "stop.target_accuracy=1"])
    tensors = check_layout(resnet)
    for name in ("3.body.0.weight", "3.body.1.running_var", "3.body.3.weight", "4.shortcut.0.weight",
                 "4.shortcut.1.running_mean"):
        if name not in tensors:
            fail(f"ResNet tensor {name} missing; the file names {sorted(tensors)[:12]}...")
    check_accuracy("resnet", resnet, x, y)

    gpt = run("gpt", "scripts/experiments/gpt.lua",
              ["model_args.n_layer=2", "model_args.n_embd=32", "model_args.n_head=2", f"data.seq_len={SEQ}",
               f"data.validation={VALIDATION}", f"data.files={TEXT}", "stop.max_iterations=60", "eval_every=60",
               "schedule.warmup_iterations=5"])
    check_gpt(gpt)
    print("ok")


main()
