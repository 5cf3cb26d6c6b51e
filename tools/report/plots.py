"""The report's figures, drawn with matplotlib's object API on the Agg canvas (no
display, no pyplot state) and returned as PNG bytes.

Readability whatever the cluster size: up to SMALL_CLUSTER workers each worker gets
its own line or panel; above it a worker is a row of a heatmap (with more than
HEATMAP_ROWS workers, a row is a group of consecutive ranks showing the group's
lowest idle share, so one straggler still shows), and iterations are binned to at
most rundata.MAX_COLUMNS columns.
"""
import io
import math
import re
import textwrap

import matplotlib
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.transforms import blended_transform_factory

import numpy as np

import metrics

SMALL_CLUSTER = 16
HEATMAP_ROWS = 256
WIDTH_IN = 13.0
DPI = 100
STYLE = {"font.size": 11, "axes.titlesize": 12, "axes.labelsize": 11, "legend.fontsize": 10,
         "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False}
PHASES = [("compute", "#4C72B0", "compute"), ("comm", "#DD8452", "communication"),
          ("idle", "#C44E52", "idle (waiting for slower workers)"),
          ("other", "#B8B8B8", "other (data, optimizer, stats)")]
FAILURE_COLOR = "#D62728"
KIND_COLORS = ["#1B9E77", "#7570B3", "#E7298A", "#66A61E", "#E6AB02", "#A6761D", "#666666", "#17BECF"]
MAX_KINDS = 7


def run_color(i):
    return matplotlib.colormaps["tab10"](i % 10)


def worker_colors(n):
    cmap = matplotlib.colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def _wrap(text, width=120):
    """A title on as many lines as it needs (run labels can be long)."""
    return "\n".join(textwrap.wrap(text, width)) if len(text) > width else text


def _png(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def _figure(height):
    return Figure(figsize=(WIDTH_IN, height), layout="constrained")


def _col_x(run):
    """Midpoints (in iterations) of the per-worker bins, and their edges."""
    mid = (run.col_first + run.col_last) / 2.0
    edges = np.concatenate((run.col_first, [run.col_last[-1] + 1])) - 0.5
    return mid, edges


def decision_kind(d):
    """A short name for what a decision was, for legends and grouping."""
    ev = d.get("event") or "?"
    if d.get("failed") or ev in ("hung", "crash", "late", "memory", "disabled", "swap_failed", "rejected", "timeout", "error"):
        return f"failure: {ev}"
    if ev == "swapped":
        return "policy swapped"
    if ev != "plan":
        return ev
    reason = (d.get("reason") or "").strip()
    if not reason:
        return "no reason given"
    head = re.split(r"[:;(]", reason, maxsplit=1)[0].strip()
    head = re.sub(r"\d+(\.\d+)?", "N", head)
    return head[:45] or "no reason given"


def kinds_of(decisions):
    """Decision kind of each decision, the rarer ones lumped into 'other', and a colour per kind."""
    raw = [decision_kind(d) for d in decisions]
    counts = {}
    for k in raw:
        counts[k] = counts.get(k, 0) + 1
    plans = sorted((k for k in counts if not k.startswith("failure")), key=lambda k: -counts[k])
    keep = set(plans[:MAX_KINDS])
    out = [k if k in keep or k.startswith("failure") else "other" for k in raw]
    colors = {}
    for k in plans[:MAX_KINDS] + (["other"] if "other" in out else []):
        colors[k] = KIND_COLORS[len(colors) % len(KIND_COLORS)]
    for k in set(out):
        if k.startswith("failure"):
            colors[k] = FAILURE_COLOR
    return out, colors


def _time_axis(ax, runs, label):
    ends = [float(r.time_s[-1]) for r in runs if len(r.time_s) and r.time_s[-1] > 0]
    if len(ends) > 1 and max(ends) / min(ends) > 20:
        ax.set_xscale("log")
        label += " [log scale: the runs' lengths differ more than 20x]"
    ax.set_xlabel(label)


TIME_LABEL = "training time (s): start-up and evaluations excluded; simulated runs: simulated time"


# ---------------------------------------------------------------------------------
def throughput(runs):
    """Achieved and ideal samples/s over training time, and their ratio."""
    with matplotlib.rc_context(STYLE):
        fig = _figure(7.5)
        top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[3, 2])
        lo, hi = math.inf, 0.0
        for i, run in enumerate(runs):
            c = run_color(i)
            achieved, ideal, eff = metrics.smoothed_throughput(run)
            t = run.time_s
            top.plot(t, achieved, color=c, lw=2.0)
            top.plot(t, ideal, color=c, lw=1.5, ls="--")
            bottom.plot(t, eff, color=c, lw=2.0, label=run.label)
            v = np.concatenate((achieved[achieved > 0], ideal[np.isfinite(ideal) & (ideal > 0)]))
            if len(v):
                lo, hi = min(lo, float(v.min())), max(hi, float(v.max()))
        if hi > 0 and lo > 0 and hi / lo > 30:
            top.set_yscale("log")
        else:
            top.set_ylim(bottom=0)
        top.set_ylabel("samples/s")
        top.set_title("Throughput: achieved (solid) against the ideal (dashed), sum of every worker's own "
                      "samples/s")
        handles = [Line2D([], [], color=run_color(i), lw=2.5, label=r.label) for i, r in enumerate(runs)]
        handles += [Line2D([], [], color="k", lw=2, label="achieved: samples / step time"),
                    Line2D([], [], color="k", lw=1.5, ls="--", label="ideal: sum of local_batch / compute_ms")]
        top.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        bottom.axhline(1.0, color="k", lw=0.8, ls=":")
        bottom.set_ylim(0, 1.1)
        bottom.set_ylabel("efficiency\n(achieved / ideal)")
        _time_axis(bottom, runs, TIME_LABEL)
        return _png(fig)


def accuracy(runs, target):
    """Training loss and test accuracy over training time; None if no run trained."""
    trained = [(i, r) for i, r in enumerate(runs) if r.trained]
    if not trained:
        return None
    with matplotlib.rc_context(STYLE):
        fig = _figure(5.2)
        axl, axa = fig.subplots(1, 2)
        for i, run in trained:
            c = run_color(i)
            w = metrics.window(len(run.loss))
            axl.plot(run.time_s, run.loss, color=c, lw=0.7, alpha=0.25)
            axl.plot(run.time_s, metrics.smooth(run.loss, w), color=c, lw=2.0, label=run.label)
            ev = [e for e in run.evals if e.get("test_accuracy") is not None]
            t = [e["train_s"] for e in ev]
            if ev:
                axl.plot(t, [e["test_loss"] for e in ev], color=c, lw=1.0, ls="--", marker="o", ms=4)
                axa.plot(t, [e["test_accuracy"] for e in ev], color=c, lw=1.8, marker="o", ms=5, label=run.label)
            ttt = metrics.time_to_target(run, target)
            if ttt is not None:
                reached = next(e["test_accuracy"] for e in ev if e["train_s"] == ttt)
                axa.axvline(ttt, color=c, lw=1.2, ls=":")
                axa.plot([ttt], [reached], marker="*", ms=18, color=c, mec="k", zorder=5)
                axa.annotate(f"{ttt:.2f} s", (ttt, reached), xytext=(6, -14), textcoords="offset points", color=c,
                             fontsize=10, fontweight="bold")
        if target is not None:
            axa.axhline(target, color="k", lw=1.0, ls="--")
            axa.annotate(f"target {target:g}", (0.01, target), xycoords=("axes fraction", "data"),
                         xytext=(0, 4), textcoords="offset points", fontsize=10)
            lo, hi = axa.get_ylim()
            lo, hi = min(lo, target), max(hi, target)
            axa.set_ylim(lo - 0.06 * (hi - lo), hi + 0.04 * (hi - lo))
        axl.set_title("Training loss (line: smoothed; faint: every iteration)\nand test loss (dashed, markers)")
        axl.set_ylabel("loss")
        axa.set_title("Test accuracy; star and dotted line: the first evaluation at the target")
        axa.set_ylabel("test accuracy")
        trained_runs = [r for _, r in trained]
        _time_axis(axl, trained_runs, "training time (s)")
        _time_axis(axa, trained_runs, "training time (s)")
        axl.legend(loc="upper right")
        axa.legend(loc="lower right")
        return _png(fig)


def balance(runs):
    """Straggler extent and idle share per iteration, every run overlaid."""
    with matplotlib.rc_context(STYLE):
        fig = _figure(4.6)
        axe, axi = fig.subplots(1, 2, sharex=True)
        for i, run in enumerate(runs):
            c = run_color(i)
            w = metrics.window(len(run.extent))
            axe.plot(run.iteration, metrics.smooth(run.extent, w), color=c, lw=2.0, label=run.label)
            axi.plot(run.iteration, metrics.smooth(run.idle_share, w), color=c, lw=2.0, label=run.label)
        axe.set_title("Straggler extent: (max - min) / mean of the workers' compute_ms")
        axe.set_ylim(bottom=0)
        axi.set_title("Idle share: the workers' idle_ms / step_ms, all workers")
        axi.set_ylim(0, 1)
        for ax in (axe, axi):
            ax.set_xlabel("iteration")
            ax.legend(loc="upper right")
        return _png(fig)


# ---------------------------------------------------------------------------------
def idle_matrix(run):
    """Idle share per (bin, worker), 0..1."""
    with np.errstate(invalid="ignore", divide="ignore"):
        m = run.col["idle"] / run.col["step"]
    return np.clip(m, 0.0, 1.0)


def _grouped_rows(m, reduce):
    """(columns, workers) -> (columns, groups) of at most HEATMAP_ROWS groups of ranks."""
    n = m.shape[1]
    if n <= HEATMAP_ROWS:
        return m, 1
    g = math.ceil(n / HEATMAP_ROWS)
    pad = g * math.ceil(n / g) - n
    mm = np.pad(m, ((0, 0), (0, pad)), constant_values=np.nan)
    with np.errstate(all="ignore"):
        return reduce(mm.reshape(m.shape[0], -1, g), axis=2), g


def _heatmap(fig, ax, run, m, title, cbar_label, vmin, vmax, cmap, reduce, reduce_name, cbar_axes=None):
    m, g = _grouped_rows(m, reduce)
    _, xedges = _col_x(run)
    yedges = np.arange(m.shape[1] + 1) * g - 0.5
    mesh = ax.pcolormesh(xedges, yedges, m.T, cmap=cmap, vmin=vmin, vmax=vmax, shading="flat")
    ax.set_ylim(yedges[-1], yedges[0])
    ax.grid(False)
    if run.workers <= SMALL_CLUSTER:
        ax.set_yticks(range(run.workers))
    ax.set_ylabel("worker (rank)" + (f"\na row: {g} ranks, their {reduce_name}" if g > 1 else ""))
    ax.set_xlabel("iteration")
    if title:
        ax.set_title(title)
    fig.colorbar(mesh, ax=cbar_axes if cbar_axes is not None else ax, label=cbar_label, pad=0.01)


def _mean_ms(run):
    with np.errstate(all="ignore"):
        return {k: np.nan_to_num(np.nanmean(run.col[k], axis=0)) for k, _, _ in PHASES}


def _phase_legend(fig_or_ax, **kw):
    fig_or_ax.legend(handles=[Patch(color=c, label=l) for _, c, l in PHASES], **kw)


def workers(run, idle_vmax):
    """Where each worker's time goes, over iterations; stragglers stand out."""
    with matplotlib.rc_context(STYLE):
        small = run.workers <= SMALL_CLUSTER
        x, _ = _col_x(run)
        speed = np.nanmean(run.col["speed"], axis=0)
        if small:
            ncols = min(4, run.workers)
            nrows = math.ceil(run.workers / ncols)
            fig = _figure(2.3 * nrows + 5.0)
            top, bottom = fig.subfigures(2, 1, height_ratios=[2.3 * nrows + 0.6, 4.4])
            axes = np.atleast_1d(top.subplots(nrows, ncols, sharex=True, sharey=True)).ravel()
            ymax = float(np.nanmax(run.col["step"])) if np.isfinite(np.nanmax(run.col["step"])) else 1.0
            for r, ax in enumerate(axes):
                if r >= run.workers:
                    ax.set_visible(False)
                    continue
                ys = [np.nan_to_num(run.col[k][:, r]) for k, _, _ in PHASES]
                ax.stackplot(x, ys, colors=[c for _, c, _ in PHASES], linewidth=0)
                ax.set_ylim(0, ymax * 1.05)
                ax.set_title(f"rank {r}: speed {speed[r]:.3g}, last to arrive {run.slowest_share[r]:.0%}",
                             fontsize=11)
                if r % ncols == 0:
                    ax.set_ylabel("ms per iteration")
                if r >= run.workers - ncols:
                    ax.set_xlabel("iteration")
            top.suptitle(_wrap(f"{run.label}: each worker's step split into compute, communication, idle and "
                               "other (ms, stacked; colours: legend at the bottom right)", 110), fontsize=13)
            axh, axb = bottom.subplots(1, 2, width_ratios=[3, 2])
            _heatmap(bottom, axh, run, idle_matrix(run), "Idle share per worker and iteration",
                     "idle_ms / step_ms", 0.0, idle_vmax, "viridis", np.nanmin, "lowest")
            mean = _mean_ms(run)
            left = np.zeros(run.workers)
            ranks = np.arange(run.workers)
            for k, c, _ in PHASES:
                axb.barh(ranks, mean[k], left=left, color=c, height=0.7)
                left += mean[k]
            for r in ranks:
                axb.annotate(f"last {run.slowest_share[r]:.0%}", (left[r], r), xytext=(3, 0),
                             textcoords="offset points", va="center", fontsize=9)
            axb.set_xlim(0, left.max() * 1.3 if left.max() > 0 else 1)
            axb.set_ylim(run.workers - 0.5, -0.5)
            axb.set_yticks(ranks)
            axb.set_xlabel("mean ms per iteration")
            axb.set_title("Mean step per worker; last: share of steps it arrived last")
            axb.grid(axis="y", visible=False)
            _phase_legend(axb, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2, fontsize=10, frameon=False)
        else:
            fig = _figure(10.5)
            top, bottom = fig.subfigures(2, 1, height_ratios=[5.5, 5.0])
            axh = top.subplots()
            _heatmap(top, axh, run, idle_matrix(run),
                     _wrap(f"{run.label}: idle share per worker and iteration (a straggler idles least: a dark row)"),
                     "idle_ms / step_ms", 0.0, idle_vmax, "viridis", np.nanmin, "lowest")
            axm, axs = bottom.subplots(2, 1, sharex=True, height_ratios=[3, 2])
            mean = _mean_ms(run)
            ranks = np.arange(run.workers)
            axm.stackplot(ranks, [mean[k] for k, _, _ in PHASES], colors=[c for _, c, _ in PHASES], linewidth=0)
            axm.set_ylabel("mean ms per iteration")
            axm.set_title("Mean step per worker, stacked: compute, communication, idle, other")
            _phase_legend(axm, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=10, frameon=False)
            axs.fill_between(ranks, run.slowest_share, step="mid", color="#C44E52", alpha=0.8, lw=0)
            axs.set_ylabel("share of iterations\nlast to arrive")
            axs.set_xlabel("worker (rank)")
            axs.set_ylim(bottom=0)
            worst = np.argsort(-run.slowest_share)[:5]
            axs.set_title("Share of steps each worker arrived last (the others waited for it); most often: " +
                          ", ".join(f"rank {r} ({run.slowest_share[r]:.1%})" for r in worst[:3]
                                    if run.slowest_share[r] > 0))
            axm.set_xlim(-0.5, run.workers - 0.5)
        return _png(fig)


def batches(run):
    """Local batch per worker over iterations, with the policy's decisions marked."""
    with matplotlib.rc_context(STYLE):
        kinds, colors = kinds_of(run.decisions)
        x, _ = _col_x(run)
        small = run.workers <= SMALL_CLUSTER
        fig = _figure(5.2 if small else 6.8)
        if small:
            ax = fig.subplots()
            wc = worker_colors(run.workers)
            for r in range(run.workers):  # lower ranks wider, so that equal batches stay visible
                lw = 1.6 + 2.0 * (run.workers - 1 - r) / max(1, run.workers - 1)
                ax.step(run.col_first, run.col["batch"][:, r], where="post", color=wc[r], lw=lw,
                        label=f"rank {r}")
            ax.set_ylim(bottom=0)
            ax.set_ylabel("local batch")
            rug = ax
        else:
            rug, ax = fig.subplots(2, 1, sharex=True, height_ratios=[1, 6])
            b = run.col["batch"]
            lo, hi = np.nanpercentile(b, 1), np.nanpercentile(b, 99)
            _heatmap(fig, ax, run, b, "", "local batch (mean over the column's iterations)", lo, hi, "cividis",
                     np.nanmean, "mean", cbar_axes=[rug, ax])
            rug.set_yticks([])
            rug.set_ylim(0, 1)
            rug.grid(False)
        # Decisions at the iteration their plan applies from (failures: where they happened).
        lo_x, hi_x = run.col_first[0] - 0.5, run.col_last[-1] + 0.5
        ax.set_xlim(lo_x, hi_x)
        tr = blended_transform_factory(rug.transData, rug.transAxes)
        numbered = len(run.decisions) <= 25
        for n, (d, k) in enumerate(zip(run.decisions, kinds), 1):
            at = d.get("applies_from") if d.get("applies_from") is not None else d["iteration"] + 1
            if at > hi_x:  # decided at the end, never in force
                continue
            if k.startswith("failure"):
                rug.plot([at], [0.97 if small else 0.5], marker="X", ms=11, color=FAILURE_COLOR, mec="k",
                         transform=tr, clip_on=False, zorder=6)
            else:
                if small:
                    ax.axvline(at, color=colors[k], lw=1.3, ls="--", alpha=0.85, zorder=1)
                else:
                    rug.axvline(at, color=colors[k], lw=1.0, alpha=0.8)
            if numbered:
                rug.annotate(str(n), (at, 1.0), xycoords=tr, xytext=(0, 2), textcoords="offset points",
                             ha="center", va="bottom", fontsize=9, color=colors[k], fontweight="bold",
                             annotation_clip=False)
        if run.has_policy:
            title = (f"{run.label}: local batch per worker; decisions of policy {run.policy} at the iteration "
                     "they apply from")
            if numbered and run.decisions:
                title += " (numbers: the table below)"
        else:
            title = f"{run.label}: local batch per worker (no policy: {run.policy})"
        title = _wrap(title, 110)
        if small:
            ax.set_title(title, pad=18 if numbered and run.decisions else 6)
        else:
            fig.suptitle(title, fontsize=12)
        ax.set_xlabel("iteration")
        handles = []
        if small:
            handles += [Line2D([], [], color=c, lw=2, label=f"rank {r}") for r, c in
                        enumerate(worker_colors(run.workers))]
        for k, c in colors.items():
            handles.append(Line2D([], [], color=c, lw=1.5, ls="--", label=f"{k} ({kinds.count(k)})")
                           if not k.startswith("failure") else
                           Line2D([], [], color=c, marker="X", ls="", ms=10, mec="k", label=f"{k} ({kinds.count(k)})"))
        if not run.decisions:
            handles.append(Line2D([], [], color="none", label="no plan changes"))
        if small:
            ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, frameon=False)
        else:
            rug.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=min(4, len(handles)),
                       fontsize=9, frameon=False)
        return _png(fig)
