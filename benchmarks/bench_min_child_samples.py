"""Held-out loss against ``min_child_samples``: the measurement behind its default.

jaxboost at its default settings (100 rounds, learning rate 0.1, depth 6,
255 bins, L2 1, ``min_child_weight`` 1e-3) on four real data sets at hand,
each split at random (80% train, 20% test, a fixed seed per split:
``--splits`` for LightGBM's examples, ``--small-splits`` for scikit-learn's,
whose test sets are small and noisy), for every ``min_child_samples`` in
``--values``:
- ``binary``: LightGBM's binary example (7500 x 28, HIGGS-like, log loss;
  ``binary.*`` in ``--data-dir``, skipped when absent);
- ``multiclass``: LightGBM's 5-class example (7500 x 28, softmax log loss;
  ``multiclass.*``, skipped when absent);
- ``breast_cancer``: scikit-learn's (569 x 30, log loss);
- ``diabetes``: scikit-learn's (442 x 10, squared error).

The table gives each data set's test loss averaged over the splits, the
ratio to ``min_child_samples=0`` (below 1: better; its mean, and its range
over the splits) and in how many splits it beat 0.  ``--min-child-weight``
sets the other bound on a child's size (default 1e-3, jaxboost's; 1 is
XGBoost's: the hessian of a log-loss row is at most 0.25, so 1 alone asks
for at least 4 rows).

``--timing ROWS`` measures what the default costs instead: fit seconds of
``min_child_samples`` 20 and 0 on ``ROWS`` rows of ``bench_fit.py``'s
synthetic data (its settings, ``--rounds`` rounds), for squared error
(whose constant hessian counts the rows) and log loss (each node's rows counted,
the children's estimated),
alternating 20 and 0 ``--repeat`` times after a fit of each; the median of
the pairs' ratios, of wall and of CPU time.  Run it with ``PYTHONPATH`` at another tree's copy to
compare versions.

    python benchmarks/bench_min_child_samples.py            # about 3 minutes on 2 busy cores
    python benchmarks/bench_min_child_samples.py --splits 3 --small-splits 8
    python benchmarks/bench_min_child_samples.py --min-child-weight 1 --values 0 20
    python benchmarks/bench_min_child_samples.py --timing 200000 --rounds 30
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from _common import jaxboost_booster, make_data, print_header, print_table
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.metrics import log_loss, mean_squared_error
from sklearn.model_selection import train_test_split

import jaxboost
from jaxboost import Classifier, Regressor, losses

DATA_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def _lightgbm_example(name: str, data_dir: Path) -> tuple[np.ndarray, np.ndarray] | None:
    """A LightGBM example's train and test files joined (label in column 0),
    or None when absent."""
    files = [data_dir / f"{name}.train", data_dir / f"{name}.test"]
    if not all(file.exists() for file in files):
        return None
    table = np.concatenate([np.loadtxt(file, dtype=np.float32) for file in files])
    return table[:, 1:], table[:, 0].astype(int)


def data_sets(
    data_dir: Path, splits: int, small_splits: int
) -> dict[str, tuple[np.ndarray, np.ndarray, bool, int]]:
    """Name -> (features, targets, is_classification, number of splits)."""
    found = {}
    for name in ("binary", "multiclass"):
        table = _lightgbm_example(name, data_dir)
        if table is not None:
            found[name] = (*table, True, splits)
    found["breast_cancer"] = (*load_breast_cancer(return_X_y=True), True, small_splits)
    found["diabetes"] = (*load_diabetes(return_X_y=True), False, small_splits)
    return found


def test_loss(data, split: int, settings: dict) -> float:
    """Held-out loss of a default jaxboost model fitted on split ``split``."""
    X, y, classification, _ = data
    stratify = y if classification else None
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.2, random_state=split, stratify=stratify
    )
    if classification:
        model = Classifier(**settings).fit(X_train, y_train)
        return log_loss(y_test, model.predict_proba(X_test), labels=model.classes_)
    model = Regressor(**settings).fit(X_train, y_train)
    return mean_squared_error(y_test, model.predict(X_test))


def loss_table(data: dict, values: list[int], min_child_weight: float) -> list[list]:
    """One row per (data set, value): mean test loss, ratio to value 0, wins."""
    rows = []
    for name, table in data.items():
        splits = table[3]
        losses = {
            value: np.array(
                [
                    test_loss(
                        table,
                        split,
                        {"min_child_samples": value, "min_child_weight": min_child_weight},
                    )
                    for split in range(splits)
                ]
            )
            for value in values
        }
        print(f"({name} done)", file=sys.stderr, flush=True)
        base = losses[values[0]]
        for value in values:
            ratios = losses[value] / base
            wins = int(np.sum(losses[value] < base))
            rows.append(
                [
                    name,
                    value,
                    f"{losses[value].mean():.4f}",
                    f"{ratios.mean():.4f}",
                    f"{ratios.min():.3f}-{ratios.max():.3f}",
                    f"{wins}/{splits}",
                ]
            )
    return rows


def timing_table(n_rows: int, rounds: int, repeat: int) -> list[list]:
    """One row per loss: median fit seconds at 20 and at 0, and the median
    and range of the paired ratios, of wall time and of this process's CPU
    time (on a busy machine the steadier of the two)."""
    X, y, _ = make_data(n_rows, 0)
    rows = []
    timed_losses = {"squared error": losses.squared_error, "log loss": losses.binary_logloss}
    for name, loss in timed_losses.items():

        def seconds(least: int, loss=loss) -> tuple[float, float]:
            model = jaxboost_booster(loss, rounds, min_child_samples=least)
            wall, cpu = time.perf_counter(), time.process_time()
            model.fit(X, y)
            return time.perf_counter() - wall, time.process_time() - cpu

        seconds(20), seconds(0)  # (compiles)
        pairs = np.array([(seconds(20), seconds(0)) for _ in range(repeat)])  # (repeat, 2, 2)
        ratios = pairs[:, 0] / pairs[:, 1]  # (repeat, [wall, cpu])
        row = [name, f"{np.median(pairs[:, 0, 0]):.3f}", f"{np.median(pairs[:, 1, 0]):.3f}"]
        for kind in (0, 1):
            row.append(f"{np.median(ratios[:, kind]):.3f}")
            row.append(f"{ratios[:, kind].min():.3f}-{ratios[:, kind].max():.3f}")
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--splits", type=int, default=2)
    parser.add_argument("--small-splits", type=int, default=6)
    parser.add_argument("--min-child-weight", type=float, default=1e-3)
    parser.add_argument("--values", type=int, nargs="+", default=[0, 5, 10, 20, 40])
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    parser.add_argument("--timing", type=int, metavar="ROWS", help="time the default instead")
    parser.add_argument("--rounds", type=int, default=100, help="rounds of --timing's fits")
    parser.add_argument("--repeat", type=int, default=5, help="pairs of --timing's fits")
    args = parser.parse_args()
    if args.timing:
        print_header(None, [])
        print(
            f"jaxboost from {Path(jaxboost.__file__).parent}; {args.timing} rows x 28, "
            f"{args.rounds} rounds, depth 6\n"
        )
        header = ["loss", "s at 20", "s at 0", "20 / 0 (median)", "range", "CPU 20 / 0", "range"]
        print_table(header, timing_table(args.timing, args.rounds, args.repeat))
        return
    values = sorted(set(args.values) | {0})
    data = data_sets(args.data_dir, args.splits, args.small_splits)
    print_header(None, ["sklearn"])
    header = ["data", "min_child_samples", "test loss", "/ at 0", "range over splits", "wins"]
    start = time.perf_counter()
    splits = {name: table[3] for name, table in data.items()}
    print(f"min_child_weight={args.min_child_weight:g}; random 80/20 splits: {splits}\n")
    print_table(header, loss_table(data, values, args.min_child_weight))
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
