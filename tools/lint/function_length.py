#!/usr/bin/env python3
"""Fails when a C++ or CUDA function under the given folders is longer than a limit.

A function that does one thing fits on a screen or two; the training loop grew to
660 lines before anyone looked, so the limit is checked with the tests. Functions
are found by their braces after comments and string literals are blanked: a `{`
whose preceding text (since the last `;`, `{` or `}`) holds a `)` and is neither a
control statement nor a class, struct, namespace or enum opens a function; lambdas
and blocks inside count towards the function that holds them.

usage: tools/lint/function_length.py [--max 120] [--top N] DIR...
"""
import argparse
import os
import re
import sys

SOURCE = (".cpp", ".hpp", ".cu", ".cuh", ".h", ".cc")
CONTROL = re.compile(r"^(if|for|while|switch|do|else|catch|try)\b")
SCOPE = re.compile(r"\b(class|struct|namespace|enum|union)\b[^()]*$")


def blank(src):
    """Comments and literals replaced by blanks, newlines kept (line numbers hold)."""
    keep_lines = lambda m: "\n" * m.group(0).count("\n")
    src = re.sub(r"/\*.*?\*/", keep_lines, src, flags=re.S)
    src = re.sub(r"//[^\n]*", "", src)
    src = re.sub(r'R"([^(]*)\(.*?\)\1"', lambda m: '""' + keep_lines(m), src, flags=re.S)
    src = re.sub(r'"(\\.|[^"\\\n])*"', '""', src)
    src = re.sub(r"'(\\.|[^'\\\n])*'", "''", src)
    return src


def functions(path):
    """(length in lines, first line, head text) of every function in the file."""
    text = blank(open(path, encoding="utf-8", errors="replace").read())
    found, stack, head, line = [], [], "", 1
    for ch in text:
        if ch == "\n":
            line += 1
        if ch == "{":
            h = head.strip()
            last = h.split("\n")[-1].strip()
            in_function = any(kind == "fn" for kind, _, _ in stack)
            if not in_function and ")" in h and not SCOPE.search(h) and not CONTROL.match(last):
                stack.append(("fn", line, " ".join(h.split())[-100:]))
            else:
                stack.append(("block", line, ""))
            head = ""
        elif ch == "}":
            if stack:
                kind, start, name = stack.pop()
                if kind == "fn":
                    found.append((line - start + 1, start, name))
            head = ""
        elif ch == ";":
            head = ""
        else:
            head += ch
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--max", type=int, default=120)
    ap.add_argument("--top", type=int, default=0, help="also list the N longest functions")
    args = ap.parse_args()
    rows = []
    for root in args.dirs:
        for folder, _, names in os.walk(root):
            for name in sorted(names):
                if name.endswith(SOURCE):
                    path = os.path.join(folder, name)
                    rows += [(n, path, start, head) for n, start, head in functions(path)]
    rows.sort(reverse=True)
    for n, path, start, head in rows[: args.top]:
        print(f"{n:5d}  {path}:{start}  {head}")
    long = [r for r in rows if r[0] > args.max]
    for n, path, start, head in long:
        print(f"{path}:{start}: a function of {n} lines (the limit is {args.max}): split it into functions of "
              f"one purpose each\n    {head}", file=sys.stderr)
    print(f"{len(rows)} functions checked, {len(long)} longer than {args.max} lines")
    return 1 if long else 0


if __name__ == "__main__":
    sys.exit(main())
