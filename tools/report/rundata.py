"""Reads a tandem run directory into compact arrays for the report.

The trace is streamed line by line (a simulated run of a thousand workers writes a few
hundred megabytes) and reduced as it is read:
- per trace row (one iteration, or one relaxed-sync segment covering several), a few
  numbers: samples, time, loss, ideal throughput, straggler extent, shares;
- per worker, sums over at most MAX_COLUMNS bins of consecutive rows (what the
  heatmaps and per-worker plots draw), so memory stays at workers x MAX_COLUMNS
  whatever the run's length;
- policy decisions other than "keep", with their reasons; evaluations.

Training time, the clock every time axis uses, is the one the engine's summary uses
for samples_per_s and time_to_target_s: evaluations and start-up excluded. For a real
run it is the running sum of rank 0's step_ms (of sync.segment_ms on a relaxed-sync
segment's line), which reproduces every evaluation's train_s exactly; a simulated
run's wall_s is its simulated clock, already training time (and stays right when
sim.trace_every thins the trace).
"""
import json
import math
import os
from operator import itemgetter

import numpy as np

MAX_COLUMNS = 400


class RunError(Exception):
    """A run directory the report cannot use; the message names the path and what is wrong."""


def _read_json(path, warnings):
    if not os.path.isfile(path):
        return None
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        warnings.append(f"{path} could not be read ({e}); left out")
        return None


def _count_lines(path):
    n = 0
    with open(path, "rb") as f:
        while True:
            block = f.read(1 << 24)
            if not block:
                return n
            n += block.count(b"\n")


class Run:
    """One run directory, reduced. Arrays per trace row are numpy arrays of equal length."""

    def __init__(self, path):
        self.path = os.path.abspath(path)
        self.name = os.path.basename(self.path.rstrip("/"))
        self.warnings = []
        self.summary = _read_json(os.path.join(path, "summary.json"), self.warnings) or {}
        self.config = _read_json(os.path.join(path, "config.json"), self.warnings) or {}
        if not self.summary:
            self.warnings.append(f"{os.path.join(path, 'summary.json')} is missing (a run still going, or killed): "
                                 "the table's figures come from the trace alone")
        self.simulated = bool(self.summary.get("simulated"))
        self.trace_every = int((self.config.get("sim") or {}).get("trace_every") or 1) if self.simulated else 1
        self.experiment = self.summary.get("experiment") or self.config.get("name") or "?"
        self.label = self.name  # made unique and descriptive by report.py
        self.evals = []  # dicts: iteration, epoch, train_s, test_accuracy, test_loss
        self.decisions = []  # policy events other than keep
        self.policy_events = 0
        self.policy_cost_sum = self.policy_cost_max = 0.0
        self.trace_policy = None  # the name on the trace's policy lines, for runs without a summary
        _read_trace(self, os.path.join(path, "trace.jsonl"))
        self.has_policy = bool((self.summary.get("policy") or {}).get("name")
                               or (self.config.get("policy") or {}).get("file") or self.trace_policy)
        self.policy = policy_name(self.summary, self.config, self.trace_policy)
        idle = self.summary.get("idle_share")
        if idle is not None and idle > 1:
            self.warnings.append(f"the summary's idle_share is {idle:.3f}, above 1: on relaxed-sync segments the "
                                 "engine adds the meeting's wait to idle_ms but not to step_ms (plots clip it at 1)")

    @property
    def trained(self):
        """Whether the run trained a model (a simulated one has no loss or accuracy)."""
        return not self.simulated


def policy_name(summary, config, traced=None):
    p = summary.get("policy") or {}
    if p.get("name") or traced:
        name = p.get("name") or traced
    else:
        f = (config.get("policy") or {}).get("file")
        name = os.path.splitext(os.path.basename(f))[0] if f else "plan.kind=" + (config.get("plan") or {}).get(
            "kind", "equal")
    mode = (config.get("sync") or {}).get("mode", "bsp")
    return name if mode in ("bsp", None) else f"{name}, {mode} sync"


class _Columns:
    """Per-worker sums over bins of `per` consecutive trace rows."""
    FIELDS = ("compute", "comm", "idle", "other", "step", "batch", "speed")

    def __init__(self, workers, columns, per):
        self.per = per
        self.workers = workers
        shape = (columns, workers)
        self.sums = {f: np.zeros(shape) for f in self.FIELDS}
        self.count = np.zeros(shape)
        self.first_iteration = np.full(columns, -1, dtype=np.int64)
        self.last_iteration = np.full(columns, -1, dtype=np.int64)

    def grow(self, workers):
        pad = ((0, 0), (0, workers - self.workers))
        self.sums = {f: np.pad(v, pad) for f, v in self.sums.items()}
        self.count = np.pad(self.count, pad)
        self.workers = workers


def _read_trace(run, path):
    lines = max(_count_lines(path), 1)
    per = max(1, math.ceil(lines / MAX_COLUMNS))
    columns = math.ceil(lines / per) + 1
    n0 = int(run.summary.get("workers") or 0)
    cols = None
    rows = {k: [] for k in ("iteration", "first_iteration", "samples", "span_ms", "time_s", "loss", "ideal",
                            "extent", "idle_share", "comm_share", "lr")}
    get = {f: itemgetter(f) for f in ("rank", "local_batch", "compute_ms", "comm_ms", "idle_ms", "step_ms")}
    speed_of = lambda w: w.get("speed", 1.0)  # noqa: E731 (older traces lack it)
    slowest = None
    train_ms = 0.0
    bad = 0
    row = 0
    with open(path, "rb") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                bad += 1
                continue
            event = obj.get("event")
            if event == "eval":
                run.evals.append({k: obj.get(k) for k in ("iteration", "epoch", "train_s", "test_accuracy",
                                                          "test_loss")})
                continue
            if event != "iteration" or not obj.get("workers"):
                continue
            try:  # everything that a malformed line can break, before anything is kept
                ws = obj["workers"]
                n = len(ws)
                ranks = np.fromiter(map(get["rank"], ws), dtype=np.int64, count=n)
                batch = np.fromiter(map(get["local_batch"], ws), dtype=float, count=n)
                compute = np.fromiter(map(get["compute_ms"], ws), dtype=float, count=n)
                comm = np.fromiter(map(get["comm_ms"], ws), dtype=float, count=n)
                idle = np.fromiter(map(get["idle_ms"], ws), dtype=float, count=n)
                step = np.fromiter(map(get["step_ms"], ws), dtype=float, count=n)
                speed = np.fromiter(map(speed_of, ws), dtype=float, count=n)
                it = int(obj["iteration"])
                sync = obj.get("sync")
                covers = int(sync.get("iterations") or 1) if sync else 1
                span = float(sync["segment_ms"]) if sync else float(obj.get("step_ms") or 0.0)
                rank0_ms = float(ws[0].get("step_ms") or 0.0)
                if ranks.min() < 0:
                    raise ValueError("negative rank")
            except (KeyError, TypeError, ValueError, AttributeError):
                bad += 1
                continue
            width = int(ranks.max()) + 1
            if cols is None:
                cols = _Columns(max(width, n0), columns, per)
                slowest = np.zeros(cols.workers)
            elif width > cols.workers:
                cols.grow(width)
                slowest = np.pad(slowest, (0, width - len(slowest)))
            other = np.maximum(step - compute - comm - idle, 0.0)
            if run.simulated:
                time_s = float(obj.get("wall_s") or 0.0)
            else:
                train_ms += span if sync else rank0_ms
                time_s = train_ms / 1000.0
            active = (batch > 0) & (compute > 0)
            ideal = float(np.sum(batch[active] / compute[active])) * 1000.0
            if active.sum() >= 2:
                c = compute[active]
                extent = float((c.max() - c.min()) / c.mean())
            else:
                extent = 0.0
            step_sum = float(step.sum())
            loss = obj.get("loss")
            rows["iteration"].append(it)
            rows["first_iteration"].append(it - covers + 1)
            rows["samples"].append(float(obj.get("global_batch") or batch.sum()) * covers)
            rows["span_ms"].append(span)
            rows["time_s"].append(time_s)
            rows["loss"].append(float("nan") if loss is None else float(loss))
            rows["lr"].append(float(obj.get("lr") or 0.0))
            rows["ideal"].append(ideal)
            rows["extent"].append(extent)
            rows["idle_share"].append(float(idle.sum()) / step_sum if step_sum > 0 else 0.0)
            rows["comm_share"].append(float(comm.sum()) / step_sum if step_sum > 0 else 0.0)
            # The worker the others waited for: the active one that idled least.
            if active.any():
                slowest[ranks[active][np.argmin(idle[active])]] += 1

            c = min(row // per, columns - 1)
            for name, v in (("compute", compute), ("comm", comm), ("idle", idle), ("other", other),
                            ("step", step), ("batch", batch), ("speed", speed)):
                cols.sums[name][c, ranks] += v
            cols.count[c, ranks] += 1
            if cols.first_iteration[c] < 0:
                cols.first_iteration[c] = it - covers + 1
            cols.last_iteration[c] = it
            row += 1

            p = obj.get("policy")
            if p:
                run.policy_events += 1
                cost = float(p.get("cost_ms") or 0.0)
                run.policy_cost_sum += cost
                run.policy_cost_max = max(run.policy_cost_max, cost)
                if run.trace_policy is None and p.get("policy"):
                    run.trace_policy = os.path.splitext(os.path.basename(str(p["policy"])))[0]
                if p.get("event") != "keep":
                    d = {k: p.get(k) for k in ("event", "reason", "cost_ms", "wait_ms", "applies_from",
                                               "from_iteration", "failed", "sync")}
                    d["iteration"] = it
                    d["time_s"] = time_s
                    if n <= 16 and p.get("plan"):
                        d["plan"] = p["plan"]
                    run.decisions.append(d)
    if bad:
        run.warnings.append(f"{path}: {bad} line(s) were not JSON or lacked fields (a run cut off mid-line?); "
                            "skipped")
    if row == 0:
        raise RunError(f"'{path}' has no iteration records (the run stopped before its first iteration was traced)")
    for k, v in rows.items():
        setattr(run, k, np.asarray(v, dtype=np.int64 if "iteration" in k else float))
    used = cols.first_iteration >= 0
    cnt = np.where(cols.count[used] > 0, cols.count[used], np.nan)
    run.workers = cols.workers
    run.col_first = cols.first_iteration[used]
    run.col_last = cols.last_iteration[used]
    # Per-worker means over each bin's rows, as (columns, workers); NaN where a worker
    # was absent (a run resumed on fewer workers).
    run.col = {f: cols.sums[f][used] / cnt for f in _Columns.FIELDS}
    run.slowest_share = slowest / max(row, 1)
    run.rows = row
