#!/usr/bin/env python3
"""tandem report: one self-contained HTML page (figures embedded) from one or more run
directories, and the comparison table on stdout.

usage: report.py RUN_DIR [RUN_DIR ...] [--out FILE.html] [--target ACC] [--title T] [--json FILE]

The page has: a comparison table (samples/s, ideal, efficiency, idle share, time to
accuracy, final accuracy, policy cost, plan changes); throughput against the ideal
over time; loss and test accuracy over time with the time to target marked; per
worker compute/communication/idle over iterations (panels up to 16 workers, heatmaps
above); local batch per worker with the policy's decisions and their reasons; and how
each quantity is computed. Several runs are overlaid where a plot allows it and
shown one after the other where it does not.

Default output: RUN_DIR/report.html for one run, ./report.html for several.
--target ACC: the accuracy for time to accuracy (default: the runs' stop.target_accuracy).
--json FILE: also write the comparison rows as JSON (for scripts and tests).
--check: exit 0 if the plotting dependencies import (after the fallback below), else 3.

Figures: matplotlib (Debian's python3-matplotlib), Agg backend, no display needed.
Where the python3 on PATH cannot import it (a pyenv or venv interpreter beside
Debian's), the script runs itself again under /usr/bin/python3 if that one can.
Exit status: 0 written; 2 bad arguments or a run directory that is missing, empty or
not a run; 3 matplotlib missing; 1 anything else.
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SYSTEM_PYTHON = "/usr/bin/python3"
REEXEC_ENV = "TANDEM_REPORT_REEXEC"


def fail(msg, code=2):
    print(f"report: {msg}", file=sys.stderr)
    sys.exit(code)


def check_run_dir(path):
    """The problem with `path` as a run directory, or None; the standard library only."""
    if not os.path.exists(path):
        return f"run directory '{path}' does not exist"
    if not os.path.isdir(path):
        return f"'{path}' is not a directory (a run directory holds config.json, summary.json and trace.jsonl)"
    trace = os.path.join(path, "trace.jsonl")
    if not os.path.isfile(trace):
        below = runs_below(path)
        if below:
            return (f"'{path}' is not a run directory but holds {len(below)} below it (e.g. '{below[0]}'): "
                    f"give those, e.g. {os.path.join(path, '*') if os.path.dirname(below[0]) == path.rstrip('/') else os.path.join(path, '*', '*')}")
        found = sorted(os.listdir(path))
        return (f"'{path}' is not a tandem run directory: it has no trace.jsonl (a run writes config.json, "
                f"summary.json and trace.jsonl there; found {', '.join(found[:8]) + (' ...' if len(found) > 8 else '') if found else 'nothing: the directory is empty'})")
    if os.path.getsize(trace) == 0:
        return f"'{trace}' is empty: the run stopped before its first iteration was traced"
    return None


def runs_below(path, depth=2):
    """Run directories (holding a trace.jsonl) up to `depth` levels below `path`."""
    found, level = [], [path.rstrip("/") or "/"]
    for _ in range(depth):
        nxt = []
        for d in level:
            try:
                subs = sorted(e.path for e in os.scandir(d) if e.is_dir())
            except OSError:
                continue
            for sub in subs:
                (found if os.path.isfile(os.path.join(sub, "trace.jsonl")) else nxt).append(sub)
        level = nxt
    return found


def ensure_plotting():
    """Imports matplotlib and numpy, or runs this script under Debian's python3, or exits 3."""
    try:
        import matplotlib  # noqa: F401
        import numpy  # noqa: F401
        return
    except ImportError as e:
        missing = e.name or str(e)
    here = os.path.realpath(sys.executable or "")
    if (not os.environ.get(REEXEC_ENV) and os.access(SYSTEM_PYTHON, os.X_OK)
            and os.path.realpath(SYSTEM_PYTHON) != here):
        os.environ[REEXEC_ENV] = "1"
        os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON, os.path.abspath(__file__)] + sys.argv[1:])
    fail(f"{missing} cannot be imported by {sys.executable}"
         f"{'' if here == os.path.realpath(SYSTEM_PYTHON) else ' nor by ' + SYSTEM_PYTHON}: "
         "install it with apt-get install -y --no-install-recommends python3-matplotlib", 3)


def label_runs(runs):
    """Short unique labels: the directory name, its parent's where two share it, the
    policy in brackets where the name does not say it."""
    names = [r.name for r in runs]
    for r in runs:
        label = r.name
        if names.count(r.name) > 1:
            label = os.path.join(os.path.basename(os.path.dirname(r.path)), r.name)
        policy = r.policy.split(",")[0] if r.has_policy else "no policy"
        if policy.lower() not in label.lower():
            label += f" [{policy}]"
        r.label = label
    seen = {}
    for r in runs:  # still equal (same parent too): number them
        if r.label in seen:
            seen[r.label] += 1
            r.label += f" #{seen[r.label]}"
        else:
            seen[r.label] = 1


def default_title(runs):
    if len(runs) == 1:
        return f"tandem report: {runs[0].label}"
    experiments = sorted({str(r.experiment) for r in runs})
    return f"tandem report: {len(runs)} runs of {', '.join(experiments)}"


def target_arg(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number")
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"{v} is not an accuracy in (0, 1]")
    return v


class ReportArgs(argparse.ArgumentParser):
    """argparse in the style of the other subcommands' --help and errors (engine/cli/usage.cpp):
    a mistake is one line and a pointer to --help, exit status 2."""

    def error(self, message):
        print(f"tandem: {message}\n(tandem report --help shows the usage)", file=sys.stderr)
        sys.exit(2)


def main(argv=None):
    ap = ReportArgs(prog="tandem report", usage="tandem report RUN_DIR [RUN_DIR ...] [options]",
                    description="A self-contained HTML report of one run or several overlaid (matplotlib), and the\n"
                                "comparison table on stdout. Default output: RUN_DIR/report.html for one run,\n"
                                "./report.html for several.",
                    formatter_class=lambda prog: argparse.RawDescriptionHelpFormatter(prog, max_help_position=21),
                    add_help=False)
    ap._optionals.title = "options"
    ap.add_argument("runs", nargs="*", metavar="RUN_DIR", help=argparse.SUPPRESS)
    ap.add_argument("--out", metavar="FILE", help="the HTML file (default RUN_DIR/report.html, ./report.html for several)")
    ap.add_argument("--target", metavar="ACC", type=target_arg, help="test accuracy for the time-to-accuracy column")
    ap.add_argument("--title", metavar="T", help="the page's title")
    ap.add_argument("--json", metavar="FILE", help="also write the comparison table's rows to this file as JSON")
    ap.add_argument("--check", action="store_true", help="only check that the plotting dependencies import")
    ap.add_argument("--png-dir", metavar="DIR", help="also write the overlaid figures (throughput, accuracy, "
                                                     "balance) as PNG files there (for a README)")
    ap.add_argument("-h", "--help", action="help", help="show this help")
    args = ap.parse_args(argv)
    if args.check:
        ensure_plotting()
        import matplotlib
        print(f"report: matplotlib {matplotlib.__version__} under {sys.executable}")
        return 0
    if not args.runs:
        ap.error("give at least one run directory")
    for path in args.runs:
        problem = check_run_dir(path)
        if problem:
            fail(problem)
    ensure_plotting()

    import warnings
    # Workers absent from part of a run (resumed on fewer) are NaN in the per-worker
    # arrays; numpy's warnings about their empty means are expected, not news.
    warnings.filterwarnings("ignore", message="Mean of empty slice")
    warnings.filterwarnings("ignore", message="All-NaN slice encountered")
    import matplotlib
    matplotlib.use("Agg")
    sys.path.insert(0, HERE)
    import metrics
    import page
    import plots
    import rundata

    start = time.monotonic()
    runs = []
    for path in args.runs:
        try:
            runs.append(rundata.Run(path))
        except rundata.RunError as e:
            fail(str(e))
        except OSError as e:
            fail(f"cannot read run directory '{path}': {e}")
    label_runs(runs)
    for r in runs:
        for w in r.warnings:
            print(f"report: warning: {r.label}: {w}", file=sys.stderr)
    target = metrics.choose_target(runs, args.target)
    rows = [metrics.comparison(r, target) for r in runs]

    import numpy as np
    all_idle = np.concatenate([plots.idle_matrix(r).ravel() for r in runs])
    all_idle = all_idle[np.isfinite(all_idle)]
    idle_vmax = float(min(1.0, max(0.05, np.percentile(all_idle, 99)))) if len(all_idle) else 1.0
    figures = {"throughput": plots.throughput(runs), "accuracy": plots.accuracy(runs, target),
               "balance": plots.balance(runs)}
    for i, r in enumerate(runs):
        figures[("workers", i)] = plots.workers(r, idle_vmax)
        figures[("batches", i)] = plots.batches(r)

    out = args.out or (os.path.join(args.runs[0], "report.html") if len(runs) == 1 else "report.html")
    text = page.build(args.title or default_title(runs), runs, rows, target, figures)
    try:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        fail(f"cannot write the report to '{out}': {e}", 1)
    if args.png_dir:
        os.makedirs(args.png_dir, exist_ok=True)
        for name in ("throughput", "accuracy", "balance"):
            if figures.get(name):
                with open(os.path.join(args.png_dir, name + ".png"), "wb") as f:
                    f.write(figures[name])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"target_accuracy": target, "rows": rows}, f, indent=2)
    print(metrics.text_table(rows, target))
    print(f"report: wrote {os.path.abspath(out)} ({len(runs)} run(s), "
          f"{sum(1 for v in figures.values() if v)} figures, {os.path.getsize(out) / 1e6:.1f} MB, "
          f"{time.monotonic() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
