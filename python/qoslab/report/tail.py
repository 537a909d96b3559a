"""The tail-latency study's report: latency distributions per target, locality and routing, their
tails and modes, and how well the background-traffic heuristic b predicts the slow runs (per
target, so several collectives and message sizes compare in one table)."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from qoslab.analysis.tail import (
    b_correlations,
    common_snapshots,
    compare_groups,
    congestion_control_effect,
    run_medians,
)
from qoslab.plots.tail import cdfs_figure, histograms_figure
from qoslab.report.html import STYLE, _figure, _table
from qoslab.sweep.outputs import write_text

BY = ["background", "locality", "routing"]


def with_background_label(iterations: pd.DataFrame) -> pd.DataFrame:
    frame = iterations.copy()
    frame["background"] = np.where(frame["snapshot"] < 0, "none", "snapshots")
    return frame


def prediction_table(table: pd.DataFrame) -> pd.DataFrame:
    """The columns of analysis.tail.b_correlations the report shows: per target x locality x
    routing, Pearson and Spearman between b and each run's median latency, and how a threshold on b
    (chosen for the best F1) flags the runs whose median is in the tail; a note only where a
    figure is undefined."""
    show = [c for c in table.columns if c not in ("b_min", "b_max")]  # p-values kept: few runs say little
    return table[show] if table["note"].notna().any() else table[show].drop(columns="note")


def _describe(target: dict[str, Any]) -> str:
    workload = target.get("workload", {})
    what = " ".join(str(workload.get(k, "")) for k in ("kind", "collective")).strip()
    size = f" {workload['bytes']} B" if "bytes" in workload else ""
    return (f"{target.get('name')}: {target.get('nodes')} nodes x {target.get('ranks_per_node', 1)} ranks, {what}{size}, "
            f"{workload.get('iterations')} iterations")


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "target"


def _scatter(medians: pd.DataFrame, targets: list[str]) -> Any:
    """b against each run's median latency: one panel per target."""
    columns = min(len(targets), 3)
    rows = -(-len(targets) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.6 * columns, 3.4 * rows), squeeze=False)
    for ax, name in zip(axes.flat, targets):
        runs_of = medians[medians["target"] == name] if "target" in medians.columns else medians
        for (locality, routing), runs in runs_of.groupby(["locality", "routing"], sort=False):
            ax.scatter(runs["b"], runs["p50_ns"] / 1000.0, s=14, label=f"{locality}, {routing}")
        if len(targets) > 1:
            ax.set_title(name, fontsize=9)
        ax.set_xlabel("background traffic b at the job's start")
        ax.set_ylabel("median iteration latency (µs)")
        ax.grid(alpha=0.3)
        if len(runs_of):
            ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(targets):]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def _by_message_size(table: pd.DataFrame, targets: list[dict[str, Any]]) -> pd.DataFrame | None:
    """The correlations laid out by message size: one row per collective x locality x routing, one
    column per size, "r / rho" in each cell. None unless several targets run collectives, each a
    different (collective, size): targets differing only in nodes would share a cell."""
    sizes = {t["name"]: (t.get("workload", {}).get("collective"), t.get("workload", {}).get("bytes")) for t in targets}
    if len(targets) < 2 or any(c is None or b is None for c, b in sizes.values()) or "target" not in table.columns \
            or len(set(sizes.values())) < len(sizes):
        return None
    frame = table.copy()
    frame["collective"] = [sizes[t][0] for t in frame["target"]]
    frame["bytes"] = [sizes[t][1] for t in frame["target"]]
    frame["r / rho"] = [("–" if np.isnan(r) else f"{r:.2f}") + " / " + ("–" if np.isnan(s) else f"{s:.2f}")
                        for r, s in zip(frame["pearson_r"], frame["spearman_rho"])]
    wide = frame.pivot_table(index=["collective", "locality", "routing"], columns="bytes", values="r / rho",
                             aggfunc="first", sort=False)
    wide.columns = [f"{b:,} B" for b in wide.columns]
    return wide.reset_index().fillna("")


def write_tail_report(out_dir: str | Path, tables: dict[str, pd.DataFrame], meta: dict[str, Any]) -> Path:
    out = Path(out_dir)
    runs, iterations = tables["tail_runs"], tables["tail_iterations"]
    name = meta.get("name") or "tail-latency study"
    formats = meta.get("figure_formats")
    targets = meta.get("targets") or ([meta["target"]] if meta.get("target") else [])
    names = [t.get("name") for t in targets] or (sorted(set(iterations["target"])) if "target" in iterations else [])
    several = len(names) > 1
    parts = [f"<h1>{html.escape(name)}</h1>"]
    if meta.get("description"):
        parts.append(f"<p>{html.escape(meta['description'])}</p>")
    measured = "; ".join(_describe(t) for t in targets)
    parts.append("<h2>Setup</h2><p>Measured job" + ("s" if several else "") + ": " + html.escape(measured) +
                 "; fabric: " + html.escape(", ".join(f"{k} {v}" for k, v in meta.get("fabric", {}).items() if v is not None)) +
                 f"; heuristic b: {html.escape(str(meta.get('heuristic')))}.</p>")
    if iterations.empty:
        parts.append("<p class='error'>No run completed; see the runs below.</p>")
    else:
        frame = with_background_label(iterations)
        by = ["target", *BY] if "target" in frame.columns else BY
        summary = compare_groups(frame, value="latency_ns", by=by)
        show = summary[by + ["snapshots", "count", "p50", "p99", "p999", "p99_over_p50", "skewness", "modes", "bimodal"]]
        parts.append("<h2>Latency per iteration</h2><p class='note'>Latency of an iteration: the slowest "
                     "rank's time (a collective completes for all). p99/p50 &gt; 2 is a long tail; bimodal: "
                     "Sarle's coefficient &gt; 5/9 and two KDE modes. snapshots: the background snapshots a "
                     "row's runs cover.</p>" + _table(show, {"p50": ",.0f", "p99": ",.0f", "p999": ",.0f"}))
        common = common_snapshots(frame)
        if len(common) < len(frame):
            paired = compare_groups(common, value="latency_ns", by=by)
            parts.append("<p class='note'>Not every locality ran on every snapshot (a job that fits in no "
                         "single group is not placed there: the busiest backgrounds), so the rows above compare "
                         "localities over different backgrounds. Over the snapshots every locality ran:</p>" +
                         _table(paired[by + ["snapshots", "count", "p50", "p99", "p99_over_p50"]],
                                {"p50": ",.0f", "p99": ",.0f"}))
        effect = congestion_control_effect(frame)
        if len(effect):
            shown = effect.copy()
            for column in ("p50_off_ns", "p50_on_ns", "p99_off_ns", "p99_on_ns"):
                shown[column.removesuffix("_ns").replace("_", " ") + " (µs)"] = shown.pop(column) / 1000.0
            parts.append("<h2>Congestion control off and on</h2><p class='note'>The runs of each routing without "
                         "and with congestion control (label +cc) on the same background snapshots: pooled p50 and "
                         "p99 of the iteration latencies, p99 on / off, the geometric mean of each snapshot's median "
                         "on / off, and in how many snapshots the median was lower with it on.</p>" +
                         _table(shown, {"p99_ratio": ".3f", "median_ratio": ".3f"}))
        parts.append("<h2>Distributions</h2>")
        for target in names:
            of = frame[frame["target"] == target] if "target" in frame.columns else frame
            if of.empty:
                continue
            suffix = f"_{_slug(target)}" if several else ""
            if several:
                parts.append(f"<h3>{html.escape(target)}</h3>")
            parts.append(_figure(histograms_figure(of, BY, "latency_ns", log_y=True), out, f"tail_histograms{suffix}",
                                 formats=formats))
            parts.append(_figure(cdfs_figure(of, BY, "latency_ns"), out, f"tail_cdfs{suffix}", formats=formats))
        medians = run_medians(iterations)
        if len(medians):
            parts.append("<h2>Background traffic b and latency</h2>" + _figure(_scatter(medians, names), out,
                                                                                 "tail_b_scatter", formats=formats))
            q = float(meta.get("tail_quantile", 0.9))
            table = tables.get("tail_correlations")
            if table is None:  # tables from before the study wrote them
                table = b_correlations(iterations, q)
            parts.append(f"<p class='note'>Per target, locality and routing over the background snapshots: correlation "
                         f"of b with each run's median latency, and a threshold on b (best F1) flagging runs whose median "
                         f"is above the {q:.0%} quantile. The threshold is fitted on the runs it is scored on, so "
                         f"precision and recall are optimistic. Table: tail_correlations.parquet.</p>" +
                         _table(prediction_table(table)))
            wide = _by_message_size(table, targets)
            if wide is not None:
                parts.append("<h3>Correlation of b with the median latency by message size</h3><p class='note'>Pearson "
                             "r / Spearman rho over the background snapshots.</p>" + _table(wide))
    failed = runs[runs["status"] != "completed"] if "status" in runs else runs.iloc[0:0]
    if len(failed):
        keys = [k for k in ("target", "snapshot", "locality", "routing", "status", "error") if k in failed.columns]
        parts.append("<h2>Runs that did not complete</h2>" + _table(failed[keys].astype(str)))
    parts.append(f"<p class='note'>qoslab {html.escape(str(meta.get('qoslab_version', '')))}; tables beside this file: "
                 "tail_runs, tail_iterations, tail_correlations (Parquet); docs/dragonfly.md explains the study.</p>")
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(name)}</title>"
            f"<style>{STYLE}</style></head><body>{''.join(parts)}</body></html>")
    return write_text(out / "report.html", page)
