"""Where a jaxboost boosting round spends its time: per tree level, and per kernel.

1. **Per level**: fits of ``make_data`` rows (log loss, 255 bins, all devices)
   at depths 1 to 6, each 10 and 40 rounds (warm, best of ``--repeat``);
   per-round time = (40-round fit - 10-round fit) / 30.  The difference
   between depths d and d-1 is what level d-1 costs (histograms, their psum,
   split search, routing); depth 1's time is the root level plus the rest of
   the round (gradients, leaf values, the update, the training loss).
2. **Per kernel**, on one device's share of the rows (``rows / devices``),
   jitted alone on one device: the histograms of a level with 1 and 32 nodes
   with the reference and the packed kernel, the split search at 1, 8 and 32
   nodes, routing the rows one level down, and the log loss's gradients and
   hessians.  Inside a fit the devices run these side by side, one core each.

    python benchmarks/profile_round.py                 # 1M rows
    python benchmarks/profile_round.py --rows 100000
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
from _common import N_FEATURES, jaxboost_booster, make_data, print_header, print_table

from jaxboost import losses
from jaxboost.engine.derivatives import grad_hess
from jaxboost.engine.split import find_best_splits
from jaxboost.kernels.histogram_kernels import HISTOGRAM_KERNELS, route_rows
from jaxboost.kernels.interfaces import LevelSplit

MAX_BINS = 255


def best_seconds(call, repeat: int) -> float:
    """Fastest of ``repeat`` timed calls (after one untimed call)."""
    jax.block_until_ready(call())
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        jax.block_until_ready(call())
        times.append(time.perf_counter() - start)
    return min(times)


def per_level(X, y, repeat: int) -> list[tuple[int, float]]:
    """``(depth, ms per round)`` for depths 1 to 6."""
    results = []
    for depth in range(1, 7):

        def fit(rounds, depth=depth):
            model = jaxboost_booster(losses.binary_logloss, rounds)
            model.max_depth = depth
            return lambda: model.fit(X, y).train_loss_

        short, long = best_seconds(fit(10), repeat), best_seconds(fit(40), repeat)
        results.append((depth, (long - short) / 30 * 1e3))
    return results


def random_split(rng: np.random.Generator, n_nodes: int) -> LevelSplit:
    """Random splits of a level of ``n_nodes`` nodes (missing bin ``MAX_BINS``)."""
    return LevelSplit(
        jnp.asarray(rng.integers(0, N_FEATURES, n_nodes, dtype=np.int32)),
        jnp.asarray(rng.integers(0, MAX_BINS, n_nodes, dtype=np.int32)),
        jnp.asarray(rng.integers(0, 2, n_nodes).astype(bool)),
        missing_bin=MAX_BINS,
    )


def kernels(n_rows: int, repeat: int) -> list[tuple[str, float]]:
    """``(kernel, ms)`` on ``n_rows`` random rows of one device."""
    rng = np.random.default_rng(0)
    bins = jnp.asarray(rng.integers(0, MAX_BINS + 1, (N_FEATURES, n_rows), dtype=np.uint8))
    stats = jnp.asarray(rng.standard_normal((n_rows, 2)).astype(np.float32))
    results = []
    native = HISTOGRAM_KERNELS["native"].level
    for n_nodes in (1, 32):
        node = jnp.asarray(rng.integers(0, n_nodes, n_rows, dtype=np.int32))
        for name, kernel in HISTOGRAM_KERNELS.items():
            build = jax.jit(kernel.level, static_argnames=("n_nodes", "n_bins"))
            seconds = best_seconds(
                lambda build=build, node=node, n_nodes=n_nodes: build(
                    bins, node, stats, n_nodes=n_nodes, n_bins=MAX_BINS + 1, parent=None, split=None
                ),
                repeat,
            )
            results.append((f"histograms, {n_nodes} node(s), {name} kernel", seconds * 1e3))
        if n_nodes > 1:  # the native kernel's level below the root: routing, subtraction
            parents = node // 2
            parent = native(bins, parents, stats, n_nodes // 2, MAX_BINS + 1, None, None)[1]
            split = random_split(rng, n_nodes // 2)
            children = jax.jit(
                lambda parents, parent, n_nodes=n_nodes, split=split: native(
                    bins, parents, stats, n_nodes, MAX_BINS + 1, parent, split
                )
            )
            seconds = best_seconds(
                lambda children=children, parents=parents, parent=parent: children(parents, parent),
                repeat,
            )
            results.append(
                (f"histograms, {n_nodes} node(s), native kernel by subtraction", seconds * 1e3)
            )
    search = jax.jit(lambda hist: find_best_splits(hist, 1, 1.0, 1e-3, 0.0))
    for n_nodes in (1, 8, 32):
        hist = np.abs(rng.standard_normal((N_FEATURES, n_nodes, MAX_BINS + 1, 2)))
        hist = jnp.asarray(hist.astype(np.float32))
        seconds = best_seconds(lambda hist=hist: search(hist), repeat)
        results.append((f"split search, {n_nodes} node(s)", seconds * 1e3))
    node = jnp.asarray(rng.integers(0, 32, n_rows, dtype=np.int32))
    split = random_split(rng, 32)
    route = jax.jit(lambda bins, node: route_rows(bins, node, split))
    seconds = best_seconds(lambda: route(bins, node), repeat)
    results.append(("routing rows one level down (32 nodes)", seconds * 1e3))
    y = jnp.asarray(rng.integers(0, 2, n_rows).astype(np.float32))
    raw = jnp.zeros((n_rows, 1), jnp.float32)
    derivatives = jax.jit(lambda y, raw: grad_hess(losses.binary_logloss, y, raw))
    seconds = best_seconds(lambda: derivatives(y, raw), repeat)
    results.append(("log loss gradients and hessians", seconds * 1e3))
    return results


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="training rows")
    parser.add_argument("--repeat", type=int, default=2, help="timed calls, fastest kept")
    parser.add_argument("--seed", type=int, default=0, help="data seed")
    args = parser.parse_args(argv)
    print_header(argv, packages=[])
    n_devices = min(len(jax.devices()), max(1, args.rows // 16_384))
    X, y, _ = make_data(args.rows, args.seed)

    print(f"\n## Per level: {args.rows} rows, {n_devices} device(s), log loss, 255 bins\n")
    levels = per_level(X, y, args.repeat)
    rows, previous = [], 0.0
    for depth, ms in levels:
        rows.append((depth, f"{ms:.1f}", f"{ms - previous:.1f}"))
        previous = ms
    print_table(["depth", "ms per round", "ms added by the deepest level"], rows)

    shard = args.rows // n_devices
    print(f"## Per kernel: {shard} rows (one device's share), {N_FEATURES} features\n")
    print_table(["kernel", "ms"], [(name, f"{ms:.2f}") for name, ms in kernels(shard, 5)])


if __name__ == "__main__":
    main()
