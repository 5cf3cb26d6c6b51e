#!/usr/bin/env python3
"""Writes text files as token files that tandem's `tokens` data set reads, one token
per byte (vocab 256: no tokenizer, nothing downloaded), in either format:

  nanogpt  raw little-endian uint16 tokens (what nanoGPT's prepare.py writes with
           np.memmap: train.bin, val.bin)
  llmc     llm.c's shards: a header of 256 int32 (magic 20240520, version 1, the
           token count), then the uint16 tokens

The files are concatenated in the order given; the last --validation fraction of the
bytes becomes the validation split. --shards N splits the training part into N files
(OUT/train_000.bin ...) to try globs.

  tools/data/text_to_tokens.py /usr/share/games/fortunes --out /tmp/fortunes-tokens
  tandem run scripts/experiments/gpt_tokens.lua data.train=/tmp/fortunes-tokens/train.bin \\
      data.validation=/tmp/fortunes-tokens/val.bin

Prints what it wrote, and the data keys to train on it (vocab = 256).
"""
import argparse
import os
import struct
import sys

LLMC_MAGIC = 20240520
LLMC_VERSION = 1
LLMC_HEADER_INTS = 256


def read_text(paths):
    """The bytes of the files given (a folder: its regular files, sorted by name)."""
    data = bytearray()
    for p in paths:
        if os.path.isdir(p):
            names = sorted(n for n in os.listdir(p) if not n.startswith(".") and not n.endswith((".dat", ".u8")))
            files = [os.path.join(p, n) for n in names
                     if os.path.isfile(os.path.join(p, n)) and not os.path.islink(os.path.join(p, n))]
        else:
            files = [p]
        for f in files:
            with open(f, "rb") as fh:
                data += fh.read()
    return bytes(data)


def encode(tokens_bytes):
    """Bytes as uint16 little-endian tokens."""
    out = bytearray(2 * len(tokens_bytes))
    out[0::2] = tokens_bytes  # low byte: the token; high byte stays 0
    return bytes(out)


def write_split(path, tokens_bytes, fmt):
    body = encode(tokens_bytes)
    with open(path, "wb") as f:
        if fmt == "llmc":
            header = [0] * LLMC_HEADER_INTS
            header[0], header[1], header[2] = LLMC_MAGIC, LLMC_VERSION, len(tokens_bytes)
            f.write(struct.pack(f"<{LLMC_HEADER_INTS}i", *header))
        f.write(body)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="+", help="text files or folders of them")
    ap.add_argument("--out", required=True, help="folder for the token files (made if missing)")
    ap.add_argument("--format", choices=["nanogpt", "llmc"], default="nanogpt")
    ap.add_argument("--validation", type=float, default=0.1, help="fraction held out at the end (default 0.1)")
    ap.add_argument("--shards", type=int, default=1, help="training shards (default 1: train.bin)")
    args = ap.parse_args()
    if not 0 < args.validation < 1:
        sys.exit("text_to_tokens.py: --validation must be between 0 and 1")
    if args.shards < 1:
        sys.exit("text_to_tokens.py: --shards must be 1 or more")
    for p in args.inputs:
        if not os.path.exists(p):
            sys.exit(f"text_to_tokens.py: '{p}' does not exist")
    text = read_text(args.inputs)
    if len(text) < 2:
        sys.exit("text_to_tokens.py: the inputs hold fewer than 2 bytes")
    cut = len(text) - max(1, int(len(text) * args.validation))
    os.makedirs(args.out, exist_ok=True)
    written = []
    train = text[:cut]
    if args.shards == 1:
        written.append(write_split(os.path.join(args.out, "train.bin"), train, args.format))
        train_key = os.path.join(args.out, "train.bin")
    else:
        step = -(-len(train) // args.shards)
        for k in range(args.shards):
            written.append(write_split(os.path.join(args.out, f"train_{k:03d}.bin"), train[k * step:(k + 1) * step],
                                       args.format))
        train_key = os.path.join(args.out, "train_*.bin")
    written.append(write_split(os.path.join(args.out, "val.bin"), text[cut:], args.format))
    for w in written:
        print(f"wrote {w} ({os.path.getsize(w)} bytes, {args.format})")
    print(f"{len(train)} training and {len(text) - cut} validation tokens; train with:")
    print(f"  data.name=tokens data.vocab=256 data.train={train_key} data.validation={os.path.join(args.out, 'val.bin')}")


if __name__ == "__main__":
    main()
