"""Figures of a study, from analysis tables only (matplotlib, Agg: files, never windows)."""

from qoslab.plots.figures import latency_cdf, policy_ranking, rank_timing_map, slowdown_bars

__all__ = ["latency_cdf", "policy_ranking", "rank_timing_map", "slowdown_bars"]
