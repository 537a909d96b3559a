"""Study tables -> metrics (docs/metrics.md): slowdown and contention per job and policy, latency
and predictability of iteration times, per-rank distributions, GPCNeT's congestion impact, and
the ranking of policies. Reads tables only; never simulates."""

from qoslab.analysis.contention import policy_summary, slowdowns
from qoslab.analysis.gpcnet import canary_tests, congestion_impact, gpcnet_impact
from qoslab.analysis.latency import iteration_stats, sample_stats
from qoslab.analysis.ranks import rank_times, slowest_ranks

__all__ = ["canary_tests", "congestion_impact", "gpcnet_impact", "iteration_stats", "policy_summary", "rank_times", "sample_stats", "slowdowns", "slowest_ranks"]
