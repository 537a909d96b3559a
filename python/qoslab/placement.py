"""Job placement: which hosts each job gets, the way a scheduler would hand them out.

Order: explicit host lists first, then fragmented jobs (interleaved leaf by leaf), then
contiguous, then random jobs, each from the hosts still free (a job with ``share_hosts`` draws
from all hosts instead). Ranks fill a job's hosts in the order returned, ``ranks_per_node`` each.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from qoslab.host_lists import expand_hosts
from qoslab.jobs import Job

# Purpose number of the placement random streams (independent of the engine's streams).
_RNG_PLACEMENT = 7


def place_jobs(jobs: Sequence[Job], host_count: int, hosts_per_leaf: int, seed: int) -> list[list[int]]:
    """The host list of every job, or a PlacementError naming the job that cannot be placed."""
    used = np.zeros(host_count, dtype=bool)
    placed: list[list[int] | None] = [None] * len(jobs)

    def take(index: int, hosts: list[int]) -> None:
        placed[index] = hosts
        if not jobs[index].share_hosts:
            used[hosts] = True

    def free_mask(job: Job) -> np.ndarray:
        return np.ones(host_count, dtype=bool) if job.share_hosts else ~used

    for i, job in enumerate(jobs):
        if job.placement != "hosts":
            continue
        hosts = expand_hosts(job.hosts, host_count)
        beyond = [h for h in hosts if h >= host_count]
        if beyond:
            raise _error(i, "hosts", f"host {beyond[0]} does not exist: the topology has {host_count} hosts")
        if job.nodes is not None and job.nodes != len(hosts):
            raise _error(i, "nodes", f"{job.nodes} nodes but {len(hosts)} hosts listed")
        clash = [h for h in hosts if used[h]] if not job.share_hosts else []
        if clash:
            raise _error(i, "hosts", f"host {clash[0]} is already used by another job (set share_hosts = true to allow)")
        take(i, hosts)

    fragmented = [i for i, j in enumerate(jobs) if j.placement == "fragmented"]
    if fragmented:
        for i, hosts in _interleave(jobs, fragmented, used, host_count, hosts_per_leaf).items():
            take(i, hosts)

    for i, job in enumerate(jobs):
        if job.placement != "contiguous":
            continue
        free = free_mask(job)
        start = _first_run(free, job.nodes)
        if start is None:
            raise _error(i, "nodes", f"no {job.nodes} consecutive free hosts left (of {host_count}; "
                         f"{int(free.sum())} free): use placement = \"random\" or fewer nodes")
        take(i, list(range(start, start + job.nodes)))

    for i, job in enumerate(jobs):
        if job.placement != "random":
            continue
        candidates = np.flatnonzero(free_mask(job))
        if len(candidates) < job.nodes:
            raise _error(i, "nodes", f"{job.nodes} nodes requested but only {len(candidates)} hosts are free")
        rng = np.random.default_rng([seed, _RNG_PLACEMENT, i])
        # Sorted, like a scheduler's node list: ranks go to hosts in index order.
        take(i, sorted(int(h) for h in rng.choice(candidates, size=job.nodes, replace=False)))

    return [p for p in placed if p is not None]


def _interleave(jobs: Sequence[Job], order: list[int], used: np.ndarray, host_count: int,
                hosts_per_leaf: int) -> dict[int, list[int]]:
    """Fragmented placement (the seeds' F4/F8): leaf by leaf, each fragmented job still short of
    nodes takes up to ``fragment_nodes`` of the leaf's free hosts, in job order."""
    need = {i: jobs[i].nodes for i in order}
    got: dict[int, list[int]] = {i: [] for i in order}
    for leaf_start in range(0, host_count, hosts_per_leaf):
        free = [h for h in range(leaf_start, min(leaf_start + hosts_per_leaf, host_count)) if not used[h]]
        for i in order:
            share = min(jobs[i].fragment_nodes, need[i], len(free))
            got[i] += free[:share]
            free = free[share:]
            need[i] -= share
        if not any(need.values()):
            break
    short = [i for i in order if need[i] > 0]
    if short:
        i = short[0]
        raise _error(i, "nodes", f"fragmented placement ran out of hosts: {need[i]} of {jobs[i].nodes} nodes "
                     f"could not be placed with {jobs[i].fragment_nodes} per leaf switch")
    return got


def _first_run(free: np.ndarray, length: int) -> int | None:
    """Start of the first run of `length` consecutive True values."""
    run = 0
    for h, ok in enumerate(free):
        run = run + 1 if ok else 0
        if run == length:
            return h - length + 1
    return None


class PlacementError(ValueError):
    """A job that cannot be placed; ``key`` names the scenario key (``jobs[2].nodes``)."""

    def __init__(self, key: str, message: str):
        self.key, self.message = key, message
        super().__init__(f"{key}: {message}")


def _error(index: int, key: str, message: str) -> PlacementError:
    return PlacementError(f"jobs[{index}].{key}", message)
