"""Application skeletons (``[jobs.workload] kind = "milc"`` ...): communication structures that
follow real codes, not the codes. One pydantic model per skeleton with its parameters; the engine
generates the rank programs (crates/qoslab-engine/src/mpi/skeletons.rs).
"""

from __future__ import annotations

from qoslab.workload_base import Workload

SKELETON_MODELS: list[type[Workload]] = []
