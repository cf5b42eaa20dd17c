"""Multi-class fit time: jaxboost's two strategies against LightGBM, XGBoost and HGB.

jaxboost fits the softmax cross-entropy from the catalogue two ways: one tree
per round with a vector of class scores in every leaf
(``multi_strategy="multi_output_tree"``, the default) and one tree per class
and round (``"one_output_per_tree"``, what LightGBM, XGBoost and
scikit-learn's HGB grow).  Settings everywhere: depth 6 (LightGBM
``num_leaves=64``), learning rate 0.1, 255 bins, L2 1, least child hessian
1e-3 (HGB: its defaults for these, ``max_depth=6``, no early stopping).
jaxboost is fitted once to compile; the table has its compiled fits (best of
``--repeat``, alternating with the peers) and the test log loss and accuracy.

Data (``--data``, one table each):
- ``synthetic``: ``--rows`` rows of ``make_data``'s 28 HIGGS-like features,
  ``--classes`` classes drawn from a softmax of random linear and nonlinear
  functions of them (Gumbel noise);
- ``digits``: scikit-learn's bundled 8x8 digits (1797 x 64, pixel values 0
  to 16, 10 classes): features with few distinct values;
- ``multiclass``: LightGBM's 5-class example (``multiclass.train`` /
  ``multiclass.test`` in ``--data-dir``), skipped when absent.

    python benchmarks/bench_multiclass.py                         # synthetic 50k x 28, 10 classes
    python benchmarks/bench_multiclass.py --data digits multiclass --repeat 3
"""

from __future__ import annotations

import argparse
from pathlib import Path

import lightgbm as lgb
import numpy as np
import xgboost as xgb
from _common import (
    best_of,
    compile_summary,
    jaxboost_booster,
    lightgbm_dataset,
    lightgbm_params,
    make_data,
    print_header,
    print_table,
    timed_report,
    usable_cores,
    xgboost_params,
)
from sklearn.datasets import load_digits
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split
from threadpoolctl import threadpool_limits

from jaxboost import losses

DATA_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
STRATEGIES = {
    "jaxboost, vector leaves": "multi_output_tree",
    "jaxboost, tree per class": "one_output_per_tree",
}


def synthetic(n_rows: int, n_classes: int, seed: int):
    """``make_data``'s features; labels from a noisy softmax of class scores
    that mix linear terms and the bumps of the first features."""
    X, _, _ = make_data(n_rows, seed)
    rng = np.random.default_rng([seed, 2])
    standardised = (X - X.mean(axis=0)) / X.std(axis=0)
    scores = standardised @ rng.normal(0.0, 0.4, size=(X.shape[1], n_classes))
    scores += np.sin(2.0 * standardised[:, :6]) @ rng.normal(0.0, 0.6, size=(6, n_classes))
    y = np.argmax(scores + rng.gumbel(size=scores.shape), axis=1)
    return train_test_split(X, y.astype(np.float32), test_size=0.2, random_state=seed)


def lightgbm_example(data_dir: Path):
    """LightGBM's 5-class example data as ``(X_train, X_test, y_train,
    y_test)``, or None when the files are absent."""
    paths = [data_dir / "multiclass.train", data_dir / "multiclass.test"]
    if not all(path.is_file() for path in paths):
        print(f"data multiclass: skipped, not found in {data_dir}")
        return None
    train, test = (np.loadtxt(path, delimiter="\t", dtype=np.float32) for path in paths)
    return tuple(
        np.ascontiguousarray(part) for part in (train[:, 1:], test[:, 1:], train[:, 0], test[:, 0])
    )


def datasets(args):
    """Yield ``(name, (X_train, X_test, y_train, y_test))`` per ``--data``."""
    for kind in args.data:
        if kind == "synthetic":
            name = f"synthetic {args.rows} x 28, {args.classes} classes"
            yield name, synthetic(args.rows, args.classes, args.seed)
        elif kind == "digits":
            X, y = load_digits(return_X_y=True)
            split = train_test_split(
                X.astype(np.float32), y.astype(np.float32), test_size=0.3, random_state=0
            )
            yield "scikit-learn digits (1797 x 64, 10 classes)", split
        else:
            loaded = lightgbm_example(args.data_dir)
            if loaded is not None:
                yield "LightGBM multiclass example (7000 x 28, 5 classes)", loaded


def fitters(X, y, n_classes: int, args):
    """``{library: fit() -> predict_proba(X_test)-able model}``."""
    threads = args.threads

    def jaxboost_fit(strategy):
        booster = jaxboost_booster(
            losses.softmax_cross_entropy,
            args.rounds,
            n_outputs=n_classes,
            multi_strategy=strategy,
        )
        return lambda: booster.fit(X, y)

    def lightgbm_fit():
        params = lightgbm_params(threads, "multiclass") | {"num_class": n_classes}
        return lgb.train(params, lightgbm_dataset(X, y), num_boost_round=args.rounds)

    def xgboost_fit():
        params = xgboost_params(threads, objective="multi:softprob", num_class=n_classes)
        matrix = xgb.QuantileDMatrix(X, y, max_bin=255, nthread=threads)
        return xgb.train(params, matrix, num_boost_round=args.rounds)

    def sklearn_fit():
        with threadpool_limits(threads):
            return HistGradientBoostingClassifier(
                max_iter=args.rounds, max_depth=6, learning_rate=0.1, early_stopping=False
            ).fit(X, y)

    calls = {name: jaxboost_fit(strategy) for name, strategy in STRATEGIES.items()}
    calls.update({"LightGBM": lightgbm_fit, "XGBoost": xgboost_fit, "sklearn HGB": sklearn_fit})
    return calls


def probabilities(name: str, model, X) -> np.ndarray:
    if name == "XGBoost":
        return model.predict(xgb.DMatrix(X))
    if name == "sklearn HGB":
        return model.predict_proba(X)
    return np.asarray(model.predict(X))  # jaxboost (softmax link) and LightGBM


def bench(name: str, split, args) -> None:
    X_train, X_test, y_train, y_test = split
    n_classes = int(max(y_train.max(), y_test.max())) + 1
    print(f"\n## {name}\n\ndata: {X_train.shape[0]} train, {X_test.shape[0]} test rows")
    calls = fitters(X_train, y_train, n_classes, args)
    first = {key: timed_report(f"{key} first fit:", calls[key]) for key in STRATEGIES}
    best = best_of(calls, args.repeat)
    for key in STRATEGIES:
        print(compile_summary(key, first[key], best[key]))
    reference = best["LightGBM"].seconds
    rows = []
    for key, timing in best.items():
        proba = probabilities(key, timing.value, X_test)
        rows.append(
            [
                key,
                f"{timing.seconds:.2f}",
                f"{timing.seconds / reference:.2f}x",
                f"{log_loss(y_test, proba, labels=np.arange(n_classes)):.4f}",
                f"{np.mean(proba.argmax(axis=1) == y_test):.4f}",
            ]
        )
    print()
    print_table(["library", "fit s", "ratio to LightGBM", "test log loss", "accuracy"], rows)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data",
        nargs="+",
        choices=("synthetic", "digits", "multiclass"),
        default=["synthetic"],
    )
    parser.add_argument("--rows", type=int, default=50_000, help="synthetic rows (80%% train)")
    parser.add_argument("--classes", type=int, default=10, help="synthetic classes")
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR, help="LightGBM's example data")
    parser.add_argument("--rounds", type=int, default=100, help="boosting rounds")
    parser.add_argument("--threads", type=int, default=usable_cores(), help="peers' threads")
    parser.add_argument(
        "--repeat", type=int, default=1, help="timed fits of each (alternating); fastest kept"
    )
    parser.add_argument("--seed", type=int, default=0, help="data seed")
    args = parser.parse_args(argv)
    print_header(argv, ["xgboost", "lightgbm", "scikit-learn"])
    for name, split in datasets(args):
        bench(name, split, args)


if __name__ == "__main__":
    main()
