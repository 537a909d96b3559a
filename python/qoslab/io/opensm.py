"""OpenSM's QoS options (`opensm.conf`) written from qoslab's [qos] tables and read back, with
OpenSM's own parsing rules (formats.md section 1): whitespace separates key and value, `#`
starts a comment anywhere, numbers go through strtoul(…, 0) (a leading 0 is octal), a VLArb
VL is stored modulo 15 and a weight truncated to 8 bits, at most 64 VLArb entries, SL2VL and
VLArb VLs are masked to the operational VLs (osm_qos.c: `vl &= vl_mask` before each table is
sent)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qoslab.errors import FileLineError
from qoslab.io.files import NotReadable, read_bytes
from qoslab.io.lines import OPENSM_LINE_BYTES, comment_lines, fits, reader_lines
from qoslab.io.opensm_cc import OpenSmCcError, cc_option, parse_cc

PORT_TYPES = {"ca": "qos_ca_", "swe": "qos_swe_"}
FIELDS = ("max_vls", "high_limit", "vlarb_high", "vlarb_low", "sl2vl")
# OpenSM's built-in defaults (osm_base.h), used where the file sets nothing.
OPENSM_DEFAULTS: dict[str, Any] = {
    "high_limit": 0,
    "vlarb_high": [(vl, 4 if vl == 0 else 0) for vl in range(15)],
    "vlarb_low": [(vl, 0 if vl == 0 else 4) for vl in range(15)],
    "sl2vl": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 7],
}
# fabric.data_vls -> max_op_vls (PortInfo VLCap encoding: 1=VL0, 2=VL0-1, 3=VL0-3, 4=VL0-7, 5=VL0-14)
MAX_OP_VLS = {1: 1, 2: 2, 4: 3, 8: 4, 15: 5}
DATA_VLS = {code: vls for vls, code in MAX_OP_VLS.items()}
# Many switches program only this many VLArb entries per table (VLArbitrationLowCap/HighCap).
COMMON_VLARB_CAP = 8
# Most InfiniBand ports advertise VLCap VL0-7: OpenSM operates at most this many data VLs on them.
COMMON_DATA_VLS = 8


def vlcap_caveat(data_vls: int) -> str | None:
    """Why `data_vls` (VL0..data_vls-1 operated) may not be what the ports run: most advertise
    VLCap VL0-7, and OpenSM masks every VL to the VLs a port operates. None when within that. The
    one wording of this rule: the export's warning and the import's use it."""
    if data_vls <= COMMON_DATA_VLS:
        return None
    top = data_vls - 1
    return (f"most InfiniBand ports advertise VLCap VL0-{COMMON_DATA_VLS - 1}: OpenSM then operates "
            f"{COMMON_DATA_VLS} data VLs on them and every SL2VL and VLArb entry naming VL{COMMON_DATA_VLS}-{top} "
            f"lands on VL0-{top - COMMON_DATA_VLS} (on ibsim, the default SL2VL table's SL8-14 land on VL0-6), so "
            "traffic simulated on VLs of its own shares them: check VLCap with smpquery portinfo, and unless every "
            f"port has VL0-{top}, simulate with fabric.data_vls = {COMMON_DATA_VLS}")


def _vlarb_text(entries: list[tuple[int, int]]) -> str:
    # An empty table must still be written: OpenSM's default high table gives VL0 weight 4.
    return ",".join(f"{vl}:{w}" for vl, w in entries) if entries else "0:0"


# Every port type OpenSM programs, and whose tables qoslab gives it: switch port 0 (the switch's
# own management port, an end port like an HCA's) takes the CA tables, router ports the
# switch-external ones; the global qos_* options (the fallback for any type left unset) take the
# switch-external tables too. Writing every type leaves nothing to OpenSM's built-in defaults.
WRITTEN_PORT_TYPES = (("qos_", "swe", "every port type not set below"), ("qos_ca_", "ca", "CA ports"),
                      ("qos_sw0_", "ca", "switch port 0 (management)"), ("qos_swe_", "swe", "switch external ports"),
                      ("qos_rtr_", "swe", "router ports"))
# Routing engines that use VLs themselves (for deadlock freedom or their own QoS levels): their
# SL2VL tables or SL use conflict with QoS tables written here.
VL_ROUTING_ENGINES = {
    "dfsssp": "assigns SL2VL (VL layers) for deadlock freedom",
    "nue": "assigns SL2VL (virtual layers) for deadlock freedom",
    "lash": "places paths on VLs (lash_start_vl) for deadlock freedom",
    "torus-2QoS": "uses SL bits and VLs for deadlock freedom and its own two QoS levels",
}


def write_opensm_conf(tables: dict[str, dict[str, Any]], data_vls: int, policy_file: str,
                      header: list[str] | None = None) -> str:
    """The QoS options of opensm.conf for `tables` = {"ca": {...}, "swe": {...}} with keys
    sl2vl, vlarb_high, vlarb_low, high_limit (qoslab's resolved [qos] per port type): every QoS
    option OpenSM has, so that merged into any opensm.conf (merge_opensm_conf) nothing is left to
    a default. `header`: comment text, split into lines OpenSM reads whole."""
    lines = [line for h in (header or []) for line in comment_lines(h, OPENSM_LINE_BYTES)]
    lines += ["qos TRUE", f"qos_policy_file {policy_file}",
              f"# {data_vls} data VLs: OpenSM's max_op_vls code {MAX_OP_VLS[data_vls]}",
              f"max_op_vls {MAX_OP_VLS[data_vls]}"]
    if data_vls > COMMON_DATA_VLS:  # the short form of vlcap_caveat, kept on one line for the merge
        lines.append(f"# note: ports whose VLCap is VL0-{COMMON_DATA_VLS - 1} (most hardware) operate "
                     f"{COMMON_DATA_VLS} data VLs: OpenSM masks SL2VL and VLArb VLs {COMMON_DATA_VLS}-{data_vls - 1} "
                     f"to VL0-{data_vls - 1 - COMMON_DATA_VLS} on them, unlike what fabric.data_vls = {data_vls} "
                     "simulated")
    long_tables: dict[tuple[str, int], list[str]] = {}  # (table, entries) -> the options that write it
    for prefix, port, _ in WRITTEN_PORT_TYPES:
        for name in ("vlarb_high", "vlarb_low"):
            if len(tables[port][name]) > COMMON_VLARB_CAP:
                long_tables.setdefault((name, len(tables[port][name])), []).append(prefix + name)
    if long_tables:
        listed = "; ".join(f"{count} {name} entries ({'every port type' if len(options) == len(WRITTEN_PORT_TYPES) else ', '.join(options)})"
                           for (name, count), options in long_tables.items())
        lines.append(f"# note: {listed}: ports whose VLArb capability is smaller (often {COMMON_VLARB_CAP}) program "
                     "only the first entries; set fabric.vlarb_capacity to it to simulate and export what they hold")
    for prefix, port, what in WRITTEN_PORT_TYPES:
        t = tables[port]
        lines.append(f"# {what}")
        lines += [
            f"{prefix}max_vls {data_vls}",
            f"{prefix}high_limit {t['high_limit']}",
            f"{prefix}vlarb_high {_vlarb_text(t['vlarb_high'])}",
            f"{prefix}vlarb_low {_vlarb_text(t['vlarb_low'])}",
            f"{prefix}sl2vl {','.join(str(v) for v in t['sl2vl'])}",
        ]
    return "\n".join(lines) + "\n"


def _option_lines(text: str) -> list[tuple[int, str]]:
    """(line index, key) of each option line: comments and blank lines skipped, as OpenSM reads them."""
    found = []
    for index, raw in enumerate(text.splitlines()):
        line = raw.split("#", 1)[0].strip()
        if line:
            found.append((index, line.split()[0]))
    return found


def merge_opensm_conf(base: str, ours: str, source: str = "<base>") -> str:
    """`base` (a site's opensm.conf, or OpenSM's `opensm -c` template) with each option of `ours`
    set: an option the base already has is replaced where it stands (its later repeats, which
    OpenSM would let win, are commented out), the others are added at the end; every other line
    of the base is kept as it is. A base line longer than OpenSM reads is refused: OpenSM would
    read its tail as a line of its own (an option hidden in a comment), which the merge cannot
    keep as it is and still mean what it shows."""
    for number, raw in enumerate(base.splitlines(), start=1):
        if not fits(raw, OPENSM_LINE_BYTES):
            raise OpenSmConfError(source, number, f"{len(raw.encode())} bytes: OpenSM reads lines of at most "
                                  f"{OPENSM_LINE_BYTES} bytes and takes the rest for a line of its own (here "
                                  f"{reader_lines(raw, OPENSM_LINE_BYTES)[1][:60]!r}...); split or shorten the line")
    # Our header (what wrote the file, from what) and notes lead the merged file too.
    ours_all = ours.splitlines()
    first_option = next((i for i, line in enumerate(ours_all) if line.split("#", 1)[0].strip()), len(ours_all))
    header = ours_all[:first_option] + [line for line in ours_all[first_option:] if line.startswith("# note:")]
    ours_lines = [line for line in ours.splitlines() if line.split("#", 1)[0].strip()]
    ours_by_key = {line.split()[0]: line for line in ours_lines}
    out = base.splitlines()
    seen: set[str] = set()
    for index, key in _option_lines(base):
        if key in ours_by_key:
            if key in seen:
                out[index] = f"# {out[index]}    # (qoslab: repeated option, set above)"
            else:
                out[index] = ours_by_key[key]
                seen.add(key)
    missing = [line for line in ours_lines if line.split()[0] not in seen]
    if missing:
        out += ["", "# QoS options added by qoslab", *missing]
    return "\n".join([*header, "", *out] if header else out) + "\n"


def routing_engine_warnings(conf: str, source: str) -> list[str]:
    """Warnings for a routing_engine setting whose engines use VLs themselves."""
    warnings = []
    for index, key in _option_lines(conf):
        if key != "routing_engine":
            continue
        value = conf.splitlines()[index].split("#", 1)[0].split(None, 1)
        engines = [e.strip() for e in (value[1] if len(value) > 1 else "").split(",") if e.strip()]
        for engine in engines:
            if engine in VL_ROUTING_ENGINES:
                warnings.append(f"{source}:{index + 1}: routing_engine {engine} {VL_ROUTING_ENGINES[engine]}; "
                                "the QoS SL2VL and VLArb tables from qoslab assume no routing engine moves packets "
                                "between VLs (use ftree, updn, minhop or dor, or simulate with routing.vls)")
    return warnings


def enables_congestion_control(conf: str) -> bool:
    """Whether an opensm.conf turns congestion control on (its last congestion_control line wins,
    compared with 'TRUE' exactly, as OpenSM does)."""
    lines = conf.splitlines()
    values = [lines[i].split("#", 1)[0].split()[1:2] for i, key in _option_lines(conf) if key == "congestion_control"]
    return bool(values) and values[-1] == ["TRUE"]


def option_value(conf: str, option: str) -> tuple[int, str] | None:
    """(line number, value) of `option` in an opensm.conf as OpenSM takes it: its last line wins,
    the value stripped of blanks and of one pair of enclosing quotes; None when no line sets it."""
    lines = conf.splitlines()
    found = [i for i, key in _option_lines(conf) if key == option]
    if not found:
        return None
    value = lines[found[-1]].split("#", 1)[0].strip()[len(option):].strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    return found[-1] + 1, value


class OpenSmConfError(FileLineError):
    """An opensm.conf qoslab cannot read; names the file and line."""


@dataclass
class OpenSmQos:
    """What OpenSM would program, per port type, after its own parsing."""

    enabled: bool
    data_vls: int
    tables: dict[str, dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    source: str = "<opensm.conf>"

    routing_vls: int = 1
    # The [congestion_control] table OpenSM would program (io/opensm_cc.py); None when it is off.
    congestion_control: dict[str, Any] | None = None

    def scenario_qos(self) -> dict[str, Any]:
        """The [qos] table of a scenario that simulates these settings. Entries of weight 0 are
        kept: they send nothing, but a port counts them among the entries it holds
        (fabric.vlarb_capacity), so dropping them would let later entries in."""
        return {port: {"sl2vl": t["sl2vl"], "vlarb_high": [list(e) for e in t["vlarb_high"]],
                       "vlarb_low": [list(e) for e in t["vlarb_low"]], "high_limit": t["high_limit"]}
                for port, t in self.tables.items()}

    def fold_routing_layers(self, layers: int) -> OpenSmQos:
        """The tables a scenario with routing.vls = `layers` wrote (qoslab export repeats each
        VLArb entry for VL v + k * data_vls / layers, same weight; SL2VL names only the first
        layer's VLs), folded back to that scenario's [qos] tables. Raises OpenSmConfError naming
        the key where the tables are not such copies."""
        if layers == 1:
            return self
        if layers < 1 or self.data_vls % layers:
            raise OpenSmConfError(self.source, 0, f"--routing-vls {layers}: expected a divisor of the "
                                  f"{self.data_vls} data VLs (max_op_vls)")
        step = self.data_vls // layers
        tables = {}
        for port, t in self.tables.items():
            prefix = PORT_TYPES[port]
            folded = dict(t)
            beyond = [sl for sl, vl in enumerate(t["sl2vl"]) if vl >= step]
            if beyond:
                raise OpenSmConfError(self.source, 0, f"{prefix}sl2vl: SL{beyond[0]} maps to VL{t['sl2vl'][beyond[0]]}, "
                                      f"but with {layers} routing layers of {step} VLs QoS uses VL0..VL{step - 1} only")
            for name in ("vlarb_high", "vlarb_low"):
                entries = [e for e in t[name] if e[1] > 0]
                groups = [entries[i:i + layers] for i in range(0, len(entries), layers)]
                for group in groups:
                    vl, weight = group[0]
                    expected = [(vl + k * step, weight) for k in range(layers)]
                    if vl >= step or group != expected:
                        shown = ",".join(f"{v}:{w}" for v, w in group)
                        want = ",".join(f"{v}:{w}" for v, w in expected) if vl < step else f"a first-layer VL (0..{step - 1})"
                        raise OpenSmConfError(self.source, 0, f"{prefix}{name}: entries {shown} are not one entry's "
                                              f"{layers} routing-layer copies (expected {want})")
                folded[name] = [group[0] for group in groups]
            tables[port] = folded
        return OpenSmQos(self.enabled, self.data_vls, tables, list(self.warnings), self.source, layers,
                         self.congestion_control)

    def layered_guess(self) -> int | None:
        """A routing.vls > 1 whose layer copies these tables are exactly (None if none fits)."""
        if not any(e[1] > 0 for t in self.tables.values() for name in ("vlarb_high", "vlarb_low") for e in t[name]):
            return None
        for layers in (2, 3, 4, 5):
            if self.data_vls % layers == 0:
                try:
                    self.fold_routing_layers(layers)
                except OpenSmConfError:
                    continue
                return layers
        return None


_C_NUMBER = re.compile(r"[+-]?(0[xX][0-9a-fA-F]+|[0-9]+)", re.ASCII)


def _strtoul(text: str) -> int:
    """C's strtoul(text, NULL, 0): an optional sign, then 0x hex, a leading 0 octal, else decimal
    (the sign applies to the number read in that base: -010 is -8). ASCII digits only: Python's
    int() also takes "6_4" and other scripts' digits, which C reads otherwise."""
    text = text.strip()
    if not _C_NUMBER.fullmatch(text):
        raise ValueError(f"not a C number: {text!r}")
    sign, digits = (-1, text[1:]) if text[0] == "-" else (1, text.lstrip("+"))
    if digits.lower().startswith("0x"):
        return sign * int(digits, 16)
    if len(digits) > 1 and digits.startswith("0"):
        return sign * int(digits, 8)
    return sign * int(digits, 10)


def opensm_option_names() -> frozenset[str]:
    """Every option OpenSM knows (opensm_keys.txt, from OpenSM 3.3.23's `opensm -c`)."""
    text = (Path(__file__).parent / "opensm_keys.txt").read_text()
    return frozenset(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


def read_opensm_conf(path: str | Path) -> OpenSmQos:
    source = str(path)
    try:
        data = read_bytes(path)
    except NotReadable as error:
        raise OpenSmConfError(source, 0, str(error)) from None
    except OSError as error:
        raise OpenSmConfError(source, 0, f"cannot read: {error.strerror or error}") from None
    nul = data.find(b"\0")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        nul = error.start if nul < 0 else min(nul, error.start)
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise OpenSmConfError(source, line, f"binary data (byte {nul}): expected opensm.conf, a text file of "
                              "'key value' lines")
    return parse_opensm_conf(text, source)


def parse_opensm_conf(text: str, source: str = "<opensm.conf>") -> OpenSmQos:
    values: dict[str, tuple[str, int]] = {}
    cc: list[tuple[str, str, int]] = []  # every congestion-control line: per-SL options repeat
    warnings: list[str] = []
    known = opensm_option_names()
    unknown: list[tuple[int, str]] = []
    # Read as OpenSM reads it: a line longer than its buffer is taken as several lines.
    pieces = [(number, piece) for number, raw in enumerate(text.splitlines(), start=1)
              for piece in reader_lines(raw, OPENSM_LINE_BYTES)]
    for number, raw in enumerate(text.splitlines(), start=1):
        if not fits(raw, OPENSM_LINE_BYTES):
            warnings.append(f"{source}:{number}: {len(raw.encode())} bytes: OpenSM reads lines of at most "
                            f"{OPENSM_LINE_BYTES} bytes and takes the rest for lines of their own, read so here "
                            f"(the first: {reader_lines(raw, OPENSM_LINE_BYTES)[1][:60]!r}...)")
    for number, raw in pieces:
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        key, _, value = line.partition(" ") if " " in line else line.partition("\t")
        key, value = key.strip(), value.strip()
        if "=" in key and key.startswith(("qos", "max_op_vls")):
            warnings.append(f"{source}:{number}: {key!r}: OpenSM separates key and value by whitespace, not '=': "
                            "it ignores this line as an unknown key")
            continue
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        if key not in known:
            unknown.append((number, key))
            continue
        if cc_option(key):
            cc.append((key, value, number))
        values[key] = (value, number)
    if not values:
        where = f"line {unknown[0][0]} starts with {unknown[0][1]!r}" if unknown else "it has no option lines"
        raise OpenSmConfError(source, unknown[0][0] if unknown else 0, f"no OpenSM option found ({where}): expected "
                              "opensm.conf, 'key value' lines such as 'qos TRUE' (see opensm -c)")
    for number, key in unknown:
        warnings.append(f"{source}:{number}: {key!r}: not an OpenSM option: OpenSM ignores this line")

    def number_of(key: str, low: int, high: int, expected: str | None = None) -> int | None:
        if key not in values or values[key][0] in ("", "(null)"):
            return None
        value, line = values[key]
        try:
            n = _strtoul(value)
        except ValueError:
            raise OpenSmConfError(source, line, f"{key}: expected a number, got {value!r}") from None
        if value.strip().startswith("0") and len(value.strip()) > 1 and not value.lower().startswith("0x"):
            warnings.append(f"{source}:{line}: {key} {value}: a leading 0 makes OpenSM read it as octal ({n})")
        if not low <= n <= high:
            raise OpenSmConfError(source, line, f"{key}: expected {expected or f'{low}..{high}'}, got {n}")
        return n

    enabled = values.get("qos", ("FALSE", 0))[0].upper() == "TRUE"
    if not enabled:
        warnings.append(f"{source}: qos is not TRUE: OpenSM programs no SL2VL or VLArb tables at all")
    op = number_of("max_op_vls", 1, 5)
    data_vls = DATA_VLS[op if op is not None else 5]
    caveat = vlcap_caveat(data_vls)
    if caveat:
        given = f"{source}:{values['max_op_vls'][1]}: max_op_vls {op}" if op is not None else \
            f"{source}: max_op_vls unset (OpenSM's default, 5)"
        warnings.append(f"{given}: read as fabric.data_vls = {data_vls} (VL0-{data_vls - 1}), but {caveat}")
    mask = (1 << (MAX_OP_VLS[data_vls] - 1)) - 1 if data_vls > 1 else 0
    def table_value(name: str, prefix: str) -> Any:
        """What OpenSM programs for one field of a port type (qos_build_config): the port type's
        own option, else the global qos_ one, else the built-in default. A string option is unset
        only when absent or "(null)" (what `opensm -c` writes): an empty one is a table of its own
        (no weight, every SL on VL0). high_limit is unset when negative (`opensm -c` writes -1)."""
        for key in (prefix + name, "qos_" + name):
            if key not in values:
                continue
            value, at = values[key]
            if name == "high_limit":
                if value in ("", "(null)"):  # strtol: 0, not unset
                    warnings.append(f"{source}:{at}: {key} {value!r}: OpenSM reads it as 0, not as unset (-1 is "
                                    "unset)")
                    return 0
                limit = number_of(key, -(2**31), 255, "0..255, or a negative number for unset")
                if limit is not None and limit >= 0:
                    return limit
                continue  # negative: unset, the next level
            if value == "(null)":
                continue
            if name == "sl2vl":
                return _sl2vl(value, key, at, source, mask, warnings)
            entries = _vlarb(value, key, at, source, warnings)
            for vl, weight in entries:
                if vl & mask != vl:
                    warnings.append(f"{source}:{at}: {key} entry {vl}:{weight} is for VL{vl}, beyond the operational "
                                    f"VLs (max_op_vls: VL0-{data_vls - 1}); OpenSM masks it to VL{vl & mask}")
            return [(vl & mask, weight) for vl, weight in entries]
        # OpenSM's built-in table, masked as a set table is (the default tables list VL0-14):
        # with max_op_vls 3 the default low table's 4:4..7:4 are programmed as 0:4..3:4.
        default = OPENSM_DEFAULTS[name]
        if name == "sl2vl":
            return [vl & mask for vl in default]
        if name in ("vlarb_high", "vlarb_low"):
            return [(vl & mask, weight) for vl, weight in default]
        return default

    tables = {port: {name: table_value(name, prefix) for name in ("high_limit", "vlarb_high", "vlarb_low", "sl2vl")}
              for port, prefix in PORT_TYPES.items()}
    try:
        congestion = parse_cc(cc, source, warnings)
    except OpenSmCcError as error:
        raise OpenSmConfError(error.source, error.line, error.message) from None
    # A global qos_ option read for each port type warns once, not once per type.
    warnings[:] = list(dict.fromkeys(warnings))
    return OpenSmQos(enabled, data_vls, tables, warnings, source, congestion_control=congestion)


def _vlarb(value: str, key: str, line: int, source: str, warnings: list[str]) -> list[tuple[int, int]]:
    if not value:
        warnings.append(f"{source}:{line}: {key} is empty: OpenSM programs a table without weight, not the "
                        "fallback of an unset option ((null) or no line)")
        return []
    entries = []
    for text in value.split(","):
        vl_text, sep, weight_text = text.partition(":")
        try:
            vl, weight = _strtoul(vl_text), _strtoul(weight_text) if sep else 0
        except ValueError:
            raise OpenSmConfError(source, line, f"{key}: bad entry {text!r}, expected VL:WEIGHT") from None
        for part, n in ((vl_text.strip(), vl), (weight_text.strip(), weight)):
            if len(part) > 1 and part.startswith("0") and not part.lower().startswith("0x"):
                warnings.append(f"{source}:{line}: {key} entry {text.strip()!r}: a leading 0 makes OpenSM read "
                                f"{part} as octal ({n})")
        if not 0 <= vl <= 14:
            warnings.append(f"{source}:{line}: {key} entry {text.strip()!r}: OpenSM stores VL {vl} as VL {vl % 15}")
            vl %= 15
        if not 0 <= weight <= 255:
            warnings.append(f"{source}:{line}: {key} entry {text.strip()!r}: OpenSM truncates weight {weight} to 8 bits "
                            f"({weight & 0xFF})")
            weight &= 0xFF
        entries.append((vl, weight))
    if len(entries) > 64:
        warnings.append(f"{source}:{line}: {key} has {len(entries)} entries: OpenSM keeps the first 64")
        entries = entries[:64]
    return entries


def _sl2vl(value: str, key: str, line: int, source: str, mask: int, warnings: list[str]) -> list[int]:
    if not value:
        warnings.append(f"{source}:{line}: {key} is empty: OpenSM maps every SL to VL 0, not the fallback of an "
                        "unset option ((null) or no line)")
        return [0] * 16
    try:
        vls = [_strtoul(v) for v in value.split(",")]
    except ValueError:
        raise OpenSmConfError(source, line, f"{key}: expected 16 comma-separated VLs, got {value!r}") from None
    if len(vls) != 16:
        warnings.append(f"{source}:{line}: {key} has {len(vls)} entries, not 16: OpenSM fills the missing SLs with VL 0"
                        if len(vls) < 16 else f"{source}:{line}: {key} has {len(vls)} entries: OpenSM reads 16")
        vls = (vls + [0] * 16)[:16]
    out = []
    for sl, vl in enumerate(vls):
        if vl == 15:
            raise OpenSmConfError(source, line, f"{key}: SL{sl} -> VL15 drops that SL's packets; qoslab does not model "
                                                "dropping")
        if not 0 <= vl <= 15:
            raise OpenSmConfError(source, line, f"{key}: SL{sl} -> VL{vl}: expected 0..15")
        if vl & mask != vl:
            warnings.append(f"{source}:{line}: {key}: SL{sl} -> VL{vl} is beyond the operational VLs; OpenSM masks it "
                            f"to VL{vl & mask}")
        out.append(vl & mask)
    return out
