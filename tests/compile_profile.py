"""A pytest plugin that records, per test, where its time went in JAX's
compile pipeline: ``PYTHONPATH=tests python -m pytest -p compile_profile
-n 2 --dist loadscope tests`` appends one JSON line per test to
``$COMPILE_PROFILE_OUT.<pid>.jsonl`` (default ``compile_profile``):
``id``, ``wall`` (the call, fixtures apart), ``backend`` (XLA compiles,
persistent-cache reads included), ``retrieve`` (those reads), ``trace``,
``lower`` (seconds, as JAX's monitoring events report them: nested traces
count in their parents too), ``n`` (programs compiled), ``miss`` and
``cache_hit`` (persistent cache).  Not loaded by the suite; a tool for
making it faster.
"""

from __future__ import annotations

import json
import os
import time

import pytest
from jax import monitoring

_totals = {
    "backend": 0.0,
    "retrieve": 0.0,
    "trace": 0.0,
    "lower": 0.0,
    "n": 0,
    "miss": 0,
    "cache_hit": 0,
}


def _duration(event: str, seconds: float, **_) -> None:
    if event.endswith("backend_compile_duration"):
        _totals["backend"] += seconds
        _totals["n"] += 1
    elif "cache_retrieval_time" in event:
        _totals["retrieve"] += seconds
    elif "jaxpr_trace" in event:
        _totals["trace"] += seconds
    elif "mlir" in event:
        _totals["lower"] += seconds


def _event(event: str, **_) -> None:
    if event.endswith("cache_hits"):
        _totals["cache_hit"] += 1
    elif event.endswith("cache_misses"):
        _totals["miss"] += 1


monitoring.register_event_duration_secs_listener(_duration)
monitoring.register_event_listener(_event)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    before, start = dict(_totals), time.time()
    yield
    row = {"id": item.nodeid, "wall": time.time() - start}
    row.update({key: _totals[key] - before[key] for key in _totals})
    path = f"{os.environ.get('COMPILE_PROFILE_OUT', 'compile_profile')}.{os.getpid()}.jsonl"
    with open(path, "a") as out:
        out.write(json.dumps(row) + "\n")
