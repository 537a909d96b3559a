"""Which level of a fat tree a link belongs to, from the engine's node names (H<n> hosts, S<l>-<i>
switches of level l): level l holds the links between levels l-1 and l, "up" towards the roots."""

from __future__ import annotations

import re
from functools import lru_cache

_NODE = re.compile(r"^(?:H\d+|S(\d+)-\d+)$")


def node_level(name: str) -> int | None:
    """H<n> -> 0, S<l>-<i> -> l (fat-tree node names); None for names of other topologies."""
    match = _NODE.match(name)
    if not match:
        return None
    return int(match[1]) if match[1] else 0


@lru_cache(maxsize=1 << 16)  # a sweep's runs ask for the same fabric's links again and again
def link_level(src: str, dst: str) -> tuple[int, str] | None:
    """(level, "up" or "down") of the link src -> dst; None where the names carry no levels."""
    a, b = node_level(src), node_level(dst)
    if a is None or b is None or a == b:
        return None
    return max(a, b), "up" if b > a else "down"
