#!/usr/bin/env python3
"""The tokens data set end to end, as a nanoGPT or llm.c user brings token files.

tools/data/text_to_tokens.py writes a slice of Debian's fortunes as byte tokens,
once as nanoGPT's train.bin / val.bin and once as llm.c's shards (three training
shards, read through a glob). A tiny GPT trains 40 iterations on each, 2 workers on
a skewed fixed split: the two formats hold the same tokens but llm.c's shards cut
the stream in three, so the runs differ; each must learn (the validation loss falls
well below ln 256, where it starts). The nanogpt run is repeated on one worker: the
same losses, as the global sampler promises for any split; and on the text data set
reading the same bytes: the same windows, so the same losses. Then what a user gets
wrong: a vocabulary smaller than the tokens (the first batch stops the run, naming
the file, the offset and the token, and no rank hangs), and a nanoGPT file read as
data.format = 'llmc' (refused before any worker starts).

usage: test_token_files.py TANDEM_BINARY SCRATCH_DIR
"""
import json
import math
import os
import shutil
import subprocess
import sys

TANDEM, SCRATCH = sys.argv[1], sys.argv[2]
ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TOOL = os.path.join(ROOT, "tools", "data", "text_to_tokens.py")
TEXT = "/usr/share/games/fortunes"  # Debian's fortunes: a folder of text files


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def write_tokens(out, *extra):
    r = subprocess.run([sys.executable, TOOL, SLICE, "--out", out, *extra], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"text_to_tokens.py {' '.join(extra)} exited {r.returncode}: {r.stderr}")
    print(r.stdout.strip())


def run(name, train, val, *extra, expect_ok=True):
    out = os.path.join(SCRATCH, "runs", name)
    cmd = [TANDEM, "run", "scripts/experiments/gpt_tokens.lua", "--out", out, "--overwrite", "log_level=warn",
           "model_args={n_layer = 1, n_head = 2, n_embd = 32, dropout = 0}", "data.seq_len=32",
           "data.validation_windows=64", "global_batch=16", "stop.max_iterations=40", "eval_every=40",
           "eval_batch=32", "schedule.warmup_iterations=5", *extra]
    if train:
        cmd += [f"data.train={train}", f"data.validation={val}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    if expect_ok and r.returncode != 0:
        fail(f"run {name} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    if not expect_ok:
        return r
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    losses = []
    with open(os.path.join(out, "trace.jsonl")) as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("event") == "iteration" and rec.get("loss") is not None:
                losses.append(rec["loss"])
    return summary, losses


shutil.rmtree(SCRATCH, ignore_errors=True)
os.makedirs(SCRATCH)
if not os.path.exists(TEXT):
    fail(f"{TEXT} is missing: apt-get install fortunes (tools/install-deps.sh installs it)")
# A 300 kB slice: enough for 40 iterations, and quick to write.
SLICE = os.path.join(SCRATCH, "fortunes-slice.txt")
sys.path.insert(0, os.path.dirname(TOOL))
from text_to_tokens import read_text  # noqa: E402  (the folder's text files, as the text data set lists them)
with open(SLICE, "wb") as g:
    g.write(read_text([TEXT])[:300_000])

nano, llmc = os.path.join(SCRATCH, "nanogpt"), os.path.join(SCRATCH, "llmc")
write_tokens(nano)
write_tokens(llmc, "--format", "llmc", "--shards", "3")
for path, want in ((f"{nano}/train.bin", 2 * 270_000), (f"{llmc}/val.bin", 1024 + 2 * 30_000)):
    if os.path.getsize(path) != want:
        fail(f"{path} is {os.path.getsize(path)} bytes, expected {want}")

split = ["--workers", "2", "plan.kind=fixed", "plan.batches=5,11"]
s_nano, l_nano = run("nanogpt", f"{nano}/train.bin", f"{nano}/val.bin", *split)
s_llmc, l_llmc = run("llmc", f"{llmc}/train_*.bin", f"{llmc}/val.bin", *split)
s_one, l_one = run("nanogpt-one-worker", f"{nano}/train.bin", f"{nano}/val.bin")
for name, s, losses in (("nanogpt", s_nano, l_nano), ("llmc", s_llmc, l_llmc)):
    if s["iterations"] != 40:
        fail(f"{name}: {s['iterations']} iterations, expected 40")
    if not losses or abs(losses[0] - math.log(256)) > 0.3:
        fail(f"{name}: first loss {losses[:1]}, expected about ln 256 = {math.log(256):.3f}")
    if s["test_loss"] is None or s["test_loss"] > math.log(256) - 1.5:
        fail(f"{name}: validation loss {s['test_loss']} after 40 iterations, expected below "
             f"{math.log(256) - 1.5:.2f} (it starts at ln 256)")
    if "tokens_per_s" not in s:
        fail(f"{name}: summary.json has no tokens_per_s")
    print(f"{name}: loss {losses[0]:.3f} -> {losses[-1]:.3f}, validation {s['test_loss']:.3f}, "
          f"{s['tokens_per_s']:.0f} tokens/s")
if len(l_one) != len(l_nano) or any(abs(a - b) > 1e-4 * max(1.0, abs(a)) for a, b in zip(l_one, l_nano)):
    fail(f"the 5 + 11 split and one worker trained differently on the same token file:\n{l_nano}\n{l_one}")
print("one worker and a 5 + 11 split: the same losses")
# The same bytes as the text data set (its held-out tenth is the tool's): the same
# training windows in the same order, so the same losses.
s_text, l_text = run("text", None, None, "data.name=text", f"data.files={SLICE}",
                     "data.validation=0.1")
if len(l_text) != len(l_one) or any(abs(a - b) > 1e-6 * max(1.0, abs(a)) for a, b in zip(l_text, l_one)):
    fail(f"byte tokens and the text data set on the same bytes trained differently:\n{l_one}\n{l_text}")
print("nanoGPT byte tokens and the text data set on the same bytes: the same losses")

# A vocabulary smaller than the tokens: stopped at the first batch, named.
r = run("small-vocab", f"{nano}/train.bin", f"{nano}/val.bin", "data.vocab=100", *split, expect_ok=False)
text = r.stdout + r.stderr
if r.returncode == 0 or "outside data.vocab = 100" not in text or f"{nano}/train.bin" not in text \
        or "at byte offset" not in text:
    fail(f"data.vocab=100 on byte tokens: exit {r.returncode}, expected an error naming the file, offset and "
         f"token:\n{text[-3000:]}")
print("a token above data.vocab:", next(line for line in text.splitlines() if "outside data.vocab" in line).strip())

# A nanoGPT file read as llm.c's: refused before any worker starts.
r = run("wrong-format", f"{nano}/train.bin", f"{nano}/val.bin", "data.format=llmc", expect_ok=False)
text = r.stdout + r.stderr
if r.returncode == 0 or "llm.c's magic number 20240520" not in text:
    fail(f"data.format=llmc on a nanoGPT file: exit {r.returncode}:\n{text[-3000:]}")
if os.path.exists(os.path.join(SCRATCH, "runs", "wrong-format", "trace.jsonl")):
    fail("data.format=llmc on a nanoGPT file started training before it was refused")
print("PASS")
