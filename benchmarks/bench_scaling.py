"""Time per boosting round of jaxboost on 1, 2 and 4 CPU devices, and the bytes
its histogram reduce-scatter moves per tree level.

Every device count runs in a fresh process (``JAXBOOST_CPU_DEVICES=N``: the
device count is fixed when JAX starts) that fits ``make_data`` rows (28
features) with the log loss, depth 6, 255 bins, learning rate 0.1, L2 1: a
fit of 10 rounds and one of 40, each fitted once first to compile and then
timed (best of ``--repeat``).  Per-round time = (40-round fit - 10-round fit)
/ 30, so binning, the initial score and the transfers cancel out.

The bytes come from the algorithm (``jaxboost/tree.py``, ``histogram.py``,
``boost.py``): at depth ``d`` (0-based, ``d < max_depth``) each device builds
a ``(28 features, 2^d nodes, 256 bins, 2 stats)`` float32 histogram -- 255
value bins plus the missing-value bin; stats = gradient and hessian (``2 K``
columns for ``K`` outputs) -- and ``lax.psum_scatter`` sums it over
devices, each receiving the sums of its slice of the features (features
padded to a multiple of the device count) to search; the devices then agree on
each node's best split with a few per-node ``pmax`` / ``pmin`` / ``psum``.
A ring reduce-scatter of ``S`` bytes sends and receives ``(n - 1) / n x S``
per device (half an all-reduce).  On CPU devices of one process this is a
copy through shared memory, not a network ring; the figure is what a
multi-host run moves.

    python benchmarks/bench_scaling.py                          # 1M rows, 1 2 4 devices
    python benchmarks/bench_scaling.py --rows 20000 --devices 1 2
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
from _common import (
    N_FEATURES,
    jaxboost_booster,
    make_data,
    print_header,
    print_table,
    report,
    timed,
    timed_report,
    usable_cores,
)

import jaxboost as jb
from jaxboost import losses
from jaxboost.kernels.histogram_reference import build_histograms

MAX_DEPTH = 6  # the settings of _common.jaxboost_booster
MAX_BINS = 255
N_OUTPUTS = 1
HIST_BINS = MAX_BINS + 1  # tree.grow_tree: max_bins value bins + the missing bin
HIST_STATS = 2 * N_OUTPUTS  # the split statistics: [grad, hess]
ROUNDS = (10, 40)
FLOAT32_BYTES = 4


def fit(X, y, rounds: int) -> jb.Booster:
    """jaxboost with bench_fit.py's settings, ``rounds`` rounds, all devices."""
    return jaxboost_booster(losses.binary_logloss, rounds).fit(X, y)


def child(args) -> None:
    """Run in the subprocess: time the fits, print one JSON line."""
    X, y, _ = make_data(args.rows, args.seed)
    result = {"devices": len(jax.devices())}
    for rounds in ROUNDS:
        first = timed_report(f"{rounds} rounds, first fit (compiles)", fit, X, y, rounds)
        warm = min((timed(fit, X, y, rounds) for _ in range(args.repeat)), key=lambda t: t.seconds)
        report(f"{rounds} rounds, warm fit (best of {args.repeat})", warm)
        result[f"first_{rounds}"] = first.seconds
        result[f"warm_{rounds}"] = warm.seconds
        result[f"compile_events_{rounds}"] = first.compile_seconds
    print(json.dumps(result))


def run_child(n_devices: int, args) -> dict:
    """Time ``n_devices`` devices in a fresh process; its JSON result."""
    command = [sys.executable, __file__, "--child", str(n_devices)]
    command += ["--rows", str(args.rows), "--repeat", str(args.repeat), "--seed", str(args.seed)]
    print(f"\n## {n_devices} device(s): {' '.join(command[1:])}", flush=True)
    try:
        done = subprocess.run(
            command,
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, "JAXBOOST_CPU_DEVICES": str(n_devices)},
        )
    except subprocess.CalledProcessError as error:
        print(error.stdout, error.stderr, sep="\n", file=sys.stderr)
        raise
    lines = done.stdout.rstrip().splitlines()
    print("\n".join(lines[:-1]), flush=True)
    result = json.loads(lines[-1])
    if result["devices"] != n_devices:
        raise RuntimeError(f"asked for {n_devices} devices, the child had {result['devices']}")
    return result


def histogram_shape(depth: int) -> tuple[int, ...]:
    """Shape of one level's histogram, read off ``build_histograms`` (no data)."""
    n_rows = 1024  # any row count: the histogram's shape does not depend on it
    build = functools.partial(build_histograms, n_nodes=2**depth, n_bins=HIST_BINS)
    shape = jax.eval_shape(
        build,
        jax.ShapeDtypeStruct((N_FEATURES, n_rows), jnp.uint8),
        jax.ShapeDtypeStruct((n_rows,), jnp.int32),
        jax.ShapeDtypeStruct((n_rows, HIST_STATS), jnp.float32),
    )
    return shape.shape


def ring_bytes(size: int, n_devices: int) -> float:
    """Bytes one device sends (and receives) in a ring reduce-scatter of
    ``size`` (the histogram padded to a multiple of ``n_devices`` features)."""
    padded = size / N_FEATURES * (-(-N_FEATURES // n_devices) * n_devices)
    return (n_devices - 1) / n_devices * padded


def print_traffic(devices: list[int]) -> None:
    """Bytes summed per level and per tree, and the ring traffic per device."""
    shared = [n for n in devices if n > 1]
    headers = ["depth d", "histogram shape (features, nodes, bins, stats)", "bytes summed"]
    headers += [f"ring bytes per device, {n} devices" for n in shared]
    rows, total = [], 0
    for depth in range(MAX_DEPTH):
        shape = histogram_shape(depth)
        size = FLOAT32_BYTES * math.prod(shape)
        total += size
        rows.append([depth, shape, f"{size:,}", *(f"{ring_bytes(size, n):,.0f}" for n in shared)])
    rows.append(
        [
            f"tree (d = 0..{MAX_DEPTH - 1})",
            "",
            f"{total:,} ({total / 2**20:.2f} MiB)",
            *(f"{ring_bytes(total, n):,.0f}" for n in shared),
        ]
    )
    print(
        f"\nHistogram reduce-scatter, {N_FEATURES} features, {MAX_BINS} bins + 1 missing-value bin, "
        f"stats [gradient, hessian] float32, depth {MAX_DEPTH}:"
    )
    print_table(headers, rows)
    leaf_sums = FLOAT32_BYTES * (4 * 2**MAX_DEPTH + 2)
    print(
        f"Besides the histograms each round psums {leaf_sums:,} bytes: per-leaf sums of the "
        "gradient (twice), the hessian and the weight, and the training loss (Newton leaves)."
    )


def parent(args, argv) -> None:
    """Run every device count in its own process and print the tables."""
    print_header(argv, [], show_devices=False)
    print(
        f"settings: {args.rows} x {N_FEATURES} rows, log loss, depth {MAX_DEPTH}, {MAX_BINS} "
        f"bins; fits of {ROUNDS[0]} and {ROUNDS[1]} rounds, warm, best of {args.repeat}"
    )
    if max(args.devices) > usable_cores():
        print(
            f"note: {max(args.devices)} devices on {usable_cores()} usable cores oversubscribe "
            "them (each CPU device runs its scatter on one thread)"
        )
    results = {n: run_child(n, args) for n in args.devices}
    short, long = ROUNDS
    per_round = {
        n: (r[f"warm_{long}"] - r[f"warm_{short}"]) / (long - short) for n, r in results.items()
    }
    base = per_round.get(1, per_round[args.devices[0]])
    print()
    print_table(
        [
            "devices",
            f"fit {short} rounds s",
            f"fit {long} rounds s",
            "per round ms",
            f"speed-up vs {1 if 1 in per_round else args.devices[0]} device(s)",
            f"compile s ({long} rounds: first - warm)",
        ],
        [
            [
                n,
                f"{r[f'warm_{short}']:.2f}",
                f"{r[f'warm_{long}']:.2f}",
                f"{1000 * per_round[n]:.1f}",
                f"{base / per_round[n]:.2f}x",
                f"{r[f'first_{long}'] - r[f'warm_{long}']:.2f}",
            ]
            for n, r in results.items()
        ],
    )
    print_traffic(args.devices)


def main(argv=None) -> None:
    """Parent: one child process per device count; child: time the fits."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--rows", type=int, default=1_000_000, help="training rows")
    parser.add_argument("--repeat", type=int, default=1, help="warm fits of each; best kept")
    parser.add_argument("--seed", type=int, default=0, help="data seed")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is None:
        parent(args, argv)
    else:
        child(args)


if __name__ == "__main__":
    main()
