"""Figures of a study, from analysis tables only (matplotlib, Agg: files, never windows)."""

from qoslab.plots.figures import (
           latency_cdf,
           policy_ranking,
           rank_timing_map,
           slowdown_bars,
           slowdown_heatmap,
)
from qoslab.plots.interference import interference_figure, utilisation_figure
from qoslab.plots.styles import PolicyStyle, policy_styles

__all__ = ["PolicyStyle", "interference_figure", "latency_cdf", "policy_ranking", "policy_styles", "rank_timing_map",
           "slowdown_bars", "slowdown_heatmap", "utilisation_figure"]
