"""A study folder's own outputs (its tables, study.json, figures, report.html) written whole or
not at all: each file is written under a temporary name beside it and renamed into place, so a
reader sees the previous file or the new one, never part of one, and a write that fails (a full
disk, a file-size limit) leaves the previous file as it was. A failure names the file."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path


class OutputError(OSError):
    """A study output that could not be written: the file and the system's reason."""

    def __init__(self, path: Path, error: OSError):
        reason = error.strerror or str(error) or type(error).__name__
        super().__init__(error.errno, reason, str(path))

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"

    def __reduce__(self) -> tuple[object, ...]:  # raised in a worker (a sweep point's folder): pickled whole
        return _rebuild, (self.filename, self.errno, self.strerror)


def _rebuild(filename: str, errno: int | None, strerror: str) -> OutputError:
    return OutputError(Path(filename), OSError(errno, strerror))


@contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary path beside `path` to write `path`'s new content to: renamed onto `path` once
    written; removed if the writing fails (an OSError becomes an OutputError naming `path`)."""
    path = Path(path)
    # The process id: a sweep's points are finished by several worker processes at once.
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield temp
        os.replace(temp, path)
    except BaseException as error:
        with suppress(OSError):
            temp.unlink()
        if isinstance(error, OSError) and not isinstance(error, OutputError):
            raise OutputError(path, error) from None
        raise


def write_text(path: Path, text: str) -> Path:
    with replacing(path) as temp:
        temp.write_text(text)
    return path


def write_bytes(path: Path, data: bytes) -> Path:
    with replacing(path) as temp:
        temp.write_bytes(data)
    return path


# Written first and removed last while a study folder's tables are rewritten: a folder that still
# has it was cut off while finishing (killed, or a file that could not be written), and its files
# may mix the new results with the previous ones. Running the study again rewrites them all.
FINISHING = "finishing.json"


def rerun_command(out: Path, source: str | None) -> str:
    """The command that finishes `out` again (a sweep point's folder: the sweep's)."""
    out = Path(out)
    from qoslab.sweep.folder import POINTS

    if out.parent.name == POINTS:  # a sweep's point, written by the sweep's command
        out = out.parent.parent
    return f"qoslab study {source + ' ' if source else ''}--out {out}"


@contextmanager
def finishing(out: Path, source: str | None) -> Iterator[None]:
    """`with finishing(out, source):` around the rewriting of a study folder's tables and report:
    marked while it lasts; the mark stays if it does not end (readers then refuse the folder,
    `check_finished`)."""
    out = Path(out)
    marker = out / FINISHING
    write_text(marker, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                   "command": rerun_command(out, source)}) + "\n")
    # What a killed finishing left half-written (the folder is held: no other writer has these).
    for temp in [*out.glob(".*.tmp"), *(out / "figures").glob(".*.tmp")]:
        temp.unlink(missing_ok=True)
    yield
    marker.unlink(missing_ok=True)


def check_finished(out: Path) -> None:
    """FolderError if `out`'s tables were being rewritten when its study stopped (or are now)."""
    from qoslab.errors import FolderError

    marker = Path(out) / FINISHING
    if not marker.exists():
        return
    try:
        command = json.loads(marker.read_text()).get("command")
    except (OSError, ValueError, AttributeError):
        command = None
    raise FolderError(f"{out}: its results are incomplete: the study was stopped, or could not write a file, while "
                      f"it wrote them (or is writing them now), so its tables may mix old and new results; run "
                      f"`{command or rerun_command(out, None)}` again to finish it (its stored runs are reused)")
