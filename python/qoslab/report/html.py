"""report.html: what a person reads instead of the tables. One file, figures embedded as PNG,
a small inline stylesheet, no external references, so it can be mailed or archived as is."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from qoslab.analysis import (
    canary_tests,
    congestion_impact,
    gpcnet_impact,
    iteration_stats,
    policy_summary,
    slowdowns,
    slowest_ranks,
)
from qoslab.analysis.contention import ranking
from qoslab.plots import latency_cdf, policy_ranking, rank_timing_map, slowdown_bars

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.88em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f2f2f2; } td:first-child, th:first-child { text-align: left; }
.headline { background: #eef4fb; border-left: 4px solid #3b75af; padding: 0.6em 1em; }
.note { color: #555; font-size: 0.9em; } img { max-width: 100%; }
.error { color: #a00; }
"""

METRICS = [
    ("slowdown", "T_shared / T_alone of a job: its runtime beside the other jobs under a policy, over its runtime alone on the same hosts."),
    ("total contention", "Sum over jobs of T_shared − T_alone (Jokanovic et al.'s Total_contention), mean over repetitions."),
    ("Pw", "Compute-power waste: C × Σ ranks × (T_shared − T_alone), in core-seconds with C = 1."),
    ("throughput", "3600 s × Σ 1/T_shared: jobs per hour if every job is rerun back to back; 'vs alone' divides by the same sum of alone runtimes."),
    ("p99/p50, cv", "Predictability of a job's iteration times: the 99th percentile over the median, and the standard deviation over the mean."),
    ("CIF", "GPCNeT's congestion impact factor: congested over isolated latency (isolated over congested bandwidth), for GPCNeT's average and 99th percentile; for other jobs their iteration times shared over alone; > 1 means congestion hurts."),
]


def _figure(fig: Any, out_dir: Path, name: str) -> str:
    """Saves `fig` as figures/<name>.png and returns an <img> with it embedded."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    data = buffer.getvalue()
    folder = out_dir / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.png").write_bytes(data)
    return f'<img alt="{html.escape(name)}" src="data:image/png;base64,{base64.b64encode(data).decode()}">'


def _table(frame: pd.DataFrame, formats: dict[str, str] | None = None) -> str:
    formats = formats or {}
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
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


def write_report(out_dir: str | Path, tables: dict[str, pd.DataFrame], meta: dict[str, Any]) -> Path:
    """Writes out_dir/report.html (and its figures as PNG under out_dir/figures/)."""
    out = Path(out_dir)
    jobs, runs, iterations = tables["jobs"], tables["runs"], tables["iterations"]
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
        parts.append(_headline(summary, slow))
        show = summary[["policy", "total_contention_us", "vs_default_pct", "mean_slowdown", "worst_slowdown", "worst_job",
                        "throughput_vs_alone", "pw_core_seconds", "complete_repetitions"]]
        parts.append("<h2>Policies</h2>" + _table(show, {"vs_default_pct": "+.1f", "total_contention_us": ",.0f"}))
        parts.append("<h3>What each policy does</h3><table><tr><th>policy</th><th>description</th></tr>" + "".join(
            f"<tr><td>{html.escape(p)}</td><td style='text-align:left'>{html.escape(policies_meta.get(p, ''))}</td></tr>"
            for p in summary["policy"]) + "</table>")
        order = list(summary["policy"])
        parts.append("<h2>Slowdown per job</h2>" + _figure(slowdown_bars(slow, order), out, "slowdown"))
        per_job = slow.pivot_table(index="policy", columns="job", values="slowdown", aggfunc="mean", sort=False).reset_index()
        parts.append(_table(per_job))
        parts.append("<h2>Ranking</h2>" + _figure(policy_ranking(summary), out, "ranking"))
        parts.append(_per_rank(iterations, slow, summary, out))
        parts.append(_distributions(iterations, slow, summary, out, meta.get("base_scenario", {})))
    if "search" in tables and tables["search"] is not None and len(tables["search"]):
        parts.append("<h2>Search candidates</h2>" + _table(tables["search"][["search", "rank", "candidate", "objective", "value"]]))
    parts.append(_failures(runs))
    parts.append("<h2>How the metrics are defined</h2><table>" + "".join(
        f"<tr><td>{html.escape(k)}</td><td style='text-align:left'>{html.escape(v)}</td></tr>" for k, v in METRICS) + "</table>")
    parts.append(f"<p class='note'>qoslab {html.escape(str(meta.get('qoslab_version', '')))}; tables beside this "
                 "file: runs, jobs, iterations, levels, slowdown, policies (Parquet); docs/metrics.md defines every metric.</p>")
    page = f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(meta.get('name') or 'qoslab study')}</title>" \
           f"<style>{STYLE}</style></head><body>{''.join(parts)}</body></html>"
    path = out / "report.html"
    path.write_text(page)
    return path


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


def _headline(summary: pd.DataFrame, slow: pd.DataFrame) -> str:
    ranked = ranking(summary)
    best = ranked.iloc[0]
    default = summary[summary["policy"] == "default"]
    lines = []
    if len(default):
        d = default.iloc[0]
        lines.append(f"Sharing the fabric under the default policy costs the jobs {d['total_contention_us']:,.0f} us of "
                     f"contention in total; the worst hit, {d['worst_job']}, runs {d['worst_slowdown']:.2f}× slower than alone.")
        if best["policy"] != "default":
            lines.append(f"The best policy by total contention is <b>{html.escape(best['policy'])}</b>: "
                         f"{best['total_contention_us']:,.0f} us ({best['vs_default_pct']:+.1f}% against default); its worst "
                         f"job, {html.escape(str(best['worst_job']))}, runs {best['worst_slowdown']:.2f}× slower than alone.")
        else:
            lines.append("No policy beats the default on total contention.")
    else:
        lines.append(f"The best policy by total contention is <b>{html.escape(best['policy'])}</b>.")
    return "<div class='headline'>" + "<br>".join(lines) + "</div>"


def _most_affected(slow: pd.DataFrame) -> str:
    base = slow[slow["policy"] == "default"]
    source = base if len(base) else slow
    return str(source.groupby("job")["slowdown"].mean().idxmax())


def _per_rank(iterations: pd.DataFrame, slow: pd.DataFrame, summary: pd.DataFrame, out: Path) -> str:
    # Jobs run with record_iterations = false have no iterations to show.
    slow = slow[slow["job"].isin(set(iterations["job"].unique()))]
    if iterations.empty or slow["slowdown"].notna().sum() == 0:
        return ""
    job = _most_affected(slow)
    best = ranking(summary).iloc[0]["policy"]
    shown = list(dict.fromkeys(["alone", "default", best]))
    present = set(iterations.loc[iterations["job"] == job, "policy"].unique())
    shown = [p for p in shown if p in present]
    spread = slowest_ranks(iterations[iterations["job"] == job])
    spread = spread[["policy", "ranks", "median_ns", "max_ns", "max_over_median"]].assign(
        slowest_ranks=[", ".join(map(str, s[:8])) for s in slowest_ranks(iterations[iterations["job"] == job])["slowest"]])
    return (f"<h2>Per-rank timing: {html.escape(job)}</h2><p class='note'>The job the default policy hurts most. Each row is "
            "a rank, each column an iteration (first repetition).</p>" + _figure(rank_timing_map(iterations, job, shown), out,
                                                                                 f"ranks-{job}") + _table(spread))


def _distributions(iterations: pd.DataFrame, slow: pd.DataFrame, summary: pd.DataFrame, out: Path,
                   scenario: dict[str, Any]) -> str:
    if iterations.empty:
        return ""
    parts = ["<h2>Iteration-time distributions</h2>"]
    policies = ["alone"] + list(summary["policy"])
    present = iterations.groupby("job", sort=False)["policy"].unique()
    for job, job_policies in present.items():
        shown = [p for p in policies if p in set(job_policies)]
        parts.append(_figure(latency_cdf(iterations, job, shown[:8]), out, f"cdf-{job}"))
    stats = iteration_stats(iterations)
    stats = stats[["job", "policy", "count", "p50", "p99", "p99_over_p50", "cv"]].sort_values(["job"], kind="stable")
    parts.append("<h3>Predictability (iteration times, ns)</h3>" + _table(stats, {"p50": ",.0f", "p99": ",.0f"}))
    canaries = canary_tests(scenario)
    gpcnet = [gpcnet_impact(iterations, job, canaries[job]) for job in present.index if job in canaries]
    gpcnet = [g for g in gpcnet if len(g)]
    if gpcnet:
        table = pd.concat(gpcnet, ignore_index=True)
        parts.append("<h3>GPCNeT congestion impact of the canaries</h3><p class='note'>As GPCNeT computes it "
                     "(docs/metrics.md): per test, its average and 99th percentile alone (isolated) and under each "
                     "policy (congested), in GPCNeT's units; CIF = congested / isolated latency, isolated / congested "
                     "bandwidth; 'printed' as GPCNeT's table shows it.</p>" +
                     _table(table[["job", "test", "policy", "unit", "isolated_average", "congested_average", "isolated_p99",
                                   "congested_p99", "cif_average", "cif_p99", "cif_average_printed", "cif_p99_printed"]]))
    others = [job for job in present.index if job not in canaries]
    impacts = [congestion_impact(iterations, job) for job in others]
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
