"""The study's figures. Each function takes analysis tables and returns a matplotlib Figure; the
caller saves it. Deterministic: no randomness, fixed sizes and order."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # files only; a study may run where there is no display

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

CDF_POINTS = 2000


def slowdown_bars(slow: pd.DataFrame, policies: list[str] | None = None) -> Figure:
    """Grouped bars: mean slowdown (shared / alone) of each job under each policy, with the range
    over repetitions as error bars; a line at 1 (alone)."""
    policies = policies or list(dict.fromkeys(slow["policy"]))
    jobs = list(dict.fromkeys(slow["job"]))
    stats = slow.groupby(["policy", "job"])["slowdown"].agg(["mean", "min", "max"])
    width = 0.8 / max(len(policies), 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(jobs) + 0.25 * len(jobs) * len(policies)), 4.2))
    x = np.arange(len(jobs))
    for i, policy in enumerate(policies):
        means = [stats["mean"].get((policy, j), np.nan) for j in jobs]
        # Clipped at 0: mean - min can come out a rounding error below zero.
        low = [max(m - stats["min"].get((policy, j), np.nan), 0.0) for m, j in zip(means, jobs)]
        high = [max(stats["max"].get((policy, j), np.nan) - m, 0.0) for m, j in zip(means, jobs)]
        ax.bar(x + (i - (len(policies) - 1) / 2) * width, means, width, label=policy, yerr=[low, high], capsize=2)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_xticks(x, jobs)
    ax.set_ylabel("slowdown (shared / alone runtime)")
    ax.set_title("How much each job slows down when sharing the fabric")
    ax.legend(fontsize="small", ncols=min(3, len(policies)), loc="upper left", bbox_to_anchor=(0, -0.12))
    fig.tight_layout()
    return fig


def policy_ranking(summary: pd.DataFrame, metric: str = "total_contention_us", label: str = "total contention (us)") -> Figure:
    """Horizontal bars of `metric` per policy, best at the top; the default baseline in grey."""
    ordered = summary.sort_values(metric, ascending=not metric.startswith("throughput"), na_position="last")
    fig, ax = plt.subplots(figsize=(7.0, 0.4 * len(ordered) + 1.4))
    colours = ["#999999" if p == "default" else "#3b75af" for p in ordered["policy"]]
    y = np.arange(len(ordered))[::-1]
    ax.barh(y, ordered[metric], color=colours)
    ax.set_yticks(y, ordered["policy"], fontsize="small")
    ax.set_xlabel(label)
    ax.set_title(f"Policies by {label}, best first")
    fig.tight_layout()
    return fig


def rank_timing_map(iterations: pd.DataFrame, job: str, policies: list[str]) -> Figure:
    """Per policy (small multiples, one colour scale): iteration time of each rank (rows) and
    iteration (columns) of `job`, first repetition; alone runs are policy "alone"."""
    rows = iterations[(iterations["job"] == job) & (iterations["policy"].isin(policies))]
    rows = rows[rows["repetition"] == rows["repetition"].min()] if len(rows) else rows
    vmax = float(rows["time_ns"].max()) / 1e3 if len(rows) else 1.0
    fig, axes = plt.subplots(1, len(policies), figsize=(3.2 * len(policies) + 1.0, 3.6), squeeze=False, sharey=True)
    image = None
    for ax, policy in zip(axes[0], policies):
        grid = rows[rows["policy"] == policy].pivot_table(index="rank", columns="iteration", values="time_ns") / 1e3
        image = ax.imshow(grid.to_numpy(), aspect="auto", interpolation="nearest", cmap="viridis", vmin=0, vmax=vmax)
        ax.set_title(policy, fontsize="small")
        ax.set_xlabel("iteration")
    axes[0][0].set_ylabel("rank")
    if image is not None:
        fig.colorbar(image, ax=axes[0].tolist(), label="iteration time (us)")
    fig.suptitle(f"{job}: per-rank iteration times")
    return fig


def latency_cdf(iterations: pd.DataFrame, job: str, policies: list[str], log_x: bool = True) -> Figure:
    """Empirical CDF of `job`'s iteration times (all ranks, iterations, repetitions) per policy."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for policy in policies:
        times = np.sort(iterations[(iterations["job"] == job) & (iterations["policy"] == policy)]["time_ns"].to_numpy()) / 1e3
        if times.size:
            fraction = np.arange(1, times.size + 1) / times.size
            if times.size > CDF_POINTS:  # the same curve to the eye, drawn from far fewer points
                keep = np.unique(np.linspace(0, times.size - 1, CDF_POINTS).astype(int))
                times, fraction = times[keep], fraction[keep]
            ax.step(times, fraction, where="post", label=policy)
    if log_x:
        ax.set_xscale("log")
    ax.set_xlabel("iteration time (us)")
    ax.set_ylabel("fraction of iterations")
    ax.set_title(f"{job}: iteration time distribution")
    ax.legend(fontsize="small")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig
