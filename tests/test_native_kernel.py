"""The native CPU histogram kernel is chosen by default on CPU: the library
built at install when it fits the installed jaxlib, else one built on first
use; without a working compiler, or switched off, fits fall back to the XLA
kernel (with one warning when the build fails)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from run_script import run_script

import jaxboost  # noqa: F401  (configures the CPU devices before JAX starts)
from jaxboost.kernels.native_build import fingerprint_path, library_name
from jaxboost.kernels.native_library import SOURCES, build_library, is_intact, native_available
from jaxboost.kernels.registry import kernels_for

SCRIPT = Path(__file__).parent / "scripts" / "kernel_choice.py"


def _fit(tmp_path: Path, name: str, installed: Path | None = None, **environment: str) -> dict:
    """The script's fit with cache ``name`` (fresh) and the libraries of
    the folder ``installed`` (default none) standing for the installed ones."""
    cache = tmp_path / name
    if installed is None:
        installed = tmp_path / f"{name}, nothing installed"
        installed.mkdir()
    folders = {"JAXBOOST_CACHE_DIR": str(cache), "KERNEL_CHOICE_INSTALLED": str(installed)}
    done = run_script(SCRIPT, {**folders, **environment}, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["cache"] = sorted(path.name for path in cache.glob("*")) if cache.exists() else []
    return result


def test_the_native_kernel_is_the_cpu_default_where_a_compiler_exists():
    # CI machines have g++: a failed build there must fail this test, not
    # quietly run the slower kernel
    assert shutil.which("g++") or shutil.which("c++"), "no C++ compiler on this machine"
    assert native_available(warn=False)
    assert kernels_for("cpu").histogram == "native"
    assert kernels_for("gpu").histogram == "reference"


def _failing_compiler(folder: Path) -> Path:
    """A "compiler" that notes each call in ``calls.log`` and fails."""
    script = folder / "failing-cxx"
    script.write_text(f'#!/bin/sh\necho called >> "{folder / "calls.log"}"\nexit 1\n')
    script.chmod(0o755)
    return script


def _copying_compiler(folder: Path) -> Path:
    """A "compiler" that notes each call in ``calls.log``, makes empty
    objects and "links" a copy of this process's built library: the build
    steps and the library's checks run, without the compiler's 20 s."""
    built = build_library()
    script = folder / "copying-cxx"
    script.write_text(
        "#!/bin/sh\n"
        f'echo called >> "{folder / "calls.log"}"\n'
        'out=""; previous=""\n'
        'for arg in "$@"; do [ "$previous" = "-o" ] && out="$arg"; previous="$arg"; done\n'
        f'case "$out" in *.o) : > "$out" ;; *) cp "{built}" "$out" ;; esac\n'
    )
    script.chmod(0o755)
    return script


def _truncated_copy(tmp_path: Path, source: str, name: str) -> Path:
    """A copy of the cache ``source`` whose library lost its second half, as
    a full disk or a killed copy leaves it."""
    shutil.copytree(tmp_path / source, tmp_path / name)
    (library,) = (tmp_path / name).glob("*.so")
    library.write_bytes(library.read_bytes()[: library.stat().st_size // 2])
    return library


def _installed(folder: Path, jaxlib_version: str | None = None) -> Path:
    """``folder`` holding a copy of this process's built library and its
    record, as installing jaxboost leaves them; named for jaxlib
    ``jaxlib_version`` when given (an install before jaxlib changed)."""
    built = build_library()
    library = folder / (library_name(jaxlib_version) if jaxlib_version else built.name)
    shutil.copy(built, library)
    shutil.copy(fingerprint_path(built), fingerprint_path(library))
    return folder


@pytest.fixture(scope="module")
def fits(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("kernels")
    # the two fallback fits run the same XLA programs: the second loads them
    # from the first's persistent compilation cache (saves ~5 s of the suite)
    fallback_programs = {"JAXBOOST_COMPILATION_CACHE": str(tmp_path / "xla")}
    compiler = _copying_compiler(tmp_path_factory.mktemp("compiler"))
    # and the two native fits likewise
    native_programs = {"JAXBOOST_COMPILATION_CACHE": str(tmp_path / "xla-native")}
    # an install before jaxlib changed left a library that no longer fits
    stale = _installed(tmp_path_factory.mktemp("installed-earlier"), jaxlib_version="0.4.1")
    unused_compiler = _failing_compiler(tmp_path_factory.mktemp("unused-compiler"))
    results = {
        "built": _fit(tmp_path, "built", stale, CXX=str(compiler), **native_programs),
        "installed": _fit(
            tmp_path,
            "installed",
            _installed(tmp_path_factory.mktemp("installed")),
            CXX=str(unused_compiler),
            **native_programs,
        ),
        "broken compiler": _fit(
            tmp_path, "broken", CXX=str(_failing_compiler(tmp_path)), **fallback_programs
        ),
        "switched off": _fit(tmp_path, "off", JAXBOOST_NATIVE="0", **fallback_programs),
    }
    # loading a truncated library killed every process (SIGBUS): now it is
    # built again, or, with no working compiler, the XLA kernels run
    rebuilt = _truncated_copy(tmp_path, "built", "truncated")
    results["truncated library"] = _fit(tmp_path, "truncated", CXX=str(compiler), **native_programs)
    results["truncated library"]["library"] = rebuilt
    _truncated_copy(tmp_path, "built", "truncated, broken")
    second_compiler = _failing_compiler(tmp_path_factory.mktemp("second-compiler"))
    results["truncated library, broken compiler"] = _fit(
        tmp_path, "truncated, broken", CXX=str(second_compiler), **fallback_programs
    )
    results["broken compiler"]["folder"] = tmp_path
    results["built"]["folder"] = tmp_path / "built"
    results["installed"]["compiler folder"] = unused_compiler.parent
    results["built"]["compiler calls"] = (compiler.parent / "calls.log").read_text().splitlines()
    return results


def test_a_fresh_cache_builds_the_library_once(fits):
    # (the library installed was built for another jaxlib)
    built = fits["built"]
    assert built["kernel"] == "native"
    assert built["warnings"] == []
    # one library and its size and digest (the compiled XLA programs are
    # kept elsewhere here)
    libraries = built["cache"]
    assert len(libraries) == 2 and libraries[0].endswith(".so")
    assert libraries[1] == libraries[0] + ".sha256.json"
    # the sources compiled and linked once for the first fit, and once again
    # for the truncated library's rebuild
    assert built["compiler calls"] == ["called"] * 2 * (len(SOURCES) + 1)


def test_the_library_built_at_install_is_loaded_without_the_compiler(fits):
    installed = fits["installed"]
    assert installed["kernel"] == "native"
    assert installed["warnings"] == []
    assert not any(name.endswith(".so") for name in installed["cache"])
    assert not (installed["compiler folder"] / "calls.log").exists()


def test_a_failed_build_warns_and_falls_back(fits):
    broken = fits["broken compiler"]
    assert broken["kernel"] == "packed"
    assert broken["cache"] == [] or not any(name.endswith(".so") for name in broken["cache"])
    assert len(broken["warnings"]) == 1
    assert "failed to build" in broken["warnings"][0]
    assert "JAXBOOST_NATIVE=0" in broken["warnings"][0]
    # two fits and their predictions asked; the build was tried once (one
    # compiler process per source, all started together)
    calls = (broken["folder"] / "calls.log").read_text().splitlines()
    assert calls == ["called"] * len(SOURCES)


def test_switched_off_falls_back_quietly(fits):
    off = fits["switched off"]
    assert off["kernel"] == "packed"
    assert off["warnings"] == []
    assert off["cache"] == []


def test_a_truncated_library_is_built_again_not_loaded(fits):
    truncated = fits["truncated library"]
    assert truncated["kernel"] == "native"
    assert truncated["warnings"] == []
    library = truncated["library"]
    assert library.stat().st_size == (fits["built"]["folder"] / library.name).stat().st_size
    assert is_intact(library)


def test_a_truncated_library_that_cannot_be_rebuilt_falls_back_with_one_warning(fits):
    broken = fits["truncated library, broken compiler"]
    assert broken["kernel"] == "packed"
    assert len(broken["warnings"]) == 1
    assert "failed to build" in broken["warnings"][0]


def test_a_library_is_intact_only_as_it_was_built(tmp_path):
    built = build_library()
    record = built.with_name(built.name + ".sha256.json")
    library = tmp_path / built.name
    shutil.copy(built, library)
    shutil.copy(record, tmp_path / record.name)
    assert is_intact(library)
    data = bytearray(library.read_bytes())
    data[len(data) // 2] ^= 1  # the same size, one bit changed
    library.write_bytes(bytes(data))
    assert not is_intact(library)
    library.write_bytes(built.read_bytes()[:-1])
    assert not is_intact(library)
    shutil.copy(built, library)
    (tmp_path / record.name).unlink()  # a build without its record
    assert not is_intact(library)


@pytest.mark.parametrize(
    "model", ["predictions", "line_search_predictions", "quantised_predictions"]
)
def test_every_kernel_fits_the_same_model(fits, model):
    native = np.asarray(fits["built"][model])
    for name in fits:
        np.testing.assert_allclose(np.asarray(fits[name][model]), native, atol=1e-5)
