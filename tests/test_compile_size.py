"""The size of the compiled split search, which every level of every tree
program holds a copy of: XLA's CPU backend compiles a program in time that
grows with its operations, so a change that bloats the search slows every
fit's first round (``python benchmarks/bench_compile.py`` measures the
programs of whole fits)."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp

import jaxboost  # noqa: F401  (configures the CPU devices before JAX starts)
from jaxboost.engine.split import find_best_splits
from jaxboost.runtime.workarounds import fast_compile_options

# an HLO instruction line: "  [ROOT ]%name = type op(...)"
_INSTRUCTION = re.compile(r"^\s+(?:ROOT )?%?[\w.\-]+ = ")
# the compiled search of one level: 334 operations (jaxlib 0.10.2, CPU); it
# was 538 before its tie search, candidate lookup and masks were made lean
_MOST_SEARCH_OPERATIONS = 420


def _operations(hlo_text: str) -> int:
    return sum(1 for line in hlo_text.splitlines() if _INSTRUCTION.match(line))


def test_the_compiled_split_search_stays_small():
    def search(hist, feature_mask, node_rows):
        return find_best_splits(
            hist,
            1,
            1.0,
            1e-3,
            0.0,
            feature_mask,
            cumulative=True,
            min_child_samples=20.0,
            node_rows=node_rows,
        )

    # a small fit's level: cumulative (native kernel) histograms, the
    # children's rows estimated from their nodes' (log loss's default)
    hist = jax.ShapeDtypeStruct((4, 2, 17, 2), jnp.float32)
    mask = jax.ShapeDtypeStruct((4,), bool)
    node_rows = jax.ShapeDtypeStruct((2,), jnp.int32)
    options = fast_compile_options(jax.devices()[0].platform) or None
    compiled = jax.jit(search, compiler_options=options).lower(hist, mask, node_rows).compile()
    n_operations = _operations(compiled.as_text())
    assert n_operations <= _MOST_SEARCH_OPERATIONS, (
        f"the compiled split search has {n_operations} operations "
        f"(at most {_MOST_SEARCH_OPERATIONS} expected)"
    )
