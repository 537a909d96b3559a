"""Contention studies: jobs alone and together under QoS policies, repeated over placements and
seeds (model: the study file; plan: the runs; runner: running them and writing the results).
Tail-latency studies: tail_model, tail_runner."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def load_study(path: str | Path) -> Any:
    """A study file: a policy study (model.Study), or a tail-latency study when it says
    ``kind = "tail-latency"`` (tail_model.TailStudy)."""
    from qoslab.scenario import read_toml

    data = read_toml(path)
    if isinstance(data, dict) and data.get("kind") == "tail-latency":
        from qoslab.study.tail_model import TailStudy

        return TailStudy.from_dict(data, str(path))
    from qoslab.study.model import Study

    return Study.from_dict(data, str(path))
