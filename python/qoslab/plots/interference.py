"""Who delayed whom and where the load went: victim x culprit matrices and per-level, per-VL link
utilisation, one panel per policy with one colour scale shared by every panel of a figure, so
panels compare by colour."""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.colors import Colormap, LogNorm, Normalize
from matplotlib.figure import Figure

from qoslab.plots.figures import PANEL_COLUMNS, first_column, panel_grid, panel_title

# Values written in the cells up to this many classes; beyond, the colours alone.
ANNOTATE_UP_TO = 6
# The log colour scale spans this many decades below the largest wait: smaller waits, and zeros,
# are drawn as the palest colour or blank.
DECADES = 4


WAIT_UNITS = (("s", 1e9), ("ms", 1e6), ("us", 1e3), ("ns", 1.0))


def wait_unit(largest_ns: float) -> tuple[str, float]:
    """The unit (name, ns per unit) in which `largest_ns` reads between 1 and 1000, so a small
    study's waits do not all print as 0.00 ms."""
    for name, scale in WAIT_UNITS:
        if largest_ns >= scale:
            return name, scale
    return "ns", 1.0


def _colour_bar_shrink(axes) -> float:
    grid = axes[0].get_gridspec() if axes else None
    return min(0.8, 2.4 / (grid.nrows if grid is not None else 1))


def _compact(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 1:
        return f"{value:.1f}"
    return f"{value:.2f}" if value >= 0.01 else "<.01"


def interference_figure(matrix: pd.DataFrame, policies: list[str], classes: list[str], kind: str,
                        columns: int = PANEL_COLUMNS) -> Figure:
    """One victim x culprit panel per policy of `matrix` (analysis.interference_matrix) rows of
    `kind` ("output" or "buffer"): rows the class that waited, columns the class it waited for,
    cells the mean wait per run summed over the victim's packets (in the unit wait_unit picks for
    the largest), on one log colour scale."""
    rows = matrix[matrix["kind"] == kind]
    grids = {}
    for policy in policies:
        part = rows[rows["policy"] == policy].pivot_table(index="victim", columns="culprit", values="wait_ns",
                                                          aggfunc="sum", fill_value=0.0)
        grids[policy] = part.reindex(index=classes, columns=classes, fill_value=0.0).to_numpy(dtype=float)
    positive = np.concatenate([g[g > 0] for g in grids.values()]) if grids else np.array([])
    unit, scale = wait_unit(float(positive.max()) if positive.size else 1.0)
    grids = {policy: grid / scale for policy, grid in grids.items()}
    vmax = float(positive.max()) / scale if positive.size else 1.0
    norm = LogNorm(vmin=vmax / 10**DECADES, vmax=vmax)
    size = max(2.2, 0.5 * len(classes) + 0.6)
    fig, axes = panel_grid(len(policies), columns, (size, size), extra_height=1.3)
    cmap = _blank_when_bad("magma_r")
    image = None
    for index, (ax, policy) in enumerate(zip(axes, policies)):
        grid = grids[policy]
        shown = np.ma.masked_less_equal(np.maximum(grid, 0.0), 0.0)
        image = ax.imshow(shown, cmap=cmap, norm=norm, interpolation="nearest", aspect="equal")
        if len(classes) <= ANNOTATE_UP_TO:
            for r in range(len(classes)):
                for c in range(len(classes)):
                    value = grid[r, c]
                    if value > 0:
                        dark = norm(max(value, norm.vmin)) > 0.55
                        ax.text(c, r, _compact(value), ha="center", va="center", fontsize=6.5,
                                color="white" if dark else "black")
        ax.set_xticks(range(len(classes)), classes, rotation=60, ha="right", fontsize="x-small")
        ax.set_yticks(range(len(classes)), classes if first_column(index, axes) else [], fontsize="x-small")
        ax.set_title(panel_title(policy, 26), fontsize="small")
    if image is not None:
        fig.colorbar(image, ax=axes, shrink=_colour_bar_shrink(axes),
                     label=f"{kind} wait, {unit} summed over the waiting job's packets (log scale)")
    what = {"output": "waiting at an output port for the link, the VL's turn or credits",
            "buffer": "queued behind another packet in an input buffer or send queue"}.get(kind, kind)
    fig.suptitle(f"Who delayed whom, {kind} waits ({what}); mean per run over repetitions\n"
                 "row: the job that waited; column: the job whose packet it waited for", fontsize="medium")
    return fig


def _blank_when_bad(name: str) -> Colormap:
    return matplotlib.colormaps[name].with_extremes(bad="white")  # no wait at all: blank, not the palest colour


def utilisation_figure(utilisation: pd.DataFrame, policies: list[str], columns: int = PANEL_COLUMNS) -> Figure:
    """One panel per policy of `utilisation` (analysis.vl_utilisation): rows the tree levels and
    directions (level l: links between levels l-1 and l), columns the VLs, cells the share of the
    run those links spent sending the VL's packets, on one colour scale."""
    bands = list(dict.fromkeys(zip(utilisation["level"], utilisation["direction"])))
    vls = sorted(utilisation["vl"].unique())
    top = float(utilisation["utilisation"].max()) if len(utilisation) else 1.0
    norm = Normalize(vmin=0.0, vmax=max(top, 1e-9))
    fig, axes = panel_grid(len(policies), columns, (0.5 * len(vls) + 0.9, 0.4 * len(bands) + 0.9), extra_height=1.3)
    image = None
    for index, (ax, policy) in enumerate(zip(axes, policies)):
        part = utilisation[utilisation["policy"] == policy].set_index(["level", "direction", "vl"])["utilisation"]
        grid = np.array([[part.get((lv, d, vl), np.nan) for vl in vls] for lv, d in bands], dtype=float)
        image = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis", norm=norm, aspect="auto", interpolation="nearest")
        for r in range(len(bands)):
            for c in range(len(vls)):
                if np.isfinite(grid[r, c]):
                    ax.text(c, r, f"{100 * grid[r, c]:.0f}", ha="center", va="center", fontsize=6.5,
                            color="white" if norm(grid[r, c]) < 0.55 else "black")
        ax.set_xticks(range(len(vls)), [f"VL{v}" for v in vls], fontsize="x-small")
        ax.set_yticks(range(len(bands)), [f"L{lv} {d}" for lv, d in bands] if first_column(index, axes) else [],
                      fontsize="x-small")
        ax.set_title(panel_title(policy, 26), fontsize="small")
    if image is not None:
        bar = fig.colorbar(image, ax=axes, shrink=_colour_bar_shrink(axes), label="utilisation (share of the run's time)")
        bar.ax.yaxis.set_major_formatter(lambda v, _: f"{100 * v:.0f}%")
    fig.suptitle("Link utilisation per level, direction and VL (%, mean over the level's links and repetitions)\n"
                 "busy time / (links x simulated time); level l: links between levels l-1 and l", fontsize="medium")
    return fig
