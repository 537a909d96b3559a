"""Study tables -> metrics (docs/metrics.md): slowdown and contention per job and policy with
confidence intervals over repetitions, latency and predictability of iteration times, per-rank
distributions, GPCNeT's congestion impact, who delayed whom, link utilisation per level and VL,
and the ranking of policies. Reads tables only; never simulates."""

from qoslab.analysis.confidence import Interval, mean_interval
from qoslab.analysis.contention import (
    best_policy_leads,
    policy_summary,
    slowdown_intervals,
    slowdowns,
    with_slowdown_intervals,
)
from qoslab.analysis.gpcnet import canary_tests, congestion_impact, gpcnet_impact
from qoslab.analysis.interference import (
    cross_job_changes,
    harm_shift,
    interference_matrix,
)
from qoslab.analysis.latency import iteration_stats, sample_stats
from qoslab.analysis.ranks import rank_times, slowest_ranks
from qoslab.analysis.utilisation import vl_utilisation

__all__ = [
    "Interval", "best_policy_leads", "canary_tests", "congestion_impact", "cross_job_changes", "gpcnet_impact",
    "harm_shift", "interference_matrix", "iteration_stats", "mean_interval", "policy_summary", "rank_times",
    "sample_stats", "slowdown_intervals", "slowdowns", "slowest_ranks", "vl_utilisation", "with_slowdown_intervals",
]
