"""The report's derived quantities, in one place so that the plots, the HTML table and
the table printed to stdout agree; DEFINITIONS (shown in the report) says the same in
words.

Achieved throughput of a trace row: its samples (global_batch, times the iterations
a relaxed-sync segment covers) over its time (the row's step_ms, the slowest
worker's; a segment's segment_ms). Ideal throughput of a row: the sum over workers
of what each would do alone at its current local batch, local_batch / compute_ms
(workers with no batch left out). Over time (the plots) every run uses that; a
simulated run's table row uses its summary's ideal_samples_per_s instead (the
simulator's: every worker alone at an equal share at iteration 0, host time
included), so that the table agrees with tandem sim and tools/sim/sweep.py. Over a window or a whole run the ideal is samples over the time the ideal
cluster would need for them, sum(samples) / sum(samples / ideal), so efficiency is
that ideal time over the time taken.
"""
import math

import numpy as np


def ideal_per_row(run):
    """Samples/s of the ideal cluster for each trace row: the workers' own throughputs summed."""
    return run.ideal


def window(rows):
    """Rows in a smoothing window: about 60 windows a run, at least one row."""
    return max(1, int(round(rows / 60)))


def _rolling_sum(x, w):
    c = np.concatenate(([0.0], np.cumsum(x)))
    lo = np.maximum(np.arange(1, len(x) + 1) - w, 0)
    return c[1:] - c[lo]


def smoothed_throughput(run):
    """(achieved, ideal, efficiency) per row, each over the window of rows ending there."""
    ideal = ideal_per_row(run)
    w = window(len(run.samples))
    ok = ideal > 0
    ideal_s = np.where(ok, run.samples / np.where(ok, ideal, 1.0), 0.0)
    samples = _rolling_sum(run.samples, w)
    span_s = _rolling_sum(run.span_ms, w) / 1000.0
    ideal_time = _rolling_sum(ideal_s, w)
    samples_ok = _rolling_sum(np.where(ok, run.samples, 0.0), w)
    achieved = np.divide(samples, span_s, out=np.zeros_like(samples), where=span_s > 0)
    ideal_rate = np.divide(samples_ok, ideal_time, out=np.full_like(samples, np.nan), where=ideal_time > 0)
    eff = np.divide(ideal_time, span_s, out=np.full_like(samples, np.nan), where=span_s > 0)
    return achieved, ideal_rate, eff


def smooth(x, w):
    """Trailing mean over w rows, NaNs ignored."""
    ok = np.isfinite(x)
    n = _rolling_sum(ok.astype(float), w)
    s = _rolling_sum(np.where(ok, x, 0.0), w)
    return np.divide(s, n, out=np.full_like(s, np.nan), where=n > 0)


def choose_target(runs, asked):
    """The accuracy the table's time-to-accuracy column uses: --target, else the
    target most of the trained runs were configured with (None if none)."""
    if asked is not None:
        return asked
    targets = [r.summary.get("target_accuracy") or (r.config.get("stop") or {}).get("target_accuracy")
               for r in runs if r.trained]
    targets = [t for t in targets if t]
    return max(set(targets), key=targets.count) if targets else None


def time_to_target(run, target):
    """Training seconds at the first evaluation reaching `target`, or None."""
    if not run.trained or target is None:
        return None
    for e in run.evals:
        if e.get("test_accuracy") is not None and e["test_accuracy"] >= target:
            return e.get("train_s")
    return None


def target_loss_of(run):
    """The run's stop.target_loss (a language model's target), or None."""
    return run.summary.get("target_loss") or (run.config.get("stop") or {}).get("target_loss")


def time_to_loss(run, target_loss):
    """Training seconds at the first evaluation whose test (validation) loss is at
    most `target_loss`, or None."""
    if not run.trained or target_loss is None:
        return None
    for e in run.evals:
        if e.get("test_loss") is not None and e["test_loss"] <= target_loss:
            return e.get("train_s")
    return None


def comparison(run, target):
    """One row of the comparison table, as numbers (None where not applicable)."""
    s = run.summary
    iterations = s.get("iterations") or int(run.iteration[-1]) + 1
    train_s = s.get("train_s") or float(run.time_s[-1])
    batch = s.get("global_batch") or (run.samples[-1] / max(1, run.iteration[-1] - run.first_iteration[-1] + 1))
    samples_per_s = s.get("samples_per_s") or (iterations * batch / train_s if train_s else 0.0)
    ideal = ideal_per_row(run)
    source = "trace"
    if run.simulated and s.get("ideal_samples_per_s"):
        # The simulator's own figure, so that the table agrees with tandem sim and tools/sim/sweep.py.
        ideal_total, source = float(s["ideal_samples_per_s"]), "summary"
    else:
        ok = ideal > 0
        ideal_time = float(np.sum(run.samples[ok] / ideal[ok]))
        ideal_total = float(np.sum(run.samples[ok])) / ideal_time if ideal_time > 0 else None
    efficiency = samples_per_s / ideal_total if ideal_total else None
    p = s.get("policy") or {}
    accuracy = None
    if run.trained:
        accuracy = s.get("test_accuracy")
        if accuracy is None and run.evals:
            accuracy = run.evals[-1].get("test_accuracy")
    idle = s.get("idle_share")
    if idle is None:
        idle = float(np.mean(run.idle_share))
    return {
        "run": run.label,
        "path": run.path,
        "experiment": run.experiment,
        "policy": run.policy,
        "workers": run.workers,
        "simulated": run.simulated,
        "iterations": iterations,
        "train_s": train_s,
        "samples_per_s": samples_per_s,
        "ideal_samples_per_s": ideal_total,
        "ideal_from": source,
        "efficiency": efficiency,
        "idle_share": idle,
        "comm_share": s.get("comm_share") if s.get("comm_share") is not None else float(np.mean(run.comm_share)),
        "target_accuracy": target if run.trained else None,
        "time_to_target_s": time_to_target(run, target),
        "final_test_accuracy": accuracy,
        "target_loss": target_loss_of(run) if run.trained else None,
        "time_to_loss_s": time_to_loss(run, target_loss_of(run)),
        "final_test_loss": (s.get("test_loss") if s.get("test_loss") is not None else
                            (run.evals[-1].get("test_loss") if run.evals else None)) if run.trained else None,
        "policy_cost_ms_mean": p.get("cost_ms_mean", run.policy_cost_sum / run.policy_events
                                     if run.policy_events else None),
        "policy_cost_ms_max": p.get("cost_ms_max", run.policy_cost_max if run.policy_events else None),
        "policy_wait_ms_mean": p.get("wait_ms_mean"),
        # A simulated run's own count first: with sim.trace_every > 1 the policy totals
        # only see the traced iterations.
        "plan_changes": s.get("plan_changes", p.get("plan_changes", sum(d.get("event") == "plan" for d in run.decisions)
                                                if run.policy_events else None)),
        "policy_failures": p.get("failures"),
    }


# Columns of the comparison table: (heading, formatter of a comparison row). The HTML
# table and the text table both use these.
def _num(v, fmt):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)


def _ttt(r):
    if r["simulated"]:
        return "- (sim)"
    if r["target_accuracy"] is None:
        return "-"
    return _num(r["time_to_target_s"], ".2f") if r["time_to_target_s"] is not None else "not reached"


def _cost(r):
    if r["policy_cost_ms_mean"] is None:
        return "-"
    return f"{r['policy_cost_ms_mean']:.2f} / {r['policy_cost_ms_max']:.2f}"


COLUMNS = [
    ("run", lambda r: r["run"]),
    ("policy", lambda r: r["policy"]),
    ("workers", lambda r: str(r["workers"]) + (" sim" if r["simulated"] else "")),
    ("iterations", lambda r: str(r["iterations"])),
    ("samples/s", lambda r: _num(r["samples_per_s"], ",.0f")),
    ("ideal samples/s", lambda r: _num(r["ideal_samples_per_s"], ",.0f")),
    ("efficiency", lambda r: _num(r["efficiency"], ".3f")),
    ("idle share", lambda r: _num(r["idle_share"], ".3f")),
    ("time to acc (s)", _ttt),
    ("final test acc", lambda r: _num(r["final_test_accuracy"], ".4f") if not r["simulated"] else "- (sim)"),
    ("policy ms mean/max", _cost),
    ("plan changes", lambda r: _num(r["plan_changes"], "d")),
]


def _ttl(r):
    if r["target_loss"] is None:
        return "-"
    return _num(r["time_to_loss_s"], ".2f") if r["time_to_loss_s"] is not None else "not reached"


# Shown only where some run has a stop.target_loss (language models).
LOSS_COLUMNS = [
    ("time to loss (s)", _ttl),
    ("final test loss", lambda r: _num(r["final_test_loss"], ".4f")),
]


def columns(rows):
    """The comparison table's columns for these rows."""
    if any(r.get("target_loss") is not None for r in rows):
        return COLUMNS + LOSS_COLUMNS
    return COLUMNS


def text_table(rows, target):
    cols = columns(rows)
    head = [h if h != "time to acc (s)" or target is None else f"time to {target:g} (s)" for h, _ in cols]
    cells = [[f(r) for _, f in cols] for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(head)]
    line = lambda cs: "  ".join(c.ljust(w) if i < 2 else c.rjust(w)  # noqa: E731
                                for i, (c, w) in enumerate(zip(cs, widths)))
    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(c) for c in cells])
