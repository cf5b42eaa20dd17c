"""Fit a small model; print the seconds JAX spent compiling in XLA, in all
and in its longest compilation.

Run twice with ``JAXBOOST_COMPILATION_CACHE=<dir>``: the second process loads
the programs from the cache and compiles only those too quick to be stored.
"""

import jax
import numpy as np

import jaxboost as jb

compile_seconds = []
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
print(f"compile seconds {sum(compile_seconds):.3f} longest {max(compile_seconds, default=0):.3f}")
