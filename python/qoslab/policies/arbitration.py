"""The fabric side of a QoS policy: priority levels as SLs, SL -> VL one to one, and VL
arbitration weights of any size expressed as OpenSM table entries.

OpenSM's VLArb entries hold weights 0..255 (64-byte units) and a table holds at most 64 entries,
so a weight such as the seeds' 2286 spans several entries of one VL. The entries are interleaved
round by round (VL0, VL1, ..., VL0, ...) so a heavy VL's turns are spread through the table
instead of bunched, which is what an administrator would write; the long-run shares are the same
either way.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from qoslab.errors import problem

MAX_ENTRY_WEIGHT = 255
MAX_TABLE_ENTRIES = 64
SL_COUNT = 16


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


def weight_entries(weights: dict[int, int]) -> list[tuple[int, int]]:
    """{VL: weight} -> VLArb entries of at most 255 each, interleaved by rounds. Weight 0 gives
    no entry. Raises ValueError when more than 64 entries would be needed."""
    chunks: dict[int, list[int]] = {}
    for vl, weight in weights.items():
        if weight <= 0:
            continue
        count = math.ceil(weight / MAX_ENTRY_WEIGHT)
        base, extra = divmod(weight, count)
        # Near-equal chunks: 2286 -> 9 x 254, not 8 x 255 + 246.
        chunks[vl] = [base + 1] * extra + [base] * (count - extra)
    total = sum(len(c) for c in chunks.values())
    if total > MAX_TABLE_ENTRIES:
        shown = ", ".join(f"VL{vl}: {w}" for vl, w in weights.items())
        raise ValueError(
            f"weights {{{shown}}} need {total} VLArb entries of at most {MAX_ENTRY_WEIGHT}, "
            f"but a table holds {MAX_TABLE_ENTRIES}"
        )
    entries = []
    for round_ in range(max((len(c) for c in chunks.values()), default=0)):
        for vl in sorted(chunks):
            if round_ < len(chunks[vl]):
                entries.append((vl, chunks[vl][round_]))
    return entries


class Arbitration(_Table):
    """How the VLs of a policy's priority levels share a port: ``weights[v]`` is VL v's weight in
    64-byte units (any size: above 255 it spans several entries); VLs listed in ``high`` go into
    the high-priority table, bounded by ``high_limit`` (4 KiB units; 255 = unbounded)."""

    weights: Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1, max_length=15)]
    high: list[Annotated[int, Field(ge=0, le=14)]] = Field(default_factory=list)
    high_limit: Annotated[int, Field(ge=0, le=255)] = 0

    @model_validator(mode="after")
    def _expressible(self) -> "Arbitration":
        for vl in self.high:
            if vl >= len(self.weights):
                raise problem(f"VL{vl} is not one of the policy's VLs 0..{len(self.weights) - 1}", "high")
        for table, vls in (("high", set(self.high)), ("low", set(range(len(self.weights))) - set(self.high))):
            try:
                weight_entries({vl: self.weights[vl] for vl in sorted(vls)})
            except ValueError as error:
                raise problem(f"the {table}-priority table cannot hold them: {error}", "weights") from None
        return self

    @property
    def levels(self) -> int:
        return len(self.weights)

    def qos(self) -> dict[str, Any]:
        """The scenario's [qos] table: SL v -> VL v for the policy's levels (other SLs -> VL0), the
        weights as entries, the same on HCAs and switches."""
        sl2vl = [sl if sl < self.levels else 0 for sl in range(SL_COUNT)]
        high = {vl: self.weights[vl] for vl in self.high}
        low = {vl: w for vl, w in enumerate(self.weights) if vl not in self.high}
        return {
            "sl2vl": sl2vl,
            "vlarb_high": [list(e) for e in weight_entries(high)],
            "vlarb_low": [list(e) for e in weight_entries(low)],
            "high_limit": self.high_limit,
        }

    def describe(self) -> str:
        text = ":".join(str(w) for w in self.weights)
        if self.high:
            text += f", VL{','.join(map(str, self.high))} high (limit {self.high_limit})"
        return text
