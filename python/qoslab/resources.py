"""What a scenario will need against what this machine has, checked before anything is built: a
run that cannot fit is an error naming its size, never an attempt that exhausts the machine."""

from __future__ import annotations

import resource
from pathlib import Path

# Measured on the engine (peak RSS of `qoslab run`, 2026-11): the interpreter, pandas and pyarrow
# take about 135 MiB; a rank about 1.3 KiB; a message posted and not yet delivered about 24 bytes
# (an all-to-all of 6,160 ranks, 38 M messages at once, peaks at 1 GB). Rounded up.
BASE_BYTES = 160 * 2**20
RANK_BYTES = 2048
NODE_BYTES = 16384  # a host or switch with its ports and per-VL lines
MESSAGE_BYTES = 32
# A packet (32 bytes) in a slab that grows by doubling: up to twice that at its peak. Messages
# are cut into packets when created, so a traffic table holds every queued message's packets.
PACKET_BYTES = 64
# An HCA send queue (the engine's 32-byte Queue), per host, SL in use and fabric.hca_send_queues_per_sl;
# twice that with congestion control, which keeps a 32-byte flow per queue.
SEND_QUEUE_BYTES = 32


def available_memory_bytes() -> int | None:
    """What this process can still allocate: the least of the machine's MemAvailable
    (/proc/meminfo, what can be allocated without swapping), the room left under its address-space
    limit (`ulimit -v`) and under its memory cgroup's limit (a Slurm job's, a container's). None
    where none can be read (not Linux), so that the check is skipped rather than guessed."""
    known = [room for room in (_meminfo_available(), _address_space_room(), _cgroup_room()) if room is not None]
    return min(known) if known else None


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _address_space_room() -> int | None:
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit == resource.RLIM_INFINITY:
        return None
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return max(0, limit - int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        return None
    return None


UNLIMITED = 1 << 60  # cgroups write "max" (v2) or a page-rounded 2^63 (v1) for no limit


def _cgroup_room(proc: Path = Path("/proc/self/cgroup"), root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """The least room under the memory limit of this process's cgroup and of every group above it
    (v2 memory.max less memory.current, v1 limit_in_bytes less usage_in_bytes): Slurm sets a job's
    limit on the job's group, above the step and task groups a process sits in."""
    try:
        lines = proc.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2
            base, files = root, ("memory.max", "memory.current")
        elif "memory" in controllers.split(","):  # v1
            base, files = root / "memory", ("memory.limit_in_bytes", "memory.usage_in_bytes")
        else:
            continue
        parts = [part for part in path.split("/") if part]
        # Leaf to root; the mount itself too, which in a container is the container's own group.
        rooms = [_room(base.joinpath(*parts[:i]), *files) for i in range(len(parts), -1, -1)]
        known = [room for room in rooms if room is not None]
        if known:
            return min(known)
    return None


def _room(folder: Path, limit_file: str, usage_file: str) -> int | None:
    try:
        limit_text = (folder / limit_file).read_text().strip()
        if limit_text == "max" or int(limit_text) >= UNLIMITED:
            return None
        return max(0, int(limit_text) - int((folder / usage_file).read_text().strip()))
    except (OSError, ValueError):
        return None


def estimated_bytes(nodes: int, ranks: int, messages_at_once: int, packets_queued: int = 0) -> int:
    return (BASE_BYTES + nodes * NODE_BYTES + ranks * RANK_BYTES + messages_at_once * MESSAGE_BYTES
            + packets_queued * PACKET_BYTES)


def describe_bytes(count: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if count < 1024 or unit == "TiB":
            return f"{count:,.0f} {unit}" if unit == "bytes" else f"{count:,.1f} {unit}"
        count /= 1024
    return f"{count:,.1f} TiB"
