"""QoS policies a study can list, each a named, parameterised object (docs/study.md)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from qoslab.policies.base import (
    NEEDS_ALONE,
    NEEDS_PROFILE,
    AloneRun,
    Policy,
    PolicyContext,
    PolicyError,
)
from qoslab.policies.default import Default
from qoslab.policies.mapping import VlMapping
from qoslab.policies.multi_vl import MultiVl
from qoslab.policies.per_job import PerJob
from qoslab.policies.per_message import PerMessage
from qoslab.policies.per_rank import PerRank
from qoslab.policies.search import Search

AnyPolicy = Annotated[
    Default | PerJob | PerRank | PerMessage | MultiVl | VlMapping | Search, Field(discriminator="kind")
]
POLICY_KINDS = ("default", "per-job", "per-rank", "per-message", "multi-vl", "vl-mapping", "search")

__all__ = [
    "NEEDS_ALONE",
    "NEEDS_PROFILE",
    "POLICY_KINDS",
    "AloneRun",
    "AnyPolicy",
    "Default",
    "MultiVl",
    "PerJob",
    "PerMessage",
    "PerRank",
    "Policy",
    "PolicyContext",
    "PolicyError",
    "Search",
    "VlMapping",
]
