"""Prediction throughput of leaf-wise trees against LightGBM's.

jaxboost ``grow_policy="lossguide"`` (31 leaves within each ``--depths``
bound) against LightGBM ``num_leaves=31`` (no depth bound): 100 log-loss
trees trained on 100k rows of ``make_data``, then 1M new rows scored (raw
scores, best of 3 calls each, jaxboost's compile before).

    python benchmarks/bench_predict_lossguide.py [--depths 6 8 10 12]
"""

from __future__ import annotations

import argparse
import functools
import time

import lightgbm as lgb
from _common import make_data, print_header, print_table, usable_cores

import jaxboost as jb


def best_seconds(call, repeat: int = 3) -> float:
    """The shortest wall clock of ``repeat`` calls of ``call()``."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--depths", type=int, nargs="+", default=[6, 8, 10, 12])
    args = parser.parse_args(argv)
    print_header(argv, ["lightgbm"])
    X, y, _ = make_data(100_000, seed=0)
    scored, _, _ = make_data(1_000_000, seed=1)
    threads = usable_cores()
    params = {"objective": "binary", "num_leaves": 31, "learning_rate": 0.1, "verbose": -1}
    lightgbm = lgb.train({**params, "num_threads": threads}, lgb.Dataset(X, y), 100)
    rows = []
    for depth in args.depths:
        model = jb.Booster(
            loss="binary_logloss",
            n_estimators=100,
            grow_policy="lossguide",
            max_leaves=31,
            max_depth=depth,
        ).fit(X, y)
        model.predict_raw(scored)  # compiles for the row bucket
        ours = best_seconds(functools.partial(model.predict_raw, scored))
        theirs = best_seconds(lambda: lightgbm.predict(scored, raw_score=True, num_threads=threads))
        rows.append((str(depth), f"{ours:.2f}", f"{theirs:.2f}", f"{theirs / ours:.2f}"))
    print_table(["max_depth", "jaxboost s", "LightGBM s", "throughput / LightGBM"], rows)


if __name__ == "__main__":
    main()
