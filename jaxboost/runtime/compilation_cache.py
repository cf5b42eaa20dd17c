"""The persistent compilation cache, on by default.

A fit compiles its programs once per process (a second or more); with the
cache, later processes load them from disk instead.  Importing jaxboost
turns JAX's persistent cache on in ``xla/`` of jaxboost's cache directory
(:func:`cache_root`: ``$JAXBOOST_CACHE_DIR``, else ``~/.cache/jaxboost``,
where the native kernels are built too), bounded to :data:`DEFAULT_MAX_BYTES` (least
recently used entries are evicted) and locked for every read and write, so
that several processes can share it.  The cache is JAX's, so the process's
other JAX programs are kept there too.

``JAXBOOST_COMPILATION_CACHE=off`` turns it off (``=<directory>`` puts it
there).  A cache the user set up for JAX (``jax_compilation_cache_dir``)
is left as it is.  :func:`enable_compilation_cache` sets it from code, before
the first program compiles.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import jax

_ROOT_VAR = "JAXBOOST_CACHE_DIR"
_ENV_VAR = "JAXBOOST_COMPILATION_CACHE"
_OFF = ("off", "none", "0", "false", "no")
DEFAULT_MAX_BYTES = 2**30
# programs that compile faster than this are not worth a file
_MIN_COMPILE_SECONDS = 0.02


def cache_root() -> Path:
    """jaxboost's cache directory: ``$JAXBOOST_CACHE_DIR``, else ``~/.cache/jaxboost``."""
    configured = os.environ.get(_ROOT_VAR, "").strip()
    return Path(configured) if configured else Path.home() / ".cache" / "jaxboost"


def default_directory() -> Path:
    """Where compiled programs are kept by default: ``xla/`` in :func:`cache_root`."""
    return cache_root() / "xla"


def enable_compilation_cache(
    directory: str | os.PathLike | None = None, max_bytes: int = DEFAULT_MAX_BYTES
) -> Path:
    """Keep compiled XLA programs in ``directory`` (default:
    :func:`default_directory`), at most ``max_bytes`` of them, so that later
    processes reuse them.  Returns the directory.

    JAX reads these settings when the first program compiles: call it before.
    """
    path = Path(directory) if directory is not None else default_directory()
    path.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", _MIN_COMPILE_SECONDS)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    # a size limit makes JAX lock the directory for every read and write
    jax.config.update("jax_compilation_cache_max_size", int(max_bytes))
    jax.config.update("jax_enable_compilation_cache", True)
    return path


def enable_by_default() -> Path | None:
    """At import: the cache in ``JAXBOOST_COMPILATION_CACHE`` or the default
    directory, unless that says ``off``, the user set up JAX's cache, the
    directory cannot be made, or ``filelock`` (which JAX needs to share a
    bounded cache between processes) is missing.  Returns the directory."""
    setting = os.environ.get(_ENV_VAR, "").strip()
    if setting.lower() in _OFF and setting:
        return None
    if jax.config.jax_compilation_cache_dir:  # the user's own
        return None
    if importlib.util.find_spec("filelock") is None:
        return None
    try:
        return enable_compilation_cache(setting or None)
    except OSError:  # a read-only home: compile every time, as without a cache
        return None
