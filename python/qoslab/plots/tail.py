"""Latency-tail figures (Salimi Beni & Cosenza): overlaid histograms and ECDFs of a value per
group (locality x routing, say). `histograms_figure` and `cdfs_figure` return a matplotlib
Figure, like `qoslab.plots.figures`; `plot_histograms` and `plot_cdfs` also save it (PNG or SVG
by the path's suffix) and return the path. Deterministic: no randomness, fixed sizes and order
(groups in the order they first appear), SVG ids from a fixed salt, no dates in the files."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; a study may run where there is no display

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from qoslab.analysis.latency import sample_stats
from qoslab.analysis.tail import ecdf
from qoslab.plots.figures import CDF_POINTS

METADATA = {".png": {"Software": None}, ".svg": {"Date": None, "Creator": None}}


def _groups(frame: pd.DataFrame, by, value: str) -> tuple[list[tuple[str, np.ndarray]], str]:
    """[(label, finite values in display units)] per group, and the axis label. A value whose
    name ends in _ns is shown in us."""
    by = [by] if isinstance(by, str) else list(by)
    missing = [c for c in (*by, value) if c not in frame.columns]
    if missing:
        raise ValueError(f"columns {missing} are not in the frame (it has {list(frame.columns)})")
    scale, label = (1e-3, f"{value[:-3]} (us)") if value.endswith("_ns") else (1.0, value)
    out = []
    for keys, group in frame.groupby(by, sort=False, dropna=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        values = group[value].to_numpy(dtype=float) * scale
        out.append((" / ".join(str(k) for k in keys), values[np.isfinite(values)]))
    return out, label


def _thin(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The same curve to the eye, drawn from at most CDF_POINTS points (as figures.latency_cdf)."""
    if x.size > CDF_POINTS:
        keep = np.unique(np.linspace(0, x.size - 1, CDF_POINTS).astype(int))
        return x[keep], y[keep]
    return x, y


def histograms_figure(frame: pd.DataFrame, by, value: str = "latency_ns", bins="auto", log_y: bool = False) -> Figure:
    """Overlaid step histograms of `value`, one per group of `by`, on common bins (numpy's `bins`
    rule over all groups pooled); the height is the fraction of the group's samples, so groups of
    different sizes compare. `log_y` shows the tail's rare bins."""
    groups, label = _groups(frame, by, value)
    pooled = np.concatenate([v for _, v in groups]) if groups else np.array([])
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    if pooled.size:
        edges = np.histogram_bin_edges(pooled, bins=bins)
        for name, values in groups:
            if values.size:
                counts, _ = np.histogram(values, bins=edges)
                ax.stairs(counts / values.size, edges, label=f"{name} (n={values.size})", linewidth=1.2)
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel(label)
    ax.set_ylabel("fraction of samples per bin")
    ax.set_title(f"{value} per {' / '.join([by] if isinstance(by, str) else by)}")
    if groups:
        ax.legend(fontsize="small")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


def cdfs_figure(frame: pd.DataFrame, by, value: str = "latency_ns", zoom_from: float = 0.9, log_x: bool = False) -> Figure:
    """ECDFs of `value` per group of `by`: the whole distribution (left) and a zoom on the tail,
    fractions from `zoom_from` to 1 (right); each group's p99 (linear interpolation, as
    sample_stats) is marked by a dashed line and a dot in the group's colour."""
    if not 0.0 <= zoom_from < 1.0:
        raise ValueError(f"zoom_from must be in [0, 1), not {zoom_from}")
    groups, label = _groups(frame, by, value)
    fig, (whole, tail) = plt.subplots(1, 2, figsize=(10.0, 4.0))
    low = np.inf
    for name, values in groups:
        if not values.size:
            continue
        x, y = ecdf(values)
        p99 = sample_stats(values)["p99"]
        (line,) = whole.step(*_thin(x, y), where="post", label=f"{name} (p99 {p99:.4g})")
        start = max(int(np.searchsorted(y, zoom_from, side="left")) - 1, 0)  # from just below zoom_from
        tail.step(*_thin(x[start:], y[start:]), where="post", color=line.get_color())
        low = min(low, x[start])
        for ax in (whole, tail):
            ax.axvline(p99, color=line.get_color(), linestyle="--", linewidth=0.8)
            ax.plot([p99], [0.99], marker="o", markersize=4, color=line.get_color())
    tail.set_ylim(zoom_from, 1.0 + (1.0 - zoom_from) * 0.02)
    if np.isfinite(low):
        tail.set_xlim(left=low)
    for ax in (whole, tail):
        if log_x:
            ax.set_xscale("log")
        ax.set_xlabel(label)
        ax.grid(True, alpha=0.3)
    whole.set_ylabel("fraction of samples <= x")
    whole.set_title("Empirical CDF (dashed: p99)")
    tail.set_title(f"Tail: fractions {zoom_from:g} to 1")
    if groups:
        whole.legend(fontsize="small", loc="lower right")
    fig.tight_layout()
    return fig


def save(fig: Figure, path) -> Path:
    """Writes `fig` as PNG or SVG by the suffix of `path` (parents created), closes it, returns
    the path. Dates and software versions are left out and SVG ids use a fixed salt, so the same
    figure gives the same bytes."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in METADATA:
        plt.close(fig)
        raise ValueError(f"figure path must end in .png or .svg, not {path.name!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    with plt.rc_context({"svg.hashsalt": "qoslab"}):
        fig.savefig(path, dpi=110, bbox_inches="tight", metadata=METADATA[suffix])
    plt.close(fig)
    return path


def plot_histograms(frame: pd.DataFrame, by, value: str, path, bins="auto", log_y: bool = False) -> Path:
    """`histograms_figure` saved to `path` (.png or .svg); returns the path."""
    return save(histograms_figure(frame, by, value, bins=bins, log_y=log_y), path)


def plot_cdfs(frame: pd.DataFrame, by, value: str, path, zoom_from: float = 0.9, log_x: bool = False) -> Path:
    """`cdfs_figure` saved to `path` (.png or .svg); returns the path."""
    return save(cdfs_figure(frame, by, value, zoom_from=zoom_from, log_x=log_x), path)
