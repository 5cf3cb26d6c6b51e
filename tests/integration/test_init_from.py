#!/usr/bin/env python3
"""init_from = 'FILE.safetensors': a model starts from a file's weights.

1. Hugging Face's GPT-2 layout: this test writes a tiny GPT-2 the way GPT2Model's
   model.safetensors names it (wte, wpe, h.<b>.*, ln_f; Conv1D weights [in, out]; the
   attention's mask buffer attn.bias; a 64-position wpe for a model whose context is
   32), from a PyTorch GPT (tools/golden/check_gpt_against_torch.py) with random
   weights. tandem loads it and evaluates it before its first step: its validation
   loss is PyTorch's on the same windows, to 1e-5 relative, and so is its token
   accuracy (but for near-ties); `tandem sample --logits` gives PyTorch's logits of
   a prompt, to 1e-5 relative, and its greedy continuation. The same file in
   float16 against PyTorch with the weights rounded to float16. The same file into a
   model whose token table is padded (models/gpt.lua: vocab_multiple) evaluates
   the same.
2. tandem's own params.safetensors: a GPT and an MLP trained a few steps with
   save_params = true start a second run, whose evaluation before its first step is
   the first run's final loss and accuracy; a model at its target already stops
   there, after no step.
3. Mistakes: a checkpoint of another model size (the first mismatch named, with what
   the model expected), a tensor missing or one too many (refused unless
   init_from_strict = false), a missing file (refused before any worker starts).

Runs under Debian's /usr/bin/python3 (python3-torch); skipped (exit 77) without torch.

usage: test_init_from.py TANDEM_BINARY SCRATCH_DIR
"""
import json
import os
import shutil
import struct
import subprocess
import sys

from torch_or_skip import ROOT, torch  # first: it may run the test again under Debian's python3
import numpy as np

TANDEM, SCRATCH = sys.argv[1], sys.argv[2]
from check_gpt_against_torch import GPT  # noqa: E402

TEXT = "/usr/share/games/fortunes/fortunes"
SEQ, VALIDATION, C, HEADS, LAYERS, CONTEXT = 32, 0.1, 32, 2, 2, 64
TIE = 1e-4
GPT_ARGS = [f"model_args.n_layer={LAYERS}", f"model_args.n_embd={C}", f"model_args.n_head={HEADS}",
            f"data.seq_len={SEQ}", f"data.files={TEXT}", "eval_batch=64"]


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def write_safetensors(path, tensors, dtype=np.float32):
    """tensors: name -> numpy array, written in the order given as dtype (float32 or float16)."""
    header, data = {}, b""
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype=dtype).tobytes()
        header[name] = {"dtype": "F32" if dtype == np.float32 else "F16", "shape": list(a.shape),
                        "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def run(name, experiment, extra, expect_ok=True):
    out = os.path.join(SCRATCH, name)
    cmd = [TANDEM, "run", experiment, "--out", out, "--overwrite", "log_level=info", "console=false"] + extra
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    if not expect_ok:
        return r
    if r.returncode != 0:
        fail(f"{name} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f), r.stdout + r.stderr


def start_eval(name, experiment, init, extra):
    """The evaluation a run from init_from makes before its first step (iteration 0 in
    trace.jsonl), and the run's log."""
    _, log = run(name, experiment, [f"init_from={init}", "stop.max_iterations=1"] + extra)
    with open(os.path.join(SCRATCH, name, "trace.jsonl")) as f:
        evals = [json.loads(line) for line in f if '"event":"eval"' in line]
    if not evals or evals[0]["iteration"] != 0:
        fail(f"{name}: no evaluation before the first step in trace.jsonl ({evals[:1]})")
    return evals[0], log


def validation_windows():
    text = np.frombuffer(open(TEXT, "rb").read(), np.uint8).astype(np.int64)
    train_tokens = len(text) - int(np.floor(len(text) * VALIDATION))
    starts = train_tokens + SEQ * np.arange((len(text) - train_tokens - 1) // SEQ)
    x = torch.from_numpy(np.stack([text[s:s + SEQ] for s in starts]))
    y = torch.from_numpy(np.stack([text[s + 1:s + SEQ + 1] for s in starts]))
    return x, y


def hugging_face_layout(model):
    """GPT2Model's state_dict names, Conv1D weights [in, out], the mask buffers kept."""
    out = {}
    t = model.transformer
    out["wte.weight"] = t.wte.weight.detach().numpy()
    out["wpe.weight"] = t.wpe.weight.detach().numpy()
    for b, block in enumerate(t.h):
        h = f"h.{b}."
        out[h + "ln_1.weight"], out[h + "ln_1.bias"] = block.ln_1.weight, block.ln_1.bias
        out[h + "attn.bias"] = torch.tril(torch.ones(CONTEXT, CONTEXT)).view(1, 1, CONTEXT, CONTEXT)
        for name, m in (("attn.c_attn", block.attn.c_attn), ("attn.c_proj", block.attn.c_proj),
                        ("mlp.c_fc", block.mlp.c_fc), ("mlp.c_proj", block.mlp.c_proj)):
            out[h + name + ".weight"] = m.weight.detach().t()  # Conv1D: [in, out]
            out[h + name + ".bias"] = m.bias
        out[h + "ln_2.weight"], out[h + "ln_2.bias"] = block.ln_2.weight, block.ln_2.bias
    out["ln_f.weight"], out["ln_f.bias"] = t.ln_f.weight, t.ln_f.bias
    return {k: (v.detach().numpy() if torch.is_tensor(v) else v) for k, v in out.items()}


def main():
    shutil.rmtree(SCRATCH, ignore_errors=True)
    os.makedirs(SCRATCH)

    # 1. Hugging Face's layout, against PyTorch on the same windows.
    torch.manual_seed(3)
    model = GPT(256, CONTEXT, C, HEADS, LAYERS)
    with torch.no_grad():  # PyTorch's initialisation, biases and norms moved off 0 and 1: a wrong offset shows
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    hf = os.path.join(SCRATCH, "gpt2-tiny.safetensors")
    write_safetensors(hf, hugging_face_layout(model))
    x, y = validation_windows()
    model.eval()
    with torch.no_grad():
        logits = model(x).view(-1, 256)  # positions 0..SEQ-1 of the 64: the crop tandem makes
    loss = float(torch.nn.functional.cross_entropy(logits, y.view(-1)))
    correct = int((logits.argmax(dim=1) == y.view(-1)).sum())
    top2 = logits.topk(2, dim=1).values
    ties = int(((top2[:, 0] - top2[:, 1]) <= TIE * top2[:, 0].abs().clamp(min=1.0)).sum())
    s, log = start_eval("hf", "scripts/experiments/gpt.lua", hf, GPT_ARGS)
    if "Hugging Face's GPT-2 layout" not in log or "the first 32 are used" not in log:
        fail(f"the log does not say how the file was read:\n{log[-2000:]}")
    got = round(s["test_accuracy"] * y.numel())
    print(f"Hugging Face layout: PyTorch loss {loss:.7f}, {correct} tokens right; tandem {s['test_loss']:.7f} before "
          f"its first step, {got} ({ties} near-ties)")
    if abs(loss - s["test_loss"]) > 1e-5 * loss:
        fail(f"tandem's validation loss {s['test_loss']} from the Hugging Face file, PyTorch's {loss}")
    if abs(correct - got) > ties:
        fail(f"tandem gets {got} tokens right from the Hugging Face file, PyTorch {correct}")

    # The logits themselves (tandem sample --logits), position by position, and a
    # greedy continuation: PyTorch's from the same file, to 1e-5 relative.
    prompt = x[0, :20]
    with torch.no_grad():
        want = model(prompt.view(1, -1))[0].numpy()
        greedy = prompt.clone()
        for _ in range(6):
            greedy = torch.cat([greedy, model(greedy.view(1, -1))[0, -1].argmax().view(1)])
    for label, extra in (("", []), (" (table padded to 300 rows)", ["model_args.vocab_multiple=100"])):
        npy = os.path.join(SCRATCH, "logits.npy")
        cmd = [TANDEM, "sample", "scripts/experiments/gpt.lua", f"init_from={hf}", *GPT_ARGS, *extra,
               "--prompt-tokens", ",".join(str(int(t)) for t in prompt), "--tokens", "6", "--temperature", "0",
               "--logits", npy, "--log-level", "warn"]
        r = subprocess.run(cmd, capture_output=True, timeout=300, cwd=ROOT)  # bytes: a byte model prints any
        if r.returncode != 0:
            fail(f"tandem sample exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
        got = np.load(npy)
        err = float(np.abs(got - want).max() / np.abs(want).max())
        if got.shape != want.shape or err > 1e-5:
            fail(f"tandem sample's logits{label}: shape {got.shape} (PyTorch {want.shape}), largest difference "
                 f"{err:.2e} of the largest logit")
        if r.stdout != bytes(int(t) for t in greedy) + b"\n":
            fail(f"tandem sample{label} printed {r.stdout!r}, PyTorch's prompt and greedy continuation are "
                 f"{bytes(int(t) for t in greedy)!r}")
        print(f"tandem sample{label}: the prompt's logits within {err:.1e} of PyTorch's (largest difference over the "
              "largest logit), the same greedy continuation")

    # The same file into a model whose token table is padded (vocab_multiple = 100:
    # 300 rows for 256 tokens, as GPT-2's 50257 become 50304): the loaded rows and
    # zero padding, never predicted, evaluate to the same loss.
    s_pad, log = start_eval("hf-padded", "scripts/experiments/gpt.lua", hf, GPT_ARGS + ["model_args.vocab_multiple=100"])
    if "vocab 256 padded to 300" not in log:
        fail(f"the log does not say the file's 256 tokens went into a table of 300 rows:\n{log[-2000:]}")
    if abs(loss - s_pad["test_loss"]) > 1e-5 * loss or abs(round(s_pad["test_accuracy"] * y.numel()) - correct) > ties:
        fail(f"into a padded table: tandem's loss {s_pad['test_loss']}, accuracy {s_pad['test_accuracy']}; "
             f"PyTorch's {loss}, {correct} right")
    print(f"into a table padded to 300 rows: tandem {s_pad['test_loss']:.7f}")

    # GPT2LMHeadModel's file: lm_head.weight beside wte, the same values (tied).
    tied = hugging_face_layout(model)
    tied["lm_head.weight"] = tied["wte.weight"].copy()
    with_head = os.path.join(SCRATCH, "gpt2-tiny-head.safetensors")
    write_safetensors(with_head, tied)
    s_head, _ = start_eval("hf-head", "scripts/experiments/gpt.lua", with_head, GPT_ARGS)
    if s_head["test_loss"] != s["test_loss"]:
        fail(f"the file with the tied lm_head evaluates to {s_head['test_loss']}, without it {s['test_loss']}")
    tied["lm_head.weight"][0, 0] += 1.0  # untied values: a tensor the tied model has no place for
    write_safetensors(with_head, tied)
    r = run("hf-head-untied", "scripts/experiments/gpt.lua", [f"init_from={with_head}"] + GPT_ARGS, False)
    untied = "holds lm_head.weight [256,32], which model 'gpt' has no place for"
    if r.returncode == 0 or untied not in r.stdout + r.stderr:
        fail(f"an lm_head.weight unlike wte in a tied model: exit {r.returncode}:\n{(r.stdout + r.stderr)[-1500:]}")
    print("lm_head.weight equal to wte passed over for the tied head; one that differs refused")

    # The same file in float16 (as many checkpoints on the hub are): PyTorch with the
    # weights rounded to float16 gets the loss tandem gets from reading them.
    half = os.path.join(SCRATCH, "gpt2-tiny-f16.safetensors")
    write_safetensors(half, hugging_face_layout(model), np.float16)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.half().float())
        loss16 = float(torch.nn.functional.cross_entropy(model(x).view(-1, 256), y.view(-1)))
    s16, _ = start_eval("hf-f16", "scripts/experiments/gpt.lua", half, GPT_ARGS)
    print(f"the same in float16: PyTorch loss {loss16:.7f}, tandem {s16['test_loss']:.7f}")
    if abs(loss16 - s16["test_loss"]) > 1e-5 * loss16:
        fail(f"tandem's validation loss {s16['test_loss']} from the float16 file, PyTorch's {loss16}")

    # 2. tandem's own params.safetensors: a GPT and an MLP continue where they ended.
    for name, experiment, extra in (("gpt", "scripts/experiments/gpt.lua", GPT_ARGS + ["eval_every=20"]),
                                    ("mlp", "scripts/experiments/quickstart.lua", ["eval_every=20"])):
        first, _ = run(f"{name}-trained", experiment, extra + ["stop.max_iterations=20", "save_params=true"])
        saved = os.path.join(SCRATCH, f"{name}-trained", "params.safetensors")
        again, _ = start_eval(f"{name}-again", experiment, saved, extra)
        for key in ("test_loss", "test_accuracy"):
            if abs(first[key] - again[key]) > 1e-5 * max(1.0, abs(first[key])):  # the trace: 6 digits
                fail(f"{name}: {key} {again[key]} from its own params.safetensors, {first[key]} when it was written")
        print(f"{name}: params.safetensors loads back: test loss {again['test_loss']:.6f}, accuracy "
              f"{again['test_accuracy']:.4f}")
    # At its target already: evaluated, and stopped before any step.
    done, _ = run("at-target", "scripts/experiments/quickstart.lua",
                  [f"init_from={saved}", "stop.target_accuracy=0.1", "eval_every=20"])
    if done["iterations"] != 0 or done["stop_reason"] != "target_accuracy":
        fail(f"a model at its target trained on: {done['iterations']} iterations, stop {done['stop_reason']}")

    # 3. Mistakes.
    r = run("bigger", "scripts/experiments/gpt.lua",
            [f"init_from={hf}", "model_args.n_embd=64"] + [a for a in GPT_ARGS if "n_embd" not in a], False)
    text = r.stdout + r.stderr
    if r.returncode == 0 or "tensor 'wte.weight' is [256,32] where model 'gpt' has transformer.wte.weight [256,64]" \
            not in text:
        fail(f"a checkpoint of another width: exit {r.returncode}:\n{text[-2000:]}")
    print("another model size:", next(l for l in text.splitlines() if "init_from:" in l).strip()[:160])
    tensors = hugging_face_layout(model)
    del tensors["h.1.ln_2.bias"]
    tensors["h.2.ln_1.weight"] = np.ones(C, np.float32)
    partial = os.path.join(SCRATCH, "partial.safetensors")
    write_safetensors(partial, tensors)
    r = run("strict", "scripts/experiments/gpt.lua", [f"init_from={partial}"] + GPT_ARGS, False)
    text = r.stdout + r.stderr
    if r.returncode == 0 or "has no tensor transformer.h.1.ln_2.bias [32]" not in text:
        fail(f"a missing tensor: exit {r.returncode}:\n{text[-2000:]}")
    del tensors["h.2.ln_1.weight"]
    tensors["h.1.ln_2.bias"] = np.zeros(C, np.float32)
    tensors["h.2.ln_1.weight"] = np.ones(C, np.float32)
    write_safetensors(partial, tensors)
    r = run("extra", "scripts/experiments/gpt.lua", [f"init_from={partial}"] + GPT_ARGS, False)
    text = r.stdout + r.stderr
    if r.returncode == 0 or "holds h.2.ln_1.weight [32], which model 'gpt' has no place for" not in text:
        fail(f"an extra tensor: exit {r.returncode}:\n{text[-2000:]}")
    _, log = run("lenient", "scripts/experiments/gpt.lua",
                 [f"init_from={partial}", "init_from_strict=false", "stop.max_iterations=1"] + GPT_ARGS)
    if "1 in the file not used (first: h.2.ln_1.weight [32])" not in log:
        fail(f"init_from_strict=false does not list what it passed over:\n{log[-2000:]}")
    # Damaged or hostile headers: refused with what is wrong, never read past the file.
    for label, header, want in (
            ("negative shape", {"wte.weight": {"dtype": "F32", "shape": [-1, 32], "data_offsets": [0, 4]}},
             "has shape value -1"),
            ("float offsets", {"wte.weight": {"dtype": "F32", "shape": [1], "data_offsets": [0.5, 4]}},
             "has data_offsets value 0.5"),
            ("past the end", {"wte.weight": {"dtype": "F32", "shape": [256, 32], "data_offsets": [0, 32768]}},
             "outside the file's 16 bytes of data"),
            ("huge shape", {"wte.weight": {"dtype": "F32", "shape": [2 ** 40, 2 ** 40], "data_offsets": [0, 16]}},
             "outside the file's 16 bytes of data")):
        bad = os.path.join(SCRATCH, "bad.safetensors")
        text = json.dumps(header).encode()
        with open(bad, "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text + bytes(16))
        r = run("bad", "scripts/experiments/gpt.lua", [f"init_from={bad}"] + GPT_ARGS, False)
        if r.returncode == 0 or want not in r.stdout + r.stderr:
            fail(f"a header with a {label}: exit {r.returncode}, expected '{want}':\n{(r.stdout + r.stderr)[-1500:]}")
    with open(bad, "wb") as f:
        f.write(struct.pack("<Q", 2 ** 64 - 1) + b"{}")
    r = run("bad", "scripts/experiments/gpt.lua", [f"init_from={bad}"] + GPT_ARGS, False)
    if r.returncode == 0 or "-byte header in a 10-byte file" not in r.stdout + r.stderr:
        fail(f"a header length of 2^64 - 1: exit {r.returncode}:\n{(r.stdout + r.stderr)[-1500:]}")
    print("damaged headers refused: negative and huge shapes, float offsets, data past the end, a 2^64 header")
    r = run("missing", "scripts/experiments/gpt.lua", [f"init_from={SCRATCH}/none.safetensors"] + GPT_ARGS, False)
    text = r.stdout + r.stderr
    if r.returncode == 0 or "none.safetensors' cannot be read" not in text \
            or os.path.exists(os.path.join(SCRATCH, "missing")):
        fail(f"a missing file: exit {r.returncode}, expected a refusal before any run directory:\n{text[-2000:]}")
    print("PASS")


main()
