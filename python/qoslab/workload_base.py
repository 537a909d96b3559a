"""What every workload model shares: the base class and the parameter types."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import ConfigDict, Field

from qoslab.scenario_files import _Table

# A message is cut into its packets when sent, each numbered in 32 bits: at most 2^31 of them
# (2^39 bytes at the smallest MTU).
MAX_MESSAGE_BYTES = 2**39
Bytes = Annotated[int, Field(ge=0, lt=MAX_MESSAGE_BYTES)]
Iterations = Annotated[int, Field(ge=1, lt=2**32)]
Count = Annotated[int, Field(ge=1, lt=2**32)]
Micros = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class Workload(_Table):
    # defer_build: a workload's validator is built inside the job's (the union of every kind),
    # not once more per kind when its class is defined (docs/design/engine.md, "Start-up").
    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True, frozen=True)

    def engine(self) -> dict[str, Any]:
        """The engine's form: every parameter, resolved, with the kind."""
        return self.model_dump(mode="json")
