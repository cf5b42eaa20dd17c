"""The native CPU histogram kernel: C++ through XLA's FFI, with subtraction.

``jaxboost/native/histogram.cc`` sums a level's histograms in float64 and,
below the root, sums only the smaller child of every parent and takes its
sibling as parent minus child, so a level passes over at most half of the
rows (XLA's scatter-add cannot skip rows: it costs per update, kept or not).
The plain reference it must equal is :func:`jaxboost.histogram.build_histograms`.

The source is compiled on first use with the C++ compiler (``$CXX``, else
``g++`` or ``c++``) against the FFI headers that ship with jaxlib, into
``$JAXBOOST_CACHE_DIR`` (default ``~/.cache/jaxboost``), once per source and
jaxlib version.  ``JAXBOOST_NATIVE=0`` turns it off; without a compiler
jaxboost warns once and uses the XLA kernels.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import warnings
from importlib.metadata import version
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

SOURCE = Path(__file__).with_name("native") / "histogram.cc"
_ENV_SWITCH = "JAXBOOST_NATIVE"
_ENV_CACHE = "JAXBOOST_CACHE_DIR"
_FLAGS = ("-O3", "-std=c++17", "-shared", "-fPIC", "-w")
_TARGETS = {
    "jaxboost_histogram_root": "JaxboostHistogramRoot",
    "jaxboost_histogram_children": "JaxboostHistogramChildren",
}


class NativeKernelUnavailable(RuntimeError):
    """The native kernel is switched off, or could not be built or loaded."""


def _cache_directory() -> Path:
    configured = os.environ.get(_ENV_CACHE, "").strip()
    return Path(configured) if configured else Path.home() / ".cache" / "jaxboost"


def _compiler() -> str:
    for candidate in (os.environ.get("CXX", "").strip(), "g++", "c++", "clang++"):
        if candidate and shutil.which(candidate):
            return candidate
    raise NativeKernelUnavailable("no C++ compiler found (set CXX, or install g++)")


def build_library() -> Path:
    """Compile the kernel unless a build of this source for this jaxlib is
    cached; returns the shared library's path."""
    include = jax.ffi.include_dir()
    key = hashlib.sha256()
    key.update(SOURCE.read_bytes())
    key.update(" ".join((jax.__version__, version("jaxlib"), *_FLAGS)).encode())
    library = _cache_directory() / f"histogram-{key.hexdigest()[:16]}.so"
    if library.exists():
        return library
    compiler = _compiler()
    library.parent.mkdir(parents=True, exist_ok=True)
    # build beside the target and rename: concurrent builds (test workers)
    # never see a half-written library
    handle, partial = tempfile.mkstemp(suffix=".so", dir=library.parent)
    os.close(handle)
    command = [compiler, *_FLAGS, "-I", include, str(SOURCE), "-o", partial]
    built = subprocess.run(command, capture_output=True, text=True, check=False)
    if built.returncode != 0:
        os.unlink(partial)
        raise NativeKernelUnavailable(
            f"{compiler} failed to build {SOURCE.name}:\n{built.stderr[-2000:]}"
        )
    os.replace(partial, library)
    return library


@functools.cache
def _load() -> None:
    """Build, load and register the FFI targets (once per process)."""
    if os.environ.get(_ENV_SWITCH, "").strip() in ("0", "false", "off"):
        raise NativeKernelUnavailable(f"switched off by {_ENV_SWITCH}")
    library = ctypes.cdll.LoadLibrary(str(build_library()))
    for target, symbol in _TARGETS.items():
        capsule = jax.ffi.pycapsule(getattr(library, symbol))
        jax.ffi.register_ffi_target(target, capsule, platform="cpu")


def native_available(warn: bool = True) -> bool:
    """True when the native kernel is built and registered (building it if
    needed).  A failure other than the switch warns once when ``warn``."""
    try:
        _load()
    except NativeKernelUnavailable as error:
        if warn and "switched off" not in str(error):
            _warn_once(str(error))
        return False
    except OSError as error:  # the library did not load
        if warn:
            _warn_once(f"could not load the native histogram kernel: {error}")
        return False
    return True


@functools.cache
def _warn_once(reason: str) -> None:
    warnings.warn(
        f"jaxboost: {reason}\nUsing the XLA histogram kernel instead (about half "
        f"the speed on CPU); set {_ENV_SWITCH}=0 to skip the native one quietly.",
        RuntimeWarning,
        stacklevel=3,
    )


def native_level_histograms(
    bins: jax.Array,
    node_of_row: jax.Array,
    row_stats: jax.Array,
    n_nodes: int,
    n_bins: int,
    parent: jax.Array | None,
) -> tuple[jax.Array, jax.Array]:
    """One level's histograms, from its parents' when ``parent`` is given.

    Args:
      bins: ``(n_features, n_rows)`` uint8 bin of every value.
      node_of_row: ``(n_rows,)`` int32 node within the level.
      row_stats: ``(n_rows, n_stats)`` float32 statistics to sum.
      n_nodes: nodes in the level (``2 * parents`` below the root).
      n_bins: bins per feature, the missing bin included.
      parent: ``(n_features, n_nodes // 2, n_bins, n_stats)`` float64, the
        previous level's second result, or None at the root.
    Returns:
      ``(n_features, n_nodes, n_bins, n_stats)`` float32 sums (what
      :func:`jaxboost.histogram.build_histograms` returns) and the same in
      float64, for the next level.
    """
    _load()
    shape = (bins.shape[0], n_nodes, n_bins, row_stats.shape[1])
    result = jax.ShapeDtypeStruct(shape, jnp.float64)
    # vmap (one tree per output, say) runs the kernel once per member
    if parent is None:
        call = jax.ffi.ffi_call("jaxboost_histogram_root", result, vmap_method="sequential")
        exact = call(
            bins, node_of_row, row_stats, n_nodes=np.int64(n_nodes), n_bins=np.int64(n_bins)
        )
    else:
        call = jax.ffi.ffi_call("jaxboost_histogram_children", result, vmap_method="sequential")
        exact = call(bins, node_of_row, row_stats, parent, n_bins=np.int64(n_bins))
    return exact.astype(jnp.float32), exact
