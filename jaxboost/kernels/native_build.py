"""Compiling the native CPU kernels into one shared library, at install and at first use.

``native/*.cc`` are compiled with the C++ compiler (``$CXX``, else ``g++``,
``c++`` or ``clang++``) against the XLA FFI headers that ship with jaxlib
into ``kernels-<key>.so``, where the key hashes the sources, jaxlib's
version and the compiler flags: a library is used only by the jaxlib it was
built for.  Beside each library a small file records its size and SHA-256,
written after a successful build; a library that does not match it
(truncated, damaged, or from a jaxboost that wrote none) is never loaded:
loading a truncated shared library kills the process (SIGBUS).

Standard library only: ``setup.py`` runs this file alone, in a build
environment where jaxboost cannot be imported, to build the library into
the package when jaxboost is installed; `native_library` builds it into the
cache with the same functions when the installed one does not fit.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

NATIVE = Path(__file__).with_name("native")
SOURCES = tuple(
    NATIVE / name
    for name in (
        "histogram.cc",
        "predict.cc",
        "binning.cc",
        "leaf_sums.cc",
        "route.cc",
        "category_order.cc",
        "shap.cc",
        "leaf_histogram.cc",
        "split_search.cc",
    )
)
# included by the sources: part of what a library was built from
HEADERS = tuple(
    NATIVE / name
    for name in (
        "bin_tiles.h",
        "category_split.h",
        "hist_layout.h",
        "leaf_lanes.h",
        "route_rows.h",
        "running_sums.h",
        "split_gain.h",
    )
)
FLAGS = ("-O3", "-std=c++17", "-shared", "-fPIC", "-w")


class NativeKernelUnavailable(RuntimeError):
    """The native kernel is switched off, or could not be built or loaded."""


def library_name(jaxlib_version: str) -> str:
    """``kernels-<key>.so``: the library of these sources and flags for jaxlib ``jaxlib_version``."""
    key = hashlib.sha256()
    for source in SOURCES + HEADERS:
        key.update(source.read_bytes())
    key.update(" ".join((jaxlib_version, *FLAGS)).encode())
    return f"kernels-{key.hexdigest()[:16]}.so"


def jaxlib_headers() -> tuple[str, str]:
    """``(include directory, version)`` of the installed jaxlib, found without
    importing it (as ``jax.ffi.include_dir`` finds the directory)."""
    spec = importlib.util.find_spec("jaxlib")
    if spec is None or not spec.submodule_search_locations:
        raise NativeKernelUnavailable("jaxlib is not installed: its FFI headers are needed")
    include = Path(next(iter(spec.submodule_search_locations))) / "include"
    if not (include / "xla" / "ffi" / "api" / "ffi.h").is_file():
        raise NativeKernelUnavailable(f"jaxlib's FFI headers are not in {include}")
    return str(include), version("jaxlib")


def compiler() -> str:
    for candidate in (os.environ.get("CXX", "").strip(), "g++", "c++", "clang++"):
        if candidate and shutil.which(candidate):
            return candidate
    raise NativeKernelUnavailable("no C++ compiler found (set CXX, or install g++)")


def fingerprint(library: str | os.PathLike) -> dict:
    """``{"bytes": size, "sha256": hex digest}`` of the file ``library``."""
    digest = hashlib.sha256()
    size = 0
    with open(library, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
            size += len(block)
    return {"bytes": size, "sha256": digest.hexdigest()}


def fingerprint_path(library: Path) -> Path:
    return library.with_name(library.name + ".sha256.json")


def _write_fingerprint(library: Path, record: dict) -> None:
    """Record ``record`` beside ``library``, atomically (temp file, rename)."""
    handle, partial = tempfile.mkstemp(suffix=".json", dir=library.parent)
    with os.fdopen(handle, "w") as file:
        json.dump(record, file)
    os.chmod(partial, 0o644)  # readable by every user of an installed library
    os.replace(partial, fingerprint_path(library))


def is_intact(library: Path) -> bool:
    """True when ``library`` exists and has the size and SHA-256 recorded
    beside it at build time (a size check first: truncation is the common
    damage, and costs no read)."""
    try:
        recorded = json.loads(fingerprint_path(library).read_text())
        if not isinstance(recorded, dict) or library.stat().st_size != recorded.get("bytes"):
            return False
        return fingerprint(library) == recorded
    except (OSError, ValueError):  # missing, unreadable or not JSON: not known to be intact
        return False


def compile_and_link(cxx: str, include: str, objects: Path, library: str) -> None:
    """Compile every source to an object in ``objects``, all at once (one
    compiler process each: the cores share them), then link them into
    ``library``."""
    compile_flags = [flag for flag in FLAGS if flag != "-shared"]
    jobs = []
    for source in SOURCES:
        target = objects / f"{source.stem}.o"
        command = [cxx, *compile_flags, "-I", include, "-c", str(source), "-o", str(target)]
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
        command = [cxx, *FLAGS, *(str(target) for target, _ in jobs), "-o", library]
        linked = subprocess.run(command, capture_output=True, text=True, check=False)
        if linked.returncode != 0:
            errors.append(linked.stderr)
    if errors:
        raise NativeKernelUnavailable(
            f"{cxx} failed to build jaxboost's native kernels:\n{errors[0][-2000:]}"
        )


def compile_library(
    library: Path,
    include: str,
    cxx: str,
    compile_sources: Callable[[str, str, Path, str], None] = compile_and_link,
) -> Path:
    """Compile the sources into ``library`` with ``cxx`` (by
    ``compile_sources``, `compile_and_link`'s signature) and record its
    fingerprint; raises `NativeKernelUnavailable` when the compiler fails."""
    library.parent.mkdir(parents=True, exist_ok=True)
    # build beside the target and rename: concurrent builds (test workers)
    # never see a half-written library
    handle, partial = tempfile.mkstemp(suffix=".so", dir=library.parent)
    os.close(handle)
    try:
        with tempfile.TemporaryDirectory(dir=library.parent) as objects:
            compile_sources(cxx, include, Path(objects), partial)
        record = fingerprint(partial)
    except NativeKernelUnavailable:
        os.unlink(partial)
        raise
    os.chmod(partial, 0o755)
    os.replace(partial, library)  # over a damaged library: a new file, safe for its users
    _write_fingerprint(library, record)
    return library


def build_for_install(
    directory: Path, compile_sources: Callable[[str, str, Path, str], None] = compile_and_link
) -> Path:
    """Build the library for the installed jaxlib into ``directory`` (the
    package's ``native/`` folder, or its copy in a wheel), removing the
    libraries built there before (other sources or jaxlib); returns its path."""
    include, jaxlib_version = jaxlib_headers()
    library = directory / library_name(jaxlib_version)
    for stale in directory.glob("kernels-*.so*"):
        if stale.name not in (library.name, fingerprint_path(library).name):
            stale.unlink()
    if is_intact(library):  # an editable install made again: nothing changed
        return library
    return compile_library(library, include, compiler(), compile_sources)
