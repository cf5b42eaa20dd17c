"""The persistent compilation cache, as an option.

A fit compiles its programs once per process (a few seconds); with the cache
on, later processes load them from disk instead.  Turn it on with
:func:`enable_compilation_cache` or the environment variable
``JAXBOOST_COMPILATION_CACHE=<directory>`` (read at import).
"""

from __future__ import annotations

import os
from pathlib import Path

import jax

_ENV_VAR = "JAXBOOST_COMPILATION_CACHE"
DEFAULT_DIRECTORY = Path.home() / ".cache" / "jaxboost" / "xla"


def enable_compilation_cache(directory: str | os.PathLike | None = None) -> Path:
    """Keep compiled XLA programs in ``directory`` (default
    ``~/.cache/jaxboost/xla``) so that later processes reuse them.

    Returns the directory.  Programs that compile in under a tenth of a second
    are not worth a file and are not stored.
    """
    path = Path(directory) if directory is not None else DEFAULT_DIRECTORY
    path.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.1)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return path


def enable_from_environment() -> Path | None:
    """Turn the cache on when ``JAXBOOST_COMPILATION_CACHE`` names a directory."""
    directory = os.environ.get(_ENV_VAR, "").strip()
    return enable_compilation_cache(directory) if directory else None
