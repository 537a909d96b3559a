"""Arrow arrays built straight from buffers, and Parquet written without pyarrow.parquet. `pa.array`
imports pandas on its first call (to rule out pandas types), which costs about 0.17 s: most of a
short run's wall time; `pc.take` imports pyarrow.compute (about 30 ms) and `pq.write_table`
pyarrow.fs with its cloud file systems and ssl (about 15 ms). A run's tables hold only numbers and
strings, so they are built here when asked for (qoslab.tables; the engine writes their files), and
the tables Python computes (interference, port counters) are built and written here (issue 15,
part 4)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa


def _validity(present: Sequence[bool]) -> pa.Buffer | None:
    """Arrow's validity bitmap (bit i set: value i is present), or None when every value is."""
    if all(present):
        return None
    return pa.py_buffer(np.packbits(np.asarray(present, dtype=bool), bitorder="little"))


def numbers(values: np.ndarray) -> pa.Array:
    """A numeric array over a numpy array's buffer (native byte order), without a copy."""
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])


def optional_numbers(values: Sequence[Any], dtype: str) -> pa.Array:
    """Numbers of numpy `dtype`, None where a value is missing."""
    data = np.array([0 if v is None else v for v in values], dtype=np.dtype(dtype))
    present = [v is not None for v in values]
    return pa.Array.from_buffers(pa.from_numpy_dtype(data.dtype), len(data), [_validity(present), pa.py_buffer(data)])


def booleans(values: np.ndarray) -> pa.Array:
    """A boolean array from a numpy bool array (Arrow packs booleans into bits)."""
    bits = np.packbits(values.astype(bool), bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(bits)])


def masked_numbers(values: np.ndarray, present: np.ndarray) -> pa.Array:
    """A numeric array over a numpy array, null where `present` is false."""
    validity = None if present.all() else pa.py_buffer(np.packbits(present.astype(bool), bitorder="little"))
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [validity, pa.py_buffer(values)])


def take_strings(values: Sequence[str], indices: np.ndarray) -> pa.Array:
    """`values[i]` for each i in `indices`, as UTF-8 strings: what ``pc.take(strings(values),
    indices)`` gives, without importing pyarrow.compute. `values` is short (node, job or class
    names), `indices` may be long: the bytes are gathered by numpy, a block of rows at a time."""
    encoded = [v.encode() for v in values]
    widths = np.array([len(b) for b in encoded], dtype=np.int64)
    lengths = widths[indices]
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] >= 2**31:  # beyond a string array's 32-bit offsets: let pyarrow say so, as before
        import pyarrow.compute as pc

        return pc.take(strings(values), numbers(np.ascontiguousarray(indices)))
    # Each name as a row of its bytes, zero-padded: in row order, a row's first `width` bytes
    # are the names' bytes one after the other.
    columns = np.arange(int(widths.max(initial=0)))
    padded = np.zeros((len(encoded), len(columns)), dtype=np.uint8)
    padded[columns < widths[:, None]] = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    block = 1 << 20  # rows gathered at a time: the padded rows of a block, then their names' bytes
    gathered = np.concatenate(
        [padded[indices[start:start + block]][columns < lengths[start:start + block, None]]
         for start in range(0, len(indices), block)] or [np.zeros(0, dtype=np.uint8)])
    buffers = [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(gathered)]
    return pa.Array.from_buffers(pa.string(), len(lengths), buffers)


def write_parquet(table: pa.Table, path: str | Path) -> None:
    """`pq.write_table(table, path)` with its defaults, through the Parquet writer pq wraps, so
    that writing does not import pyarrow.parquet's file-system layer (pyarrow.fs: S3, GCS, Azure,
    HDFS and ssl). The file is the same, byte for byte (tests/test_startup.py); so is a failure
    (the partial file removed). A pyarrow whose private writer differs gets pq.write_table."""
    path = os.path.expanduser(os.fspath(path))
    try:
        from pyarrow._parquet import ParquetWriter
    except ImportError:
        ParquetWriter = None
    try:
        writer = None if ParquetWriter is None else ParquetWriter(path, table.schema, **PARQUET_DEFAULTS)
    except TypeError:  # the private writer's arguments changed: the public way
        writer = None
    if writer is None:
        import pyarrow.parquet as pq

        pq.write_table(table, path)
        return
    try:
        try:
            writer.write_table(table)
        finally:
            writer.close()
    except Exception:
        with contextlib.suppress(OSError):
            os.remove(path)
        raise


# pq.write_table's defaults that its writer's own defaults differ from (pyarrow/parquet/core.py).
PARQUET_DEFAULTS: dict[str, Any] = {"version": "2.6", "use_dictionary": True, "compression": "snappy",
                                    "write_statistics": True, "writer_engine_version": "V2",
                                    "data_page_version": "1.0"}


def inferred(values: Sequence[Any]) -> pa.Array:
    """What ``pa.array(values)`` gives for a list of strings, of ints (int64) or of numbers
    (double), without importing pandas; anything else (and an empty list) goes to pa.array."""
    if values and all(isinstance(v, str) for v in values):
        return strings(values)
    if values and all(type(v) is int for v in values):
        return numbers(np.array(values, dtype=np.int64))
    if values and all(type(v) in (int, float) for v in values):
        return numbers(np.array(values, dtype=np.float64))
    return pa.array(values)


def strings(values: Sequence[str | None]) -> pa.Array:
    """UTF-8 strings, None where a value is missing."""
    encoded = [b"" if v is None else v.encode() for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int32)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    present = [v is not None for v in values]
    buffers = [_validity(present), pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    return pa.Array.from_buffers(pa.string(), len(encoded), buffers)
