"""The built-in default study `qoslab study` runs with no file: four jobs on a small slimmed fat
tree, compared under the seeds' main policies. Small enough for a few minutes on two cores."""

from __future__ import annotations

from typing import Any

from qoslab.study.model import Study

DEFAULT_STUDY: dict[str, Any] = {
    "name": "default study: four jobs, five QoS policies",
    "description": (
        "Four MPI jobs share a 4:1 slimmed two-level fat tree, each fragmented four nodes per leaf so "
        "their traffic crosses the spines: a bandwidth-heavy all-to-all, a halo exchange, an allreduce "
        "loop and a flood. Each job runs alone on its hosts, then all four together under each policy."
    ),
    "repetitions": 2,
    "scenario": {
        "seed": 1,
        "topology": {"kind": "xgft", "m": [16, 8], "w": [1, 4]},
        "jobs": [
            {"name": "a2a", "nodes": 32, "placement": "fragmented",
             "workload": {"kind": "all-to-all", "bytes": 16384, "iterations": 3}},
            {"name": "halo", "nodes": 32, "placement": "fragmented",
             "workload": {"kind": "nearest-neighbor", "dims": 2, "bytes": 65536, "compute_us": 5.0, "iterations": 10}},
            {"name": "allreduce", "nodes": 32, "placement": "fragmented",
             "workload": {"kind": "collective-loop", "collective": "allreduce", "bytes": 65536, "iterations": 10}},
            {"name": "flood", "nodes": 32, "placement": "fragmented",
             "workload": {"kind": "flood-pairs", "iterations": 20}},
        ],
    },
    "policies": [
        {"kind": "default"},
        {"kind": "per-job", "name": "per-job[halo first]",
         "assignment": {"halo": 0, "allreduce": 1, "a2a": 2, "flood": 3}},
        {"kind": "per-rank", "job": "halo", "fraction": 0.1},
        {"kind": "per-message", "jobs": "all"},
        {"kind": "multi-vl", "by": "connection"},
    ],
}


def default_study() -> Study:
    return Study.from_dict(DEFAULT_STUDY, None)
