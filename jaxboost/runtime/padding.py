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


# PJRT's CPU client takes a host array as a device buffer in place, with no
# copy, when its data starts at a multiple of this many bytes (jaxlib 0.10.2:
# 64 and 128 in place, 16 and 32 copied; numpy's large arrays start at 16).
# Its copy is several times slower than numpy's into aligned memory
# (bench_fit.py's traces).
CPU_IN_PLACE_ALIGNMENT = 64


def in_place_on(platform: str) -> bool:
    """Whether devices of ``platform`` take aligned host rows in place, so
    that `pad_rows` and `padded_slice` should align them: CPU."""
    return platform == "cpu"


def aligned_empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts at a multiple of
    `CPU_IN_PLACE_ALIGNMENT` bytes."""
    dtype = np.dtype(dtype)
    n_bytes = int(np.prod(shape)) * dtype.itemsize
    raw = np.empty(n_bytes + CPU_IN_PLACE_ALIGNMENT, np.uint8)
    offset = -raw.ctypes.data % CPU_IN_PLACE_ALIGNMENT
    return raw[offset : offset + n_bytes].view(dtype).reshape(shape)


def is_aligned(array: np.ndarray) -> bool:
    """Whether a CPU device can take ``array`` in place (see `aligned_empty`)."""
    return array.flags.c_contiguous and array.ctypes.data % CPU_IN_PLACE_ALIGNMENT == 0


def pad_rows(array: np.ndarray, n_target: int, aligned: bool = False) -> np.ndarray:
    """``array`` with copies of its first row appended up to ``n_target`` rows
    (``array`` itself when it has as many; see `padded_slice` for
    ``aligned``)."""
    if n_target <= array.shape[0] and (not aligned or is_aligned(array)):
        return array
    return padded_slice(array, 0, max(n_target, array.shape[0]), aligned)


def padded_slice(array: np.ndarray, start: int, stop: int, aligned: bool = False) -> np.ndarray:
    """Rows ``start:stop`` of ``array`` padded as by `pad_rows`: rows past
    its end are copies of its first row.  A view when no padding is needed,
    unless ``aligned`` and the view does not start on a
    `CPU_IN_PLACE_ALIGNMENT` boundary; a copy is always aligned, so that
    a CPU device takes it in place."""
    rows = array[start:stop]
    n_present = rows.shape[0]
    if n_present == stop - start and (not aligned or is_aligned(rows)):
        return rows
    padded = aligned_empty((stop - start, *array.shape[1:]), array.dtype)
    padded[:n_present] = rows
    padded[n_present:] = array[:1]
    return padded


# The row counts of the programs that `in_chunks` runs: a batch of any size
# is cut into chunks of the largest and one last chunk padded to the
# smallest that holds it, so three programs serve every batch size.
CHUNK_ROWS = (256, 4096, 65536)


def chunk_sizes(n_rows: int) -> list[tuple[int, int]]:
    """``(rows, padded size)`` of each chunk `in_chunks` cuts ``n_rows`` rows
    into, in order: sizes from `CHUNK_ROWS`."""
    largest = CHUNK_ROWS[-1]
    chunks = [(largest, largest)] * (max(n_rows - 1, 0) // largest)
    rest = n_rows - len(chunks) * largest
    chunks.append((rest, next(size for size in CHUNK_ROWS if size >= rest)))
    return chunks


def in_chunks(function, array: np.ndarray, aligned: bool = False) -> np.ndarray:
    """``function(rows)`` of ``array``'s rows, called on chunks of the sizes
    of `CHUNK_ROWS` (padded as by `pad_rows`; zeros pad an empty array) and
    joined: a jitted ``function`` compiles one program per chunk size,
    whatever the number of rows.  ``function`` keeps the rows on the
    leading axis."""
    n_rows = array.shape[0]
    if n_rows == 0:
        array = np.zeros((1, *array.shape[1:]), array.dtype)
    if n_rows <= CHUNK_ROWS[0] and not aligned:  # (a few rows: the fixed cost is the point)
        padded = np.empty((CHUNK_ROWS[0], *array.shape[1:]), array.dtype)
        padded[:n_rows] = array[:n_rows]
        padded[n_rows:] = array[:1]
        return np.asarray(function(padded))[:n_rows]
    outputs, start = [], 0
    for rows, size in chunk_sizes(n_rows):
        # (dispatched one after the other: a device works on one while the next is sent)
        outputs.append((function(padded_slice(array, start, start + size, aligned)), rows))
        start += rows
    return np.concatenate([np.asarray(output)[:rows] for output, rows in outputs])
