"""Prediction throughput of jaxboost, LightGBM and XGBoost on the same forest shape.

Each library trains 100 trees of depth 6 for the log loss on ``--train-rows``
rows of ``make_data`` with ``bench_fit.py``'s settings (depth 6, LightGBM 64
leaves, 255 bins, learning rate 0.1, L2 1, least child hessian 1e-3; XGBoost
``hist``), then scores ``--rows`` new rows, raw scores (margins) only:

- jaxboost ``Booster.predict_raw(X)``: called once untimed-for-the-table (it
  compiles for the row bucket), then the best of ``--repeat`` calls;
- LightGBM ``Booster.predict(X, raw_score=True, num_threads=cores)``;
- XGBoost ``Booster.predict(DMatrix(X), output_margin=True)`` (the time includes
  building the ``DMatrix``) and ``Booster.inplace_predict(X,
  predict_type="margin")``, both with ``nthread`` = cores.

The calls alternate between libraries, best of ``--repeat`` each.  Sanity
checks: the AUC of every prediction against the labels, XGBoost's two paths
against each other, and jaxboost's scores of the first rows predicted alone
against the same rows in the big call.

``--batch-sizes N ...`` times, after one prediction of 5 rows, each batch
size new to the process: its first call (and the JAX compile events
during it: 0 when nothing compiles), then the best of ``--repeat`` (at
least 200 calls below 1000 rows) of jaxboost's ``predict_raw`` and
``predict`` (the link too) beside LightGBM's ``predict(raw_score=True)``
and ``predict`` (probabilities), alternating; no 1M-row table then.

    python benchmarks/bench_predict.py                    # 1M rows scored
    python benchmarks/bench_predict.py --rows 50000 --train-rows 20000 --rounds 10
    python benchmarks/bench_predict.py --train-rows 20000 --batch-sizes 1 7 100 1000 7000 100000
"""

from __future__ import annotations

import argparse
import time

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
    timed,
    timed_report,
    usable_cores,
    xgboost_params,
)
from sklearn.metrics import roc_auc_score

from jaxboost import losses

CHECK_ROWS = 1000  # rows jaxboost also predicts on their own, for the consistency check


def train_models(X, y, args) -> dict:
    """The three fitted models (log loss, bench_fit.py's settings), by library."""
    fits = {
        "jaxboost": lambda: jaxboost_booster(losses.binary_logloss, args.rounds).fit(X, y),
        "LightGBM": lambda: lgb.train(
            lightgbm_params(args.threads, "binary"),
            lightgbm_dataset(X, y),
            num_boost_round=args.rounds,
        ),
        "XGBoost": lambda: xgb.train(
            xgboost_params(args.threads, objective="binary:logistic"),
            xgb.DMatrix(X, label=y, nthread=args.threads),
            num_boost_round=args.rounds,
        ),
    }
    models = {}
    for name, fit in fits.items():
        models[name] = timed_report(f"{name} training (not the point here)", fit).value
    return models


def prediction_calls(models: dict, X: np.ndarray, threads: int) -> dict:
    """``name -> call() -> raw scores`` for each way of predicting."""
    booster = models["XGBoost"]
    booster.set_param({"nthread": threads})
    return {
        "jaxboost predict_raw": lambda: models["jaxboost"].predict_raw(X),
        "LightGBM predict(raw_score=True)": lambda: models["LightGBM"].predict(
            X, raw_score=True, num_threads=threads
        ),
        "XGBoost DMatrix + predict(output_margin)": lambda: booster.predict(
            xgb.DMatrix(X, nthread=threads), output_margin=True
        ),
        "XGBoost inplace_predict(margin)": lambda: booster.inplace_predict(
            X, predict_type="margin"
        ),
    }


def sanity_checks(models: dict, X: np.ndarray, best: dict) -> None:
    """Print the agreements that show each library scored its own model."""
    jb_alone = models["jaxboost"].predict_raw(X[:CHECK_ROWS])
    jb_big = best["jaxboost predict_raw"].value[:CHECK_ROWS]
    xgb_paths = (
        best["XGBoost DMatrix + predict(output_margin)"].value
        - best["XGBoost inplace_predict(margin)"].value
    )
    print(
        f"sanity: jaxboost first {CHECK_ROWS} rows alone vs in the big call: max |diff| "
        f"{np.max(np.abs(jb_alone - jb_big)):.2e}; XGBoost DMatrix vs inplace: max |diff| "
        f"{np.max(np.abs(xgb_paths)):.2e}"
    )


def _best_seconds(call, repeat: int) -> float:
    """The fastest of ``repeat`` calls of ``call``, in seconds."""
    best = np.inf
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def batch_size_table(models: dict, X: np.ndarray, sizes: list[int], args) -> None:
    """Print, per batch size, jaxboost's first call at that size (compile
    events included) and the best calls of both libraries, in ms."""
    jaxboost, lightgbm = models["jaxboost"], models["LightGBM"]
    jaxboost.predict(X[:5])  # the model's first prediction
    rows = []
    for size in sizes:
        batch = X[:size]
        first = timed(jaxboost.predict, batch)
        repeat = max(args.repeat, 200 if size < 1000 else 20 if size <= 10_000 else 3)
        calls = {
            "raw": lambda batch=batch: jaxboost.predict_raw(batch),
            "predict": lambda batch=batch: jaxboost.predict(batch),
            "lgb raw": lambda batch=batch: lightgbm.predict(
                batch, raw_score=True, num_threads=args.threads
            ),
            "lgb predict": lambda batch=batch: lightgbm.predict(batch, num_threads=args.threads),
        }
        best = {name: np.inf for name in calls}
        for _ in range(3):  # alternating, a third of the calls each time
            for name, call in calls.items():
                best[name] = min(best[name], _best_seconds(call, -(-repeat // 3)))
        rows.append(
            [
                size,
                f"{first.seconds * 1e3:.2f}",
                f"{first.compile_seconds:.3f}",
                *(f"{best[name] * 1e3:.3f}" for name in calls),
                f"{best['predict'] / best['lgb predict']:.2f}",
            ]
        )
    print_table(
        [
            "rows",
            "jaxboost first predict (ms)",
            "its compile events (s)",
            "jaxboost predict_raw (ms)",
            "jaxboost predict (ms)",
            "LightGBM raw (ms)",
            "LightGBM predict (ms)",
            "predict / LightGBM's",
        ],
        rows,
    )


def main(argv=None) -> None:
    """Parse the options, train, time the predictions and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows to score")
    parser.add_argument("--train-rows", type=int, default=100_000, help="training rows")
    parser.add_argument("--rounds", type=int, default=100, help="trees (boosting rounds)")
    parser.add_argument("--repeat", type=int, default=3, help="timed calls of each; best kept")
    parser.add_argument("--threads", type=int, default=usable_cores(), help="peers' threads")
    parser.add_argument("--seed", type=int, default=0, help="data seed (scored rows: seed + 1)")
    parser.add_argument(
        "--batch-sizes", type=int, nargs="+", help="time these batch sizes (see above) instead"
    )
    args = parser.parse_args(argv)

    if args.batch_sizes:
        args.rows = max(args.batch_sizes)
    print_header(argv, ["xgboost", "lightgbm", "scikit-learn"])
    print(
        f"settings: {args.rounds} trees, depth 6, log loss, trained on {args.train_rows} rows; "
        f"{args.rows} x 28 float32 rows scored; LightGBM/XGBoost threads {args.threads}"
    )
    X_train, y_train, _ = make_data(args.train_rows, args.seed)
    X, y, _ = make_data(args.rows, args.seed + 1)
    models = train_models(X_train, y_train, args)
    if args.batch_sizes:
        batch_size_table(models, X, args.batch_sizes, args)
        return
    calls = prediction_calls(models, X, args.threads)
    first = timed_report(
        "jaxboost predict_raw first call (compiles)", calls["jaxboost predict_raw"]
    )
    best = best_of(calls, args.repeat)
    print(compile_summary("jaxboost predict_raw", first, best["jaxboost predict_raw"]))
    sanity_checks(models, X, best)
    reference = best["LightGBM predict(raw_score=True)"].seconds
    xgb_names = [name for name in best if name.startswith("XGBoost")]
    faster_xgb = min(xgb_names, key=lambda name: best[name].seconds)
    print(f"faster XGBoost path here: {faster_xgb}")
    print()
    print_table(
        ["library / call", "best seconds", "rows/s", "throughput / LightGBM's", "AUC"],
        [
            [
                name,
                f"{timing.seconds:.3f}",
                f"{args.rows / timing.seconds:,.0f}",
                f"{reference / timing.seconds:.2f}x",
                f"{roc_auc_score(y, timing.value):.5f}",
            ]
            for name, timing in best.items()
        ],
    )


if __name__ == "__main__":
    main()
