"""Calibrating a skeleton's compute phases against a published figure (docs/skeletons.md,
"Calibration").

A skeleton's communication comes from its pattern and the fabric; its compute is a parameter.
Given the alone run a preset stands for (skeleton_presets.Reference: the seed's job size and our
model of its machine) and a target (a published alone time per iteration, or a fraction of time
in MPI), `calibrate` finds the `compute_us` that makes the alone run hit the target. The engine
models the communication, so the result depends on the fabric: recalibrate for another one.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, cast

from qoslab.scenario import Scenario
from qoslab.simulate import RunResult, simulate
from qoslab.skeleton_presets import PRESETS, Reference, reference
from qoslab.workload_base import Workload

_TIME_LIMIT_US = 1e9  # simulated; a calibration run ends when its job does


@dataclass(frozen=True)
class AloneRun:
    """What one alone run of a skeleton measured, per skeleton iteration and rank."""

    compute_us: float
    iteration_us: float  # mean over ranks and iterations
    mpi_fraction: float  # share of rank time blocked in MPI waits
    bytes_per_rank: float  # payload bytes sent per rank per iteration (collectives' messages included)
    messages_per_rank: float

    @property
    def mpi_us(self) -> float:
        return self.iteration_us * self.mpi_fraction


def reference_scenario(preset: str, kind: str, workload: dict[str, Any] | None = None,
                       messages: bool = False) -> Scenario:
    """The alone run `preset` was calibrated on for `kind`, with the preset's parameters
    (`workload` overrides them, e.g. compute_us or iterations); `messages` records every message
    (messages.parquet)."""
    ref = reference(preset, kind)
    data = copy.deepcopy(ref.scenario)
    # An alone run has no other job to end it: let it finish however long compute makes it.
    data["run"] = {"duration_us": _TIME_LIMIT_US, "messages": messages}
    job = {"name": kind, "nodes": ref.nodes, "ranks_per_node": ref.ranks_per_node, **ref.job,
           "workload": {"kind": kind, "preset": preset, "iterations": ref.iterations, **(workload or {})}}
    data["jobs"] = [job]
    return Scenario.model_validate(data)


def measure(scenario: Scenario) -> AloneRun:
    """Runs a one-job scenario and reduces it to per-iteration figures."""
    return figures(scenario, simulate(scenario))


def figures(scenario: Scenario, result: RunResult) -> AloneRun:
    """Per-iteration figures of a one-job run: the first run's ranks, every iteration."""
    (job,) = scenario.jobs
    summary = result.summary["jobs"][scenario.job_names()[0]]
    if not summary["completed"]:
        raise ValueError(f"job {scenario.job_names()[0]!r} did not complete: {summary}")
    assert result.ranks is not None
    ranks = result.ranks.to_pandas()
    first = ranks[ranks["run"] == 0]
    rank_iterations = len(first)  # one row per rank per iteration
    time_ns = float(first["time_ns"].sum())
    return AloneRun(
        compute_us=float(cast(Workload, job.workload).engine()["compute_us"]),
        iteration_us=time_ns / rank_iterations / 1e3,
        mpi_fraction=float(first["mpi_wait_ns"].sum()) / time_ns,
        bytes_per_rank=summary["bytes_sent"] / rank_iterations,
        messages_per_rank=summary["messages_sent"] / rank_iterations,
    )


def _target_error(run: AloneRun, ref: Reference) -> float:
    if ref.iteration_us is not None:
        return run.iteration_us / ref.iteration_us - 1.0
    assert ref.mpi_fraction is not None
    return run.mpi_fraction - ref.mpi_fraction


def calibrate(preset: str, kind: str, tolerance: float = 0.01, max_runs: int = 12) -> tuple[float, AloneRun]:
    """The compute_us that makes `kind`'s alone run under `preset` hit the preset's target, and
    that run. `tolerance`: relative on iteration times, absolute on fractions. Finer is not
    meaningful: packet-level timing moves a 1540-rank MILC's fraction by up to 0.02 when
    compute_us changes by under 1% (`sensitivity` measures it).

    The first guess assumes compute and communication do not overlap: compute per iteration is
    what the target leaves once the communication-only wait is paid. Skeletons that overlap them
    (MILC's gathers, BT's pipelines) wait less as compute grows, so the guess is refined by
    regula falsi (Illinois) on the target error, which is monotonic in compute_us apart from
    that timing noise."""
    ref = reference(preset, kind)
    base = measure(reference_scenario(preset, kind, {"compute_us": 0.0}))
    # Compute per iteration per unit of compute_us (each skeleton splits compute_us its own way),
    # read from one run with a known compute.
    probe_us = max(base.iteration_us, 1.0)
    probe = measure(reference_scenario(preset, kind, {"compute_us": probe_us}))
    per_unit = (probe.iteration_us - probe.mpi_us) / probe_us
    if per_unit <= 0:
        raise ValueError(f"{kind}: compute_us adds no compute time in this configuration")

    def guess(run: AloneRun) -> float:
        wait = run.mpi_us
        if ref.iteration_us is not None:
            busy = ref.iteration_us - wait
        else:
            assert ref.mpi_fraction is not None
            busy = wait * (1.0 - ref.mpi_fraction) / ref.mpi_fraction
        if busy <= 0:
            raise ValueError(f"{kind}: communication alone ({wait:.1f} us per iteration) leaves no time for compute")
        return busy / per_unit

    # Error is increasing in compute for an iteration-time target, decreasing for a fraction:
    # orient it so that it always increases; bracket the root with [lo, hi] as runs come in.
    sign = 1.0 if ref.iteration_us is not None else -1.0
    lo: list[float] | None = None  # [compute, error] with error < 0
    hi: list[float] | None = None  # [compute, error] with error > 0
    last_side = 0
    compute = guess(probe)
    for _ in range(max_runs):
        run = measure(reference_scenario(preset, kind, {"compute_us": compute}))
        error = sign * _target_error(run, ref)
        if abs(error) <= tolerance:
            return compute, run
        side = -1 if error < 0 else 1
        if side < 0:
            lo = [compute, error]
            if last_side < 0 and hi is not None:
                hi[1] /= 2  # Illinois: hi kept twice in a row, so pull the next guess toward it
        else:
            hi = [compute, error]
            if last_side > 0 and lo is not None:
                lo[1] /= 2
        last_side = side
        if lo is None or hi is None:
            compute = guess(run)  # not bracketed yet: another fixed-point step
        else:
            compute = lo[0] - lo[1] * (hi[0] - lo[0]) / (hi[1] - lo[1])
    raise ValueError(f"{preset}/{kind}: no compute_us within {tolerance} of the target after {max_runs} runs "
                     f"(last: {run})")


def sensitivity(preset: str, kind: str, compute_us: float, step: float = 0.02) -> list[AloneRun]:
    """Alone runs with compute_us scaled by 1 - step, 1 and 1 + step: how much the measured
    fraction moves for reasons other than the calibration (the change itself moves it by about
    f (1 - f) step; packet timing adds the rest), which is what a test's tolerance must allow."""
    return [measure(reference_scenario(preset, kind, {"compute_us": compute_us * f}))
            for f in (1 - step, 1.0, 1 + step)]


def preset_kinds() -> list[tuple[str, str]]:
    """Every (preset, kind) pair, in PRESETS' order."""
    return [(preset, kind) for preset, kinds in PRESETS.items() for kind in kinds]
