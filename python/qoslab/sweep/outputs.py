"""A study folder's own outputs (its tables, study.json, figures, report.html) written whole or
not at all: each file is written under a temporary name beside it and renamed into place, so a
reader sees the previous file or the new one, never part of one, and a write that fails (a full
disk, a file-size limit) leaves the previous file as it was. A failure names the file."""

from __future__ import annotations

import os
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
