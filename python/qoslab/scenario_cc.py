"""The scenario's ``[congestion_control]`` table: InfiniBand congestion control (IB spec Annex A10)
in OpenSM's vocabulary, its ``cc_*`` options without the prefix (docs/design/congestion-control.md,
sections 2 and 3). Values are checked as the hardware fields hold them; where OpenSM's own default
would program a fabric that never marks or throttles, the default is a working value from a public
study, named in the design note. OpenSM's syntax (reading and writing the lines) is io/opensm.py's.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, model_validator

from qoslab.errors import problem, show
from qoslab.host_lists import is_int as _is_int
from qoslab.scenario_files import _Table

SL_COUNT = 16
MAX_CCT_ENTRIES = 128  # OpenSM's OSM_CCT_ENTRY_MAX (two 64-entry MAD blocks); the spec allows more
MAX_SHIFT = 3  # CCT_Shift: bits 15..14 of an entry
MAX_MULTIPLIER = 16383  # CCT_Multiplier: bits 13..0
MASK_BITS = 256  # switch port masks; bit 255 is reserved
SW_CONTROL_MAP_BITS = 5  # victim mask, credit mask, threshold + packet size, credit starvation, marking rate
CCTI_TIMER_UNIT_NS = 1024.0  # CCTI_Timer counts 1.024 µs (hfi1; the A10 time stamp unit)
_HEX = re.compile(r"^(0[xX])?[0-9a-fA-F]+$")


def mellanox_default_cct() -> list[tuple[int, int]]:
    """128 entries 0:floor(7 i^2 / (95^2 x 0.218)): 0 up to index 16, 57 at index 127 (a rate floor
    of 1/58 of the link), the CCT the LLNL study named "mellanox default" (design note, [L1])."""
    return [(0, math.floor(7 * i * i / (95 * 95 * 0.218))) for i in range(MAX_CCT_ENTRIES)]


NAMED_CCTS = {"mellanox-default": mellanox_default_cct}


def parse_cct(value: Any) -> list[tuple[int, int]]:
    """A CCT: a name (NAMED_CCTS), OpenSM's "shift:multiplier,..." string, or a list of
    [shift, multiplier] pairs; each entry within the 2-bit shift and 14-bit multiplier."""
    if isinstance(value, str) and value in NAMED_CCTS:
        return NAMED_CCTS[value]()
    if isinstance(value, str):
        entries: list[Any] = []
        for i, token in enumerate(t.strip() for t in value.split(",")):
            shift, sep, multiplier = token.partition(":")
            if not sep or not shift.strip().isdigit() or not multiplier.strip().isdigit():
                raise problem(f'entry {i}: expected shift:multiplier like "0:57", got {show(token)} (or a name: '
                              f"{', '.join(NAMED_CCTS)})")
            entries.append([int(shift), int(multiplier)])
        value = entries
    if not isinstance(value, (list, tuple)):
        raise problem(f'expected a CCT name ({", ".join(NAMED_CCTS)}), an OpenSM string "0:0,0:1,..." or a list '
                      f"of [shift, multiplier] pairs, got {show(value)}")
    if len(value) > MAX_CCT_ENTRIES:
        raise problem(f"{len(value)} entries: OpenSM programs at most {MAX_CCT_ENTRIES} (the rest it drops)")
    out = []
    for i, entry in enumerate(value):
        if not (isinstance(entry, (list, tuple)) and len(entry) == 2 and all(_is_int(v) for v in entry)):
            raise problem(f"entry {i}: expected [shift, multiplier], got {show(entry)}")
        shift, multiplier = entry
        if not 0 <= shift <= MAX_SHIFT:
            raise problem(f"entry {i}: shift {shift}: expected 0..{MAX_SHIFT} (2 bits)")
        if not 0 <= multiplier <= MAX_MULTIPLIER:
            raise problem(f"entry {i}: multiplier {multiplier}: expected 0..{MAX_MULTIPLIER} (14 bits)")
        out.append((int(shift), int(multiplier)))
    return out


def parse_port_mask(value: Any) -> int:
    """A 256-bit switch port mask: a hex string (at most 64 digits; bit 255 reserved) or a list of
    port numbers 0..254 (0: the enhanced switch port)."""
    if isinstance(value, str):
        if not _HEX.match(value):
            raise problem(f'expected a hex mask like "0x1E" (at most 64 digits) or a list of ports, got {show(value)}')
        digits = value[2:] if value[:2] in ("0x", "0X") else value
        if len(digits.lstrip("0")) > MASK_BITS // 4:
            raise problem(f"{len(digits)} hex digits: a port mask has 256 bits (64 digits)")
        mask = int(digits, 16)
    elif isinstance(value, (list, tuple)):
        mask = 0
        for port in value:
            if not _is_int(port) or not 0 <= port < MASK_BITS - 1:
                raise problem(f"port {show(port)}: expected a port number 0..{MASK_BITS - 2}")
            mask |= 1 << port
    elif _is_int(value):
        mask = int(value)
    else:
        raise problem(f"expected a hex string or a list of ports, got {show(value)}")
    if mask >> (MASK_BITS - 1):
        raise problem("bit 255 is reserved")
    return mask


def _per_sl(limit: int, what: str, default: int):
    """A CA value for every SL (one number), by SL ({ 0 = 10, 3 = 40 }; the SLs not listed keep the
    key's `default`, as they would with the key left out), or a list of 16 (SL0..SL15, as the
    resolved scenario writes it)."""

    def parse(value: Any) -> list[int]:
        if _is_int(value):
            values = [int(value)] * SL_COUNT
        elif isinstance(value, (list, tuple)):
            if len(value) != SL_COUNT or not all(_is_int(v) for v in value):
                raise problem(f"expected {SL_COUNT} integers (SL0..SL15), got {show(value)}")
            values = [int(v) for v in value]
        elif isinstance(value, dict):
            values = [default] * SL_COUNT
            for key, v in value.items():
                if not str(key).isdigit() or not 0 <= int(key) < SL_COUNT:
                    raise problem(f"SL {show(key)}: expected an SL 0..{SL_COUNT - 1}")
                if not _is_int(v):
                    raise problem(f"SL {key}: expected an integer {what}, got {show(v)}")
                values[int(key)] = int(v)
        else:
            raise problem(f"expected one {what} for every SL or a table by SL like {{ 0 = 10, 3 = 40 }}, got {show(value)}")
        for sl, v in enumerate(values):
            if not 0 <= v <= limit:
                raise problem(f"SL {sl}: {v}: expected 0..{limit}")
        return values

    return BeforeValidator(parse)


def _bits(limit_bits: int, what: str):
    def parse(value: Any) -> int:
        if not _is_int(value) or not 0 <= value < 1 << limit_bits:
            raise problem(f"expected {what} 0..{(1 << limit_bits) - 1:#x}, got {show(value)}")
        return int(value)

    return BeforeValidator(parse)


CCTI_TIMER = 10  # 10.24 µs: inside LLNL's sweep (docs/design/congestion-control.md)
CCTI_INCREASE = 1


class CongestionControl(_Table):
    """[congestion_control]: off by default (every result as without it)."""

    enabled: bool = False
    sw_cong_setting_control_map: Annotated[int, _bits(SW_CONTROL_MAP_BITS, "a 5-bit control map")] = 0x1F
    sw_cong_setting_victim_mask: Annotated[int, BeforeValidator(parse_port_mask)] = 0
    sw_cong_setting_credit_mask: Annotated[int, BeforeValidator(parse_port_mask)] = 0
    sw_cong_setting_threshold: Annotated[int, _bits(4, "a threshold")] = 0xF
    sw_cong_setting_packet_size: Annotated[int, _bits(8, "a size in 64-byte credits")] = 0
    sw_cong_setting_credit_starvation_threshold: Annotated[int, _bits(4, "a threshold")] = 0
    sw_cong_setting_credit_starvation_return_delay: Annotated[tuple[int, int], BeforeValidator(
        lambda v: parse_cct(v)[0] if isinstance(v, str) else parse_cct([v])[0])] = (0, 0)
    sw_cong_setting_marking_rate: Annotated[int, _bits(16, "packets between markings")] = 0
    ca_cong_setting_port_control: Annotated[int, _bits(1, "port control (bit 0: 0 per QP, 1 per SL)")] = 0
    ca_cong_setting_control_map: Annotated[int, _bits(16, "a 16-bit SL map")] = 0xFFFF
    ca_cong_setting_ccti_timer: Annotated[list[int], _per_sl(0xFFFF, "CCTI timer (1.024 µs units)", CCTI_TIMER)] = Field(
        default_factory=lambda: [CCTI_TIMER] * SL_COUNT)
    ca_cong_setting_ccti_increase: Annotated[list[int], _per_sl(0xFF, "CCTI increase", CCTI_INCREASE)] = Field(
        default_factory=lambda: [CCTI_INCREASE] * SL_COUNT)
    ca_cong_setting_trigger_threshold: Annotated[list[int], _per_sl(0xFF, "trigger threshold", 0)] = Field(
        default_factory=lambda: [0] * SL_COUNT)
    ca_cong_setting_ccti_min: Annotated[list[int], _per_sl(0xFF, "CCTI minimum", 0)] = Field(
        default_factory=lambda: [0] * SL_COUNT)
    cct: Annotated[list[tuple[int, int]], BeforeValidator(parse_cct)] = Field(default_factory=mellanox_default_cct)

    @model_validator(mode="after")
    def _consistent(self) -> CongestionControl:
        if not self.enabled:
            return self
        if not self.cct:
            raise problem("an empty table with enabled = true throttles nothing (CCTI_Limit 0): give entries", "cct")
        limit = len(self.cct) - 1
        for sl in self.controlled_sls():
            if self.ca_cong_setting_ccti_timer[sl] == 0:
                raise problem(f"SL {sl}: a CCTI timer of 0 has no defined meaning in the spec; give 1..65535 "
                              "(1.024 µs units)", "ca_cong_setting_ccti_timer")
            for key in ("ca_cong_setting_ccti_min", "ca_cong_setting_trigger_threshold"):
                if getattr(self, key)[sl] > limit:
                    raise problem(f"SL {sl}: {getattr(self, key)[sl]} is beyond the table's last index {limit} "
                                  "(CCTI_Limit)", key)
        return self

    def switch_fields_set(self) -> dict[str, bool]:
        """Which SwitchCongestionSetting fields the control map sends (IBA A10: bit 0 victim mask,
        1 credit mask, 2 threshold and packet size, 3 credit starvation, 4 marking rate); a field
        not sent stays at the switch's reset value, 0."""
        m = self.sw_cong_setting_control_map
        return {"victim_mask": bool(m & 1), "credit_mask": bool(m >> 1 & 1), "threshold": bool(m >> 2 & 1),
                "credit_starvation": bool(m >> 3 & 1), "marking_rate": bool(m >> 4 & 1)}

    def warnings(self) -> list[str]:
        """Settings that change nothing in the simulation, or that leave the switches marking nothing."""
        if not self.enabled:
            return []
        out = []
        sets = self.switch_fields_set()
        if not sets["threshold"]:
            out.append("congestion_control.sw_cong_setting_control_map: bit 2 (threshold and packet size) is clear, so "
                       "switches keep their reset threshold, 0, and mark nothing: no FECN, no throttling")
        for key, default in (("sw_cong_setting_credit_mask", 0), ("sw_cong_setting_credit_starvation_threshold", 0),
                             ("sw_cong_setting_credit_starvation_return_delay", (0, 0))):
            if getattr(self, key) != default:
                out.append(f"congestion_control.{key}: credit starvation is not modelled (its behaviour is not "
                           "public): exported as given, but the simulation is as without it")
        idle = [str(sl) for sl in self.controlled_sls() if self.ca_cong_setting_ccti_increase[sl] == 0]
        if idle:
            out.append(f"congestion_control.ca_cong_setting_ccti_increase: 0 on SL {', '.join(idle)}, which the "
                       "control map includes: a BECN never raises their CCTI, so their flows are never throttled")
        return out

    def controlled_sls(self) -> list[int]:
        """The SLs the CA settings apply to (ca_cong_setting_control_map)."""
        return [sl for sl in range(SL_COUNT) if self.ca_cong_setting_control_map >> sl & 1]

    def injection_delay_ns(self, index: int, max_packet_ns: float) -> float:
        """The gap a source leaves after a packet at CCT index `index`: (T_maxpkt >> shift) x
        multiplier, T_maxpkt the time a maximum-size packet takes on the link (design note, [K1])."""
        shift, multiplier = self.cct[min(index, len(self.cct) - 1)]
        return max_packet_ns / (1 << shift) * multiplier
