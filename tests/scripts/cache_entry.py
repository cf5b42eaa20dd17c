"""Compile one small program with the persistent cache on (every program
stored, however quick); print, as one JSON line, the cache directory, the
program's result, the programs loaded from the cache and the warnings raised."""

import json
import warnings

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import jax
    import jax.numpy as jnp

    import jaxboost  # noqa: F401  (turns the cache on, or warns why not)

    hits = []
    jax.monitoring.register_event_listener(
        lambda event, **_: hits.append(event) if event.endswith("/cache_hits") else None
    )
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    total = float(jax.jit(lambda x: jnp.sum(jnp.sin(x) * jnp.cos(x) + x**3))(jnp.arange(7.0)))
print(
    json.dumps(
        {
            "directory": jax.config.jax_compilation_cache_dir,
            "total": total,
            "hits": len(hits),
            "warnings": [str(w.message) for w in caught],
        }
    )
)
