"""Suite-wide setup: one persistent XLA compilation cache per test run.

Many tests fit small models whose programs are the same HLO built from
different loss objects (a fresh lambda, a catalogue factory called again);
jaxboost's in-memory cache is keyed on the loss object, XLA's persistent cache
on the program, so with it each such program compiles once per run instead of
once per test.  The directory is made by the controlling process and shared
by the xdist workers and the scripts the tests run (`run_script`, unless a
test gives its own cache): JAX's key for a program includes the cache's
directory (its GPU autotuning files live there), so workers with a
directory each never found each other's programs.

Compilation is most of the suite's time, so XLA's CPU backend runs LLVM at
optimisation level 0 here (``XLA_FLAGS``, inherited by the subprocess tests
that do not clear it): a small fit compiles in 2.5 to 2.7 s instead of 3.3
to 4.1.  It is meant to change how fast the compiled code runs, not what it
computes: XLA emits its reductions' loops itself, and LLVM without fast-math
does not reorder float sums (checked, not proven: the same fits gave
bit-identical scores, and the suite passes either way).  On jaxlib 0.10 the
fusions are also emitted by XLA's older LLVM IR emitters instead of its MLIR
fusion emitters (``--xla_cpu_use_fusion_emitters=false``), which roughly
halves a small fit's compile time; the suite took 11.5 to 12.3 minutes
without it on a 2-core Zen 4.  The two flags change code generation for the
tests only; fits outside the suite compile as users' do.  The native kernels
are built by g++ -O3 as always.
"""

from __future__ import annotations

import gc
import os
import shutil
import sys
import tempfile

import pytest

_DIRECTORY_VARIABLE = "JAXBOOST_TEST_RUN_XLA_CACHE"
_FAST_COMPILE = "--xla_backend_optimization_level=0"
# XLA's CPU fusions by its older LLVM IR emitters, not the MLIR fusion
# emitters: a small fit's training program compiles in 0.39 s instead of
# 1.1 s.  An unknown XLA flag is fatal, so only for the jaxlibs it was tried on.
_LEGACY_EMITTERS = "--xla_cpu_use_fusion_emitters=false"
_LEGACY_EMITTER_JAXLIBS = ((0, 10),)  # (major, minor)


def _fast_compile_flags(flags: str) -> str:
    """``flags`` with the suite's compile-time flags added (those not set)."""
    from jaxboost.runtime.workarounds import _installed_jaxlib_version  # JAX's backends stay off

    added = [_FAST_COMPILE]
    if (_installed_jaxlib_version() or ())[:2] in _LEGACY_EMITTER_JAXLIBS:
        added.append(_LEGACY_EMITTERS)
    for flag in added:
        if flag.split("=")[0] not in flags:
            flags = f"{flags} {flag}"
    return flags.strip()


def pytest_configure(config):
    # before any JAX backend starts (it reads XLA_FLAGS once)
    os.environ["XLA_FLAGS"] = _fast_compile_flags(os.environ.get("XLA_FLAGS", ""))
    if _DIRECTORY_VARIABLE not in os.environ:
        os.environ[_DIRECTORY_VARIABLE] = tempfile.mkdtemp(prefix="jaxboost-test-xla-")
        config._jaxboost_owns_cache = True
    import jaxboost

    jaxboost.enable_compilation_cache(os.environ[_DIRECTORY_VARIABLE])


def pytest_unconfigure(config):
    if getattr(config, "_jaxboost_owns_cache", False):
        shutil.rmtree(os.environ.pop(_DIRECTORY_VARIABLE), ignore_errors=True)


# caches kept: the native library's load (run once per process) and the
# catalogue's factories (the same parameters give the same loss object)
_KEPT_CACHES = ("jaxboost.kernels.native_library", "jaxboost.losses")


def clear_compiled_programs() -> None:
    """Drop every compiled program the process holds: jaxboost's caches (its
    program factories and functools caches) and JAX's."""
    import jax

    for name, module in list(sys.modules.items()):
        if not name.startswith("jaxboost.") or name.startswith(_KEPT_CACHES):
            continue
        for value in list(vars(module).values()):
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()
    jax.clear_caches()
    gc.collect()


@pytest.fixture(autouse=True, scope="module")
def _programs_freed_after_each_module():
    """Each test module's compiled programs are dropped when it ends: a
    worker otherwise keeps every program of the modules it ran (its memory
    grew to 5.4 GB over the suite); the next module reads the programs it
    shares from the run's XLA cache on disk."""
    yield
    clear_compiled_programs()


def pytest_collection_modifyitems(config, items):
    """The slow tier (`slow_tests`) marked ``slow``; a name listed there that
    its module no longer holds is an error, so the tier cannot shrink unseen."""
    from slow_tests import SLOW_MODULES, SLOW_TESTS

    checked = set()
    for item in items:
        module = item.module
        name = module.__name__.rpartition(".")[2]
        if name not in checked:
            checked.add(name)
            missing = [test for test in SLOW_TESTS.get(name, ()) if not hasattr(module, test)]
            if missing:
                raise pytest.UsageError(
                    f"tests/slow_tests.py names tests {name} does not hold: {missing}; "
                    "rename or remove them there"
                )
        if name in SLOW_MODULES or item.originalname in SLOW_TESTS.get(name, ()):
            item.add_marker(pytest.mark.slow)
