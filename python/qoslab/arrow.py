"""Arrow arrays built straight from buffers. `pa.array` imports pandas on its first call (to rule
out pandas types), which costs about 0.17 s: most of a short run's wall time. A run writes only
numbers and strings, so it builds its arrays here and never imports pandas."""

from __future__ import annotations

from collections.abc import Sequence
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


def strings(values: Sequence[str | None]) -> pa.Array:
    """UTF-8 strings, None where a value is missing."""
    encoded = [b"" if v is None else v.encode() for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int32)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    present = [v is not None for v in values]
    buffers = [_validity(present), pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    return pa.Array.from_buffers(pa.string(), len(encoded), buffers)
