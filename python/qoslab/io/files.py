"""Reading a file the user named, never more of it than the machine can hold: a device
(/dev/zero), a FIFO or a file far larger than any real one of its kind is refused by name
instead of being read until memory runs out (a MemoryError traceback)."""

from __future__ import annotations

import gzip
from pathlib import Path

# The largest input file read: an ibnetdiscover dump or a set of LFT dumps of a 10,000-node
# fabric is a few hundred MB.
MAX_INPUT_BYTES = 1 << 30


class NotReadable(ValueError):
    """The file is not one to read whole: the message says why (its caller names the file)."""


def read_bytes(path: str | Path, cap: int | None = None, gunzip: bool = False) -> bytes:
    """The file's bytes. Raises NotReadable for something other than a regular file or more than
    `cap` bytes (MAX_INPUT_BYTES), and OSError (FileNotFoundError, IsADirectoryError, ...) as
    reading does. `gunzip`: a gzipped file (by its magic number) is read decompressed, with the
    cap on what it decompresses to (a gzip bomb of 14 MB holds 3 GB). Raises EOFError or OSError
    for gzip data that ends early or is damaged."""
    cap = MAX_INPUT_BYTES if cap is None else cap
    p = Path(path)
    if p.exists() and not p.is_file() and not p.is_dir():
        raise NotReadable("expected a regular file, got a device, FIFO or socket")
    with p.open("rb") as file:
        data = file.read(cap + 1)
    if gunzip and data[:2] == b"\x1f\x8b":
        with gzip.open(p, "rb") as file:
            data = file.read(cap + 1)
    if len(data) > cap:
        raise NotReadable(f"larger than {cap >> 20} MiB{' decompressed' if gunzip else ''}: not read")
    return data
