"""The persistent compilation cache, on by default.

A fit compiles its programs once per process (a second or more); with the
cache, later processes load them from disk instead.  Importing jaxboost
turns JAX's persistent cache on in ``xla/`` of jaxboost's cache directory
(`cache_root`: ``$JAXBOOST_CACHE_DIR``, else ``~/.cache/jaxboost``,
where the native kernels are built too), bounded to `DEFAULT_MAX_BYTES` (least
recently used entries are evicted) and locked for every read and write, so
that several processes can share it.  The cache is JAX's, so the process's
other JAX programs are kept there too.

``JAXBOOST_COMPILATION_CACHE=off`` turns it off (``=<directory>`` puts it
there).  A cache the user set up for JAX (``jax_compilation_cache_dir``)
is left as it is.  `enable_compilation_cache` sets it from code, before
the first program compiles.

Both variables take ``~`` (expanded) and relative paths (from the working
directory when jaxboost first reads them, then fixed for the process).  A
directory that cannot be made or written to leaves the cache off, with one
warning naming the variable to change.  JAX never replaces an entry it
cannot read (it warns and compiles, in every process), so jaxboost removes
such an entry when JAX fails to read it: it is compiled and stored anew.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

_ROOT_VAR = "JAXBOOST_CACHE_DIR"
_ENV_VAR = "JAXBOOST_COMPILATION_CACHE"
_OFF = ("off", "none", "0", "false", "no")
DEFAULT_MAX_BYTES = 2**30
# programs that compile faster than this are not worth a file
_MIN_COMPILE_SECONDS = 0.02


@functools.cache
def _absolute(configured: str) -> Path:
    """``configured`` with ``~`` expanded, made absolute from the working
    directory of the first call (cached: a later ``chdir`` does not move it)."""
    return Path(configured).expanduser().absolute()


def cache_root() -> Path:
    """jaxboost's cache directory: ``$JAXBOOST_CACHE_DIR``, else ``~/.cache/jaxboost``."""
    configured = os.environ.get(_ROOT_VAR, "").strip()
    return _absolute(configured) if configured else Path.home() / ".cache" / "jaxboost"


def default_directory() -> Path:
    """Where compiled programs are kept by default: ``xla/`` in `cache_root`."""
    return cache_root() / "xla"


def enable_compilation_cache(
    directory: str | os.PathLike | None = None, max_bytes: int = DEFAULT_MAX_BYTES
) -> Path:
    """Keep compiled XLA programs in ``directory`` (default:
    `default_directory`), at most ``max_bytes`` of them, so that later
    processes reuse them.  Returns the directory.

    JAX reads these settings when the first program compiles: call it before.
    """
    path = _absolute(os.fspath(directory)) if directory is not None else default_directory()
    path.mkdir(parents=True, exist_ok=True)
    _check_writable(path)
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", _MIN_COMPILE_SECONDS)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    # a size limit makes JAX lock the directory for every read and write
    jax.config.update("jax_compilation_cache_max_size", int(max_bytes))
    jax.config.update("jax_enable_compilation_cache", True)
    _remove_entries_that_fail_to_read()
    _scan_for_eviction_only_when_full()
    _write_from_every_process()
    return path


def _check_writable(path: Path) -> None:
    """Raises ``OSError`` unless a file can be made in ``path`` (JAX's cache
    writes an access time and a lock file even to read)."""
    with tempfile.TemporaryFile(dir=path):
        pass


# -- entries JAX cannot read -----------------------------------------------------
# JAX's file cache (jax/_src/lru_cache.py) keeps entry KEY in "KEY-cache",
# with its last use in "KEY-atime", and never overwrites an existing file.
_ENTRY_SUFFIXES = ("-cache", "-atime")


def _remove_entry(cache_key: str) -> Path | None:
    """Delete entry ``cache_key`` from the cache directory; its file, or None
    when it was not there or could not be deleted."""
    directory = jax.config.jax_compilation_cache_dir
    entry = Path(directory) / f"{cache_key}{_ENTRY_SUFFIXES[0]}" if directory else None
    if entry is None or not entry.is_file():
        return None
    try:
        for suffix in _ENTRY_SUFFIXES:
            entry.with_name(cache_key + suffix).unlink(missing_ok=True)
    except OSError:
        return None
    return entry


def _removing_on_failure(read: Callable) -> Callable:
    """``read`` (JAX's ``get_executable_and_time``), removing an entry it fails on."""

    @functools.wraps(read)
    def read_or_remove(cache_key: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return read(cache_key, *args, **kwargs)
        except Exception as error:  # JAX turns any failure to read into a warning too
            entry = (
                None if jax.config.jax_raise_persistent_cache_errors else _remove_entry(cache_key)
            )
            if entry is None:
                raise
            warnings.warn(
                f"jaxboost: removed the compiled program {entry} from the compilation "
                f"cache: it could not be read ({type(error).__name__}: {error}). It is "
                "compiled again and stored anew.",
                RuntimeWarning,
                stacklevel=2,
            )
            return None, None  # what JAX's read gives for a missing entry: compile it

    read_or_remove.removes_entries = True
    return read_or_remove


def _wrap_once(owner: Any, name: str, wrap: Callable, marker: str) -> None:
    """Replace ``owner.name`` (JAX's private function or method: left alone
    where it is missing) by ``wrap(it)``, unless already wrapped (``marker``
    set on the wrapper)."""
    original = getattr(owner, name, None)
    if callable(original) and not getattr(original, marker, False):
        setattr(owner, name, wrap(original))


def _remove_entries_that_fail_to_read() -> None:
    """Wrap JAX's cache read once."""
    try:
        from jax._src import compilation_cache as jax_cache
    except ImportError:  # a JAX without it: its reads stay as they are
        return
    _wrap_once(jax_cache, "get_executable_and_time", _removing_on_failure, "removes_entries")


# -- eviction ---------------------------------------------------------------------
# JAX's bounded cache scans the whole directory before every write (the size
# and last use of every entry: a stat and a file read each), about 0.1 ms an
# entry: 0.18 s per compiled program at 1,700 entries (49 MB), seconds near
# the 1 GiB bound, paid by every fit of a new loss.


def _entries_bytes(directory: Path) -> int:
    """The bytes of the cache's entries in ``directory`` (one stat each)."""
    total = 0
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.name.endswith(_ENTRY_SUFFIXES[0]):
                with contextlib.suppress(OSError):  # removed meanwhile
                    total += entry.stat().st_size
    return total


def _evicting_only_when_full(evict: Callable) -> Callable:
    """``evict`` (JAX's ``LRUCache._evict_if_needed``) run only when this
    process's count of the directory's bytes (its size when the process
    first wrote to it, plus what it wrote since) passes the bound; other
    processes' writes are counted when they next start, so the bound holds
    to within what the processes running at once write."""
    counted: dict[str, int] = {}

    @functools.wraps(evict)
    def evict_when_full(cache: Any, *, additional_size: int = 0) -> None:
        directory = str(cache.path)
        if directory not in counted:
            counted[directory] = _entries_bytes(Path(directory))
        counted[directory] += additional_size
        if counted[directory] > cache.max_size:
            evict(cache, additional_size=additional_size)
            counted[directory] = _entries_bytes(Path(directory)) + additional_size

    evict_when_full.only_when_full = True
    return evict_when_full


def _scan_for_eviction_only_when_full() -> None:
    """Wrap JAX's eviction once."""
    try:
        from jax._src.lru_cache import LRUCache
    except ImportError:  # a JAX without it: its writes stay as they are
        return
    _wrap_once(LRUCache, "_evict_if_needed", _evicting_only_when_full, "only_when_full")


# -- writes from every process ----------------------------------------------------
# JAX stores programs from process 0 only (against write contention on shared
# filesystems, jax/_src/compiler.py's _cache_write), yet on CPU each process's
# programs have keys of their own (the build options hold the process's
# number): the other processes compiled every program in every fit (a Dask
# fit's process 1: 21 programs, 3 s, its peer waiting in the first
# collective; benchmarks/README.md).  This cache is one local directory,
# locked for every write (`enable_compilation_cache`): each process stores its
# own programs.


def _writing_from_every_process(write: Callable) -> Callable:
    """``write`` (JAX's ``_cache_write``), storing the programs of processes
    other than 0 too."""

    @functools.wraps(write)
    def write_from_any_process(cache_key, compile_time_secs, module_name, backend, executable,
                               host_callbacks):  # fmt: skip
        from jax._src import compilation_cache as jax_cache
        from jax._src import distributed

        minimum = jax.config.jax_persistent_cache_min_compile_time_secs
        if (
            not distributed.global_state.process_id  # (0 or None: JAX writes it)
            or host_callbacks
            or compile_time_secs < minimum
        ):
            return write(cache_key, compile_time_secs, module_name, backend, executable,
                         host_callbacks)  # fmt: skip
        try:
            jax_cache.put_executable_and_time(
                cache_key, module_name, executable, backend, int(compile_time_secs)
            )
        except Exception as error:  # JAX too only warns when a write fails
            if jax.config.jax_raise_persistent_cache_errors:
                raise
            warnings.warn(
                f"jaxboost: could not store the compiled program {module_name!r}: "
                f"{type(error).__name__}: {error}",
                RuntimeWarning,
                stacklevel=2,
            )
        return None

    write_from_any_process.every_process = True
    return write_from_any_process


def _write_from_every_process() -> None:
    """Wrap JAX's cache write once."""
    try:
        from jax._src import compiler
    except ImportError:  # a JAX without it: its writes stay as they are
        return
    _wrap_once(compiler, "_cache_write", _writing_from_every_process, "every_process")


def enable_by_default() -> Path | None:
    """At import: the cache in ``JAXBOOST_COMPILATION_CACHE`` or the default
    directory, unless that says ``off``, the user set up JAX's cache, or
    ``filelock`` (which JAX needs to share a bounded cache between processes)
    is missing.  A directory that cannot be made or written to warns, naming
    the variable to change, and leaves the cache off.  Returns the directory."""
    setting = os.environ.get(_ENV_VAR, "").strip()
    if setting.lower() in _OFF and setting:
        return None
    if jax.config.jax_compilation_cache_dir:  # the user's own
        return None
    if importlib.util.find_spec("filelock") is None:
        return None
    try:
        return enable_compilation_cache(setting or None)
    except OSError as error:
        _warn_unusable(_absolute(setting) if setting else default_directory(), error, setting)
        return None


def _warn_unusable(directory: Path, error: OSError, setting: str) -> None:
    """Warn that the cache is off because ``directory`` is unusable, naming the
    variable that chose it (``setting``: ``JAXBOOST_COMPILATION_CACHE``'s value)."""
    if setting:
        chosen, fix = f"{_ENV_VAR}={setting}", f"Set {_ENV_VAR} to a directory you can write to"
    else:
        chosen = f"{_ROOT_VAR}'s xla/" if os.environ.get(_ROOT_VAR, "").strip() else "the default"
        fix = f"Set {_ROOT_VAR} to a directory you can write to (the cache goes in its xla/)"
    warnings.warn(
        f"jaxboost: cannot keep compiled programs in {directory} ({chosen}): "
        f"{type(error).__name__}: {error.strerror or error}. Every process compiles them "
        f"again. {fix}, or set {_ENV_VAR}=off to compile without a cache and without "
        "this warning.",
        RuntimeWarning,
        stacklevel=3,
    )
