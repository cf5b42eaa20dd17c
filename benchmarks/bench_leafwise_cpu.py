"""Leaf-wise fits timed by wall and by the process's CPU seconds, one fit after another.

`bench_leafwise.py`'s data and settings, one model a process: jaxboost
(``grow_policy="lossguide"``, ``max_leaves``, ``--depth`` 0 for no
bound, one CPU device) fitted ``--fits`` times in the process (the first
compiles, the others find its programs), or LightGBM (``num_leaves``, one
thread) once. On a shared machine the wall counts other work; the CPU
seconds count this process's threads only. To compare two versions, run
this file from each checkout alternately (``JAXBOOST_COMPILATION_CACHE=off``
for first fits that compile):

    python benchmarks/bench_leafwise_cpu.py --data synthetic --rows 200000 --leaves 255 --depth 16
    python benchmarks/bench_leafwise_cpu.py --data multiclass --leaves 31 --model lightgbm
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import numpy as np
from bench_leafwise import DATA_DIR, SETTINGS, fit_lightgbm, multiclass, synthetic, test_loss


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", choices=["multiclass", "synthetic"], default="multiclass")
    parser.add_argument("--rows", type=int, default=200_000, help="synthetic train rows")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--leaves", type=int, default=31)
    parser.add_argument("--depth", type=int, default=0, help="max_depth, 0: None")
    parser.add_argument("--model", choices=["jaxboost", "lightgbm"], default="jaxboost")
    parser.add_argument("--fits", type=int, default=2)
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    args = parser.parse_args(argv)
    data = multiclass(args.data_dir) if args.data == "multiclass" else synthetic(args.rows)
    X_train, y_train, X_test, y_test = data
    if args.model == "lightgbm":
        start = time.process_time()
        probabilities, seconds = fit_lightgbm(data, args.data, args.leaves, args.rounds, 1)
        cpu = time.process_time() - start
        loss = test_loss(args.data, y_test, probabilities)
        print(f"LightGBM: wall {seconds:.1f} s, CPU {cpu:.1f} s, test loss {loss:.4f}")
        return
    import jax

    import jaxboost as jb

    fits = []
    for _ in range(args.fits):
        model = jb.Booster(
            n_estimators=args.rounds,
            devices=jax.devices()[:1],
            grow_policy="lossguide",
            max_leaves=args.leaves,
            max_depth=args.depth or None,
            **SETTINGS[args.data][1],
        )
        wall, cpu = time.perf_counter(), time.process_time()
        model.fit(X_train, y_train)
        fits.append(
            f"wall {time.perf_counter() - wall:.1f} s, CPU {time.process_time() - cpu:.1f} s"
        )
    loss = test_loss(args.data, y_test, np.asarray(model.predict(X_test)))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"jaxboost max_depth {args.depth or 'none'}: "
        + " | ".join(fits)
        + f" | test loss {loss:.4f} | peak {peak:.0f} MB"
    )


if __name__ == "__main__":
    main()
