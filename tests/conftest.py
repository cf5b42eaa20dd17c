"""Suite-wide setup: one persistent XLA compilation cache per test run.

Many tests fit small models whose programs are the same HLO built from
different loss objects (a fresh lambda, a catalogue factory called again);
jaxboost's in-memory cache is keyed on the loss object, XLA's persistent cache
on the program, so with it each such program compiles once per run instead of
once per test and per worker.  The directory is made by the controlling
process and inherited by the xdist workers; subprocess tests set their own
caches (or none) and are not affected.
"""

from __future__ import annotations

import os
import shutil
import tempfile

_DIRECTORY_VARIABLE = "JAXBOOST_TEST_RUN_XLA_CACHE"


def pytest_configure(config):
    if _DIRECTORY_VARIABLE not in os.environ:
        os.environ[_DIRECTORY_VARIABLE] = tempfile.mkdtemp(prefix="jaxboost-test-xla-")
        config._jaxboost_owns_cache = True
    import jaxboost

    jaxboost.enable_compilation_cache(os.environ[_DIRECTORY_VARIABLE])


def pytest_unconfigure(config):
    if getattr(config, "_jaxboost_owns_cache", False):
        shutil.rmtree(os.environ.pop(_DIRECTORY_VARIABLE), ignore_errors=True)
