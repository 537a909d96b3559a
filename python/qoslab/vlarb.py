"""What VLArb tables give on a fabric: the closed form of the engine's arbiter, and tables built
to give chosen bandwidth shares. The one place this arithmetic lives; `qoslab check`, the studies'
warnings, the policies' shares and the validation checks all use it.

The engine's arbiter (crates/qoslab-engine/src/fabric/vl_arbiter.rs) keeps serving an entry's VL
while the credits the entry has used are below its weight, so its last packet overshoots. With
every VL of a table backlogged by MTU packets of c credits (64 bytes each, header included), an
entry of weight w therefore sends ceil(w / c) packets per turn, and a VL's share of a saturated
port is the packets of all its entries over the packets of the whole table. With 4 KiB packets
(65 credits), weights 1 and 9 both mean "one packet a turn".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

CREDIT_BYTES = 64
MAX_ENTRY_WEIGHT = 255
MAX_TABLE_ENTRIES = 64
HIGH_LIMIT_UNIT_BYTES = 4096
UNBOUNDED_HIGH_LIMIT = 255

Entries = Sequence[tuple[int, int]]  # (VL, weight) pairs, table order


@dataclass(frozen=True)
class Granularity:
    """What a weight means on one fabric: MTU packets of `credits` credits; tables of at most
    `max_entries` entries (the 64 a table can have, or the `capacity` its ports hold:
    fabric.vlarb_capacity; routing layers repeat every entry, so they share them)."""

    mtu_bytes: int
    header_bytes: int
    routing_layers: int = 1
    capacity: int | None = None

    @classmethod
    def of(cls, scenario: Any) -> Granularity:
        """From a Scenario (duck-typed: this module imports nothing of qoslab's)."""
        return cls(scenario.fabric.mtu_bytes, scenario.fabric.header_bytes, scenario.routing.vls or 1,
                   scenario.fabric.vlarb_capacity)

    @property
    def wire_bytes(self) -> int:
        return self.mtu_bytes + self.header_bytes

    @property
    def credits(self) -> int:
        return math.ceil(self.wire_bytes / CREDIT_BYTES)

    @property
    def max_entries(self) -> int:
        return (MAX_TABLE_ENTRIES if self.capacity is None else self.capacity) // self.routing_layers

    def held(self, entries: Entries) -> Entries:
        """The entries of a table as written that a port holds and arbitrates by: its first ones."""
        return entries[: self.max_entries]

    @property
    def packets_per_entry(self) -> int:
        """The most MTU packets one entry can send per turn (weight 255)."""
        return packets_per_turn(MAX_ENTRY_WEIGHT, self.credits)

    def entry_weight(self, packets: int) -> int:
        """The weight that sends `packets` MTU packets per turn: packets x credits, so that
        smaller packets are weighted by bytes too; 255 when that is more (it still sends them)."""
        return min(packets * self.credits, MAX_ENTRY_WEIGHT)

    def label(self) -> str:
        return f"MTU {self.mtu_bytes}"


def packets_per_turn(weight: int, credits: int) -> int:
    """MTU packets an entry of `weight` sends before the arbiter moves on: ceil(weight / credits)."""
    return -(-weight // credits) if weight > 0 else 0


def table_weights(entries: Entries) -> dict[int, int]:
    """{VL: sum of its entries' weights}."""
    out: dict[int, int] = {}
    for vl, weight in entries:
        out[vl] = out.get(vl, 0) + weight
    return out


def round_packets(entries: Entries, credits: int) -> dict[int, int]:
    """{VL: MTU packets it sends in one round of the table} with every VL backlogged."""
    out: dict[int, int] = {}
    for vl, weight in entries:
        out[vl] = out.get(vl, 0) + packets_per_turn(weight, credits)
    return out


def effective_shares(entries: Entries, credits: int) -> dict[int, float]:
    """{VL: share of a saturated port} when every VL of the table is backlogged with MTU packets
    (packets all have the same size, so the packet share is the byte share)."""
    packets = round_packets(entries, credits)
    total = sum(packets.values())
    return {vl: (n / total if total else 0.0) for vl, n in packets.items()}


# On a cluster SL 0 always carries traffic, whatever a study's jobs use: tables that leave its VL
# without weight cannot be deployed (qoslab export opensm refuses them, a study warns).
OUTSIDE_SL0 = "everything outside this export (other jobs, IPoIB, storage, SA queries at OpenSM's sm_sl 0)"


def unweighted(sl2vl: Sequence[int], high: Entries, low: Entries, sls: Iterable[int]) -> dict[int, int]:
    """{SL: VL} for each SL of `sls` whose VL (by `sl2vl`) has no entry of nonzero weight in either
    VLArb table: a port never sends that VL's packets. OpenSM programs such tables without a word;
    `qoslab check` warns, a study warns for its policies and `qoslab export opensm` refuses them."""
    weighted = {vl for vl, weight in [*high, *low] if weight > 0}
    return {sl: sl2vl[sl] for sl in sorted(set(sls)) if sl2vl[sl] not in weighted}


def high_packets_per_low_packet(high_limit: int, wire_bytes: int) -> int | None:
    """MTU packets the high table sends between two low-table packets when both are backlogged;
    None when high_limit is 255 (unbounded: the low table waits until the high one is idle). The
    engine lets high packets go while the bytes sent so far are below the limit (0 means one
    packet), so ceil(limit / packet)."""
    if high_limit == UNBOUNDED_HIGH_LIMIT:
        return None
    return -(-max(high_limit * HIGH_LIMIT_UNIT_BYTES, 1) // wire_bytes)


def interleave(chunks: Mapping[int, Sequence[int]]) -> list[tuple[int, int]]:
    """{VL: its entries' weights} -> table entries interleaved round by round (VL0, VL1, ...,
    VL0, ...), so a heavy VL's turns are spread through the table instead of bunched."""
    entries = []
    for round_ in range(max((len(c) for c in chunks.values()), default=0)):
        for vl in sorted(chunks):
            if round_ < len(chunks[vl]):
                entries.append((vl, chunks[vl][round_]))
    return entries


def percent(share: float) -> str:
    return f"{100 * share:.3g}%"


# ------------------------------------------------------------------------------------------------
# collapsed weights


@dataclass(frozen=True)
class Collapse:
    """VLs stated differently (weights or shares) that get the same packets per round."""

    vls: tuple[int, ...]
    stated: tuple[str, ...]  # "weight 9", "share 0.26", one per VL
    packets: int
    share: float
    kind: str  # "weights" or "shares": what was stated

    def message(self, table: str, granularity: Granularity) -> str:
        named = [f"VL{vl} ({stated})" for vl, stated in zip(self.vls, self.stated)]
        listed = " and ".join(named) if len(named) == 2 else ", ".join(named[:-1]) + " and " + named[-1]
        both = "both" if len(named) == 2 else "all"
        unit = "packet" if self.packets == 1 else "packets"
        return (f"{listed} {both} get {self.packets} {unit} per round of {table} ({percent(self.share)} each of a "
                f"saturated port) at {granularity.label()}: the {self.kind} collapse")


def collapses(entries: Entries, credits: int, shares: Mapping[int, float] | None = None) -> list[Collapse]:
    """Groups of VLs whose weights differ (or, for a table built from `shares`, whose shares do)
    but whose packets per round are equal: the table cannot tell them apart."""
    packets = round_packets(entries, credits)
    achieved = effective_shares(entries, credits)
    if shares is None:
        labels, kind = {vl: f"weight {w}" for vl, w in table_weights(entries).items()}, "weights"
    else:
        labels, kind = {vl: f"share {s:g}" for vl, s in shares.items()}, "shares"
    groups: dict[int, list[int]] = {}
    for vl in sorted(packets):
        if packets[vl] > 0:
            groups.setdefault(packets[vl], []).append(vl)
    out = []
    for n, vls in sorted(groups.items(), key=lambda item: -item[0]):
        if len(vls) > 1 and len({labels[vl] for vl in vls}) > 1:
            out.append(Collapse(tuple(vls), tuple(labels[vl] for vl in vls), n, achieved[vls[0]], kind))
    return out


# ------------------------------------------------------------------------------------------------
# a port's arbitration described


def describe_port(tables: Mapping[str, Any], vls: int, granularity: Granularity) -> dict[str, Any]:
    """What one port type's tables do at the fabric's MTU, per VL: the weights in each table
    (sums of the VL's entries), the packets per round, and the shares of a saturated port when
    every VL of that table is backlogged; the high table's shares are among the high VLs, and
    `high_packets_per_low_packet` says how the two tables share the port when both are."""
    credits = granularity.credits
    out_vls = []
    per_table = {}
    for name in ("high", "low"):
        entries = list(tables[f"vlarb_{name}"])
        per_table[name] = (table_weights(entries), round_packets(entries, credits), effective_shares(entries, credits))
    for vl in range(vls):
        row: dict[str, Any] = {"vl": vl}
        for name in ("high", "low"):
            weights, packets, shares = per_table[name]
            row[f"{name}_weight"] = weights.get(vl, 0)
            row[f"{name}_packets_per_round"] = packets.get(vl, 0)
            row[f"effective_{name}_share"] = shares.get(vl, 0.0)
        out_vls.append(row)
    return {
        "high_limit": tables["high_limit"],
        "high_packets_per_low_packet": (high_packets_per_low_packet(tables["high_limit"], granularity.wire_bytes)
                                        if tables["vlarb_high"] else None),
        "vls": out_vls,
    }


def describe_fabric(port_tables: Mapping[str, Mapping[str, Any]], vls: int, granularity: Granularity) -> dict[str, Any]:
    """`vl_arbitration` of `qoslab check --json`: the packet size and each port type's tables."""
    return {
        "mtu_bytes": granularity.mtu_bytes,
        "header_bytes": granularity.header_bytes,
        "packet_credits": granularity.credits,
        **{port: describe_port(tables, vls, granularity) for port, tables in port_tables.items()},
    }


# ------------------------------------------------------------------------------------------------
# shares -> table entries


@dataclass(frozen=True)
class Realised:
    """Entries built for stated shares, and what they achieve at the fabric's MTU."""

    entries: list[tuple[int, int]]
    packets: dict[int, int]  # per VL, per round
    shares: dict[int, float]  # achieved, with every VL backlogged by MTU packets
    error: float  # the largest |achieved - stated| / stated over the VLs with a share

    def errors(self, stated: Mapping[int, float]) -> dict[int, float]:
        return {vl: abs(self.shares.get(vl, 0.0) - s) / s for vl, s in stated.items() if s > 0}


def realise_shares(shares: Mapping[int, float], granularity: Granularity) -> Realised:
    """Table entries whose effective shares come closest to `shares` ({VL: share}, summing to 1):
    no table of at most `granularity.max_entries` entries of weight 0..255 has a smaller largest
    relative error |achieved - stated| / stated at this MTU, and subject to that the VLs' errors
    are made as small as possible in turn (the same criterion applied again to the others). VLs
    of share 0 get no entry; the shares are normalised to sum to 1. Raises ValueError when the
    VLs outnumber the entries or none has a share."""
    if not any(s > 0 for s in shares.values()):
        raise ValueError("no VL has a share above 0")
    total = sum(s for s in shares.values() if s > 0)
    stated = {vl: float(s) / total for vl, s in sorted(shares.items()) if s > 0}
    if len(stated) > granularity.max_entries:
        holds = "the ports hold (fabric.vlarb_capacity)" if granularity.capacity is not None else "a table holds"
        raise ValueError(f"{len(stated)} VLs with a share need at least {len(stated)} entries, but {holds} "
                         f"{granularity.max_entries}")
    packets = _apportion(tuple(stated.values()), granularity.packets_per_entry, granularity.max_entries)
    per_entry = granularity.packets_per_entry
    chunks = {}
    for vl, n in zip(stated, packets):
        count = -(-n // per_entry)
        base, extra = divmod(n, count)
        # Near-equal entries (9 packets over 3 entries: 3, 3, 3), each weighted packets x credits.
        chunks[vl] = [granularity.entry_weight(k) for k in [base + 1] * extra + [base] * (count - extra)]
    entries = interleave(chunks)
    achieved = effective_shares(entries, granularity.credits)
    error = max(abs(achieved[vl] - s) / s for vl, s in stated.items())
    return Realised(entries, round_packets(entries, granularity.credits), achieved, error)


@lru_cache(maxsize=256)
def _apportion(shares: tuple[float, ...], per_entry: int, max_entries: int) -> tuple[int, ...]:
    """Packets per round for each share (all > 0), lexicographic minimax relative error, subject
    to sum(ceil(n / per_entry)) <= max_entries. Every total N = sum(n) the table can hold is
    tried at once (numpy); the bound on the errors is found by bisection."""
    import numpy as np  # here and in the helpers below: describing a fabric's tables needs none

    s = np.array(shares, dtype=float)
    s = s / s.sum()
    totals = np.arange(len(s), per_entry * max_entries + 1, dtype=float)[:, None]
    bounds = np.full(len(s), np.inf)
    free = list(range(len(s)))

    def feasible_with(free: list[int], value: float, only: int | None = None) -> bool:
        b = bounds.copy()
        b[free] = value
        if only is not None:
            b[only] = value - max(1e-6 * value, 1e-8)
        return bool(_feasible(s, b, totals, per_entry, max_entries).any())

    while free:
        lo, hi = 0.0, float(1 / s.min()) + 1.0  # hi: any positive count is within it
        if feasible_with(free, 0.0):
            hi = 0.0
        for _ in range(64):
            if hi - lo <= 1e-12 * max(1.0, hi):
                break
            mid = (lo + hi) / 2
            if feasible_with(free, mid):
                hi = mid
            else:
                lo = mid
        # The VLs that cannot do better while the others keep within `hi` are fixed there; if
        # none can be singled out (integer effects), all the free ones are.
        binding = [v for v in free if not feasible_with(free, hi, only=v)] or list(free)
        bounds[binding] = hi
        free = [v for v in free if v not in binding]
    ok = _feasible(s, bounds, totals, per_entry, max_entries)
    n_total = int(totals[np.argmax(ok), 0])  # the smallest total: the shortest round
    return tuple(_fill(s, bounds, n_total, per_entry))


_SLACK = 1e-10  # floating-point slack on the interval ends (counts are integers up to 64 x 64)


def _intervals(s: np.ndarray, bounds: np.ndarray, totals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per total N (rows) and VL (columns): the counts whose relative error is within the VL's bound."""
    import numpy as np

    ideal = totals * s[None, :]
    with np.errstate(invalid="ignore"):
        lo = np.where(np.isinf(bounds), 1.0, np.ceil(ideal * (1 - bounds) - _SLACK))
        hi = np.where(np.isinf(bounds), totals, np.floor(ideal * (1 + bounds) + _SLACK))
    return np.maximum(lo, 1.0), np.minimum(hi, totals)


def _feasible(s: np.ndarray, bounds: np.ndarray, totals: np.ndarray, per_entry: int, max_entries: int) -> np.ndarray:
    """For each total N: can counts within the bounds sum to N in at most max_entries entries?
    The fewest entries: each VL at its least count, then the room left in its last entry (free),
    then whole new entries, largest first (a VL's last one may be partial, capped by its bound)."""
    import numpy as np

    lo, hi = _intervals(s, bounds, totals)
    n = totals[:, 0]
    ok = (lo <= hi).all(axis=1) & (lo.sum(axis=1) <= n) & (n <= hi.sum(axis=1))
    filled = np.ceil(lo / per_entry) * per_entry
    base = np.ceil(lo / per_entry).sum(axis=1)
    free = (np.minimum(hi, filled) - lo).sum(axis=1)
    rest = n - lo.sum(axis=1) - free
    room = np.maximum(hi - filled, 0.0)
    full, partial = np.floor(room / per_entry), np.mod(room, per_entry)
    whole = full.sum(axis=1)
    extra = np.where(rest <= 0, 0.0, np.ceil(np.maximum(rest, 0) / per_entry))
    beyond = rest - whole * per_entry
    partial_sorted = -np.sort(-partial, axis=1)
    needed = (np.cumsum(partial_sorted, axis=1) < beyond[:, None]).sum(axis=1) + 1
    extra = np.where(beyond > 0, whole + needed, extra)
    return ok & (base + extra <= max_entries)


def _fill(s: np.ndarray, bounds: np.ndarray, total: int, per_entry: int) -> list[int]:
    """The counts _feasible found for one total, in the same order: least counts, free room,
    whole entries, the largest partial ones."""
    import numpy as np

    lo, hi = (a[0] for a in _intervals(s, bounds, np.array([[float(total)]])))
    counts = lo.astype(int).tolist()
    top = hi.astype(int).tolist()
    rest = total - sum(counts)
    for v in range(len(counts)):  # room in the last entry costs nothing
        take = min(rest, min(top[v], -(-counts[v] // per_entry) * per_entry) - counts[v])
        counts[v] += max(take, 0)
        rest -= max(take, 0)
    while rest > 0:  # then new entries: whole ones first, then the largest partial ones
        room = [top[v] - counts[v] for v in range(len(counts))]
        v = max(range(len(counts)), key=lambda i: (min(room[i], per_entry), -i))
        take = min(rest, room[v], per_entry)
        assert take > 0, "a feasible total always has room"
        counts[v] += take
        rest -= take
    return counts
