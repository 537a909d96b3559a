"""The study's figures. Each function takes analysis tables and returns a matplotlib Figure; the
caller saves it. Deterministic: no randomness, fixed sizes and order. Every policy given is drawn
(in panels when there are many, never cut), each in its PolicyStyle (styles.py) when lines or
bars tell policies apart."""

from __future__ import annotations

import math
import re

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from qoslab.analysis.contention import slowdown_intervals
from qoslab.analysis.sliced import Slices, as_slices
from qoslab.plots.styles import PolicyStyle, policy_styles

# Files only; a study may run where there is no display. pyplot picks its backend at the first
# figure, so choosing it after the import is in time.
matplotlib.use("Agg")

CDF_POINTS = 2000
# Lines per CDF panel besides the references (alone, default) drawn in every panel: more would
# be a tangle of colours.
CDF_POLICIES_PER_PANEL = 4
PANEL_COLUMNS = 4  # panels per row: wider figures shrink too far in a 1100-pixel page


def interval_note(repetitions: int) -> str:
    """What error bars mean, for a figure's caption."""
    if repetitions < 2:
        return "one repetition: no confidence interval, no error bars"
    return f"error bars: 95% confidence interval of the mean over {repetitions} repetitions (Student t)"


def panel_title(name: str, width: int = 30) -> str:
    """`name` on lines of about `width` characters, broken after a space, comma or hyphen (policy
    names have few spaces), never inside a word."""
    pieces = re.findall(r"[^ ,-]*[ ,-]?", name)
    lines = [""]
    for piece in filter(None, pieces):
        if lines[-1] and len(lines[-1]) + len(piece.rstrip()) > width:
            lines.append("")
        lines[-1] += piece
    return "\n".join(line.rstrip() for line in lines)


def panel_grid(count: int, columns: int, panel_size: tuple[float, float], extra_height: float = 0.9,
               sharex: bool = False, sharey: bool = False) -> tuple[Figure, list[Axes]]:
    """`count` panels in rows of `columns` (fewer if there are fewer panels), laid out by
    matplotlib's constrained layout (room for titles and a shared colour bar); unused cells
    hidden, and the panel above one keeps its x labels."""
    columns = max(1, min(columns, count))
    rows = max(1, math.ceil(count / columns))
    fig, axes = plt.subplots(rows, columns, figsize=(panel_size[0] * columns + 1.2, panel_size[1] * rows + extra_height),
                             squeeze=False, sharex=sharex, sharey=sharey, layout="constrained")
    flat = [ax for row in axes for ax in row]
    for ax in flat[count:]:
        ax.set_visible(False)
    for index in range(max(0, count - columns), count):
        flat[index].tick_params(labelbottom=True)
    return fig, flat[:count]


def first_column(index: int, axes: list[Axes]) -> bool:
    """Whether panel `index` of a panel_grid starts a row (where row labels go)."""
    grid = axes[0].get_gridspec() if axes else None
    return index % (grid.ncols if grid is not None else 1) == 0


def _styles(policies: list[str], styles: dict[str, PolicyStyle] | None) -> dict[str, PolicyStyle]:
    if styles is not None and all(p in styles for p in policies):
        return styles
    return policy_styles(["alone", "default", *policies])


def _slowdown_stats(slow: pd.DataFrame) -> pd.DataFrame:
    return slowdown_intervals(slow).set_index(["policy", "job"])


def slowdown_bars(slow: pd.DataFrame, policies: list[str] | None = None, styles: dict[str, PolicyStyle] | None = None) -> Figure:
    """Grouped bars: mean slowdown (shared / alone) of each job under each policy, with the 95%
    confidence interval over repetitions as error bars (none with one repetition); a line at 1
    (alone). For a handful of policies; slowdown_heatmap reads at any number."""
    policies = policies or list(dict.fromkeys(slow["policy"]))
    styles = _styles(policies, styles)
    jobs = list(dict.fromkeys(slow["job"]))
    stats = _slowdown_stats(slow)
    width = 0.8 / max(len(policies), 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(jobs) + 0.25 * len(jobs) * len(policies)), 4.4))
    x = np.arange(len(jobs))
    for i, policy in enumerate(policies):
        rows = stats.reindex([(policy, j) for j in jobs])
        means = rows["slowdown_mean"].to_numpy(dtype=float)
        # NaN where there is no interval: matplotlib then draws no bar for it.
        low = np.clip(means - rows["slowdown_ci95_low"].to_numpy(dtype=float), 0.0, None)
        high = np.clip(rows["slowdown_ci95_high"].to_numpy(dtype=float) - means, 0.0, None)
        ax.bar(x + (i - (len(policies) - 1) / 2) * width, means, width, label=policy, yerr=[low, high], capsize=2,
               **styles[policy].bar())
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_xticks(x, jobs)
    ax.set_ylabel("slowdown (shared / alone runtime)")
    repetitions = int(stats["slowdown_repetitions"].max()) if len(stats) else 0
    ax.set_title(f"How much each job slows down when sharing the fabric\n({interval_note(repetitions)})", fontsize="medium")
    ax.legend(fontsize="small", ncols=min(3, len(policies)), loc="upper left", bbox_to_anchor=(0, -0.12))
    fig.tight_layout()
    return fig


def slowdown_heatmap(slow: pd.DataFrame, policies: list[str] | None = None) -> Figure:
    """Policies (rows, in the given order) x jobs (columns): each cell the mean slowdown over
    repetitions and, below it, ± the half-width of its 95% confidence interval (Student t)."""
    policies = policies or list(dict.fromkeys(slow["policy"]))
    jobs = list(dict.fromkeys(slow["job"]))
    stats = _slowdown_stats(slow)
    means = np.array([[stats["slowdown_mean"].get((p, j), np.nan) for j in jobs] for p in policies], dtype=float)
    lows = np.array([[stats["slowdown_ci95_low"].get((p, j), np.nan) for j in jobs] for p in policies], dtype=float)
    fig, ax = plt.subplots(figsize=(2.4 + 1.25 * len(jobs) + 0.06 * max(map(len, policies), default=10),
                                    1.6 + 0.36 * len(policies)))
    finite = means[np.isfinite(means)]
    vmin = min(1.0, float(finite.min())) if finite.size else 1.0
    vmax = max(vmin + 1e-9, float(finite.max())) if finite.size else 2.0
    image = ax.imshow(np.ma.masked_invalid(means), aspect="auto", cmap="YlOrRd", vmin=vmin, vmax=vmax, interpolation="nearest")
    for r in range(len(policies)):
        for c in range(len(jobs)):
            mean, low = means[r, c], lows[r, c]
            if not np.isfinite(mean):
                text = "no run"
            elif np.isfinite(low):
                text = f"{mean:.2f} ±{mean - low:.2f}"
            else:
                text = f"{mean:.2f}"
            dark = np.isfinite(mean) and (mean - vmin) / (vmax - vmin) > 0.6
            ax.text(c, r, text, ha="center", va="center", fontsize="x-small", color="white" if dark else "black")
    ax.set_xticks(range(len(jobs)), jobs)
    ax.set_yticks(range(len(policies)), policies, fontsize="small")
    ax.xaxis.tick_top()
    fig.colorbar(image, ax=ax, label="slowdown (shared / alone runtime)", shrink=min(1.0, 6 / max(len(policies), 1) + 0.3))
    repetitions = int(stats["slowdown_repetitions"].max()) if len(stats) else 0
    note = (f"±: half-width of the 95% confidence interval over {repetitions} repetitions (Student t)" if repetitions > 1
            else "one repetition: no confidence interval")
    ax.set_title(f"Mean slowdown of each job under each policy\n{note}", fontsize="medium", pad=24)
    fig.tight_layout()
    return fig


def policy_ranking(summary: pd.DataFrame, metric: str = "total_contention_us", label: str = "total contention (us)",
                   styles: dict[str, PolicyStyle] | None = None) -> Figure:
    """Horizontal bars of `metric` per policy, best at the top, each in its policy's style; for
    total contention the whiskers are the 95% confidence interval over repetitions."""
    ordered = summary.sort_values(metric, ascending=not metric.startswith("throughput"), na_position="last", kind="stable")
    policies = list(ordered["policy"])
    styles = _styles(policies, styles)
    fig, ax = plt.subplots(figsize=(7.5, 0.4 * len(ordered) + 1.6))
    y = np.arange(len(ordered))[::-1]
    values = ordered[metric].to_numpy(dtype=float)
    error = None
    note = ""
    if metric == "total_contention_us" and "total_contention_ci95_low_us" in ordered.columns:
        low = np.clip(values - ordered["total_contention_ci95_low_us"].to_numpy(dtype=float), 0.0, None)
        high = np.clip(ordered["total_contention_ci95_high_us"].to_numpy(dtype=float) - values, 0.0, None)
        error = [low, high]
        note = "\n" + interval_note(int(ordered["complete_repetitions"].max()) if len(ordered) else 0).replace(
            "error bars", "whiskers")
    for yy, value, policy, lo, hi in zip(y, values, policies, *(error or [[np.nan] * len(y)] * 2)):
        ax.barh(yy, value, xerr=None if error is None else [[lo], [hi]], capsize=3, **styles[policy].bar())
    ax.set_yticks(y, policies, fontsize="small")
    ax.set_xlabel(label)
    ax.set_title(f"Policies by {label}, best first{note}", fontsize="medium")
    fig.tight_layout()
    return fig


def rank_timing_map(iterations: pd.DataFrame | Slices, job: str, policies: list[str], columns: int = PANEL_COLUMNS) -> Figure:
    """Per policy (small multiples, rows of `columns`, one colour scale): iteration time of each
    rank (rows) and iteration (columns) of `job`, first repetition; alone runs are policy "alone".
    From a table or a study's iterations file (read a policy at a time)."""
    grids = _rank_grids(iterations, job, policies)
    maxima = [float(np.nanmax(grid)) for grid in grids.values() if grid.size]
    vmax = max(maxima) if maxima else 1.0
    fig, axes = panel_grid(len(policies), columns, (2.7, 2.6))
    image = None
    for index, (ax, policy) in enumerate(zip(axes, policies)):
        image = ax.imshow(grids[policy], aspect="auto", interpolation="nearest", cmap="viridis", vmin=0, vmax=vmax)
        ax.set_title(panel_title(policy), fontsize="small")
        ax.set_xlabel("iteration", fontsize="small")
        if first_column(index, axes):
            ax.set_ylabel("rank", fontsize="small")
    if image is not None:
        fig.colorbar(image, ax=axes, label="iteration time (us)", shrink=0.8)
    fig.suptitle(f"{job}: per-rank iteration times, first repetition ({len(policies)} panels)")
    return fig


def _rank_grids(iterations: pd.DataFrame | Slices, job: str, policies: list[str]) -> dict[str, np.ndarray]:
    """Per policy: `job`'s iteration times (us) in the first repetition any of `policies` has,
    ranks x iterations."""
    slices = as_slices(iterations)
    first = slices.first_repetition(job, policies)
    return {policy: (slices.read(job, [policy], ["rank", "iteration", "time_ns"], first)
                     .pivot_table(index="rank", columns="iteration", values="time_ns") / 1e3).to_numpy()
            for policy in policies}


def _cdf(ax: Axes, iterations: pd.DataFrame | Slices, job: str, policy: str, style: PolicyStyle, width: float = 1.4) -> None:
    times = np.sort(as_slices(iterations).read(job, [policy], ["time_ns"])["time_ns"].to_numpy()) / 1e3
    if not times.size:
        return
    fraction = np.arange(1, times.size + 1) / times.size
    if times.size > CDF_POINTS:  # the same curve to the eye, drawn from far fewer points
        keep = np.unique(np.linspace(0, times.size - 1, CDF_POINTS).astype(int))
        times, fraction = times[keep], fraction[keep]
    ax.step(times, fraction, where="post", label=policy, linewidth=width, **style.line())


def latency_cdf(iterations: pd.DataFrame | Slices, job: str, policies: list[str], log_x: bool = True,
                styles: dict[str, PolicyStyle] | None = None, per_panel: int = CDF_POLICIES_PER_PANEL,
                columns: int = 3) -> Figure:
    """Empirical CDF of `job`'s iteration times (all ranks, iterations, repetitions) per policy,
    from a table or a study's iterations file (read a policy at a time).
    Up to `per_panel` + 2 policies share one plot; beyond that, panels of `per_panel` policies
    each, with the references (alone, default) repeated in every panel for comparison."""
    styles = _styles(policies, styles)
    references: list[str] = [p for p in ("alone", "default") if p in policies]
    others = [p for p in policies if p not in references]
    groups = [others] if len(policies) <= per_panel + len(references) else \
        [others[i:i + per_panel] for i in range(0, len(others), per_panel)]
    groups = groups or [[]]
    if len(groups) == 1:
        fig, ax = plt.subplots(figsize=(6.4, 4.0))
        axes = [ax]
    else:
        fig, axes = panel_grid(len(groups), columns, (4.2, 3.0), extra_height=1.0, sharex=True, sharey=True)
    for ax, group in zip(axes, groups):
        for policy in references:
            _cdf(ax, iterations, job, policy, styles[policy], width=1.0 if len(groups) > 1 else 1.4)
        for policy in group:
            _cdf(ax, iterations, job, policy, styles[policy])
        if log_x:
            ax.set_xscale("log")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="x-small" if len(groups) > 1 else "small", loc="lower right")
    for index, ax in enumerate(axes):
        ax.set_xlabel("iteration time (us)", fontsize="small")
        if len(groups) == 1 or first_column(index, axes):
            ax.set_ylabel("fraction of iterations", fontsize="small")
    title = f"{job}: iteration time distribution"
    if len(groups) > 1:
        fig.suptitle(f"{title}: {len(policies)} policies in {len(groups)} panels, "
                     f"{' and '.join(references) or 'no reference'} in each")
    else:
        axes[0].set_title(title)
        fig.tight_layout()
    return fig
