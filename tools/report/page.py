"""Assembles the report as one self-contained HTML file: inline CSS, figures as
base64 PNG data URIs, nothing fetched from anywhere (it opens offline, can be mailed
or attached to an issue as it is).
"""
import base64
import datetime
import html

import metrics
import plots

SECTIONS = [
    ("comparison", "Comparison"),
    ("throughput", "Throughput against the ideal"),
    ("accuracy", "Loss and test accuracy against training time"),
    ("workers", "Compute, communication and idle per worker"),
    ("batches", "Local batch per worker and policy decisions"),
    ("definitions", "How each quantity is computed"),
]
TITLES = dict(SECTIONS)

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0;
       background: #fafafa; color: #222; }
main { max-width: 1320px; margin: 0 auto; padding: 16px 24px 48px; background: #fff; }
h1 { font-size: 26px; margin: 8px 0 4px; }
h2 { font-size: 21px; margin: 36px 0 8px; padding-bottom: 4px; border-bottom: 2px solid #4C72B0; }
h3 { font-size: 17px; margin: 24px 0 6px; }
p, li, dd { font-size: 15px; line-height: 1.45; }
.meta { color: #666; font-size: 14px; }
nav a { margin-right: 14px; font-size: 14px; }
img { display: block; max-width: 100%; height: auto; margin: 8px 0; border: 1px solid #eee; }
table { border-collapse: collapse; margin: 8px 0 12px; font-size: 14px; }
th, td { border: 1px solid #ddd; padding: 4px 9px; text-align: right; vertical-align: top; }
th { background: #f0f3f8; }
td.l, th.l { text-align: left; }
td.plan { white-space: nowrap; }
td.reason { text-align: left; max-width: 760px; font-size: 13px; }
.how { color: #444; font-size: 14px; background: #f6f8fb; border-left: 3px solid #4C72B0; padding: 6px 10px; }
.warn { color: #8a4b00; background: #fff4e0; padding: 4px 8px; font-size: 14px; }
dt { font-weight: 600; margin-top: 10px; font-size: 15px; }
dd { margin-left: 18px; }
code { font-size: 13px; background: #f2f2f2; padding: 0 3px; }
"""

DEFINITIONS = [
    ("training time (every time axis)",
     "Wall-clock time spent training, start-up and evaluations excluded: the clock of the summary's "
     "<code>samples_per_s</code> and <code>time_to_target_s</code>. For a real run, the running sum of rank 0's "
     "<code>step_ms</code> (of <code>sync.segment_ms</code> for a relaxed-sync segment), which matches every "
     "evaluation's <code>train_s</code>; for a simulated run, <code>wall_s</code>, the simulated clock."),
    ("achieved throughput (plot)",
     "Samples of a trace line (<code>global_batch</code>, times the iterations a relaxed-sync segment covers) over "
     "its time (<code>step_ms</code>, the slowest worker's step; <code>sync.segment_ms</code> for a segment), "
     "summed over a trailing window of about 1/60 of the run before dividing."),
    ("ideal throughput",
     "What the workers would do if none waited for another: the sum over workers of each one's own throughput at "
     "its current local batch, <code>local_batch / compute_ms</code> (workers with no batch left out). Over a "
     "window or a run: samples / the time the ideal cluster needs for them, "
     "<code>&Sigma; samples / &Sigma; (samples / ideal)</code>. The plots use this for every run, so that they "
     "follow speed changes. A simulated run's table row uses its summary's <code>ideal_samples_per_s</code> "
     "instead (the simulator's: every worker alone at an equal share of the batch at iteration 0, host time "
     "included), so that it agrees with <code>tandem sim</code> and <code>tools/sim/sweep.py</code>."),
    ("efficiency",
     "Achieved / ideal. In the table: the summary's <code>samples_per_s</code> (all samples over the training "
     "time) divided by the run's ideal; in the plot, per window: ideal time / time taken."),
    ("samples/s (table)", "The summary's <code>samples_per_s</code>: samples trained / training time."),
    ("idle share",
     "<code>idle_ms / step_ms</code>: the part of a worker's step spent waiting at the barrier for slower "
     "workers. Table: the summary's <code>idle_share</code> (mean over workers and iterations)."),
    ("compute, communication, other",
     "Per worker and iteration from the trace: <code>compute_ms</code> (forward and backward, emulated stretch "
     "included), <code>comm_ms</code> (the all-reduce), <code>idle_ms</code>; other = <code>step_ms</code> minus "
     "those three (loading the batch, the optimizer step, stats). Per-worker plots average them over bins of "
     "consecutive trace lines (at most 400 bins a run)."),
    ("slowest / last to arrive",
     "The share of trace lines on which a worker (with a batch) had the smallest <code>idle_ms</code>: the one the "
     "others waited for."),
    ("straggler extent",
     "<code>(max - min) / mean</code> of the workers' <code>compute_ms</code> on a trace line (LBB's SE)."),
    ("time to accuracy",
     "Training time at the first evaluation whose <code>test_accuracy</code> reaches the target (the "
     "<code>--target</code> given, else the target the runs were configured with); it can be no finer than the "
     "runs' evaluation interval (<code>eval_every</code>). Simulated runs train nothing: no loss, accuracy or "
     "time to accuracy."),
    ("final test acc", "The summary's <code>test_accuracy</code>: the last evaluation."),
    ("policy cost",
     "Mean / maximum milliseconds of one call of the policy's <code>step</code> (the summary's "
     "<code>policy.cost_ms_mean</code> and <code>cost_ms_max</code>); the call overlaps training, what training "
     "waited for it is <code>wait_ms</code>. Plan changes: the plans adopted."),
    ("policy decisions",
     "Trace lines whose <code>policy.event</code> is not <code>keep</code>: a new plan (marked at "
     "<code>applies_from</code>, the iteration it is in force from, two after the stats it was decided on), a "
     "swap, or a failure (timeout, error, rejected plan, ...). Their kind is the head of the policy's reason."),
]


def _img(png, alt):
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _comparison_table(rows, target):
    head = "".join(f'<th class="{"l" if i < 2 else ""}">{html.escape(h if h != "time to acc (s)" or target is None else f"time to {target:g} (s)")}</th>'
                   for i, (h, _) in enumerate(metrics.columns(rows)))
    body = []
    for r in rows:
        cells = "".join(f'<td class="{"l" if i < 2 else ""}">{html.escape(f(r))}</td>'
                        for i, (_, f) in enumerate(metrics.columns(rows)))
        body.append(f'<tr class="run-row">{cells}</tr>')
    return f'<table class="comparison"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def kind_of(run):
    if not run.simulated:
        return "trained"
    return "simulated" + (f" (trace: every {run.trace_every}th iteration)" if run.trace_every > 1 else "")


def _runs_table(runs):
    out = ['<table class="runs"><thead><tr><th class="l">run</th><th class="l">directory</th>'
           '<th class="l">experiment</th><th class="l">policy</th><th>workers</th><th>global batch</th>'
           '<th>iterations</th><th class="l">stopped</th><th class="l">kind</th></tr></thead><tbody>']
    for r in runs:
        s = r.summary
        out.append(f'<tr><td class="l">{html.escape(r.label)}</td><td class="l"><code>{html.escape(r.path)}</code></td>'
                   f'<td class="l">{html.escape(str(r.experiment))}</td><td class="l">{html.escape(r.policy)}</td>'
                   f'<td>{r.workers}</td><td>{html.escape(str(s.get("global_batch", "?")))}</td>'
                   f'<td>{html.escape(str(s.get("iterations", int(r.iteration[-1]) + 1)))}</td>'
                   f'<td class="l">{html.escape(str(s.get("stop_reason", "?")))}</td>'
                   f'<td class="l">{kind_of(r)}</td></tr>')
    out.append("</tbody></table>")
    for r in runs:
        for w in r.warnings:
            out.append(f'<p class="warn">{html.escape(r.label)}: {html.escape(w)}</p>')
    return "".join(out)


def _decisions_table(run):
    if run.trace_every > 1:
        thinned = (f"<p class='warn'>The trace holds every {run.trace_every}th iteration (sim.trace_every): "
                   "decisions taken on the others are not in it; the table's plan changes are the simulator's "
                   "own count.</p>")
    else:
        thinned = ""
    return thinned + _decisions_rows(run)


def _decisions_rows(run):
    if not run.decisions:
        n = run.policy_events
        return (f"<p>No plan changes or failures{f' in {n} policy calls' if n else ''}"
                f"{'' if n else ' (no policy decided: the plan stayed as the experiment set it)'}.</p>")
    kinds, _ = plots.kinds_of(run.decisions)
    show_plan = any("plan" in d for d in run.decisions)
    head = ("<tr><th>#</th><th>decided on iteration</th><th>applies from</th><th class='l'>kind</th>"
            "<th class='l'>event</th><th>cost ms</th>" + ("<th class='l'>plan</th>" if show_plan else "") +
            "<th class='l'>reason</th></tr>")

    def row(n, d, k):
        plan = f"<td class='l plan'>{html.escape(' '.join(map(str, d.get('plan') or [])))}</td>" if show_plan else ""
        cost = d.get("cost_ms")
        return (f"<tr><td>{n}</td><td>{d['iteration']}</td><td>{d.get('applies_from', '')}</td>"
                f"<td class='l plan'>{html.escape(k)}</td><td class='l'>{html.escape(str(d.get('event')))}</td>"
                f"<td>{'' if cost is None else f'{cost:.2f}'}</td>{plan}"
                f"<td class='reason'>{html.escape(d.get('reason') or '')}</td></tr>")

    if len(run.decisions) <= 40:
        rows = "".join(row(n, d, k) for n, (d, k) in enumerate(zip(run.decisions, kinds), 1))
        return f"<table class='decisions'><thead>{head}</thead><tbody>{rows}</tbody></table>"
    # Many decisions: grouped by kind, then the first few and every failure.
    groups = {}
    for d, k in zip(run.decisions, kinds):
        g = groups.setdefault(k, {"n": 0, "first": d["iteration"], "last": d["iteration"], "cost": 0.0, "eg": d})
        g["n"] += 1
        g["last"] = d["iteration"]
        g["cost"] += d.get("cost_ms") or 0.0
    grows = "".join(f"<tr><td class='l'>{html.escape(k)}</td><td>{g['n']}</td><td>{g['first']}</td>"
                    f"<td>{g['last']}</td><td>{g['cost'] / g['n']:.2f}</td>"
                    f"<td class='reason'>{html.escape(g['eg'].get('reason') or '')}</td></tr>"
                    for k, g in sorted(groups.items(), key=lambda kv: -kv[1]["n"]))
    picked = [(n, d, k) for n, (d, k) in enumerate(zip(run.decisions, kinds), 1)
              if n <= 10 or k.startswith("failure")][:40]
    rows = "".join(row(n, d, k) for n, d, k in picked)
    return (f"<p>{len(run.decisions)} decisions; by kind:</p><table class='decision-kinds'><thead><tr>"
            "<th class='l'>kind</th><th>count</th><th>first iteration</th><th>last iteration</th>"
            "<th>mean cost ms</th><th class='l'>example reason</th></tr></thead>"
            f"<tbody>{grows}</tbody></table><p>The first ten, and every failure:</p>"
            f"<table class='decisions'><thead>{head}</thead><tbody>{rows}</tbody></table>")


def build(title, runs, rows, target, figures):
    """figures: dict of name -> PNG bytes (or None); per-run ones keyed (name, index)."""
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{CSS}</style></head><body><main>",
             f"<h1>{html.escape(title)}</h1>",
             f"<p class='meta'>{len(runs)} run(s); written {datetime.datetime.now():%Y-%m-%d %H:%M} by "
             "tools/report/report.py (figures: matplotlib)</p>",
             "<nav>" + "".join(f"<a href='#{k}'>{html.escape(t)}</a>" for k, t in SECTIONS) + "</nav>",
             _runs_table(runs)]

    parts.append(f"<section id='comparison'><h2>{TITLES['comparison']}</h2>")
    parts.append(_comparison_table(rows, target))
    parts.append("<p class='how'>samples/s: the summary's (samples over training time); ideal: sum of the workers' "
                 "own samples/s (local_batch / compute_ms; the simulator's for a simulated run); efficiency = "
                 "samples/s / ideal; time to accuracy: training seconds to the first evaluation at or above "
                 f"{'the target' if target is None else f'{target:g}'}; policy cost: mean / max ms of a policy "
                 "call. Details at the end.</p></section>")

    parts.append(f"<section id='throughput'><h2>{TITLES['throughput']}</h2>")
    parts.append(_img(figures["throughput"], "achieved and ideal throughput over training time"))
    parts.append("<p class='how'>Solid: achieved samples/s (samples over step time, trailing window); dashed: the "
                 "ideal, the sum over workers of local_batch / compute_ms, each worker at its own speed and "
                 "nobody waiting. Below: their ratio. A balanced cluster keeps the solid line close to the "
                 "dashed one.</p></section>")

    parts.append(f"<section id='accuracy'><h2>{TITLES['accuracy']}</h2>")
    if figures.get("accuracy"):
        parts.append(_img(figures["accuracy"], "loss and test accuracy over training time"))
        parts.append("<p class='how'>Training loss per iteration (smoothed over a trailing window), test loss and "
                     "accuracy at each evaluation, against training time. The dashed line is the target accuracy; "
                     "a star and a dotted line mark each run's time to reach it.</p>")
    else:
        parts.append("<p>Only simulated runs: nothing was trained, so there is no loss or accuracy.</p>")
    parts.append("</section>")

    parts.append(f"<section id='workers'><h2>{TITLES['workers']}</h2>")
    parts.append(_img(figures["balance"], "straggler extent and idle share over iterations"))
    parts.append("<p class='how'>Every run overlaid: how far apart the workers' compute times are, and the share of "
                 "the workers' time spent idle, per iteration (smoothed).</p>")
    for i, run in enumerate(runs):
        parts.append(f"<h3>{html.escape(run.label)}: {run.workers} workers, {html.escape(run.policy)}</h3>")
        parts.append(_img(figures[("workers", i)], f"per-worker time breakdown of {run.label}"))
    parts.append("<p class='how'>" + (
        "Up to 16 workers: a panel per worker with its step stacked (compute, communication, idle, other), the "
        "idle-share heatmap and each worker's mean step; a straggler computes all step long and never idles, the "
        "others wait for it. " if any(r.workers <= plots.SMALL_CLUSTER for r in runs) else "") + (
        "Above 16 workers: the idle-share heatmap (a straggler is a dark row; with more than 256 workers a row "
        "is a group of ranks showing its lowest idle share), the mean step by rank, and how often each rank was "
        "the last to arrive. " if any(r.workers > plots.SMALL_CLUSTER for r in runs) else "") +
        "The heatmaps of all runs share one colour scale.</p></section>")

    parts.append(f"<section id='batches'><h2>{TITLES['batches']}</h2>")
    for i, run in enumerate(runs):
        parts.append(f"<h3>{html.escape(run.label)}: "
                     f"{'policy ' if run.has_policy else 'no policy, '}{html.escape(run.policy)}</h3>")
        parts.append(_img(figures[("batches", i)], f"local batch per worker of {run.label}"))
        parts.append(_decisions_table(run))
    parts.append("</section>")

    parts.append(f"<section id='definitions'><h2>{TITLES['definitions']}</h2><dl>")
    parts.extend(f"<dt>{html.escape(k)}</dt><dd>{v}</dd>" for k, v in DEFINITIONS)
    parts.append("</dl></section></main></body></html>\n")
    return "".join(parts)
