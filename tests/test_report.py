"""Figures and report.html from hand-made tables (they never simulate)."""

from __future__ import annotations

import re

import pandas as pd

from qoslab.analysis import slowdowns
from qoslab.plots import latency_cdf, policy_ranking, rank_timing_map, slowdown_bars
from qoslab.analysis import policy_summary
from qoslab.report import write_report


def tables():
    jobs, iterations, runs = [], [], []
    runtimes = {"alone": {"a": 100.0, "b": 200.0}, "default": {"a": 150.0, "b": 320.0}, "prio-a": {"a": 105.0, "b": 330.0}}
    for policy, per_job in runtimes.items():
        mode = "alone" if policy == "alone" else "shared"
        for job, t in per_job.items():
            run_id = f"r0-{policy}-{job}" if mode == "alone" else f"r0-{policy}"
            jobs.append({"run_id": run_id, "repetition": 0, "policy": policy, "mode": mode, "job": job,
                         "workload": "all-to-all", "ranks": 4, "runtime_us": t})
            for rank in range(4):
                for it in range(3):
                    iterations.append({"run_id": run_id, "repetition": 0, "policy": policy, "mode": mode, "job": job,
                                       "rank": rank, "iteration": it, "time_ns": t * 1000 / 3 * (1 + 0.1 * rank),
                                       "mpi_wait_ns": 10.0 * rank})
    for run_id in sorted({j["run_id"] for j in jobs}):
        runs.append({"run_id": run_id, "repetition": 0, "policy": "x", "alone_job": None, "status": "completed", "error": None})
    runs.append({"run_id": "r0-broken", "repetition": 0, "policy": "broken", "alone_job": None, "status": "error",
                 "error": "engine exploded at the spine"})
    return {"jobs": pd.DataFrame(jobs), "iterations": pd.DataFrame(iterations), "runs": pd.DataFrame(runs)}


def test_figures_have_the_expected_bars_and_lines():
    t = tables()
    slow = slowdowns(t["jobs"])
    bars = slowdown_bars(slow, ["default", "prio-a"])
    assert len(bars.axes[0].patches) == 2 * 2  # two policies x two jobs
    ranking = policy_ranking(policy_summary(slow))
    assert len(ranking.axes[0].patches) == 2
    cdf = latency_cdf(t["iterations"], "a", ["alone", "default", "prio-a"])
    assert len(cdf.axes[0].get_lines()) == 3
    heat = rank_timing_map(t["iterations"], "a", ["alone", "default"])
    assert len([ax for ax in heat.axes if ax.images]) == 2


def test_report_is_self_contained_with_headline_figures_and_failures(tmp_path):
    meta = {"name": "hand-made", "description": "two jobs", "seeds": [1], "qoslab_version": "test",
            "policies": [{"name": "default", "description": "everyone on SL0"}, {"name": "prio-a", "description": "a first"}],
            "base_scenario": {"topology": {"kind": "single-switch", "hosts": 8}, "fabric": {"link_gbps": 100.0, "data_vls": 4}}}
    path = write_report(tmp_path, tables(), meta)
    page = path.read_text()
    # default: contention 50 + 120 = 170; prio-a: 5 + 130 = 135, 20.6% less.
    assert "The best policy by total contention is <b>prio-a</b>: 135 us (-20.6% against default)" in page
    assert "costs the jobs 170 us of contention in total; the worst hit, b, runs 1.60× slower" in page
    images = re.findall(r'<img [^>]*src="data:image/png;base64,', page)
    assert len(images) == 3 + 2  # slowdown, ranking, per-rank map, and a CDF per job
    assert "src=\"http" not in page and "<link" not in page and "<script" not in page
    assert "engine exploded at the spine" in page
    assert (tmp_path / "figures" / "slowdown.png").exists()
