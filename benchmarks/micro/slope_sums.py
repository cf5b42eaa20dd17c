"""The line search's sums, alone: the loss's slope and curvature handed to the
native kernel as two buffers (``jaxboost_slope_sums``, what jaxboost runs)
against the concatenation ``[slope, curvature, |slope|] * weight`` summed by
the plain native leaf sums (what it ran before, 2026-11-23).

Fused into the concatenation, XLA on CPU computes each of its ``3 P`` rows
separately and recomputes the loss's shared exponentials for every one.  One
iteration of the search on one device's rows: ``--rows`` rows, 32 leaves, 2
trial points per leaf, fastest of 15 calls.  The two must agree exactly.

    python benchmarks/micro/slope_sums.py
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxboost  # noqa: F401  (configures devices before JAX starts)
from jaxboost import losses
from jaxboost.engine import line_search
from jaxboost.kernels.leaf_sums import LEAF_KERNELS, leaf_sums_native

N_LEAVES = 32


def log_cosh(y, f):
    d = f - y
    return jnp.logaddexp(d, -d) - jnp.log(2.0)


def concatenated(slope, curvature, weight, leaf_of_row, n_leaves):
    """The earlier path: one ``(3 P, n_rows)`` array of weighted terms."""
    terms = jnp.concatenate([slope, curvature, jnp.abs(slope)], axis=0) * weight
    return leaf_sums_native(terms, leaf_of_row, n_leaves)


def fastest_ms(program, *args, repeat: int = 15) -> float:
    """Fastest of ``repeat`` calls of ``program(*args)`` (after one untimed)."""
    jax.block_until_ready(program(*args))
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        jax.block_until_ready(program(*args))
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def sums_program(loss, kernels, direction):
    """``(rows, steps) -> (32, 3, P)`` the search's sums, jitted."""
    return jax.jit(
        lambda rows, steps: line_search._slope_sums(
            loss, kernels, direction, N_LEAVES, rows, steps, None
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=500_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    n = args.rows
    rows = line_search._LeafRows(
        jnp.asarray(rng.standard_normal(n).astype(np.float32)),
        jnp.asarray(rng.standard_normal((n, 1)).astype(np.float32)),
        jnp.ones(n, jnp.float32),
        jnp.asarray(rng.integers(0, N_LEAVES, n).astype(np.int32)),
    )
    direction = jnp.ones((N_LEAVES, 1), jnp.float32)
    steps = jnp.asarray(rng.standard_normal((N_LEAVES, 2)).astype(np.float32))
    native = LEAF_KERNELS["native"]
    before = native._replace(slope_sums=concatenated)
    print(f"{n} rows, {N_LEAVES} leaves, 2 points; ms, fastest of 15; jax {jax.__version__}")
    print("| loss | concatenated | two buffers | ratio |")
    print("| --- | --- | --- | --- |")
    for name, loss, y in (
        ("log-cosh", log_cosh, rows.y),
        ("log loss", losses.binary_logloss, (rows.y > 0).astype(jnp.float32)),
        ("pinball 0.9", losses.quantile(0.9), rows.y),
    ):
        data = rows._replace(y=y)
        old, new = (sums_program(loss, kernels, direction) for kernels in (before, native))
        np.testing.assert_array_equal(np.asarray(old(data, steps)), np.asarray(new(data, steps)))
        old_ms, new_ms = fastest_ms(old, data, steps), fastest_ms(new, data, steps)
        print(f"| {name} | {old_ms:.2f} | {new_ms:.2f} | {old_ms / new_ms:.2f}x |")


if __name__ == "__main__":
    main()
