"""OpenSM's congestion-control options (``congestion_control``, ``cc_*``): written from a scenario's
[congestion_control] table in OpenSM's own format, and read back by OpenSM's own rules
(docs/design/congestion-control.md, sections 2 and 5: checked against OpenSM 3.3.23's parser).
What OpenSM would ignore (keeping its default) is refused, naming file and line; what it accepts
but programs differently is a warning saying what the fabric would get."""

from __future__ import annotations

from typing import Any

from qoslab.errors import FileLineError
from qoslab.io.lines import OPENSM_LINE_BYTES, fits
from qoslab.scenario_cc import MAX_CCT_ENTRIES, SL_COUNT, CongestionControl

# Per-SL options: `cc_ca_cong_setting_<field> <sl> <value>`, with the field's largest value.
PER_SL = {"ccti_timer": 0xFFFF, "ccti_increase": 0xFF, "trigger_threshold": 0xFF, "ccti_min": 0xFF}
# Single-value numeric options: (largest value, how OpenSM writes it).
NUMBERS = {
    "cc_sw_cong_setting_control_map": (0xFFFFFFFF, "0x{:X}"),
    "cc_sw_cong_setting_threshold": (0xFF, "0x{:02X}"),
    "cc_sw_cong_setting_packet_size": (0xFF, "{}"),
    "cc_sw_cong_setting_credit_starvation_threshold": (0xFF, "0x{:02X}"),
    "cc_sw_cong_setting_marking_rate": (0xFFFF, "{}"),
    "cc_ca_cong_setting_port_control": (0xFFFF, "0x{:04X}"),
    "cc_ca_cong_setting_control_map": (0xFFFF, "0x{:04X}"),
}
MASKS = ("cc_sw_cong_setting_victim_mask", "cc_sw_cong_setting_credit_mask")
# Management options OpenSM needs beside the settings; written with OpenSM's defaults.
MANAGEMENT = ("cc_key 0x0000000000000000", "cc_max_outstanding_mads 500")


class OpenSmCcError(FileLineError):
    """A cc_* line OpenSM would ignore (keeping its default); names the file and line."""


def cc_lines(cc: CongestionControl) -> list[str]:
    """The congestion-control lines of opensm.conf for `cc`, every setting, so that a merged file
    leaves nothing to a default; for a table that is off, `congestion_control FALSE` alone (the
    export writes nothing then, so as not to switch off a site's own setting)."""
    if not cc.enabled:
        return ["congestion_control FALSE"]
    lines = ["congestion_control TRUE", *MANAGEMENT]
    for key, (_, form) in NUMBERS.items():
        if key.startswith("cc_sw_"):
            lines.append(f"{key} {form.format(getattr(cc, key[3:]))}")
    for key in MASKS:
        lines.append(f"{key} 0x{getattr(cc, key[3:]):064X}")
    shift, multiplier = cc.sw_cong_setting_credit_starvation_return_delay
    lines.append(f"cc_sw_cong_setting_credit_starvation_return_delay {shift}:{multiplier}")
    for key in ("cc_ca_cong_setting_port_control", "cc_ca_cong_setting_control_map"):
        lines.append(f"{key} {NUMBERS[key][1].format(getattr(cc, key[3:]))}")
    # Every SL, in the control map or not (CAs ignore those outside it): the file then holds the
    # whole table, and importing it gives the same scenario back.
    for sl in range(SL_COUNT):
        lines += [f"cc_ca_cong_setting_{name} {sl} {getattr(cc, 'ca_cong_setting_' + name)[sl]}" for name in PER_SL]
    cct = f"cc_cct {','.join(f'{s}:{m}' for s, m in cc.cct)}"
    if not fits(cct, OPENSM_LINE_BYTES):
        raise ValueError(f"congestion_control.cct: {len(cct)} characters as an OpenSM line; OpenSM reads at most "
                         f"{OPENSM_LINE_BYTES} and would cut it (use smaller multipliers or fewer entries)")
    lines.append(cct)
    return lines


def cc_option(key: str) -> bool:
    return key == "congestion_control" or key.startswith("cc_")


def parse_cc(lines: list[tuple[str, str, int]], source: str, warnings: list[str]) -> dict[str, Any] | None:
    """The [congestion_control] table OpenSM would program from its cc lines (key, value, line
    number; every occurrence, in file order), or None when congestion control is off."""
    settings: dict[str, Any] = {}
    per_sl: dict[str, list[int]] = {}
    listed: dict[str, set[int]] = {}  # the SLs the file gives a value for, per setting
    enabled = False
    for key, value, line in lines:
        if key == "congestion_control":
            enabled = value == "TRUE"
            if value.upper() == "TRUE" and not enabled:
                warnings.append(f"{source}:{line}: congestion_control {value}: OpenSM compares with 'TRUE' exactly "
                                "and reads this as FALSE")
        elif key in ("cc_key", "cc_max_outstanding_mads"):
            continue  # management, not modelled
        elif key in NUMBERS:
            n = _number(value, key, line, source, NUMBERS[key][0], warnings)
            if key.endswith("_threshold") and n > 0xF:
                warnings.append(f"{source}:{line}: {key} {value}: OpenSM programs the low 4 bits ({n & 0xF})")
                n &= 0xF
            settings[key[3:]] = n
        elif key in MASKS:
            settings[key[3:]] = _mask(value, key, line, source, warnings)
        elif key == "cc_sw_cong_setting_credit_starvation_return_delay":
            settings[key[3:]] = list(_entry(value, key, line, source, warnings))
        elif key.startswith("cc_ca_cong_setting_") and key[len("cc_ca_cong_setting_"):] in PER_SL:
            name = key[len("cc_ca_cong_setting_"):]
            parts = value.split()
            if len(parts) != 2:
                raise OpenSmCcError(source, line, f"{key}: expected '<sl> <value>', got {value!r} (OpenSM ignores "
                                    "the line)")
            sl = _number(parts[0], f"{key} SL", line, source, SL_COUNT - 1, warnings)
            per_sl.setdefault(name, [0] * SL_COUNT)[sl] = _number(parts[1], key, line, source, PER_SL[name], warnings)
            listed.setdefault(name, set()).add(sl)
        elif key == "cc_cct":
            settings["cct"] = [] if value in ("", "(null)") else _cct(value, line, source, warnings)
        else:
            warnings.append(f"{source}:{line}: {key!r}: not an OpenSM congestion-control option: OpenSM ignores it")
    if not enabled:
        return None
    table: dict[str, Any] = {"enabled": True}
    # OpenSM's own defaults for what the file leaves out (all zero, an empty table).
    for key in NUMBERS:
        table[key[3:]] = settings.get(key[3:], 0)
    for key in MASKS:
        table[key[3:]] = f"0x{settings.get(key[3:], 0):X}"
    table["sw_cong_setting_credit_starvation_return_delay"] = settings.get(
        "sw_cong_setting_credit_starvation_return_delay", [0, 0])
    control = table["ca_cong_setting_control_map"]
    for name in PER_SL:
        # Every SL written out: a table by SL would leave the SLs not listed at qoslab's defaults,
        # where OpenSM programs 0. An SL the file leaves out and the control map too (CAs ignore
        # it) takes qoslab's default: it changes nothing, and keeps the scenario what it was.
        given, named = per_sl.get(name, [0] * SL_COUNT), listed.get(name, set())
        default = CongestionControl.model_fields[f"ca_cong_setting_{name}"].get_default(call_default_factory=True)
        values = [given[sl] if control >> sl & 1 or sl in named else default[sl] for sl in range(SL_COUNT)]
        table[f"ca_cong_setting_{name}"] = values[0] if len(set(values)) == 1 else values
    table["cct"] = [list(e) for e in settings.get("cct", [])]
    # What OpenSM would program but qoslab refuses, or what leaves CC doing nothing: said here, at
    # import, rather than by the check of the scenario the table is pasted into.
    if not table["cct"]:
        warnings.append(f"{source}: congestion_control TRUE without cc_cct: OpenSM programs an empty table "
                        "(CCTI_Limit 0), which throttles nothing; qoslab refuses it until a cct is given")
    timers = per_sl.get("ccti_timer", [0] * SL_COUNT)
    zero = [sl for sl in range(SL_COUNT) if control >> sl & 1 and timers[sl] == 0]
    if zero:
        warnings.append(f"{source}: cc_ca_cong_setting_ccti_timer is 0 on SL {', '.join(map(str, zero))}, which "
                        "cc_ca_cong_setting_control_map includes: a timer of 0 has no defined meaning, and qoslab "
                        "refuses it until a timer is given")
    if not control:
        warnings.append(f"{source}: cc_ca_cong_setting_control_map is 0 (OpenSM's default): CAs apply no CC setting "
                        "to any SL, so no flow is ever throttled")
    if not table["sw_cong_setting_control_map"] >> 2 & 1:
        warnings.append(f"{source}: cc_sw_cong_setting_control_map leaves bit 2 clear (OpenSM's default 0): switches "
                        "keep their reset threshold, 0, and mark nothing")
    for name in PER_SL:
        unused = [sl for sl, v in enumerate(per_sl.get(name, [])) if v and not control >> sl & 1]
        if unused:
            warnings.append(f"{source}: cc_ca_cong_setting_{name}: SL {', '.join(map(str, unused))} set, but "
                            "cc_ca_cong_setting_control_map leaves them out: CAs ignore those entries")
    return table


def _number(value: str, key: str, line: int, source: str, high: int, warnings: list[str]) -> int:
    text = value.strip()
    try:
        if text.lower().startswith("0x"):
            n = int(text, 16)
        elif len(text) > 1 and text.startswith("0"):
            n = int(text, 8)
            warnings.append(f"{source}:{line}: {key} {text}: a leading 0 makes OpenSM read it as octal ({n})")
        else:
            n = int(text, 10)
    except ValueError:
        raise OpenSmCcError(source, line, f"{key}: expected a number, got {value!r} (OpenSM ignores the line)") from None
    if not 0 <= n <= high:
        raise OpenSmCcError(source, line, f"{key}: expected 0..{high}, got {n} (OpenSM ignores the line as out of range)")
    return n


def _mask(value: str, key: str, line: int, source: str, warnings: list[str]) -> int:
    digits = value[2:] if value[:2] in ("0x", "0X") else value
    if not digits or any(c not in "0123456789abcdefABCDEF" for c in digits):
        raise OpenSmCcError(source, line, f"{key}: expected a hex mask of at most 64 digits, got {value!r} "
                            "(OpenSM ignores the line)")
    if len(digits) > 64:
        warnings.append(f"{source}:{line}: {key}: {len(digits)} hex digits: OpenSM keeps the leading 64")
        digits = digits[:64]
    return int(digits, 16)


def _entry(token: str, key: str, line: int, source: str, warnings: list[str]) -> tuple[int, int]:
    shift_text, sep, multiplier_text = token.strip().partition(":")
    if not sep:
        raise OpenSmCcError(source, line, f"{key}: expected shift:multiplier, got {token.strip()!r} (OpenSM ignores "
                            "the whole line)")
    try:
        shift, multiplier = int(shift_text.strip(), 0), int(multiplier_text.strip(), 0)
    except ValueError:
        raise OpenSmCcError(source, line, f"{key}: expected numbers in {token.strip()!r}") from None
    if shift > 3 or multiplier > 0x3FFF:
        word = ((shift & 0xFF) << 14 | (multiplier & 0xFFFF)) & 0xFFFF  # packed as OpenSM does
        warnings.append(f"{source}:{line}: {key}: {token.strip()}: beyond the 2-bit shift or 14-bit multiplier; "
                        f"the device gets {word >> 14}:{word & 0x3FFF}")
        shift, multiplier = word >> 14, word & 0x3FFF
    return shift, multiplier


def _cct(value: str, line: int, source: str, warnings: list[str]) -> list[tuple[int, int]]:
    entries = [_entry(token, "cc_cct", line, source, warnings) for token in value.split(",")]
    if len(entries) > MAX_CCT_ENTRIES:
        warnings.append(f"{source}:{line}: cc_cct: {len(entries)} entries: OpenSM keeps the first {MAX_CCT_ENTRIES}")
        entries = entries[:MAX_CCT_ENTRIES]
    return entries
