"""The native CPU kernels (C++ through XLA's FFI): building and loading them.

``jaxboost/native/*.cc`` (histograms with subtraction, forest prediction,
binning, the line search's leaf sums, routing rows, the categorical split
search's sort, TreeSHAP values) are compiled on first use with the C++ compiler (``$CXX``, else
``g++``, ``c++`` or ``clang++``) against the FFI headers that ship with
jaxlib, into one shared library in ``$JAXBOOST_CACHE_DIR`` (default ``~/.cache/jaxboost``),
once per source and jaxlib version, and registered as XLA custom-call
targets for the CPU.  Beside each library a small file records its size and
SHA-256, written after a successful build; a library that does not match it
(truncated, damaged, or from a jaxboost that wrote none) is built again, never
loaded: loading a truncated shared library kills the process (SIGBUS).  ``JAXBOOST_NATIVE=0`` turns them off; without a
working compiler jaxboost warns once and uses its XLA kernels, which give the
same models, slower.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import warnings
from importlib.metadata import version
from logging import getLogger
from pathlib import Path

import jax

from ..runtime.compilation_cache import cache_root

SOURCES = tuple(
    Path(__file__).with_name("native") / name
    for name in (
        "histogram.cc",
        "predict.cc",
        "binning.cc",
        "leaf_sums.cc",
        "route.cc",
        "category_order.cc",
        "shap.cc",
    )
)
# included by the sources: part of what a cached build was built from
HEADERS = tuple(
    Path(__file__).with_name("native") / name
    for name in ("bin_tiles.h", "hist_layout.h", "leaf_lanes.h", "route_rows.h")
)
_ENV_SWITCH = "JAXBOOST_NATIVE"
# a first build says so in one line: logged, as there is nothing to act on
_log = getLogger(__name__)
_FLAGS = ("-O3", "-std=c++17", "-shared", "-fPIC", "-w")
_TARGETS = {
    "jaxboost_histogram_root": "JaxboostHistogramRoot",
    "jaxboost_histogram_children": "JaxboostHistogramChildren",
    "jaxboost_histogram_root_quantised": "JaxboostHistogramRootQuantised",
    "jaxboost_histogram_children_quantised": "JaxboostHistogramChildrenQuantised",
    "jaxboost_predict_forest": "JaxboostPredictForest",
    "jaxboost_apply_bins": "JaxboostApplyBins",
    "jaxboost_leaf_sums": "JaxboostLeafSums",
    "jaxboost_slope_sums": "JaxboostSlopeSums",
    "jaxboost_rows_of_leaves": "JaxboostRowsOfLeaves",
    "jaxboost_first_true_rows": "JaxboostFirstTrueRows",
    "jaxboost_route_rows": "JaxboostRouteRows",
    "jaxboost_route_leaf_sums": "JaxboostRouteLeafSums",
    "jaxboost_category_order": "JaxboostCategoryOrder",
    "jaxboost_category_sums": "JaxboostCategorySums",
    "jaxboost_shap_contributions": "JaxboostShapContributions",
    "jaxboost_shap_interactions": "JaxboostShapInteractions",
}


class NativeKernelUnavailable(RuntimeError):
    """The native kernel is switched off, or could not be built or loaded."""


def _cache_directory() -> Path:
    return cache_root()


def _compiler() -> str:
    for candidate in (os.environ.get("CXX", "").strip(), "g++", "c++", "clang++"):
        if candidate and shutil.which(candidate):
            return candidate
    raise NativeKernelUnavailable("no C++ compiler found (set CXX, or install g++)")


def _fingerprint(library: str | os.PathLike) -> dict:
    """``{"bytes": size, "sha256": hex digest}`` of the file ``library``."""
    digest = hashlib.sha256()
    size = 0
    with open(library, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
            size += len(block)
    return {"bytes": size, "sha256": digest.hexdigest()}


def _fingerprint_path(library: Path) -> Path:
    return library.with_name(library.name + ".sha256.json")


def _write_fingerprint(library: Path, fingerprint: dict) -> None:
    """Record ``fingerprint`` beside ``library``, atomically (temp file, rename)."""
    handle, partial = tempfile.mkstemp(suffix=".json", dir=library.parent)
    with os.fdopen(handle, "w") as file:
        json.dump(fingerprint, file)
    os.replace(partial, _fingerprint_path(library))


def is_intact(library: Path) -> bool:
    """True when ``library`` exists and has the size and SHA-256 recorded
    beside it at build time (a size check first: truncation is the common
    damage, and costs no read)."""
    try:
        recorded = json.loads(_fingerprint_path(library).read_text())
        if not isinstance(recorded, dict) or library.stat().st_size != recorded.get("bytes"):
            return False
        return _fingerprint(library) == recorded
    except (OSError, ValueError):  # missing, unreadable or not JSON: not known to be intact
        return False


def build_library() -> Path:
    """Compile the kernels unless an intact build of these sources for this
    jaxlib is cached; returns the shared library's path."""
    include = jax.ffi.include_dir()
    key = hashlib.sha256()
    for source in SOURCES + HEADERS:
        key.update(source.read_bytes())
    key.update(" ".join((jax.__version__, version("jaxlib"), *_FLAGS)).encode())
    library = _cache_directory() / f"kernels-{key.hexdigest()[:16]}.so"
    if is_intact(library):
        return library
    compiler = _compiler()
    _log.warning(
        "jaxboost: building the native CPU kernels in %s, once per jaxboost and jaxlib "
        "version (tens of seconds)",
        library.parent,
    )
    library.parent.mkdir(parents=True, exist_ok=True)
    # build beside the target and rename: concurrent builds (test workers)
    # never see a half-written library
    handle, partial = tempfile.mkstemp(suffix=".so", dir=library.parent)
    os.close(handle)
    try:
        with tempfile.TemporaryDirectory(dir=library.parent) as objects:
            _compile_and_link(compiler, include, Path(objects), partial)
        fingerprint = _fingerprint(partial)
    except NativeKernelUnavailable:
        os.unlink(partial)
        raise
    os.replace(partial, library)  # over a damaged library: a new file, safe for its users
    _write_fingerprint(library, fingerprint)
    return library


def _compile_and_link(compiler: str, include: str, objects: Path, library: str) -> None:
    """Compile every source to an object in ``objects``, all at once (one
    compiler process each: the cores share them), then link them into
    ``library``."""
    compile_flags = [flag for flag in _FLAGS if flag != "-shared"]
    jobs = []
    for source in SOURCES:
        target = objects / f"{source.stem}.o"
        command = [compiler, *compile_flags, "-I", include, "-c", str(source), "-o", str(target)]
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        jobs.append((target, process))
    errors = []
    for _, process in jobs:
        _, stderr = process.communicate()
        if process.returncode != 0:
            errors.append(stderr)
    if not errors:
        command = [compiler, *_FLAGS, *(str(target) for target, _ in jobs), "-o", library]
        linked = subprocess.run(command, capture_output=True, text=True, check=False)
        if linked.returncode != 0:
            errors.append(linked.stderr)
    if errors:
        raise NativeKernelUnavailable(
            f"{compiler} failed to build jaxboost's native kernels:\n{errors[0][-2000:]}"
        )


# the loaded library (ctypes), for the kernels called from the host
_loaded: list[ctypes.CDLL] = []


@functools.cache
def _load_once() -> Exception | None:
    """Build, load and register the FFI targets; the failure, if any.

    Cached, failure included: a missing or broken compiler is tried once per
    process, not on every fit.
    """
    try:
        if os.environ.get(_ENV_SWITCH, "").strip() in ("0", "false", "off"):
            raise NativeKernelUnavailable(f"switched off by {_ENV_SWITCH}")
        library = ctypes.cdll.LoadLibrary(str(build_library()))
        for target, symbol in _TARGETS.items():
            if not hasattr(library, symbol):
                raise NativeKernelUnavailable(f"the native library lacks {symbol}")
            capsule = jax.ffi.pycapsule(getattr(library, symbol))
            jax.ffi.register_ffi_target(target, capsule, platform="cpu")
        _loaded.append(library)
    except OSError as error:  # the library did not load (or the cache is not writable)
        return NativeKernelUnavailable(
            f"could not build or load the native kernels in {_cache_directory()}: {error} "
            "(set JAXBOOST_CACHE_DIR to a directory you can write to)"
        )
    except NativeKernelUnavailable as error:
        return error
    return None


def load() -> None:
    """Make sure the FFI targets are registered; raises
    `NativeKernelUnavailable` when they cannot be."""
    failure = _load_once()
    if failure is not None:
        raise failure


def host_library() -> ctypes.CDLL:
    """The loaded library, for its functions called from the host through
    ctypes (`load` first; raises `NativeKernelUnavailable` as it does)."""
    load()
    return _loaded[0]


def native_available(warn: bool = True) -> bool:
    """True when the native kernels are built and registered (building them
    if needed).  A failure other than the switch warns once when ``warn``."""
    failure = _load_once()
    if failure is not None and warn and "switched off" not in str(failure):
        _warn_once(str(failure))
    return failure is None


@functools.cache
def _warn_once(reason: str) -> None:
    warnings.warn(
        f"jaxboost: {reason}\nUsing the XLA kernels instead (the same models, "
        f"slower on CPU); set {_ENV_SWITCH}=0 to skip the native ones quietly.",
        RuntimeWarning,
        stacklevel=3,
    )
