"""Training over several processes (hosts), each holding its own rows.

With ``jax.distributed`` every process runs the same Python program; the mesh
spans all processes' devices and the boosting programs combine histograms
with ``psum`` across them.  Each process passes *its own rows* to ``fit``; the
helpers here give the few host-side steps that need the other processes:
their row counts (for global row numbers), a gathered sample for the bin
edges, global arrays built from local rows, copies of replicated results, and
decisions taken by process 0 (so that every process runs the same programs).

With one process every helper is the identity or a plain ``device_put``, so
the single-process path is the same code.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from .devices import ROWS
from .padding import bucket_size, in_place_on, pad_rows, padded_slice

T = TypeVar("T")
F = TypeVar("F", bound=Callable)

# what the collectives' errors say when a peer process is gone (gloo on CPU,
# NCCL on GPU; the transport's own words where the library's name is absent)
_LOST_PEER_WORDS = (
    "gloo",
    "nccl",
    "connection reset",
    "connection closed",
    "connection refused",
    "broken pipe",
    "socket closed",
)


def initialize(
    coordinator_address: str,
    num_processes: int,
    process_id: int,
    cpu_devices: int | None = None,
    **kwargs: Any,
) -> None:
    """``jax.distributed.initialize`` with what CPU training needs.

    Selects the gloo collectives for CPU devices (the default CPU client has no
    cross-process collectives) and, if given, ``cpu_devices`` CPU devices per
    process.  Call it right after ``import jaxboost``, before any JAX
    operation, in every process.

    Args:
      coordinator_address: ``"host:port"`` of process 0 (all processes pass the
        same one), e.g. ``"127.0.0.1:12345"`` on one machine.
      num_processes: processes taking part.
      process_id: this process's number, ``0 .. num_processes - 1``.
      cpu_devices: CPU devices per process (default: what ``import jaxboost``
        chose, one per core).
      kwargs: passed on to ``jax.distributed.initialize``.
    """
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if cpu_devices is not None:
        jax.config.update("jax_num_cpu_devices", int(cpu_devices))
    jax.distributed.initialize(
        coordinator_address, num_processes=num_processes, process_id=process_id, **kwargs
    )


def gather_same_shape(array: np.ndarray) -> np.ndarray:
    """``(processes, *array.shape)``: every process's ``array`` (the same shape
    and dtype on all), bit for bit, in process order.

    Sent as bytes: ``process_allgather`` puts its input on the devices, where
    with JAX's 64-bit mode off 64-bit values are cut to 32 bits (``[2**40,
    3]`` arrives as ``[0, 3]``, a float64 as the nearest float32).
    """
    array = np.asarray(array)
    if jax.process_count() == 1:
        return array[None]
    flat = np.ascontiguousarray(array).reshape(-1)
    if flat.nbytes == 0:  # (a device array of no bytes: nothing to send)
        return np.empty((jax.process_count(), *array.shape), array.dtype)
    stacked = multihost_utils.process_allgather(flat.view(np.uint8))  # (processes, nbytes)
    return np.ascontiguousarray(stacked).view(array.dtype).reshape(-1, *array.shape)


def gather(array: np.ndarray) -> np.ndarray:
    """Every process's ``array`` concatenated on the first axis, in process
    order, bit for bit (64-bit values included: see `gather_same_shape`).

    The arrays may differ in length along the first axis only.
    """
    array = np.asarray(array)
    if jax.process_count() == 1:
        return array
    lengths = gather_same_shape(np.int64(array.shape[0]))
    longest = int(np.max(lengths))
    padded = np.zeros((longest, *array.shape[1:]), array.dtype)
    padded[: array.shape[0]] = array
    stacked = gather_same_shape(padded)  # (processes, longest, ...)
    return np.concatenate([part[:n] for part, n in zip(stacked, lengths)], axis=0)


def on_every_process(check: Callable[[], T]) -> T:
    """``check()`` (host-side input validation, no collectives inside), made
    to fail on every process when it fails on any.

    With one process this is ``check()``.  With several, the processes
    exchange their outcome before going on: the process whose ``check``
    raised a ``ValueError`` or ``TypeError`` re-raises it, and every other
    process raises a ``ValueError`` quoting it, instead of waiting in the next
    collective until ``jax.distributed`` times out.
    """
    if jax.process_count() == 1:
        return check()
    try:
        result, error = check(), None
    except (ValueError, TypeError) as caught:
        result, error = None, caught
    message = b"" if error is None else f"{type(error).__name__}: {error}".encode()
    lengths = gather_same_shape(np.int64(len(message)))
    if not np.any(lengths):
        return result
    texts = gather(np.frombuffer(message.ljust(1), np.uint8))  # 1 byte at least each
    if error is not None:
        raise error
    failures, start = [], 0
    for process, length in enumerate(lengths):
        if length:
            text = texts[start : start + length].tobytes().decode(errors="replace")
            failures.append(f"process {process}: {text}")
        start += max(int(length), 1)
    raise ValueError("fit: the input of another process failed its checks; " + "; ".join(failures))


def lost_process_error(error: BaseException) -> RuntimeError | None:
    """The error to raise for ``error`` when it is a collective exchange that
    failed because another process is gone (ended, killed, or its connection
    broke), else None; with one process always None."""
    if jax.process_count() == 1:
        return None
    said = str(error)
    if not any(word in said.lower() for word in _LOST_PEER_WORDS):
        return None
    this, count = jax.process_index(), jax.process_count()
    # the collective names the peer's address only, not its process number
    lost = f"process {1 - this}" if count == 2 else f"one of the other {count - 1} processes"
    first_line = said.strip().splitlines()[0] if said.strip() else type(error).__name__
    return RuntimeError(
        f"fit: process {this} lost {lost} in a collective exchange ({first_line}); the fit "
        "cannot continue without every process. Restart all processes; this one cannot "
        "leave jax.distributed cleanly: JAX's coordination service aborts it once the lost "
        "process misses its heartbeats (jaxboost.distributed.initialize(..., "
        "heartbeat_timeout_seconds=...), 100 s by default), or end it now with os._exit"
    )


def stops_when_a_process_leaves(function: F) -> F:
    """``function``, raising `lost_process_error`'s RuntimeError
    instead of a failed collective's own error when another process is gone."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except Exception as error:
            lost = lost_process_error(error)
            if lost is None:
                raise
            raise lost from None  # (the JAX trace would bury the reason)

    return wrapper


def on_any_process(flag: bool) -> bool:
    """Whether ``flag`` is true on any process (``flag`` itself with one)."""
    if jax.process_count() == 1:
        return bool(flag)
    return bool(np.any(gather(np.array([bool(flag)]))))


def first_process_value(value: Any) -> Any:
    """Process 0's ``value`` (a pytree of numbers or numpy arrays, each the
    same shape and dtype on every process), on every process, as numpy
    arrays of the leaves' own dtypes (64-bit ones bit for bit)."""
    if jax.process_count() == 1:
        return value
    leaves, structure = jax.tree.flatten(value)
    leaves = [np.asarray(leaf) for leaf in leaves]
    # one exchange for all leaves, as bytes (see gather_same_shape)
    sent = np.concatenate(
        [np.empty(0, np.uint8)]
        + [np.ascontiguousarray(leaf).reshape(-1).view(np.uint8) for leaf in leaves]
    )
    first = gather_same_shape(sent)[0]
    received, start = [], 0
    for leaf in leaves:
        part = first[start : start + leaf.nbytes]
        received.append(part.view(leaf.dtype).reshape(leaf.shape))
        start += leaf.nbytes
    return jax.tree.unflatten(structure, received)


class RowLayout(NamedTuple):
    """Where this process's rows sit among all processes' rows."""

    first_row: int  # global number of this process's first row
    n_padded: int  # rows this process holds after padding (the same on all)


def row_layout(n_local_rows: int, mesh: Mesh) -> RowLayout:
    """Global row numbers and the common padded size of every process's rows.

    Rows are numbered in process order; each process pads its rows to the
    bucket of the largest process's count, a multiple of its device count.
    """
    counts = gather(np.array([n_local_rows], np.int64))
    process = jax.process_index()
    local_devices = mesh.local_mesh.size
    return RowLayout(
        first_row=int(np.sum(counts[:process])),
        n_padded=bucket_size(int(np.max(counts)), local_devices),
    )


def global_rows(mesh: Mesh, local: np.ndarray, n_padded: int | None = None) -> jax.Array:
    """An array sharded on rows over ``mesh`` from this process's ``local`` rows.

    Args:
      local: ``(n_rows, ...)`` this process's rows.
      n_padded: rows per process after padding with copies of row 0 (the
        same on every process; default ``n_rows``).  With one process each
        device's shard is cut from ``local`` directly, so only a shard that
        reaches into the padding is copied, never the whole array; on CPU
        devices also a shard that does not start on a 64-byte boundary, into
        memory that does (`jaxboost.runtime.padding.padded_slice`): the device
        then takes it in place, where PJRT's own copy is several times slower.
    """
    n_padded = local.shape[0] if n_padded is None else n_padded
    sharding = NamedSharding(mesh, P(ROWS))
    aligned = in_place_on(mesh.devices.flat[0].platform)
    if jax.process_count() > 1:
        local = pad_rows(local, n_padded, aligned)
        return jax.make_array_from_process_local_data(sharding, local)

    def shard(index: tuple[slice, ...]) -> np.ndarray:
        start, stop, _ = index[0].indices(n_padded)
        return padded_slice(local, start, stop, aligned)

    return jax.make_array_from_callback((n_padded, *local.shape[1:]), sharding, shard)


def replicated(mesh: Mesh, value: np.ndarray) -> jax.Array:
    """``value`` (the same on every process) on every device of ``mesh``."""
    return jax.device_put(value, NamedSharding(mesh, P()))


def fetch(tree: Any) -> Any:
    """Host numpy copies of replicated (or local) arrays in a pytree."""

    def addressable(leaf):
        if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
            return leaf.addressable_shards[0].data
        return leaf

    return jax.device_get(jax.tree.map(addressable, tree))
