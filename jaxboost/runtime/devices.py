"""Devices and the 1-D mesh of row shards every jitted step runs on.

XLA runs a scatter-add as a serial loop on one core, so a single CPU device
uses one core.  jaxboost therefore exposes the CPU cores as devices at import
(when JAX's backends are not initialised yet and the user has not chosen) and
shards rows over them; the same program runs on many GPUs or hosts.

Control it with the environment variable ``JAXBOOST_CPU_DEVICES``: an integer
number of CPU devices, or ``0`` to leave JAX's configuration alone.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh

ROWS = "rows"
_ENV_VAR = "JAXBOOST_CPU_DEVICES"


def _available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _user_chose_cpu_devices() -> bool:
    if "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", ""):
        return True
    return jax.config.jax_num_cpu_devices not in (-1, None)


def configure_cpu_devices() -> int | None:
    """Expose the CPU cores as JAX devices, if it is not too late.

    Returns the number of CPU devices requested, or None when jaxboost left the
    configuration alone (the user chose, or ``JAXBOOST_CPU_DEVICES=0``).
    Warns once when JAX's backends are already initialised.
    """
    requested = os.environ.get(_ENV_VAR, "").strip()
    if requested == "0" or _user_chose_cpu_devices():
        return None
    n_devices = int(requested) if requested else _available_cores()
    if n_devices <= 1:
        return None
    try:
        jax.config.update("jax_num_cpu_devices", n_devices)
    except RuntimeError:
        warnings.warn(
            "jaxboost could not expose the CPU cores as devices because JAX was "
            "already initialised, so CPU training uses one core. Import jaxboost "
            "before running any JAX operation, or call "
            f'jax.config.update("jax_num_cpu_devices", {n_devices}) right after '
            f"`import jax` (or set {_ENV_VAR}=0 to silence this).",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    return n_devices


# below this many rows per device, sharding costs more than it saves (each
# level's split search and collectives are a fixed cost per device)
MIN_ROWS_PER_DEVICE = 16_384


def default_training_devices(n_rows: int) -> list[jax.Device]:
    """The devices a fit uses when none are given: all of them, or, in a single
    process, only as many as give each at least ``MIN_ROWS_PER_DEVICE`` rows."""
    devices = jax.devices()
    if jax.process_count() > 1:
        return devices
    return devices[: max(1, min(len(devices), n_rows // MIN_ROWS_PER_DEVICE))]


def check_devices(devices: Any) -> list[jax.Device] | None:
    """``devices`` as a list of distinct ``jax.Device`` objects of one
    platform (one ``jax.Device`` alone is a list of one; None stays None, the
    default devices), or a ValueError or TypeError saying what to pass."""
    if devices is None:
        return None
    example = "e.g. jax.devices()[:2], or jax.devices('cpu') for the CPU devices"
    if isinstance(devices, jax.Device):
        return [devices]
    if isinstance(devices, (str, bytes)) or not isinstance(devices, Iterable):
        raise TypeError(
            f"devices: expected a list of jax.Device objects ({example}), got {devices!r}"
        )
    devices = list(devices)
    if not devices:
        raise ValueError(
            f"devices: expected at least one jax.Device ({example}), got an empty list"
        )
    for index, device in enumerate(devices):
        if not isinstance(device, jax.Device):
            raise TypeError(
                f"devices: entry {index} is {device!r}, not a jax.Device; pass the device "
                f"objects ({example})"
            )
    if len(set(devices)) < len(devices):
        repeated = next(device for device in devices if devices.count(device) > 1)
        raise ValueError(
            f"devices: {repeated} is listed more than once; each device holds one shard of "
            f"the rows, so pass distinct devices ({example})"
        )
    platforms = sorted({device.platform for device in devices})
    if len(platforms) > 1:
        raise ValueError(
            f"devices: expected devices of one platform, got {', '.join(platforms)}; pass "
            "those of one, e.g. jax.devices('gpu')"
        )
    return devices


def collective_axis(mesh: Mesh) -> str | None:
    """The axis the programs on ``mesh`` sum over: ``ROWS``, or None on a mesh
    of one device, where every ``psum`` would still copy its operand (XLA
    keeps an all-reduce over one device: 0.13 ms per 32-node level's
    histograms)."""
    return ROWS if mesh.size > 1 else None


def make_mesh(devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A 1-D mesh named ``"rows"`` over ``devices`` (default: all devices of the
    default backend)."""
    if devices is None:
        devices = jax.devices()
    devices = list(devices)
    if not devices:
        raise ValueError("devices: expected at least one jax.Device, got an empty list")
    return Mesh(np.array(devices), (ROWS,))


def memory_per_device(devices: Sequence[jax.Device]) -> int | None:
    """Bytes each of ``devices`` can hold: the smallest allocator limit a
    device reports, or for CPU devices the machine's physical memory shared
    by this process's CPU devices; None when unknown."""
    limits = []
    for device in devices:
        if device.platform == "cpu":
            try:
                physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
            except (AttributeError, OSError, ValueError):
                return None
            limit = physical // len(jax.local_devices(backend="cpu"))
        else:
            limit = (device.memory_stats() or {}).get("bytes_limit")
        if limit is None:
            return None
        limits.append(int(limit))
    return min(limits, default=None)


def device_keys(devices: Sequence[jax.Device] | None) -> list[tuple[str, int]] | None:
    """``devices`` as ``(platform, id)`` pairs, which pickle (``jax.Device`` objects
    do not); one ``jax.Device`` is a list of one."""
    if isinstance(devices, jax.Device):
        devices = [devices]
    return None if devices is None else [(device.platform, device.id) for device in devices]


def devices_from_keys(keys: Sequence[tuple[str, int]] | None) -> list[jax.Device] | None:
    """The devices of this process named by `device_keys`.  Where it lacks
    one (a model pickled on a machine with more devices) it warns and returns
    None, the default devices: they change the speed, not the model."""
    if keys is None:
        return None
    by_key = {}
    for platform in {key[0] for key in keys}:  # jax.devices(): the default platform's only
        try:
            by_key.update({(platform, device.id): device for device in jax.devices(platform)})
        except RuntimeError:  # no backend of that platform here
            pass
    missing = [tuple(key) for key in keys if tuple(key) not in by_key]
    if missing:
        warnings.warn(
            f"devices: this process has no device {missing[0][0]}:{missing[0][1]}; "
            "the model uses the default devices",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    return [by_key[tuple(key)] for key in keys]
