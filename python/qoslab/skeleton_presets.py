"""Calibrated parameter sets for the application skeletons (``preset = "..."`` in a skeleton's
``[jobs.workload]``), and the alone run each was calibrated on.

A preset fills every parameter the workload table does not set, so an explicit key always wins.
Each was calibrated at one seed's scale (job size, ranks per node, our model of that machine):
`compute_us` is chosen so that the skeleton, run alone there, matches the published figure (the
seed's alone time per iteration, or a fraction of time in MPI), with communication modelled by the
engine. docs/skeletons.md ("Calibration") gives the sources, the figures, what is assumed where
nothing is published, and how to recalibrate (scripts/calibrate_skeletons.py, python/qoslab/
calibration.py). At another job size or on another fabric the same parameters give another
fraction of time in MPI: recalibrate rather than reuse.

Data only: skeletons.py reads PRESETS, calibration.py and the tests read REFERENCES.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

# Every parameter that shapes the communication is pinned, so a change of a default cannot move a
# calibrated preset; compute_us is written by scripts/calibrate_skeletons.py --write, not by hand.
# `iterations` only where the seed says how many ran.
PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    # Savoie et al. (IPDPSW'18): 70 nodes x 22 ranks per node = 1540 ranks, LLNL InfiniBand fat tree.
    "savoie-1540": {
        "milc": {"local_lattice": 8, "naik": True, "cg_iterations": 10, "compute_us": 619.2},
        "pf3d": {"nx": 64, "ny": 64, "nz": 16, "compute_us": 5046.6},
        "qbox": {"states": 256, "plane_waves": 16384, "fft_grid": 64, "compute_us": 5973.7},
        "crystal-router": {"bytes": 65536, "compute_us": 649.7},
    },
    # Jokanovic et al. (thesis ch. 5, Table 5.3): NPB class D, 256 ranks, 10 Gb/s, F4, x10 CPU.
    # `iterations`: the iterations in their 75 s trace cut (CG: 337 CG iterations / 26 products).
    "jokanovic-class-d-256": {
        "nas-ft": {"class": "D", "iterations": 5, "compute_us": 1187883.2},
        "nas-cg": {"class": "D", "iterations": 13, "compute_us": 14728.3},
        "nas-mg": {"class": "D", "iterations": 36, "compute_us": 188972.9},
        "nas-bt": {"class": "D", "iterations": 22, "compute_us": 322157.1},
    },
    # Salimi Beni & Cosenza (Bench'22): Marconi100; 8 nodes x 32 ranks is our assumption.
    "marconi100-256": {
        "hacc": {"particles_per_rank": 262144, "overload": 4, "compute_us": 49940.3},
        "miniamr": {"block_cells": 10, "blocks_per_dim": 2, "variables": 40, "stages_per_step": 20,
                    "checksum_every": 5, "refine_every": 5, "compute_us": 1036.2},
    },
    # Subramoni et al. (ICPP'10): CPMD on an InfiniBand cluster; 8 nodes x 8 ranks is our assumption.
    "subramoni-64": {
        "cpmd": {"states": 128, "fft_grid": 64, "atoms": 64, "compute_us": 19759.4},
    },
}


@dataclass(frozen=True)
class Reference:
    """The alone run a preset was calibrated on, and what it was calibrated to.

    `scenario` holds scenario tables (fabric, topology, routing, seed); `job` the job's placement
    keys. The target is either `iteration_us` (a published alone time per skeleton iteration) or
    `mpi_fraction` (the share of the alone run's rank time spent waiting in MPI). `basis` says where
    the target comes from: "published" (read in a source), "derived" (computed from published
    figures) or "assumed" (nothing published found); docs/skeletons.md gives the sources.
    """

    nodes: int
    ranks_per_node: int
    scenario: dict[str, Any]
    job: dict[str, Any]
    basis: Literal["published", "derived", "assumed"]
    iteration_us: float | None = None
    mpi_fraction: float | None = None
    # Iterations the calibration and its test run (enough to include every kind of iteration).
    iterations: int = 1

    @property
    def ranks(self) -> int:
        return self.nodes * self.ranks_per_node


# Our model of Savoie et al.'s machine (300 nodes, InfiniBand fat tree): neither the link rate nor
# the tree is in the seed; 100 Gb/s and a full-bisection two-level tree of 36-port switches
# (18 leaves x 18 hosts = 324) are assumptions (docs/skeletons.md).
_SAVOIE = {"seed": 1, "fabric": {"link_gbps": 100.0}, "topology": {"kind": "xgft", "m": [18, 18], "w": [1, 18]}}
_SAVOIE_JOB = {"placement": "random"}

# Jokanovic et al.'s simulated machine, as published: XGFT(3;16,16,4;1,4,4), 10 Gb/s, random
# routing, 4 KB segments; T_alone with 16 KB buffers, 1 VL, F4.
_JOKANOVIC = {"seed": 1, "fabric": {"link_gbps": 10.0, "data_vls": 1, "vl_buffer_bytes": 16384, "mtu_bytes": 4096},
              "topology": {"kind": "xgft", "m": [16, 16, 4], "w": [1, 4, 4]}, "routing": {"algorithm": "random"}}
_JOKANOVIC_JOB = {"placement": "fragmented", "fragment_nodes": 4}


def _jokanovic(t_alone_s: float, iters_in_cut: float, products_per_iteration: int = 1) -> Reference:
    # Published alone time of the trace cut / its iterations = seconds per (NPB) iteration.
    return Reference(nodes=256, ranks_per_node=1, scenario=_JOKANOVIC, job=_JOKANOVIC_JOB, basis="published",
                     iteration_us=t_alone_s / iters_in_cut * products_per_iteration * 1e6)


# Marconi100 (EDR Dragonfly+, docs/dragonfly.md's preset); the job in one leaf, minimal routing.
_MARCONI = {"seed": 1, "fabric": {"link_gbps": 100.0}, "topology": {"kind": "dragonfly-plus", "preset": "marconi100"},
            "routing": {"algorithm": "minimal"}}

# A 2010 multi-core InfiniBand cluster (assumed: 8 hosts on one QDR switch, 32 Gb/s data rate).
_SUBRAMONI = {"seed": 1, "fabric": {"link_gbps": 32.0}, "topology": {"kind": "single-switch", "hosts": 8}}

REFERENCES: dict[str, Reference] = {
    "savoie-1540": Reference(nodes=70, ranks_per_node=22, scenario=_SAVOIE, job=_SAVOIE_JOB, basis="assumed",
                             mpi_fraction=0.5),
    "marconi100-256": Reference(nodes=8, ranks_per_node=32, scenario=_MARCONI, job={}, basis="assumed",
                                mpi_fraction=0.5),
    # 6% faster overall when its collectives got 11% faster: collectives ~ 0.06 / 0.11 of the time.
    "subramoni-64": Reference(nodes=8, ranks_per_node=8, scenario=_SUBRAMONI, job={}, basis="derived",
                              mpi_fraction=round(0.06 / 0.11, 3)),
}

# Per (preset, kind) where one preset covers several kinds with different targets.
KIND_REFERENCES: dict[tuple[str, str], Reference] = {
    ("jokanovic-class-d-256", "nas-ft"): _jokanovic(8.192807, 5),
    # 337 CG iterations in the cut; a skeleton iteration is 25 CG iterations + the residual.
    ("jokanovic-class-d-256", "nas-cg"): _jokanovic(7.95694, 337, products_per_iteration=26),
    ("jokanovic-class-d-256", "nas-mg"): _jokanovic(7.304353, 36),
    ("jokanovic-class-d-256", "nas-bt"): _jokanovic(7.459007, 22),
    # miniAMR varies by step (refinement every refine_every steps): calibrate over one epoch.
    ("marconi100-256", "miniamr"): Reference(nodes=8, ranks_per_node=32, scenario=_MARCONI, job={},
                                            basis="assumed", mpi_fraction=0.5, iterations=5),
}


def reference(preset: str, kind: str) -> Reference:
    """The alone run `preset` was calibrated on for skeleton `kind`."""
    if kind not in PRESETS.get(preset, {}):
        raise KeyError(f"no preset {preset!r} for workload kind {kind!r}")
    return KIND_REFERENCES.get((preset, kind)) or REFERENCES[preset]


def presets_for(kind: str) -> list[str]:
    """The preset names a skeleton kind accepts."""
    return [name for name, kinds in PRESETS.items() if kind in kinds]
