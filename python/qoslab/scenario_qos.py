"""The scenario's ``[qos]`` tables, in OpenSM's vocabulary (weights in 64-byte units, high_limit
in 4 KiB units): SL2VL and VLArb tables given as lists or as OpenSM's strings, generic or per port
type (``[qos.ca]``, ``[qos.swe]``), per-(input, output) switch SL2VL tables, the default tables,
and the tables as JSON. Which VLs SL2VL may name (fabric.data_vls, routing layers) and how many
entries a table holds once repeated per layer the engine checks; that a VLArb entry as written is
for a QoS VL, the Scenario.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from qoslab.errors import problem, show
from qoslab.host_lists import is_int as _is_int
from qoslab.scenario_files import _Table

MAX_DATA_VL = 14  # VL15 is management (OpenSM: "drop" in SL2VL)
MAX_VLARB_ENTRIES = 64
SL_COUNT = 16


def _parse_sl2vl(value: Any) -> list[int]:
    """16 VLs, SL0..SL15: a list, or OpenSM's "0,1,2,..." string."""
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(",")]
        if not all(p.isdigit() for p in parts):
            raise problem(f'expected 16 comma-separated VL numbers like "0,1,2,3,...", got {show(value)}')
        value = [int(p) for p in parts]
    if not isinstance(value, (list, tuple)):
        raise problem(f"expected a list of 16 VLs (one per SL), got {show(value)}")
    if len(value) != SL_COUNT:
        raise problem(f"expected {SL_COUNT} entries (SL0..SL15), got {len(value)}")
    for sl, vl in enumerate(value):
        if not _is_int(vl):
            raise problem(f"SL{sl}: expected an integer VL, got {show(vl)}")
        if not 0 <= vl <= MAX_DATA_VL:
            raise problem(f"SL{sl} -> VL{vl}: expected a data VL 0..{MAX_DATA_VL} (VL15 'drop' is not modelled)")
    return list(value)


_VLARB_ENTRY = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*$")


def _vlarb_entry(vl: int, weight: int, shown: str) -> tuple[int, int]:
    if not 0 <= vl <= MAX_DATA_VL:
        raise problem(f"bad entry {shown}: VL {vl} is out of range, expected 0..{MAX_DATA_VL}")
    if not 0 <= weight <= 255:
        raise problem(f"bad entry {shown}: weight {weight} is out of range, expected 0..255 (64-byte units)")
    return (vl, weight)


def _parse_vlarb(value: Any) -> list[tuple[int, int]]:
    """OpenSM's "VL:WEIGHT,VL:WEIGHT" string, or a list of [vl, weight] pairs."""
    entries: list[tuple[int, int]] = []
    if isinstance(value, str):
        if value.strip():
            for text in value.split(","):
                match = _VLARB_ENTRY.match(text)
                if not match:
                    raise problem(f'bad entry {show(text.strip())}: expected VL:WEIGHT, as in "0:64,1:128"')
                entries.append(_vlarb_entry(int(match[1]), int(match[2]), show(text.strip())))
    elif isinstance(value, (list, tuple)):
        for item in value:
            if not (isinstance(item, (list, tuple)) and len(item) == 2 and all(_is_int(x) for x in item)):
                raise problem(f"bad entry {show(item)}: expected a [vl, weight] pair of integers")
            entries.append(_vlarb_entry(item[0], item[1], show(list(item))))
    else:
        raise problem(f'expected "VL:WEIGHT,..." or a list of [vl, weight] pairs, got {show(value)}')
    return entries  # at most MAX_VLARB_ENTRIES once repeated per routing layer: the engine's rule


Sl2Vl = Annotated[list[int], BeforeValidator(_parse_sl2vl)]
VlArb = Annotated[list[tuple[int, int]], BeforeValidator(_parse_vlarb)]
HighLimit = Annotated[int, Field(ge=0, le=255)]


class PortQos(_Table):
    """QoS tables for one port type; unset fields fall back to the generic [qos] value, then the default."""

    sl2vl: Sl2Vl | None = None
    vlarb_high: VlArb | None = None
    vlarb_low: VlArb | None = None
    high_limit: HighLimit | None = None


class Sl2VlPair(_Table):
    """One switch's SL2VL table for a single (input port, output port) pair, as the hardware holds
    them (SLtoVLMappingTable with attribute modifier in_port << 8 | out_port). Ports are 0-based."""

    switch: Annotated[int, Field(ge=0, lt=2**32)]
    in_port: Annotated[int, Field(ge=0, lt=2**16)]
    out_port: Annotated[int, Field(ge=0, lt=2**16)]
    sl2vl: Sl2Vl


class Qos(PortQos):
    ca: PortQos = Field(default_factory=PortQos)  # HCA ports (OpenSM qos_ca_*)
    swe: PortQos = Field(default_factory=PortQos)  # external switch ports (OpenSM qos_swe_*)
    sl2vl_pairs: list[Sl2VlPair] = Field(default_factory=list)  # per (input, output) switch overrides


def default_port_qos(data_vls: int) -> dict[str, Any]:
    """SL s -> VL (s mod data_vls); every data VL weight 255 in the low table; no high table."""
    return {
        "sl2vl": [sl % data_vls for sl in range(SL_COUNT)],
        "vlarb_high": [],
        "vlarb_low": [(vl, 255) for vl in range(data_vls)],
        "high_limit": 0,
    }


def _json_qos(tables: dict[str, Any]) -> dict[str, Any]:
    return {
        "sl2vl": list(tables["sl2vl"]),
        "vlarb_high": [[vl, w] for vl, w in tables["vlarb_high"]],
        "vlarb_low": [[vl, w] for vl, w in tables["vlarb_low"]],
        "high_limit": tables["high_limit"],
    }
