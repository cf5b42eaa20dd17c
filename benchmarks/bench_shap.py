"""SHAP values of jaxboost's forests: contributions and interactions, timed.

Trains 100 trees of depth 6 for the log loss on ``--train-rows`` rows of
``make_data`` (``bench_fit.py``'s settings), then explains ``--rows`` new
rows with ``Booster.predict_contributions`` and ``--interaction-rows`` with
``predict_interactions``: each called once first (it compiles for the row
bucket), then the best of ``--repeat`` calls.  Sanity check: each row's
contributions sum to ``predict_raw``.  The same model exported
(``save(path, format="xgboost")``) is explained by XGBoost's ``pred_contribs``
and ``pred_interactions`` in the same run, alternating with jaxboost's
calls, with as many threads as jaxboost has devices (one thread each);
their values are checked equal and the table gives jaxboost / XGBoost
time ratios.

    python benchmarks/bench_shap.py                       # 100k x 28 rows explained
    python benchmarks/bench_shap.py --rows 10000 --train-rows 20000 --rounds 10
"""

from __future__ import annotations

import argparse
import os
import tempfile

import jax
import numpy as np
import xgboost as xgb
from _common import (
    best_of,
    compile_summary,
    jaxboost_booster,
    make_data,
    print_header,
    print_table,
    timed_report,
)

from jaxboost import losses


def main(argv=None) -> None:
    """Parse the options, train, time the explanations and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000, help="rows to explain")
    parser.add_argument(
        "--interaction-rows", type=int, default=10_000, help="rows for interactions"
    )
    parser.add_argument("--train-rows", type=int, default=100_000, help="training rows")
    parser.add_argument("--rounds", type=int, default=100, help="trees (boosting rounds)")
    parser.add_argument("--repeat", type=int, default=2, help="timed calls of each; best kept")
    parser.add_argument("--seed", type=int, default=0, help="data seed (explained rows: seed + 1)")
    args = parser.parse_args(argv)

    print_header(argv, ["xgboost"])
    print(
        f"settings: {args.rounds} trees, depth 6, log loss, trained on {args.train_rows} rows; "
        f"{args.rows} x 28 rows explained, {args.interaction_rows} for interactions"
    )
    X_train, y_train, _ = make_data(args.train_rows, args.seed)
    X, _, _ = make_data(args.rows, args.seed + 1)
    X_pairs = X[: args.interaction_rows]
    model = timed_report(
        "jaxboost training (not the point here)",
        lambda: jaxboost_booster(losses.binary_logloss, args.rounds).fit(X_train, y_train),
    ).value
    threads = len(model.devices or jax.local_devices())  # the native walk's threads
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.json")
        model.save(path, format="xgboost")
        exported = xgb.Booster(model_file=path)
    exported.set_param({"nthread": threads})
    print(f"threads: {threads} (jaxboost's CPU devices; XGBoost's nthread)")
    rows_all, rows_pairs = xgb.DMatrix(X, nthread=threads), xgb.DMatrix(X_pairs, nthread=threads)
    calls = {
        "predict_contributions": lambda: model.predict_contributions(X),
        "xgb pred_contribs": lambda: exported.predict(rows_all, pred_contribs=True),
        "predict_interactions": lambda: model.predict_interactions(X_pairs),
        "xgb pred_interactions": lambda: exported.predict(rows_pairs, pred_interactions=True),
        "predict_raw": lambda: model.predict_raw(X),
        # in place: predict() on one DMatrix returns its cached scores
        "xgb predict margin": lambda: exported.inplace_predict(X, predict_type="margin"),
    }
    first = {
        name: timed_report(f"{name} first call (compiles)", call) for name, call in calls.items()
    }
    best = best_of(calls, args.repeat)
    for name in calls:
        print(compile_summary(name, first[name], best[name]))
    contributions = best["predict_contributions"].value
    raw = best["predict_raw"].value
    print(
        "sanity: max |row sum of contributions - predict_raw| "
        f"{np.max(np.abs(contributions.sum(axis=1) - raw)):.2e}"
    )
    for ours, theirs in [
        ("predict_contributions", "xgb pred_contribs"),
        ("predict_interactions", "xgb pred_interactions"),
    ]:
        mine, other = best[ours].value, best[theirs].value
        scale = max(float(np.abs(other).max()), 1.0)
        print(f"sanity: max |{ours} - {theirs}| / scale {np.abs(mine - other).max() / scale:.2e}")
    rows = {name: args.interaction_rows if "interactions" in name else args.rows for name in calls}
    partner = {name: "xgb " + name for name in calls}
    partner.update(
        predict_contributions="xgb pred_contribs",
        predict_interactions="xgb pred_interactions",
        predict_raw="xgb predict margin",
    )
    print()
    print_table(
        ["call", "rows", "best seconds", "rows/s", "us per row and tree", "jaxboost / XGBoost"],
        [
            [
                name,
                rows[name],
                f"{timing.seconds:.3f}",
                f"{rows[name] / timing.seconds:,.0f}",
                f"{1e6 * timing.seconds / rows[name] / args.rounds:.3f}",
                f"{timing.seconds / best[partner[name]].seconds:.2f}x"
                if partner[name] in best
                else "",
            ]
            for name, timing in best.items()
        ],
    )


if __name__ == "__main__":
    main()
