"""The native CPU histogram kernel is built on first use and chosen by
default on CPU; without a working compiler, or switched off, fits fall back
to the XLA kernel (with one warning when the build fails)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from run_script import run_script

import jaxboost  # noqa: F401  (configures the CPU devices before JAX starts)
from jaxboost.kernels.native_library import SOURCES, native_available
from jaxboost.kernels.registry import kernels_for

SCRIPT = Path(__file__).parent / "scripts" / "kernel_choice.py"


def _fit(tmp_path: Path, name: str, **environment: str) -> dict:
    cache = tmp_path / name
    done = run_script(SCRIPT, {"JAXBOOST_CACHE_DIR": str(cache), **environment}, timeout=300)
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


@pytest.fixture(scope="module")
def fits(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("kernels")
    # the two fallback fits run the same XLA programs: the second loads them
    # from the first's persistent compilation cache (saves ~5 s of the suite)
    fallback_programs = {"JAXBOOST_COMPILATION_CACHE": str(tmp_path / "xla")}
    results = {
        "built": _fit(tmp_path, "built"),
        "broken compiler": _fit(
            tmp_path, "broken", CXX=str(_failing_compiler(tmp_path)), **fallback_programs
        ),
        "switched off": _fit(tmp_path, "off", JAXBOOST_NATIVE="0", **fallback_programs),
    }
    results["broken compiler"]["folder"] = tmp_path
    return results


def test_a_fresh_cache_builds_the_library_once(fits):
    built = fits["built"]
    assert built["kernel"] == "native"
    assert built["warnings"] == []
    # one library; the compiled XLA programs are kept beside it, in xla/
    libraries = [name for name in built["cache"] if name != "xla"]
    assert len(libraries) == 1 and libraries[0].endswith(".so")


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


@pytest.mark.parametrize(
    "model", ["predictions", "line_search_predictions", "quantised_predictions"]
)
def test_every_kernel_fits_the_same_model(fits, model):
    native = np.asarray(fits["built"][model])
    for name in ("broken compiler", "switched off"):
        np.testing.assert_allclose(np.asarray(fits[name][model]), native, atol=1e-5)
