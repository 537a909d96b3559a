"""Job placement: which hosts each job gets, the way a scheduler would hand them out.

Order: explicit host lists first, then fragmented jobs (interleaved leaf by leaf), then
contiguous, then the Dragonfly+ group placements (same-group, spread-groups, scheduler), then
random jobs, each from the hosts still free (a job with ``share_hosts`` draws from all hosts
instead). Ranks fill a job's hosts in the order returned, ``ranks_per_node`` each.

Group placements (Dragonfly+ only):
- ``same-group``: every node in one group, drawn at random among the groups with room, hosts at
  random inside it.
- ``spread-groups``: nodes dealt round robin over every group (as evenly as the free hosts allow),
  hosts at random inside each.
- ``scheduler``: what a topology-aware scheduler (Slurm's tree plugin) tends to produce: the
  fullest group that still fits the job (best fit), its lowest free hosts first; a job that fits
  in no group takes the groups with the most free hosts first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from qoslab.host_lists import expand_hosts
from qoslab.jobs import Job

# Purpose number of the placement random streams (independent of the engine's streams).
_RNG_PLACEMENT = 7


GROUP_PLACEMENTS = ("same-group", "spread-groups", "scheduler")


def place_jobs(jobs: Sequence[Job], host_count: int, hosts_per_leaf: int, seed: int,
               host_groups: Sequence[int] | None = None) -> list[list[int]]:
    """The host list of every job, or a PlacementError naming the job that cannot be placed.
    ``host_groups``: the Dragonfly+ group of every host (None on other topologies)."""
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
        # Required with placement = "hosts", and host names are indices once the scenario is valid.
        hosts = expand_hosts(cast(str | list[int], job.hosts), host_count)
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
        need = job.requested_nodes()
        start = _first_run(free, need)
        if start is None:
            raise _error(i, "nodes", f"no {need} consecutive free hosts left (of {host_count}; "
                         f"{int(free.sum())} free): use placement = \"random\" or fewer nodes")
        take(i, list(range(start, start + need)))

    for i, job in enumerate(jobs):
        if job.placement not in GROUP_PLACEMENTS:
            continue
        if host_groups is None:
            raise _error(i, "placement", f'placement = "{job.placement}" needs a dragonfly-plus topology (its groups)')
        rng = np.random.default_rng([seed, _RNG_PLACEMENT, i])
        take(i, _in_groups(i, job, np.asarray(host_groups), free_mask(job), rng))

    for i, job in enumerate(jobs):
        if job.placement != "random":
            continue
        candidates = np.flatnonzero(free_mask(job))
        need = job.requested_nodes()
        if len(candidates) < need:
            raise _error(i, "nodes", f"{need} nodes requested but only {len(candidates)} hosts are free")
        rng = np.random.default_rng([seed, _RNG_PLACEMENT, i])
        # Sorted, like a scheduler's node list: ranks go to hosts in index order.
        take(i, sorted(int(h) for h in rng.choice(candidates, size=need, replace=False)))

    return [p for p in placed if p is not None]


def _interleave(jobs: Sequence[Job], order: list[int], used: np.ndarray, host_count: int,
                hosts_per_leaf: int) -> dict[int, list[int]]:
    """Fragmented placement (the seeds' F4/F8): leaf by leaf, each fragmented job still short of
    nodes takes up to ``fragment_nodes`` of the leaf's free hosts, in job order."""
    need = {i: jobs[i].requested_nodes() for i in order}
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


def _in_groups(index: int, job: Job, groups: np.ndarray, free: np.ndarray, rng: np.random.Generator) -> list[int]:
    count = int(groups.max()) + 1
    free_in = [np.flatnonzero(free & (groups == g)) for g in range(count)]
    room = np.array([len(f) for f in free_in])
    need = job.requested_nodes()
    if room.sum() < need:
        raise _error(index, "nodes", f"{need} nodes requested but only {int(room.sum())} hosts are free")
    if job.placement == "same-group":
        fits = np.flatnonzero(room >= need)
        if len(fits) == 0:
            raise _error(index, "nodes", f"no group has {need} free hosts (at most {int(room.max())}): use "
                         'placement = "spread-groups" or "scheduler", or fewer nodes')
        g = int(rng.choice(fits))
        return sorted(int(h) for h in rng.choice(free_in[g], size=need, replace=False))
    if job.placement == "spread-groups":
        share = np.zeros(count, dtype=int)
        left = need
        while left:
            # One node to every group that still has room, in group order, until the job is placed.
            for g in range(count):
                if left and share[g] < room[g]:
                    share[g] += 1
                    left -= 1
        spread = [int(h) for g in range(count) if share[g] for h in rng.choice(free_in[g], size=share[g], replace=False)]
        return sorted(spread)
    # scheduler: best fit, else the emptiest groups first; lowest free hosts first either way.
    roomy = [g for g in range(count) if room[g] >= need]
    if roomy:
        best = min(roomy, key=lambda g: (room[g], g))
        return [int(h) for h in free_in[best][:need]]
    hosts: list[int] = []
    for g in sorted(range(count), key=lambda g: (-room[g], g)):
        hosts += [int(h) for h in free_in[g][: need - len(hosts)]]
        if len(hosts) == need:
            break
    return sorted(hosts)


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

    def __reduce__(self) -> tuple[Any, ...]:  # pickled whole, as qoslab.errors' are
        return type(self), (self.key, self.message)


def _error(index: int, key: str, message: str) -> PlacementError:
    return PlacementError(f"jobs[{index}].{key}", message)
