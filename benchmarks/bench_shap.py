"""SHAP values of jaxboost's forests: contributions and interactions, timed.

Trains 100 trees of depth 6 for the log loss on ``--train-rows`` rows of
``make_data`` (``bench_fit.py``'s settings), then explains ``--rows`` new
rows with ``Booster.predict_contributions`` and ``--interaction-rows`` with
``predict_interactions``: each called once first (it compiles for the row
bucket), then the best of ``--repeat`` calls.  Sanity check: each row's
contributions sum to ``predict_raw``.  jaxboost alone: the comparison with
XGBoost's ``pred_contribs`` on the same exported model waits for export.

    python benchmarks/bench_shap.py                       # 100k x 28 rows explained
    python benchmarks/bench_shap.py --rows 10000 --train-rows 20000 --rounds 10
"""

from __future__ import annotations

import argparse

import numpy as np
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

    print_header(argv, [])
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
    calls = {
        "predict_contributions": lambda: model.predict_contributions(X),
        "predict_interactions": lambda: model.predict_interactions(X_pairs),
        "predict_raw": lambda: model.predict_raw(X),
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
    rows = {"predict_contributions": args.rows, "predict_interactions": args.interaction_rows}
    rows["predict_raw"] = args.rows
    print()
    print_table(
        ["call", "rows", "best seconds", "rows/s", "microseconds per row and tree"],
        [
            [
                name,
                rows[name],
                f"{timing.seconds:.3f}",
                f"{rows[name] / timing.seconds:,.0f}",
                f"{1e6 * timing.seconds / rows[name] / args.rounds:.3f}",
            ]
            for name, timing in best.items()
        ],
    )


if __name__ == "__main__":
    main()
