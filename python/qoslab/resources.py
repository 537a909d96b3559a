"""What a scenario will need against what this machine has, checked before anything is built: a
run that cannot fit is an error naming its size, never an attempt that exhausts the machine."""

from __future__ import annotations

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


def available_memory_bytes() -> int | None:
    """MemAvailable of /proc/meminfo (what can be allocated without swapping); None where it
    cannot be read (not Linux), so that the check is skipped rather than guessed."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
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
