"""The report of a swept study (study/sweep_runner.py): per point and policy, the total contention
and each job's mean slowdown, and with one numeric swept key a figure of both against it; with
GPCNeT canaries, their congestion impact factors per test and policy, the points side by side.
Each point's own report is in points/point=N/report.html."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd

from qoslab.analysis.gpcnet import impact_by_point
from qoslab.report.html import STYLE, _figure, _table
from qoslab.sweep.outputs import write_text

SHOWN = ["policy", "total_contention_us", "mean_slowdown", "worst_slowdown", "worst_job", "vs_default_pct"]


def write_sweep_report(out_dir: str | Path, tables: dict[str, pd.DataFrame], meta: dict[str, Any]) -> Path:
    out = Path(out_dir)
    keys: list[str] = meta["keys"]
    sweep, slowdown = tables["sweep"], tables["sweep_slowdown"]
    name = meta.get("name") or "qoslab sweep"
    parts = [f"<h1>{html.escape(name)}</h1>",
             f"<p>{len(meta['points'])} sweep points ({html.escape(meta['sweep_mode'])} of "
             f"{html.escape(', '.join(keys))}), {meta['runs']} runs. Each point is a whole study: its own report is "
             "<code>points/point=N/report.html</code>, its tables beside it.</p>"]
    numeric = len(keys) == 1 and len(sweep) and pd.api.types.is_numeric_dtype(sweep[keys[0]])
    if numeric:
        parts.append("<h2>Against " + html.escape(keys[0]) + "</h2>" + _figure(_against(sweep, slowdown, keys[0]), out,
                                                                              "sweep", alt=f"sweep over {keys[0]}"))
    columns = ["point", *keys, *[c for c in SHOWN if c in sweep.columns]]
    parts.append("<h2>Per point and policy</h2>" + _table(sweep[columns], break_headers=True))
    gpcnet = tables.get("sweep_gpcnet")
    if gpcnet is not None and len(gpcnet):
        parts.append("<h2>GPCNeT congestion impact per point</h2><p class='note'>Each canary test's congestion "
                     "impact factor, average / 99%, as GPCNeT prints them (congested over isolated latency, isolated "
                     "over congested bandwidth, from the figures rounded to 0.1; &gt; 1: congestion hurts), per "
                     "policy, one column per sweep point. Exact values: sweep_gpcnet.parquet (cif_average, "
                     "cif_p99).</p>" + _table(impact_by_point(gpcnet, keys)))
    parts.append("<p class='note'>Tables: sweep.parquet (per point and policy), sweep_slowdown.parquet (per point, "
                 "policy and job), sweep_gpcnet.parquet (with GPCNeT canaries), sweep_points.parquet; every point's "
                 "run tables read together with qoslab.study.sweep_runner.sweep_dataset(out, \"jobs\").</p>")
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(name)}</title>"
            f"<style>{STYLE}</style></head><body>{''.join(parts)}</body></html>")
    return write_text(out / "report.html", page)


def _against(sweep: pd.DataFrame, slowdown: pd.DataFrame, key: str) -> Any:
    jobs = list(dict.fromkeys(slowdown["job"])) if len(slowdown) else []
    fig, axes = plt.subplots(1, 1 + len(jobs), figsize=(4.2 * (1 + len(jobs)), 3.4), squeeze=False)
    for policy, rows in sweep.groupby("policy", sort=False):
        rows = rows.sort_values(key)
        axes[0][0].plot(rows[key], rows["total_contention_us"], marker="o", label=str(policy))
        for j, job in enumerate(jobs):
            of = slowdown[(slowdown["policy"] == policy) & (slowdown["job"] == job)].sort_values(key)
            axes[0][j + 1].plot(of[key], of["slowdown_mean"], marker="o", label=str(policy))
    axes[0][0].set_title("total contention (µs)")
    for j, job in enumerate(jobs):
        axes[0][j + 1].set_title(f"{job}: mean slowdown")
    for ax in axes[0]:
        ax.set_xlabel(key)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    return fig
