"""Host lists as scenario files write them: "all", a range "0-511", a list of indices, or host
names (a Slurm hostlist expression like "node[001-016]", or a list of names) on fabrics whose
hosts have names (an imported fabric). Names are resolved to indices against the topology."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Any

import hostlist
from pydantic import BeforeValidator

from qoslab.errors import problem, show


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_RANGE = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")


def _parse_hosts(value: Any) -> str | list[int] | list[str]:
    """"all", a range "a-b" (inclusive), a list of host indices (a single index is a list of one),
    or host names: a hostlist expression or a list of names, expanded here, resolved later."""
    expected = 'expected "all", a range like "0-15", a list of host indices, or host names like "node[001-016]"'
    if is_int(value):
        value = [value]
    if isinstance(value, str):
        if value.strip() == "all":
            return "all"
        match = _RANGE.match(value)
        if match:
            first, last = int(match[1]), int(match[2])
            if first > last:
                raise problem(f"expected a range first-last with first <= last, got {show(value)}")
            return f"{first}-{last}"
        if value.strip().isdigit():
            raise problem(f"expected host indices as integers (hosts = [{value.strip()}]), got the string {show(value)}")
        try:
            value = hostlist.expand_hostlist(value.strip())
        except hostlist.BadHostlist as error:
            raise problem(f"{expected}, got {show(value)} ({error})") from None
    if not isinstance(value, (list, tuple)):
        raise problem(f"{expected}, got {show(value)}")
    if not value:
        raise problem("expected at least one host")
    if all(isinstance(host, str) for host in value):
        names = [host.strip() for host in value]
        if any(not name for name in names):
            raise problem("expected host names, got an empty one")
        twice = [name for i, name in enumerate(names) if name in names[:i]]
        if twice:
            raise problem(f"host {twice[0]!r} listed twice")
        return names
    for host in value:
        if not is_int(host) or host < 0:
            raise problem(f"expected host indices (integers >= 0) or host names, not a mix; got {show(host)}")
    if len(set(value)) != len(value):
        raise problem(f"host listed twice in {show(list(value))}")
    return list(value)


def has_names(hosts: Any) -> bool:
    """A parsed host list that names hosts (still to be resolved against the fabric)."""
    return isinstance(hosts, list) and bool(hosts) and isinstance(hosts[0], str)


def resolve_names(names: list[str], fabric_names: Sequence[str] | None, key: str) -> list[int]:
    """Host indices of `names` in a fabric whose host i is called fabric_names[i]; errors name `key`."""
    if fabric_names is None:
        raise problem("host names need a fabric whose hosts have names (topology kind = \"ibnetdiscover\"); "
                      "this topology numbers its hosts: use indices or a range like \"0-15\"", key)
    index = {name: i for i, name in enumerate(fabric_names)}
    unknown = [name for name in names if name not in index]
    if unknown:
        known = hostlist.collect_hostlist(list(fabric_names))
        known = known if len(known) <= 200 else known[:200] + "..."
        raise problem(f"host {unknown[0]!r} is not in the fabric (its hosts: {known})", key)
    return [index[name] for name in names]


Hosts = Annotated[str | list[int] | list[str], BeforeValidator(_parse_hosts)]


def expand_hosts(hosts: str | list[int] | list[str], host_count: int) -> list[int]:
    """Host indices; names in a list must have been resolved (Scenario does it at validation)."""
    if hosts == "all":
        return list(range(host_count))
    if isinstance(hosts, str):
        first, last = (int(x) for x in hosts.split("-"))
        # Past the fabric's last host only the first absent one matters (callers name it), so a
        # range like "0-999999999" is never expanded in full.
        return list(range(first, min(last, max(first, host_count)) + 1))
    indices = [h for h in hosts if isinstance(h, int)]
    if len(indices) != len(hosts):
        raise TypeError(f"host names are resolved to indices before hosts are expanded: {hosts!r}")
    return indices


def compact(hosts: list[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> "0-2,5,7-8" (for display)."""
    parts: list[str] = []
    start = prev = None
    for h in hosts:
        if prev is not None and h == prev + 1:
            prev = h
            continue
        if start is not None:
            parts.append(f"{start}-{prev}" if prev != start else f"{start}")
        start = prev = h
    if start is not None:
        parts.append(f"{start}-{prev}" if prev != start else f"{start}")
    return ",".join(parts)
