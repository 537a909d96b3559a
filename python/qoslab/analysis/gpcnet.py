"""GPCNeT's congestion impact factor (CIF), computed as GPCNeT computes it (netbench/GPCNET v1.3:
utils.c summarize_performance and print_comparison_results; science.md 1.1). Isolated samples
come from the canary's alone runs, congested ones from a policy's shared runs; repetitions are
pooled, as if one GPCNeT run had measured them all.

- **Samples.** One per rank and timed iteration: the iteration time (RR Two-sided Lat: half of
  it, GPCNeT's "2 sends"; in µs), or for a bandwidth test the bytes a rank sends per iteration
  over its time (MiB/s/rank).
- **Average.** GPCNeT's per-rank figure of each ring (per rank over every test for the allreduce
  canary): for latency the mean of the samples, for bandwidth the ring's bytes over the ring's
  time (not the mean of per-iteration bandwidths); then the mean over ranks, then over rings.
- **99th percentile.** GPCNeT bins the pooled samples and takes the ⌊0.99 N⌋-th in order of
  badness: from the lowest latency up, from the highest bandwidth down. Here the same order
  statistic exactly (GPCNeT's 100 000 bins between min and max shift it by at most 1/99 999 of
  that range).
- **CIF.** Latency: congested / isolated; bandwidth: isolated / congested, for the average and
  the 99th percentile (> 1: congestion hurts). GPCNeT computes it from the figures as printed,
  rounded to 0.1 in their units, and prints it to 0.1: the `*_printed` columns.
"""

from __future__ import annotations

import functools
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import TypeAdapter

from qoslab.workloads import GpcnetTest

CIF_COLUMNS = ["policy", "job", "kind", "cif_average", "cif_p99"]
GPCNET_COLUMNS = ["policy", "job", "test", "kind", "unit", "samples_isolated", "samples_congested",
                  "isolated_average", "congested_average", "isolated_p99", "congested_p99",
                  "cif_average", "cif_p99", "cif_average_printed", "cif_p99_printed"]


def gpcnet_p99(samples: np.ndarray, kind: str) -> float:
    """GPCNeT's "99%": the ⌊0.99 N⌋-th sample from the best (at least the first)."""
    if samples.size == 0:
        return float("nan")
    k = max(1, int(0.99 * samples.size))
    ordered = np.sort(samples)
    return float(ordered[k - 1] if kind == "latency" else ordered[::-1][k - 1])


def _average(repetition: np.ndarray, rank: np.ndarray, block: np.ndarray, time_ns: np.ndarray,
             test: GpcnetTest) -> float:
    """GPCNeT's average of one mode's (and policy's) timed samples of `test`."""
    if time_ns.size == 0:
        return float("nan")
    frame = pd.DataFrame({"repetition": repetition, "rank": rank, "time_ns": time_ns,
                          "block": block if test.average_per_block else 0})
    groups = frame.groupby(["repetition", "rank", "block"], sort=False)["time_ns"]
    if test.kind == "bandwidth":
        # A rank's ring: the bytes it sent over the ring's time.
        per_rank = test.bytes_per_iteration * groups.count() / (groups.sum() * 1e-9) / (1 << 20)
    else:
        per_rank = groups.mean().pipe(lambda t: pd.Series(test.sample(t.to_numpy()), index=t.index))
    # Mean over ranks of each ring, then over rings (summarize_performance's avgperf_vals).
    return float(per_rank.groupby(level=["repetition", "block"], sort=False).mean().mean())


def _ratio(isolated: float, congested: float, kind: str) -> float:
    num, den = (congested, isolated) if kind == "latency" else (isolated, congested)
    if np.isnan(num) or np.isnan(den):
        return float("nan")
    return num / den if den != 0 else float("inf")


def _printed(isolated: float, congested: float, kind: str) -> float:
    """print_comparison_results: each figure printed with %12.1f and read back, the ratio printed %.1f."""
    ratio = _ratio(float(f"{isolated:12.1f}"), float(f"{congested:12.1f}"), kind)
    return ratio if not np.isfinite(ratio) else float(f"{ratio:.1f}")


def gpcnet_impact(iterations: pd.DataFrame, job: str, tests: list[GpcnetTest]) -> pd.DataFrame:
    """Per policy and test of canary `job`: GPCNeT's isolated and congested average and 99th
    percentile (in its units) and the CIF, exact and as GPCNeT prints it."""
    # Columns as arrays once: canary tables run to millions of rows.
    rows = iterations.loc[iterations["job"] == job, ["repetition", "policy", "mode", "rank", "iteration", "time_ns"]]
    if rows.empty:
        return pd.DataFrame(columns=GPCNET_COLUMNS)
    iteration = rows["iteration"].to_numpy(dtype=np.int64)
    repetition = rows["repetition"].to_numpy(dtype=np.int64)
    rank = rows["rank"].to_numpy(dtype=np.int64)
    time_ns = rows["time_ns"].to_numpy(dtype=float)
    alone = (rows["mode"] == "alone").to_numpy()
    policy_code, policies = pd.factorize(rows["policy"])
    # Which test and block (ring or allreduce test) each iteration belongs to; -1: untimed.
    size = int(iteration.max()) + 1
    test_of = np.full(size, -1, dtype=np.int64)
    block_of = np.full(size, -1, dtype=np.int64)
    for t, test in enumerate(tests):
        for b, (first, count) in enumerate(test.blocks):
            test_of[first:min(first + count, size)] = t
            block_of[first:min(first + count, size)] = b
    row_test, row_block = test_of[iteration], block_of[iteration]
    shared_policies = [(code, str(name)) for code, name in enumerate(policies) if (~alone & (policy_code == code)).any()]
    out = []
    for t, test in enumerate(tests):
        of_test = row_test == t

        def figures(mask: np.ndarray, test: GpcnetTest = test) -> tuple[float, float, int]:
            samples = test.sample(time_ns[mask])
            average = _average(repetition[mask], rank[mask], row_block[mask], time_ns[mask], test)
            return average, gpcnet_p99(samples, test.kind), int(mask.sum())

        iso_avg, iso_p99, iso_n = figures(of_test & alone)
        if iso_n == 0:
            continue
        for code, policy in shared_policies:
            con_avg, con_p99, con_n = figures(of_test & ~alone & (policy_code == code))
            if con_n == 0:
                continue
            out.append({
                "policy": policy, "job": job, "test": test.name, "kind": test.kind, "unit": test.unit,
                "samples_isolated": iso_n, "samples_congested": con_n,
                "isolated_average": iso_avg, "congested_average": con_avg,
                "isolated_p99": iso_p99, "congested_p99": con_p99,
                "cif_average": _ratio(iso_avg, con_avg, test.kind), "cif_p99": _ratio(iso_p99, con_p99, test.kind),
                "cif_average_printed": _printed(iso_avg, con_avg, test.kind),
                "cif_p99_printed": _printed(iso_p99, con_p99, test.kind),
            })
    return pd.DataFrame(out, columns=GPCNET_COLUMNS)


@functools.cache
def _workload_adapter() -> TypeAdapter[Any]:
    """The validator of every workload kind: building it takes about 12 ms, and a sweep asks once
    per point."""
    from qoslab.workloads import AnyWorkload

    return TypeAdapter(AnyWorkload)


def canary_tests(scenario: dict[str, Any]) -> dict[str, list[GpcnetTest]]:
    """The GPCNeT canary jobs of a resolved scenario (a study's base scenario) and their tests."""
    found = {}
    for job in scenario.get("jobs", []):
        workload = job.get("workload", {})
        if str(workload.get("kind", "")).startswith("gpcnet-"):
            model = _workload_adapter().validate_python(workload)
            if hasattr(model, "gpcnet_tests"):
                found[job["name"]] = model.gpcnet_tests()
    return found


def congestion_impact(iterations: pd.DataFrame, job: str, kind: Literal["latency", "bandwidth"] = "latency",
                      ring_iterations: int | None = None) -> pd.DataFrame:
    """Per policy: cif_average and cif_p99 of `job` (> 1: congestion hurts), from every one of its
    iterations' time_ns, with GPCNeT's average and 99th percentile. For a bandwidth-type job a
    sample is 1 / time (bandwidth of a fixed amount of data) and, with `ring_iterations`, the
    average is over rings of that many iterations (GPCNeT's bytes over ring time)."""
    per_ring = ring_iterations or 1
    rows = iterations[iterations["job"] == job]
    if rows.empty:
        return pd.DataFrame(columns=CIF_COLUMNS)
    last = int(rows["iteration"].max()) + 1
    test = GpcnetTest(job, kind, "", tuple((s, min(per_ring, last - s)) for s in range(0, last, per_ring)),
                      bytes_per_iteration=1 << 20)
    table = gpcnet_impact(iterations, job, [test])
    return table.assign(kind=kind)[CIF_COLUMNS] if len(table) else pd.DataFrame(columns=CIF_COLUMNS)


def impact_by_point(table: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """A swept study's `sweep_gpcnet` table laid out side by side: one row per canary test and
    policy (in the order they first appear), one column per sweep point (named by its swept
    values, "key=value, ..."), each cell GPCNeT's CIF as it prints them, "average / 99%"."""
    if table.empty:
        return pd.DataFrame(columns=["test", "policy"])
    frame = table.copy()

    def name(row: Any) -> str:
        return ", ".join(f"{key}={_shown(row[key])}" for key in keys) or f"point {row['point']}"

    frame["point_name"] = frame.apply(name, axis=1)
    frame["cif"] = [f"{a:.1f} / {p:.1f}" for a, p in zip(frame["cif_average_printed"], frame["cif_p99_printed"])]
    wide = frame.pivot_table(index=["test", "policy"], columns="point_name", values="cif", aggfunc="first", sort=False)
    points = list(dict.fromkeys(frame.sort_values("point", kind="stable")["point_name"]))
    return wide[points].reset_index().rename_axis(columns=None)


def _shown(value: Any) -> str:
    """A swept value as a column name shows it: booleans as on/off (a swept `enabled`)."""
    if isinstance(value, (bool, np.bool_)):
        return "on" if value else "off"
    return str(value)
