"""The fabric side of a QoS policy: priority levels as SLs, SL -> VL one to one, and VL
arbitration stated as weights of any size or as bandwidth shares, expressed as OpenSM table
entries.

OpenSM's VLArb entries hold weights 0..255 (64-byte units) and a table holds at most 64 entries,
so a weight such as the seeds' 2286 spans several entries of one VL. The entries are interleaved
round by round (VL0, VL1, ..., VL0, ...) so a heavy VL's turns are spread through the table
instead of bunched, which is what an administrator would write; the long-run shares are the same
either way. What the entries give at the fabric's MTU is qoslab.vlarb's closed form.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from qoslab.errors import problem
from qoslab.vlarb import (
    MAX_ENTRY_WEIGHT,
    MAX_TABLE_ENTRIES,
    Collapse,
    Granularity,
    Realised,
    collapses,
    effective_shares,
    interleave,
    percent,
    realise_shares,
    table_weights,
)

SL_COUNT = 16
# Shares are realised when every VL's achieved share is within this fraction of its own.
DEFAULT_SHARE_TOLERANCE = 0.1
SHARE_SUM_SLACK = 0.01  # shares must sum to 1 within this (they are then normalised)

Weights = Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1, max_length=15)]
Shares = Annotated[list[Annotated[float, Field(allow_inf_nan=False)]], Field(min_length=1, max_length=15)]
ShareTolerance = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


def weight_entries(weights: dict[int, int]) -> list[tuple[int, int]]:
    """{VL: weight} -> VLArb entries of at most 255 each, interleaved by rounds. Weight 0 gives
    no entry. Raises ValueError when more than 64 entries would be needed."""
    # Counted before any entry is made: a weight of 10^12 would otherwise build 4 * 10^9 of them.
    counts = {vl: -(-weight // MAX_ENTRY_WEIGHT) for vl, weight in weights.items() if weight > 0}
    total = sum(counts.values())
    if total > MAX_TABLE_ENTRIES:
        shown = ", ".join(f"VL{vl}: {w}" for vl, w in weights.items())
        raise ValueError(
            f"weights {{{shown}}} need {total} VLArb entries of at most {MAX_ENTRY_WEIGHT}, "
            f"but a table holds {MAX_TABLE_ENTRIES}"
        )
    chunks: dict[int, list[int]] = {}
    for vl, count in counts.items():
        base, extra = divmod(weights[vl], count)
        # Near-equal chunks: 2286 -> 9 x 254, not 8 x 255 + 246.
        chunks[vl] = [base + 1] * extra + [base] * (count - extra)
    return interleave(chunks)


def check_shares(shares: list[float], high: list[int]) -> None:
    """Shares that cannot mean a split of a saturated port: raises naming the key."""
    for vl, share in enumerate(shares):
        if share < 0:
            raise problem(f"expected shares >= 0, got {share:g} for VL{vl}", "shares")
    total = sum(shares)
    if abs(total - 1) > SHARE_SUM_SLACK:
        hint = " (fractions, not percentages: 0.9, not 90)" if total > 1.5 else ""
        raise problem(f"expected shares summing to 1 (within {SHARE_SUM_SLACK:g}){hint}, got "
                      f"{':'.join(f'{s:g}' for s in shares)} = {total:g}", "shares")
    if high:
        raise problem(
            f"shares split a saturated port by the low-priority table's round robin, but VL"
            f"{','.join(map(str, high))} in high would preempt it: give weights with high, or high = []", "shares")


class Arbitration(_Table):
    """How the VLs of a policy's priority levels share a port: ``weights[v]`` is VL v's weight in
    64-byte units (any size: above 255 it spans several entries), or ``shares[v]`` its share of a
    saturated port, realised at the fabric's MTU within ``share_tolerance`` (relative). VLs listed
    in ``high`` go into the high-priority table, bounded by ``high_limit`` (4 KiB units; 255 =
    unbounded)."""

    weights: Weights | None = None
    shares: Shares | None = None
    share_tolerance: ShareTolerance = DEFAULT_SHARE_TOLERANCE
    high: list[Annotated[int, Field(ge=0, le=14)]] = Field(default_factory=list)
    high_limit: Annotated[int, Field(ge=0, le=255)] = 0

    @model_validator(mode="after")
    def _expressible(self) -> Arbitration:
        if (self.weights is None) == (self.shares is None):
            raise problem("give either weights (64-byte units) or shares (of a saturated port), not both",
                          "shares" if self.shares is not None else "weights")
        for vl in self.high:
            if vl >= self.levels:
                raise problem(f"VL{vl} is not one of the policy's VLs 0..{self.levels - 1}", "high")
        if self.shares is not None:
            check_shares(self.shares, self.high)
            return self
        assert self.weights is not None
        for table, vls in (("high", set(self.high)), ("low", set(range(self.levels)) - set(self.high))):
            try:
                weight_entries({vl: self.weights[vl] for vl in sorted(vls)})
            except ValueError as error:
                raise problem(f"the {table}-priority table cannot hold them: {error}", "weights") from None
        return self

    @property
    def levels(self) -> int:
        return len(self.shares if self.shares is not None else self.weights or [])

    @property
    def key(self) -> str:
        """The key that states the arbitration."""
        return "shares" if self.shares is not None else "weights"

    def realise(self, granularity: Granularity) -> Realised:
        """The entries for `shares` at this fabric's MTU; ValueError if they miss a share by more
        than `share_tolerance`, saying what the closest table would give."""
        assert self.shares is not None
        stated = dict(enumerate(self.shares))
        try:
            realised = realise_shares(stated, granularity)
        except ValueError as error:
            raise ValueError(f"{error} at {granularity.label()}") from None
        if realised.error > self.share_tolerance:
            total = sum(self.shares)
            errors = realised.errors({vl: s / total for vl, s in stated.items()})
            worst = max(errors, key=lambda vl: errors[vl])
            achieved = ", ".join(f"VL{vl} {percent(realised.shares.get(vl, 0.0))}" for vl in stated)
            raise ValueError(
                f"cannot be realised at {granularity.label()} ({granularity.credits} credits per packet, at most "
                f"{granularity.packets_per_entry} packets per entry, {granularity.max_entries} entries"
                f"{' as fabric.vlarb_capacity holds' if granularity.capacity is not None else ''}): the closest "
                f"table gives {achieved}: VL{worst} gets {percent(realised.shares.get(worst, 0.0))} for "
                f"{percent(stated[worst] / total)} ({errors[worst]:.0%} off), beyond share_tolerance = "
                f"{self.share_tolerance:g}; use a smaller fabric.mtu_bytes, larger small shares, or a larger "
                f"share_tolerance")
        return realised

    def entries(self, granularity: Granularity | None = None) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """(high entries, low entries). Shares need the fabric (`granularity`)."""
        if self.shares is not None:
            if granularity is None:
                raise ValueError("shares are realised at the fabric's MTU, which was not given")
            return [], self.realise(granularity).entries
        assert self.weights is not None
        high = {vl: self.weights[vl] for vl in self.high}
        low = {vl: w for vl, w in enumerate(self.weights) if vl not in self.high}
        return weight_entries(high), weight_entries(low)

    def qos(self, granularity: Granularity | None = None) -> dict[str, Any]:
        """The scenario's [qos] table: SL v -> VL v for the policy's levels (other SLs -> VL0), the
        weights as entries, the same on HCAs and switches."""
        high, low = self.entries(granularity)
        return {
            "sl2vl": [sl if sl < self.levels else 0 for sl in range(SL_COUNT)],
            "vlarb_high": [list(e) for e in high],
            "vlarb_low": [list(e) for e in low],
            "high_limit": self.high_limit,
        }

    def nominal_weights(self, granularity: Granularity | None = None) -> list[int]:
        """Each VL's weight (sum of its entries in either table): the stated ones, or those built
        for the shares."""
        high, low = self.entries(granularity)
        sums = table_weights(list(high) + list(low))
        return [sums.get(vl, 0) for vl in range(self.levels)]

    def collapses(self, granularity: Granularity) -> list[tuple[str, Collapse]]:
        """(table, collapse) for each group of VLs whose different weights (or shares) give the
        same packets per round at this MTU."""
        high, low = self.entries(granularity)
        stated = None if self.shares is None else dict(enumerate(self.shares))
        return [(name, c) for name, entries in (("the high table", high), ("the low table", low))
                for c in collapses(granularity.held(entries), granularity.credits, stated)]

    def describe(self, granularity: Granularity | None = None) -> str:
        """"weights 2286:254:9:1 (...)" or "shares ... realised as ...", with the effective shares
        of a saturated port at the fabric's MTU when it is known."""
        if self.shares is not None:
            text = "shares " + ":".join(f"{s:g}" for s in self.shares)
            if granularity is not None:
                realised = self.realise(granularity)
                shown = ", ".join(f"VL{vl} {percent(realised.shares.get(vl, 0.0))}" for vl in range(self.levels))
                text += (f", realised at {granularity.label()} as {shown} (largest error {realised.error:.1%}; "
                         f"weights {':'.join(map(str, self.nominal_weights(granularity)))})")
            return text
        text = "weights " + ":".join(str(w) for w in self.weights or [])
        if granularity is not None:
            high, low = self.entries(granularity)
            parts = [f"{name}{_split(entries, granularity)}" for name, entries in (("", low), ("high table: ", high))
                     if entries]
            text += f" (a saturated port at {granularity.label()}: {'; '.join(parts)})"
        if self.high:
            text += f", VL{','.join(map(str, self.high))} high (limit {self.high_limit})"
        return text


def _split(entries: list[tuple[int, int]], granularity: Granularity) -> str:
    """The shares of a saturated port, by the entries it holds (fabric.vlarb_capacity)."""
    held = granularity.held(entries)
    shares = effective_shares(held, granularity.credits)
    text = ", ".join(f"VL{vl} {percent(share)}" for vl, share in sorted(shares.items()))
    if len(held) < len(entries):
        text += f", by the first {len(held)} of its {len(entries)} entries, which the ports hold"
    return text
