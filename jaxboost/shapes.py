"""Row counts rounded up to a few sizes, so programs compile once per bucket.

Every distinct array shape compiles a new XLA program.  Padding the rows to a
bucket (with copies of row 0 that carry weight 0, or whose outputs are cut
off) lets data sets of nearby sizes share compiled programs, at a cost of at
most about 3% extra rows above 1024 rows.
"""

from __future__ import annotations

import numpy as np

_SMALLEST = 64
_EXACT_POWERS_UP_TO = 1024
_GRANULARITY_SHIFT = 5  # above 1024 rows, buckets are 1/32 of the leading power of two


def bucket_size(n_rows: int, multiple: int = 1) -> int:
    """The padded row count for ``n_rows``: a power of two up to 1024, then a
    multiple of ``2^(floor(log2 n) - 5)``; always a multiple of ``multiple``."""
    if n_rows <= _EXACT_POWERS_UP_TO:
        size = max(_SMALLEST, 1 << (max(n_rows, 1) - 1).bit_length())
    else:
        step = 1 << (n_rows.bit_length() - 1 - _GRANULARITY_SHIFT)
        size = -(-n_rows // step) * step
    return -(-size // multiple) * multiple


def pad_rows(array: np.ndarray, n_target: int) -> np.ndarray:
    """``array`` with copies of its first row appended up to ``n_target`` rows."""
    extra = n_target - array.shape[0]
    if extra <= 0:
        return array
    return np.concatenate([array, np.repeat(array[:1], extra, axis=0)])


def padded_slice(array: np.ndarray, start: int, stop: int) -> np.ndarray:
    """Rows ``start:stop`` of ``array`` padded as by :func:`pad_rows`: rows past
    its end are copies of its first row.  A view when no padding is needed."""
    rows = array[start:stop]
    missing = (stop - start) - rows.shape[0]
    if missing <= 0:
        return rows
    return np.concatenate([rows, np.repeat(array[:1], missing, axis=0)])
