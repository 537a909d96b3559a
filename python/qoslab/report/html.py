"""report.html: what a person reads instead of the tables. One file, figures embedded as PNG,
a small inline stylesheet, no external references, so it can be mailed or archived as is. The
figures are also written to figures/ (PNG, and SVG or PDF when the study asks).

This module assembles: the numbers come from qoslab.analysis, the drawings from qoslab.plots."""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from qoslab.analysis import (
    best_policy_leads,
    canary_tests,
    cross_job_changes,
    harm_shift,
    interference_matrix,
    policy_summary,
    slowdown_intervals,
    slowdowns,
    slowest_ranks,
    vl_utilisation,
)
from qoslab.analysis.contention import incomplete, ranking
from qoslab.analysis.interference import MOVED_SHARE, UNCHANGED_SHARE, class_order
from qoslab.analysis.sliced import job_congestion_impact, job_gpcnet_impact, job_iteration_stats
from qoslab.plots import (
    interference_figure,
    latency_cdf,
    policy_ranking,
    policy_styles,
    rank_timing_map,
    slowdown_bars,
    slowdown_heatmap,
    utilisation_figure,
)
from qoslab.plots.interference import wait_unit
from qoslab.policies.search import is_candidate
from qoslab.sweep.iterations import IterationsFile
from qoslab.sweep.outputs import replacing, write_bytes, write_text

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.88em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f2f2f2; } td:first-child, th:first-child { text-align: left; }
.headline { background: #eef4fb; border-left: 4px solid #3b75af; padding: 0.6em 1em; }
.note { color: #555; font-size: 0.9em; } img { max-width: 100%; }
figure { margin: 1em 0; } figcaption { color: #555; font-size: 0.9em; }
.error { color: #a00; } .warning { color: #8a4b00; }
"""

METRICS = [
    ("slowdown", "T_shared / T_alone of a job: its runtime beside the other jobs under a policy, over its runtime alone on the same hosts."),
    ("total contention", "Sum over jobs of T_shared − T_alone (Jokanovic et al.'s Total_contention), mean over repetitions."),
    ("95% CI", "Confidence interval of a mean over repetitions: mean ± t(0.975, n−1) × s / √n (Student t, s the sample standard deviation); none with one repetition."),
    ("Pw", "Compute-power waste: C × Σ ranks × (T_shared − T_alone), in core-seconds with C = 1."),
    ("throughput", "3600 s × Σ 1/T_shared: jobs per hour if every job is rerun back to back; 'vs alone' divides by the same sum of alone runtimes."),
    ("p99/p50, cv", "Predictability of a job's iteration times: the 99th percentile over the median, and the standard deviation over the mean."),
    ("CIF", "GPCNeT's congestion impact factor: congested over isolated latency (isolated over congested bandwidth), for GPCNeT's average and 99th percentile; for other jobs their iteration times shared over alone; > 1 means congestion hurts."),
    ("wait (who delayed whom)", "Time the victim's packets spent waiting on the culprit's packets, summed over packets, mean per run over repetitions: output waits (for the link, the VL's turn or credits) and buffer waits (queued behind the culprit's packet)."),
    ("utilisation", "busy_ns / (links × simulated time) of a tree level, direction and VL: the share of the run its links spent sending that VL's packets."),
]

# Grouped bars read well up to this many policies; beyond, the policies x jobs heatmap.
BAR_POLICIES = 6


def _figure(fig: Any, out_dir: Path, name: str, alt: str | None = None, formats: Iterable[str] | None = None,
            caption: str | None = None) -> str:
    """Saves `fig` as figures/<name>.png (and .svg, .pdf if in `formats`) and returns an <img>
    with the PNG embedded, its alt text `alt` (default: the name), under a caption if given."""
    folder = out_dir / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    data = buffer.getvalue()
    try:
        write_bytes(folder / f"{name}.png", data)
        for extra in dict.fromkeys(formats or ()):
            if extra == "png":
                continue
            # Fixed ids and no dates, so the same study writes the same files.
            with plt.rc_context({"svg.hashsalt": "qoslab"}), replacing(folder / f"{name}.{extra}") as temp:
                fig.savefig(temp, format=extra, bbox_inches="tight", metadata=VECTOR_METADATA[extra])
    finally:
        plt.close(fig)
    image = f'<img alt="{html.escape(alt or name)}" src="data:image/png;base64,{base64.b64encode(data).decode()}">'
    if caption is None:
        return image
    return f"<figure>{image}<figcaption>{caption}</figcaption></figure>"


VECTOR_METADATA: dict[str, dict[str, Any]] = {"svg": {"Date": None, "Creator": None},
                                              "pdf": {"CreationDate": None, "Creator": None, "Producer": None}}


def _table(frame: pd.DataFrame, formats: dict[str, str] | None = None, break_headers: bool = False) -> str:
    """`frame` as an HTML table; `break_headers`: the column names (kept as in Parquet) may wrap
    after an underscore, so a wide table fits the page."""
    formats = formats or {}
    head = "".join(f"<th>{html.escape(str(c)).replace('_', '_<wbr>') if break_headers else html.escape(str(c))}</th>"
                   for c in frame.columns)
    body = []
    for row in frame.itertuples(index=False):
        cells = []
        for column, value in zip(frame.columns, row):
            if isinstance(value, float):
                text = "–" if np.isnan(value) else format(value, formats.get(column, ".3g"))
            else:
                text = str(value)
            cells.append(f"<td>{html.escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _names(policies: Iterable[str]) -> str:
    return ", ".join(policies)


def write_report(out_dir: str | Path, tables: dict[str, pd.DataFrame], iterations: IterationsFile,
                 search: pd.DataFrame | None, meta: dict[str, Any]) -> Path:
    """Writes out_dir/report.html (and its figures under out_dir/figures/) from the run tables,
    the iterations (read by slice) and the search candidates."""
    out = Path(out_dir)
    jobs, runs = tables["jobs"], tables["runs"]
    formats = meta.get("figure_formats") or ["png"]
    policies_meta = {p["name"]: p["description"] for p in meta.get("policies", [])}
    slow = slowdowns(jobs)
    summary = policy_summary(slow)
    parts = [f"<h1>{html.escape(meta.get('name') or 'qoslab study')}</h1>"]
    if meta.get("description"):
        parts.append(f"<p>{html.escape(meta['description'])}</p>")
    parts.append(_setup(meta, jobs))
    if meta.get("warnings"):
        # Weights the fabric's MTU cannot tell apart: the policies compared are not what they say.
        parts.append("<h3>Warnings</h3><ul class='error'>" + "".join(
            f"<li>{html.escape(w)}</li>" for w in meta["warnings"]) + "</ul>")
    if summary.empty:
        parts.append("<p class='error'>No policy has complete runs to compare; see the failed runs below.</p>")
    else:
        # The study's order (the search winners and later stages would otherwise come last).
        listed = [p["name"] for p in meta.get("policies", [])]
        present = list(summary["policy"])
        order = [p for p in listed if p in present] + [p for p in present if p not in listed]
        summary = summary.set_index("policy").loc[order].reset_index()
        # One look per policy, the same in every figure: the study's order, alone and default first.
        styles = policy_styles(["alone", "default", *order])
        parts.append(_headline(summary, slow, runs))
        parts.append(_policies(summary, policies_meta))
        parts.append(_slowdown(slow, order, styles, out, formats))
        repetitions = int(summary["complete_repetitions"].max())  # the most any policy rests on
        parts.append("<h2>Ranking</h2>" + _figure(
            policy_ranking(summary, styles=styles), out, "ranking", formats=formats,
            alt=f"Policies by total contention, best first, with 95% confidence intervals: {_names(ranking(summary)['policy'])}",
            caption=html.escape(_interval_caption(repetitions, "whiskers"))))
        parts.append(_interference(tables.get("interference"), runs, jobs, order, out, formats))
        parts.append(_utilisation(tables.get("vl_levels"), runs, order, out, formats))
        parts.append(_per_rank(iterations, slow, order, out, formats))
        parts.append(_distributions(iterations, jobs, order, styles, out, formats, meta.get("base_scenario", {})))
    if search is not None and len(search):
        parts.append("<h2>Search candidates</h2>" + _table(search[["search", "rank", "candidate", "objective", "value"]]))
    parts.append(_failures(runs))
    parts.append("<h2>How the metrics are defined</h2><table>" + "".join(
        f"<tr><td>{html.escape(k)}</td><td style='text-align:left'>{html.escape(v)}</td></tr>" for k, v in METRICS) + "</table>")
    parts.append(f"<p class='note'>qoslab {html.escape(str(meta.get('qoslab_version', '')))}; tables beside this "
                 "file: runs, jobs, iterations, levels, interference, vl_levels, slowdown, policies (Parquet); "
                 "docs/metrics.md defines every metric.</p>")
    page = f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(meta.get('name') or 'qoslab study')}</title>" \
           f"<style>{STYLE}</style></head><body>{''.join(parts)}</body></html>"
    return write_text(out / "report.html", page)


def _interval_caption(repetitions: int, marks: str = "error bars") -> str:
    """`repetitions`: the most complete repetitions any policy has; a policy with fewer has a wider
    interval, and one with a single one none (the policies table gives each its count)."""
    if repetitions == 0:
        return "No repetition completed (the headline says how the runs ended), so there is no mean to show."
    if repetitions < 2:
        return (f"One repetition: there is no confidence interval, so no {marks}; differences between policies "
                "cannot be told from run-to-run variation.")
    return (f"{marks.capitalize()}: 95% confidence interval of the mean over each policy's complete repetitions "
            f"(Student t; at most {repetitions}, see the policies table), not the range of the repetitions.")


def _setup(meta: dict[str, Any], jobs: pd.DataFrame) -> str:
    scenario = meta.get("base_scenario") or {}
    topology = scenario.get("topology") or {}
    shape = ", ".join(f"{k} = {v}" for k, v in topology.items() if k != "kind")
    fabric = scenario.get("fabric") or {}
    text = (f"<p class='note'>Fabric: {html.escape(str(topology.get('kind', '?')))} ({html.escape(shape)}), "
            f"{fabric.get('link_gbps', '?')} Gb/s links, {fabric.get('data_vls', '?')} data VLs, routing "
            f"{html.escape(str((scenario.get('routing') or {}).get('algorithm', '?')))}; "
            f"{len(meta.get('seeds', []))} repetition(s) (seeds {html.escape(str(meta.get('seeds', [])))}).</p>")
    alone = jobs[jobs["mode"] == "alone"].groupby("job", sort=False).agg(
        workload=("workload", "first"), ranks=("ranks", "first"), alone_us=("runtime_us", "mean")).reset_index()
    return text + "<h2>Jobs</h2>" + _table(alone, {"alone_us": ",.1f"})


# How a run that did not complete ended (runs.parquet's status), and what to do about it.
ENDINGS = {
    "deadlock": ("deadlocked", "A deadlock is a result of the fabric, routing and policy (the runs table below names "
                 "its cycle or the ranks waiting); more time does not change it."),
    "time_limit": ("ended at the time limit (run.duration_us) before all their jobs finished",
                   "Give the runs more time (run.duration_us)."),
    "error": ("failed with an error", "Running the study again retries the runs that failed with an error."),
}


def _endings(runs: pd.DataFrame) -> tuple[str, str]:
    """How `runs` that did not complete ended, counted by status ("2 deadlocked, 1 failed with an
    error"), and the advice for those statuses."""
    counts = runs.loc[runs["status"] != "completed", "status"].value_counts()
    said = [f"{int(counts[status])} {what}" for status, (what, _) in ENDINGS.items() if status in counts]
    said += [f"{int(n)} ended as {status}" for status, n in counts.items() if status not in ENDINGS]
    advice = " ".join(hint for status, (_, hint) in ENDINGS.items() if status in counts)
    return ", ".join(said) or "none failed, but some job never completed", advice


def _headline(summary: pd.DataFrame, slow: pd.DataFrame, runs: pd.DataFrame) -> str:
    runs = runs[~runs["policy"].map(is_candidate)]  # a search's candidates are scored, not compared
    shared = runs[runs["mode"] == "shared"]
    if summary["total_contention_us"].isna().all():
        ended, advice = _endings(runs)
        return (f"<div class='headline'>No repetition completed, so there is no contention to compare: of the "
                f"{len(shared)} shared and {len(runs) - len(shared)} alone runs, {html.escape(ended)}. "
                f"{html.escape(advice)}</div>")
    ranked = ranking(summary)
    best = ranked.iloc[0]
    default = summary[summary["policy"] == "default"]
    lines = []
    if len(default) and np.isnan(default.iloc[0]["total_contention_us"]):
        ended, _ = _endings(pd.concat([shared[shared["policy"] == "default"], runs[runs["mode"] == "alone"]]))
        lines.append(f"Under the default policy no repetition completed (of its shared runs and the alone runs, "
                     f"{html.escape(ended)}), so no figure is given against it.")
    elif len(default):
        d = default.iloc[0]
        lines.append(f"Sharing the fabric under the default policy costs the jobs {d['total_contention_us']:,.0f} us of "
                     f"contention in total; the worst hit, {html.escape(str(d['worst_job']))}, runs {d['worst_slowdown']:.2f}× slower than alone.")
    if len(default) and best["policy"] != "default":
        against = f" ({best['vs_default_pct']:+.1f}% against default)" if not np.isnan(best["vs_default_pct"]) else ""
        lines.append(f"The best policy by total contention is <b>{html.escape(best['policy'])}</b>: "
                     f"{best['total_contention_us']:,.0f} us{against}"
                     f"{_interval_text(best)}; its worst job, {html.escape(str(best['worst_job']))}, runs "
                     f"{best['worst_slowdown']:.2f}× slower than alone.")
    elif len(default):
        lines.append("No policy beats the default on total contention.")
    else:
        lines.append(f"The best policy by total contention is <b>{html.escape(best['policy'])}</b>.")
    unfinished = summary[incomplete(summary)]
    if len(unfinished):
        names = ", ".join(f"{html.escape(str(r.policy))} ({r.complete_repetitions} of {r.repetitions})"
                          for r in unfinished.itertuples())
        lines.append(f"<span class='warning'>Some job did not complete in every repetition under {names}: each "
                     "such policy's figures rest on the repetitions it completed, often the easier placements, so it "
                     "is ranked after every policy that completed all of them.</span>")
    lines += [_lead_text(lead) for lead in best_policy_leads(summary, slow).to_dict("records")]
    return "<div class='headline'>" + "<br>".join(lines) + "</div>"


def _interval_text(row: pd.Series) -> str:
    if row.get("identical_repetitions", False):
        return f", the same in all {int(row['complete_repetitions'])} repetitions"
    if np.isnan(row["total_contention_ci95_low_us"]):
        return ""
    return (f", 95% confidence interval {row['total_contention_ci95_low_us']:,.0f} to "
            f"{row['total_contention_ci95_high_us']:,.0f} us over {int(row['complete_repetitions'])} repetitions")


def _lead_text(lead: dict[str, Any]) -> str:
    best, other = html.escape(str(lead["best"])), html.escape(str(lead["other"]))
    whom = {"default": "default", "runner-up": f"the runner-up, {other}",
            "default and runner-up": "default, the runner-up"}[lead["against"]]
    repetitions = int(lead["repetitions"])
    plural = "repetition" if repetitions == 1 else "repetitions"
    if lead.get("tied"):
        return (f"<span class='warning'>{best} and {whom} are tied: the same total contention in each of the "
                f"{repetitions} {plural} both completed; {best} is named first only because it is listed "
                "first.</span>")
    if lead.get("identical_repetitions"):
        return (f"<span class='warning'>The repetitions of {best} or {other} gave identical results (a fixed "
                "placement and no random traffic, or a fabric on which every placement is alike), so they are one "
                f"sample: {best}'s lead over {whom} ({lead['lead_us']:,.0f} us) holds for the placement run; its "
                "variation over placements is unknown.</span>")
    if lead["distinguishable"] is None:
        return (f"<span class='warning'>With {repetitions} {plural} that both completed there is no confidence "
                f"interval: {best}'s lead over {whom} ({lead['lead_us']:,.0f} us) cannot be told from run-to-run "
                "variation; run more repetitions.</span>")
    interval = f"{lead['lead_ci95_low_us']:,.0f} to {lead['lead_ci95_high_us']:,.0f} us"
    chosen = f", widened for picking the best of {lead['candidates']} policies" if lead["candidates"] > 1 else ""
    if lead["distinguishable"] and lead["lead_us"] < 0:
        return (f"<span class='warning'>Warning: over the {repetitions} {plural} both completed, {best} has "
                f"{-lead['lead_us']:,.0f} us more contention than {whom} (95% confidence interval "
                f"{-lead['lead_ci95_high_us']:,.0f} to {-lead['lead_ci95_low_us']:,.0f} us{chosen}): it ranks first only because "
                f"{other} did not complete every repetition.</span>")
    if lead["distinguishable"]:
        return (f"{best}'s lead over {whom}, {lead['lead_us']:,.0f} us (95% confidence interval {interval}, paired "
                f"over {repetitions} {plural}{chosen}), is more than run-to-run variation.")
    return (f"<span class='warning'>Warning: {best}'s lead over {whom}, {lead['lead_us']:,.0f} us, is within run-to-run "
            f"variation (95% confidence interval {interval}, paired over {repetitions} {plural}{chosen}): {best} is not "
            f"distinguishable from {other}.</span>")


def _policies(summary: pd.DataFrame, policies_meta: dict[str, str]) -> str:
    show = summary[["policy", "total_contention_us"]].assign(**{"95% CI (us)": [
        _range(lo, hi, ",.0f") for lo, hi in zip(summary["total_contention_ci95_low_us"],
                                                  summary["total_contention_ci95_high_us"])]})
    show = pd.concat([show, summary[["vs_default_pct", "mean_slowdown", "worst_slowdown", "worst_job", "throughput_vs_alone",
                                     "pw_core_seconds", "complete_repetitions"]]], axis=1)
    return ("<h2>Policies</h2><p class='note'>Total contention: mean over repetitions, with its 95% confidence "
            "interval (Student t; – with one repetition).</p>" +
            _table(show, {"vs_default_pct": "+.1f", "total_contention_us": ",.0f"}, break_headers=True) +
            "<h3>What each policy does</h3><table><tr><th>policy</th><th>description</th></tr>" + "".join(
                f"<tr><td>{html.escape(p)}</td><td style='text-align:left'>{html.escape(policies_meta.get(p, ''))}</td></tr>"
                for p in summary["policy"]) + "</table>")


def _range(low: float, high: float, spec: str) -> str:
    return "–" if np.isnan(low) else f"{format(low, spec)} to {format(high, spec)}"


def _slowdown(slow: pd.DataFrame, order: list[str], styles: dict[str, Any], out: Path, formats: list[str]) -> str:
    intervals = slowdown_intervals(slow)
    repetitions = int(intervals["slowdown_repetitions"].max()) if len(intervals) else 0
    if len(order) <= BAR_POLICIES:
        figure = slowdown_bars(slow, order, styles)
        what = "Bars: mean slowdown over repetitions. " + _interval_caption(repetitions)
    else:
        figure = slowdown_heatmap(slow, order)
        what = ("Each cell: mean slowdown over repetitions; ± the half-width of its 95% confidence interval (Student t)."
                if repetitions > 1 else "Each cell: the slowdown. " + _interval_caption(repetitions, "intervals"))
    parts = ["<h2>Slowdown per job</h2>", _figure(figure, out, "slowdown", formats=formats,
                                                  alt=f"Slowdown of each job under each policy: {_names(order)}",
                                                  caption=html.escape(what))]
    cells = intervals.assign(cell=[_mean_and_interval(m, lo, hi) for m, lo, hi in zip(
        intervals["slowdown_mean"], intervals["slowdown_ci95_low"], intervals["slowdown_ci95_high"])])
    table = cells.pivot(index="policy", columns="job", values="cell").reindex(order).reset_index()
    table.columns.name = None
    parts.append("<p class='note'>Mean slowdown [95% confidence interval] over repetitions.</p>" + _table(table))
    return "".join(parts)


def _mean_and_interval(mean: float, low: float, high: float) -> str:
    if np.isnan(mean):
        return "–"
    return f"{mean:.3g}" if np.isnan(low) else f"{mean:.3g} [{low:.3g}, {high:.3g}]"


def _interference(interference: pd.DataFrame | None, runs: pd.DataFrame, jobs: pd.DataFrame, order: list[str],
                  out: Path, formats: list[str]) -> str:
    if interference is None or interference.empty:
        return ""
    job_names = list(dict.fromkeys(jobs["job"]))
    classes = class_order(job_names, set(interference["victim"]) | set(interference["culprit"]))
    matrix = interference_matrix(interference, runs, classes)
    shown = [p for p in order if p in set(matrix["policy"])]
    if not shown:
        return ""
    parts = ["<h2>Who delayed whom</h2>", (
        "<p>During every shared run the engine charges each packet's waiting to the job whose packet it waited for. "
        "<b>Output waits</b>: at an output port while another packet is on the link (on any VL: waiting for the link "
        "or for its VL's turn), or while the port is stalled for credits (charged to the job holding the downstream "
        "buffer). <b>Buffer waits</b>: queued behind another packet in an input buffer or a send queue "
        "(head-of-line blocking), charged to that packet's job. They are shown separately because different levers "
        "act on them: arbitration weights and priorities decide who gets the link (output waits), while only "
        "separate VLs take one job's packets out of another's queues (buffer waits); and a buffer wait blames the "
        "packet in front, often the victim's own, which itself waits at an output for someone else. For one packet "
        "the two are disjoint spans of time, so the sentences and the table below add them for the whole harm one "
        "job did another.</p>"
        "<p class='note'>Row: the job that waited; column: the job it waited for; the diagonal is a job waiting on "
        "its own packets. Values: waiting summed over the waiting job's packets (two packets waiting 1 us each "
        "count 2 us), summed over the fabric, mean per run over the repetitions; one colour scale (log) for all "
        "panels of a figure; blank: no wait.</p>")]
    for kind in ("output", "buffer"):
        parts.append(_figure(interference_figure(matrix, shown, classes, kind), out, f"interference-{kind}",
                             formats=formats, alt=f"Who delayed whom, {kind} waits, one panel per policy: {_names(shown)}"))
    shift = harm_shift(cross_job_changes(matrix))
    shift = shift.set_index("policy").reindex([p for p in shown if p in set(shift["policy"])]).reset_index()
    unit = wait_unit(float(matrix["wait_ns"].max()))
    if len(shift):
        parts.append(f"<h3>Against default: was the harm removed or moved?</h3><p class='note'>Waiting the jobs "
                     f"caused each other (output and buffer, diagonal left out), against the default policy. "
                     f"<i>reduced</i>/<i>increased</i>: one direction dominates; <i>moved</i>: some pairs rose by at "
                     f"least {MOVED_SHARE:.0%} of what others fell (or the reverse); <i>about the same</i>: the falls "
                     f"together and the rises together each under {UNCHANGED_SHARE:.0%} of the default's total (so "
                     f"<i>moved</i> can hide a net change: see the figures in each line). Means over repetitions, without intervals: "
                     f"check the slowdown intervals above before reading much into small changes.</p><ul>" +
                     "".join(f"<li>{_harm_sentence(row, unit)}</li>" for row in shift.to_dict("records")) + "</ul>")
    table = matrix.pivot_table(index=["policy", "victim", "culprit"], columns="kind", values="wait_ns", sort=False)
    table = (table.reindex(columns=["output", "buffer"]).fillna(0.0) / unit[1]).reset_index()
    table = table[table["output"] + table["buffer"] > 0]
    table["total"] = table["output"] + table["buffer"]
    base = table[table["policy"] == "default"].set_index(["victim", "culprit"])["total"]
    table["vs default %"] = [100.0 * (t / base[(v, c)] - 1.0) if (v, c) in base.index and base[(v, c)] > 0 else np.nan
                             for v, c, t in zip(table["victim"], table["culprit"], table["total"])]
    table = table.rename(columns={"output": f"output wait {unit[0]}", "buffer": f"buffer wait {unit[0]}",
                                  "total": f"total {unit[0]}"})
    table.columns.name = None
    parts.append(f"<details><summary>Table: waits per policy, victim and culprit ({unit[0]}, mean per run)</summary>" +
                 _table(table, {"vs default %": "+.0f"}) + "</details>")
    return "".join(parts)


def _pair(victim: str, culprit: str) -> str:
    return f"{html.escape(victim)}'s wait caused by {html.escape(culprit)}"


def _change(pct: float, change_ns: float, unit: tuple[str, float]) -> str:
    if np.isnan(pct):
        return f"{change_ns / unit[1]:+.3g} {unit[0]} (none under default)"
    return f"{pct:+.0f}%"


def _harm_sentence(row: dict[str, Any], unit: tuple[str, float]) -> str:
    name, scale = unit
    text = f"<b>{html.escape(row['policy'])}</b>: waiting caused by other jobs "
    if np.isnan(row["change_pct"]):
        text += f"{row['cross_wait_ns'] / scale:.3g} {name}, none under default"
    else:
        text += (f"{row['change_pct']:+.0f}% against default ({row['baseline_cross_wait_ns'] / scale:,.3g} → "
                 f"{row['cross_wait_ns'] / scale:,.3g} {name})")
    text += f": harm {row['verdict']}."
    if row["largest_fall"] is not None:
        v, c, pct, ns = row["largest_fall"]
        text += f" Largest fall: {_pair(v, c)}: {_change(pct, ns, unit)}."
    if row["largest_rise"] is not None:
        v, c, pct, ns = row["largest_rise"]
        text += f" Largest rise: {_pair(v, c)}: {_change(pct, ns, unit)}."
    return text


def _utilisation(vl_levels: pd.DataFrame | None, runs: pd.DataFrame, order: list[str], out: Path, formats: list[str]) -> str:
    if vl_levels is None or vl_levels.empty:
        return ""
    utilisation = vl_utilisation(vl_levels, runs)
    shown = [p for p in order if p in set(utilisation["policy"])]
    if not shown:
        return ""
    return ("<h2>Link utilisation per level and VL</h2><p>Which VLs carry the load, and where: for each tree level "
            "(level l holds the links between levels l−1 and l) and direction, the share of the run its links spent "
            "sending each VL's packets (busy time / (links × the run's simulated time), from vl_levels.parquet), "
            "averaged over all the level's links, used or not, and over repetitions, so a few saturated links "
            "show as a modest average. A policy that separates jobs onto VLs moves the load across columns; the top "
            "level's up-links are where a slimmed tree is short of bandwidth.</p>" +
            _figure(utilisation_figure(utilisation, shown), out, "utilisation", formats=formats,
                    alt=f"Link utilisation per level, direction and VL, one panel per policy: {_names(shown)}"))


def _most_affected(slow: pd.DataFrame) -> str:
    base = slow[slow["policy"] == "default"]
    source = base if len(base) else slow
    return str(source.groupby("job")["slowdown"].mean().idxmax())


def _per_rank(iterations: IterationsFile, slow: pd.DataFrame, order: list[str], out: Path, formats: list[str]) -> str:
    # Jobs run with record_iterations = false have no iterations to show.
    slow = slow[slow["job"].isin(set(iterations.jobs()))]
    if iterations.empty or slow["slowdown"].notna().sum() == 0:
        return ""
    job = _most_affected(slow)
    present = set(iterations.present[job])
    shown = [p for p in ["alone", *order] if p in present]
    # The first repetition only (the figure's), a policy at a time.
    first = iterations.first_repetition(job)
    spread = pd.concat([slowest_ranks(iterations.read(job, [p], repetition=first)) for p in shown]).set_index("policy")
    spread = spread.reindex([p for p in shown if p in spread.index]).reset_index()
    spread["slowest_ranks"] = [", ".join(map(str, s[:8])) for s in spread["slowest"]]
    spread = spread[["policy", "ranks", "median_ns", "max_ns", "max_over_median", "send_latency_max_over_median",
                     "slowest_ranks"]]
    return (f"<h2>Per-rank timing: {html.escape(job)}</h2><p class='note'>The job the default policy hurts most. Each "
            "panel a policy, each row a rank, each column an iteration (first repetition). In the table, per "
            "iteration the median and the slowest rank's time, averaged over iterations, and their ratio; the "
            "slowest ranks are those whose messages arrive latest (highest mean message latency), and their "
            "latency over the median rank's. A rank's mean iteration time says nothing here: ranks that "
            "synchronise finish together, so those means are equal.</p>" +
            _figure(rank_timing_map(iterations, job, shown), out, f"ranks-{job}", formats=formats,
                    alt=f"{job}: per-rank iteration times, one panel per policy: {_names(shown)}") +
            _table(spread, {"median_ns": ",.0f", "max_ns": ",.0f", "max_over_median": ".3f",
                            "send_latency_max_over_median": ".3f"}))


def _distributions(iterations: IterationsFile, jobs: pd.DataFrame, order: list[str], styles: dict[str, Any], out: Path,
                   formats: list[str], scenario: dict[str, Any]) -> str:
    """Per job: its iteration-time CDF per policy, its predictability and GPCNeT's congestion
    impact, each read a job and a policy at a time (analysis/sliced.py): the study's iterations
    are never all in memory."""
    if iterations.empty:
        return ""
    parts = ["<h2>Iteration-time distributions</h2>"]
    policies = ["alone", *order]
    canaries = canary_tests(scenario)
    stats, gpcnet, impacts = [], [], []
    for job, job_policies in iterations.present.items():
        shown = [p for p in policies if p in set(job_policies)]
        parts.append(_figure(latency_cdf(iterations, job, shown, styles=styles), out, f"cdf-{job}", formats=formats,
                             alt=f"{job}: iteration time distribution per policy: {_names(shown)}"))
        stats.append(job_iteration_stats(iterations, job))
        # The impact compares runs in which the job completed: a deadlocked run's few iterations say nothing.
        complete = set(jobs.loc[(jobs["job"] == job) & jobs["completed"].astype(bool), "run_id"])
        if job in canaries:
            gpcnet.append(job_gpcnet_impact(iterations, job, canaries[job], complete))
        else:
            impacts.append(job_congestion_impact(iterations, job, complete))
    table = pd.concat(stats, ignore_index=True)
    table = table[["job", "policy", "count", "p50", "p99", "p99_over_p50", "cv"]].sort_values(["job"], kind="stable")
    parts.append("<h3>Predictability (iteration times, ns)</h3>" + _table(table, {"p50": ",.0f", "p99": ",.0f"}))
    gpcnet = [g for g in gpcnet if len(g)]
    if gpcnet:
        table = pd.concat(gpcnet, ignore_index=True)
        parts.append("<h3>GPCNeT congestion impact of the canaries</h3><p class='note'>As GPCNeT computes it "
                     "(docs/metrics.md): per test, its average and 99th percentile alone (isolated) and under each "
                     "policy (congested), in GPCNeT's units; CIF = congested / isolated latency, isolated / congested "
                     "bandwidth; 'printed' as GPCNeT's table shows it.</p>" +
                     _table(table[["job", "test", "policy", "unit", "isolated_average", "congested_average", "isolated_p99",
                                   "congested_p99", "cif_average", "cif_p99", "cif_average_printed", "cif_p99_printed"]]))
    impacts = [i for i in impacts if len(i)]
    if impacts:
        table = pd.concat(impacts, ignore_index=True)
        parts.append("<h3>Congestion impact (GPCNeT's CIF: shared over alone iteration time)</h3>" +
                     _table(table[["job", "policy", "cif_average", "cif_p99"]]))
    return "".join(parts)


def _failures(runs: pd.DataFrame) -> str:
    failed = runs[runs["status"] != "completed"]
    if failed.empty:
        return "<h2>Runs</h2><p>All runs completed.</p>"
    rows = failed[["run_id", "repetition", "policy", "alone_job", "status", "error"]].fillna("")
    return "<h2>Runs that did not complete</h2>" + _table(rows)
