"""The native CPU kernels (C++ through XLA's FFI): finding, building and loading them.

The kernels (histograms with subtraction, forest prediction, binning, the
line search's leaf sums, routing rows, the categorical split search's sort,
TreeSHAP values) are one shared library, compiled by `native_build` and
registered as XLA custom-call targets for the CPU.  Installing jaxboost
builds it into the package (``jaxboost/kernels/native/``, the source tree in
an editable install), for the jaxlib installed then.  A process loads that
library when it was built for these sources and the jaxlib installed now;
otherwise (jaxlib changed since, or the install had no compiler) it builds
one at first use with the machine's C++ compiler into ``$JAXBOOST_CACHE_DIR``
(default ``~/.cache/jaxboost``), once per source and jaxlib version.  Either
is loaded only when it matches the size and SHA-256 recorded at its build.
``JAXBOOST_NATIVE=0`` turns the kernels off; without a library and a working
compiler jaxboost warns once and uses its XLA kernels, which give the same
models, slower.
"""

from __future__ import annotations

import ctypes
import functools
import os
import warnings
from importlib.metadata import version
from logging import getLogger
from pathlib import Path

import jax

from ..runtime.compilation_cache import cache_root
from .native_build import (
    NATIVE,
    SOURCES,
    NativeKernelUnavailable,
    compile_and_link,
    compile_library,
    compiler,
    is_intact,
    library_name,
)

__all__ = ["SOURCES", "NativeKernelUnavailable", "build_library", "is_intact"]

# where installing jaxboost puts the library
INSTALLED_DIRECTORY = NATIVE
_ENV_SWITCH = "JAXBOOST_NATIVE"
# a first build says so in one line: logged, as there is nothing to act on
_log = getLogger(__name__)
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
    "jaxboost_leaf_split": "JaxboostLeafSplit",
    "jaxboost_row_major_bins": "JaxboostRowMajorBins",
    "jaxboost_leaf_of_row": "JaxboostLeafOfRow",
    "jaxboost_split_search": "JaxboostSplitSearch",
}


def _cache_directory() -> Path:
    return cache_root()


def installed_library() -> Path | None:
    """The library installing jaxboost built, when it fits these sources and
    the installed jaxlib and is intact; else None."""
    library = INSTALLED_DIRECTORY / library_name(version("jaxlib"))
    return library if is_intact(library) else None


def build_library() -> Path:
    """The shared library's path: the installed one when it fits, else an
    intact build of these sources for this jaxlib in the cache, compiled
    there first when there is none."""
    installed = installed_library()
    if installed is not None:
        return installed
    jaxlib_version = version("jaxlib")
    library = _cache_directory() / library_name(jaxlib_version)
    if is_intact(library):
        return library
    cxx = compiler()
    _log.warning(
        "jaxboost: building the native CPU kernels in %s, once per jaxboost and jaxlib "
        "version: none was built at install for jaxlib %s (about 20 s)",
        library.parent,
        jaxlib_version,
    )
    return compile_library(library, jax.ffi.include_dir(), cxx, compile_and_link)


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
