"""The tail-latency study's report: latency distributions per locality and routing, their tails
and modes, and how well the background-traffic heuristic b predicts the slow runs."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from qoslab.analysis.tail import compare_groups, correlation, tail_prediction
from qoslab.plots.tail import cdfs_figure, histograms_figure
from qoslab.report.html import STYLE, _figure, _table

BY = ["background", "locality", "routing"]


def with_background_label(iterations: pd.DataFrame) -> pd.DataFrame:
    frame = iterations.copy()
    frame["background"] = np.where(frame["snapshot"] < 0, "none", "snapshots")
    return frame


def run_medians(iterations: pd.DataFrame) -> pd.DataFrame:
    """Per background run: b, and the median and p99 of its iteration latencies."""
    runs = iterations[iterations["snapshot"] >= 0]
    grouped = runs.groupby(["snapshot", "locality", "routing"], sort=False)
    out = grouped.agg(b=("b", "first"), p50_ns=("latency_ns", "median"),
                      p99_ns=("latency_ns", lambda v: float(np.percentile(v, 99)))).reset_index()
    return out


def prediction_table(iterations: pd.DataFrame, tail_quantile: float) -> pd.DataFrame:
    """Per locality x routing: Pearson and Spearman between b and each run's median latency, and
    how a threshold on b (chosen for the best F1) flags the runs whose median is in the tail."""
    rows = []
    for (locality, routing), runs in run_medians(iterations).groupby(["locality", "routing"], sort=False):
        row: dict[str, Any] = {"locality": locality, "routing": routing, "runs": len(runs)}
        try:
            c = correlation(runs["b"], runs["p50_ns"])
            p = tail_prediction(runs["b"], runs["p50_ns"], tail_quantile=tail_quantile)
            row.update(pearson_r=c.pearson_r, spearman_rho=c.spearman_rho, threshold_b=p.threshold,
                       precision=p.precision, recall=p.recall, f1=p.f1)
        except ValueError as error:  # too few runs, or b constant: say so in the table
            row.update(note=str(error))
        rows.append(row)
    return pd.DataFrame(rows)


def _scatter(medians: pd.DataFrame) -> Any:
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for (locality, routing), runs in medians.groupby(["locality", "routing"], sort=False):
        ax.scatter(runs["b"], runs["p50_ns"] / 1000.0, s=14, label=f"{locality}, {routing}")
    ax.set_xlabel("background traffic b at the job's start")
    ax.set_ylabel("median iteration latency (µs)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def write_tail_report(out_dir: str | Path, tables: dict[str, pd.DataFrame], meta: dict[str, Any]) -> Path:
    out = Path(out_dir)
    runs, iterations = tables["tail_runs"], tables["tail_iterations"]
    name = meta.get("name") or "tail-latency study"
    formats = meta.get("figure_formats")
    parts = [f"<h1>{html.escape(name)}</h1>"]
    if meta.get("description"):
        parts.append(f"<p>{html.escape(meta['description'])}</p>")
    target = meta.get("target", {})
    parts.append("<h2>Setup</h2><p>Measured job: " + html.escape(
        f"{target.get('nodes')} nodes, {target.get('workload', {}).get('kind')} "
        f"{target.get('workload', {}).get('collective', '')} {target.get('workload', {}).get('bytes', '')} B, "
        f"{target.get('workload', {}).get('iterations')} iterations") + "; fabric: " +
        html.escape(", ".join(f"{k} {v}" for k, v in meta.get("fabric", {}).items() if v is not None)) +
        f"; heuristic b: {html.escape(str(meta.get('heuristic')))}.</p>")
    if iterations.empty:
        parts.append("<p class='error'>No run completed; see the runs below.</p>")
    else:
        frame = with_background_label(iterations)
        summary = compare_groups(frame, value="latency_ns", by=BY)
        show = summary[BY + ["count", "p50", "p99", "p999", "p99_over_p50", "skewness", "modes", "bimodal"]]
        parts.append("<h2>Latency per iteration</h2><p class='note'>Latency of an iteration: the slowest "
                     "rank's time (a collective completes for all). p99/p50 &gt; 2 is a long tail; bimodal: "
                     "Sarle's coefficient &gt; 5/9 and two KDE modes.</p>" + _table(show, {"p50": ",.0f", "p99": ",.0f",
                                                                                            "p999": ",.0f"}))
        parts.append("<h2>Distributions</h2>" + _figure(histograms_figure(frame, BY, "latency_ns", log_y=True), out,
                                                         "tail_histograms", formats=formats))
        parts.append(_figure(cdfs_figure(frame, BY, "latency_ns"), out, "tail_cdfs", formats=formats))
        medians = run_medians(iterations)
        if len(medians):
            parts.append("<h2>Background traffic b and latency</h2>" + _figure(_scatter(medians), out, "tail_b_scatter",
                                                                                       formats=formats))
            q = float(meta.get("tail_quantile", 0.9))
            parts.append(f"<p class='note'>Per locality and routing over the background snapshots: correlation of b "
                         f"with each run's median latency, and a threshold on b (best F1) flagging runs whose median "
                         f"is above the {q:.0%} quantile. The threshold is fitted on the runs it is scored on, so "
                         f"precision and recall are optimistic.</p>" + _table(prediction_table(iterations, q)))
    failed = runs[runs["status"] != "completed"] if "status" in runs else runs.iloc[0:0]
    if len(failed):
        parts.append("<h2>Runs that did not complete</h2>" + _table(
            failed[["snapshot", "locality", "routing", "status", "error"]].astype(str)))
    parts.append(f"<p class='note'>qoslab {html.escape(str(meta.get('qoslab_version', '')))}; tables beside this file: "
                 "tail_runs, tail_iterations (Parquet); docs/dragonfly.md explains the study.</p>")
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(name)}</title>"
            f"<style>{STYLE}</style></head><body>{''.join(parts)}</body></html>")
    path = out / "report.html"
    path.write_text(page)
    return path
