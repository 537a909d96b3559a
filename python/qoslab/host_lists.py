"""Host lists as scenario files write them: "all", a range "0-511", or a list of indices."""

from __future__ import annotations

import re
from typing import Annotated, Any, Union

from pydantic import BeforeValidator

from qoslab.errors import problem, show


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_RANGE = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")


def _parse_hosts(value: Any) -> str | list[int]:
    """"all", a range "a-b" (inclusive), or a list of host indices (a single index is a list of one)."""
    if is_int(value):
        value = [value]
    if isinstance(value, str):
        if value.strip() == "all":
            return "all"
        match = _RANGE.match(value)
        if not match:
            raise problem(f'expected "all", a range like "0-15", or a list of host indices, got {show(value)}')
        first, last = int(match[1]), int(match[2])
        if first > last:
            raise problem(f"expected a range first-last with first <= last, got {show(value)}")
        return f"{first}-{last}"
    if not isinstance(value, (list, tuple)):
        raise problem(f'expected "all", a range like "0-15", or a list of host indices, got {show(value)}')
    if not value:
        raise problem("expected at least one host")
    for host in value:
        if not is_int(host) or host < 0:
            raise problem(f"expected host indices (integers >= 0), got {show(host)}")
    if len(set(value)) != len(value):
        raise problem(f"host listed twice in {show(list(value))}")
    return list(value)


Hosts = Annotated[Union[str, list[int]], BeforeValidator(_parse_hosts)]


def expand_hosts(hosts: str | list[int], host_count: int) -> list[int]:
    if hosts == "all":
        return list(range(host_count))
    if isinstance(hosts, str):
        first, last = (int(x) for x in hosts.split("-"))
        return list(range(first, last + 1))
    return list(hosts)


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
