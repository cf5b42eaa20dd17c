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
    def search(hist, feature_mask):
        return find_best_splits(
            hist, 1, 1.0, 1e-3, 0.0, feature_mask, cumulative=True, min_child_samples=20.0
        )

    # a small fit's level: cumulative (native kernel) histograms with the count column
    hist = jax.ShapeDtypeStruct((4, 2, 17, 3), jnp.float32)
    mask = jax.ShapeDtypeStruct((4,), bool)
    options = fast_compile_options(jax.devices()[0].platform) or None
    compiled = jax.jit(search, compiler_options=options).lower(hist, mask).compile()
    n_operations = _operations(compiled.as_text())
    assert n_operations <= _MOST_SEARCH_OPERATIONS, (
        f"the compiled split search has {n_operations} operations "
        f"(at most {_MOST_SEARCH_OPERATIONS} expected)"
    )


def _tree_program_operations(max_depth: int) -> int:
    """Operations of the lowered program that grows one tree of ``max_depth``
    on 2000 rows of 20 features (the reference kernel: no native library)."""
    from jaxboost.engine.tree import TreeParams, grow_tree

    params = TreeParams(max_depth, 1.0, 1e-3, 0.0, "reference", min_child_samples=20.0)
    bins = jax.ShapeDtypeStruct((20, 2000), jnp.uint8)
    stats = jax.ShapeDtypeStruct((2000, 3), jnp.float32)
    edges = jax.ShapeDtypeStruct((20, 255), jnp.float32)
    grow = jax.jit(grow_tree, static_argnames=("params", "axis_name"))
    lowered = grow.lower(bins, stats, edges, params=params, axis_name=None)
    return sum(1 for line in lowered.as_text().splitlines() if _LOWERED_OPERATION.match(line))


# a lowered (StableHLO) operation line: "    %name = op ..." or "    %a:2 = ..."
_LOWERED_OPERATION = re.compile(r"^\s+%[\w#:]+ = ")
# what a tree of depth 6 may lower to beyond one of depth 3: the levels share
# one copy of the split search (jaxboost.engine.level_loop); unrolled, each
# level added its own (about 440 lowered operations)
_MOST_OPERATIONS_OF_DEEPER_LEVELS = 40


def test_deeper_trees_share_one_copy_of_the_levels_program():
    extra = _tree_program_operations(6) - _tree_program_operations(3)
    assert extra <= _MOST_OPERATIONS_OF_DEEPER_LEVELS, (
        f"depth 6 lowers to {extra} more operations than depth 3 "
        f"(at most {_MOST_OPERATIONS_OF_DEEPER_LEVELS} expected)"
    )
