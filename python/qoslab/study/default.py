"""The built-in default study `qoslab study` runs with no file: four jobs on a small slimmed fat
tree, compared under each family of policy the seeds propose. It finishes in well under a minute
on two cores (benchmarks/study.json has the figures).

The fabric is a 4:1 slimmed two-level tree, so jobs spread over its leaves meet on the up-links,
as on the slimmed trees of the seeds. Three jobs of 32 nodes are placed at random (one to eight
nodes on each leaf): a MILC skeleton (the job the per-job and per-rank policies favour), an
all-to-all and an allreduce loop (latency-bound). A Flood-Pairs congestor sits on one leaf and talks to four
others, so its pressure is local: the MILC ranks near it are the job's slow ranks.
"""

from __future__ import annotations

from typing import Any

from qoslab.study.model import Study

DEFAULT_STUDY: dict[str, Any] = {
    "name": "qoslab default study: four jobs, one congestor, every kind of QoS policy",
    "description": (
        "Four MPI jobs share a 128-host, 4:1 slimmed fat tree: a MILC skeleton, an all-to-all and an "
        "allreduce loop placed at random, and a Flood-Pairs congestor on one leaf. Each job runs "
        "alone on its hosts, then all four together under each policy: everyone on one service level, "
        "job-level priorities (Savoie et al.), prioritising 10% of MILC's ranks (Savoie et al.), priority "
        "per message from past latency (Khalilov et al.) and traffic spread over all VLs (Subramoni et al.)."
    ),
    "repetitions": 3,
    "scenario": {
        "seed": 1,
        "topology": {"kind": "xgft", "m": [16, 8], "w": [1, 4]},
        "jobs": [
            {"name": "milc", "nodes": 32, "placement": "random",
             "workload": {"kind": "milc", "iterations": 3, "cg_iterations": 5, "compute_us": 5.0}},
            {"name": "alltoall", "nodes": 32, "placement": "random",
             "workload": {"kind": "all-to-all", "bytes": 16384, "iterations": 3}},
            {"name": "allreduce", "nodes": 32, "placement": "random",
             "workload": {"kind": "collective-loop", "collective": "allreduce", "bytes": 8, "iterations": 200}},
            {"name": "flood", "placement": "hosts", "hosts": [0, 1, 2, 3, 64, 80, 96, 112],
             "workload": {"kind": "flood-pairs", "iterations": 20}},
        ],
    },
    "policies": [
        {"kind": "default"},
        {"kind": "per-job", "name": "per-job[milc first]",
         "assignment": {"milc": 0, "allreduce": 1, "alltoall": 2, "flood": 3}},
        {"kind": "per-job", "name": "per-job[flood first]",
         "assignment": {"flood": 0, "milc": 1, "allreduce": 2, "alltoall": 3}},
        {"kind": "per-job", "name": "per-job[milc high]", "assignment": {"milc": 1}, "weights": [9, 2286]},
        {"kind": "per-rank", "job": "milc", "fraction": 0.1},
        {"kind": "per-rank", "job": "milc", "fraction": 0.1, "selection": "online"},
        {"kind": "per-rank", "job": "milc", "fraction": 0.1, "metric": "random"},
        {"kind": "per-message", "name": "per-message[victims]", "jobs": ["milc", "alltoall", "allreduce"]},
        {"kind": "per-message", "name": "per-message[all]"},
        {"kind": "multi-vl", "by": "connection"},
    ],
}


def default_study() -> Study:
    return Study.from_dict(DEFAULT_STUDY, None)
