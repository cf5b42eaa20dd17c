"""Fit a small model; print the seconds JAX spent compiling in XLA, in all
and in its longest compilation (a program loaded from the cache counts its
loading), and the programs loaded from the persistent cache.

Run twice with ``JAXBOOST_COMPILATION_CACHE=<dir>``: the second process loads
the programs from the cache and compiles only those too quick to be stored.
"""

import jax
import numpy as np

import jaxboost as jb

compile_seconds = []
cache_hits = []
jax.monitoring.register_event_listener(
    lambda event, **_: cache_hits.append(event) if event.endswith("/cache_hits") else None
)
jax.monitoring.register_event_duration_secs_listener(
    lambda event, seconds, **_: (
        compile_seconds.append(seconds)
        if event == "/jax/core/compile/backend_compile_duration"
        else None
    )
)

rng = np.random.default_rng(0)
X = rng.normal(size=(500, 4)).astype(np.float32)
y = X[:, 0] + 0.1 * rng.normal(size=500).astype(np.float32)
model = jb.Booster(n_estimators=5, max_depth=3).fit(X, y)
model.predict(X)
longest = max(compile_seconds, default=0)
print(f"compile seconds {sum(compile_seconds):.3f} longest {longest:.3f} hits {len(cache_hits)}")
