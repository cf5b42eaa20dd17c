"""Friedman's any-loss gradient boosting as write-ups implement it, against jaxboost.

The reference (numpy, scikit-learn, scipy), for the pinball loss of the
``alpha`` quantile: ``F0 = argmin_c sum_i loss(y_i, c)``
(``scipy.optimize.minimize_scalar``); then each round the hand-written negative
gradient of the loss as pseudo-residuals, a
``sklearn.tree.DecisionTreeRegressor(max_depth=depth)`` fitted to them (least
squares), and for every leaf ``gamma = argmin_g sum_{i in leaf} loss(y_i, F_i +
g)`` by ``minimize_scalar`` (Brent); ``F += learning_rate * gamma``.

jaxboost runs the same algorithm: ``leaf_method="line_search"`` (the exact
leaf minimiser: a weighted quantile for the pinball loss),
``split_criterion="first_order"`` (least squares on the pseudo-residuals)
and ``reg_lambda=0``; it bins features into 255 quantile bins where the
reference's trees use exact thresholds, so the trees can differ slightly.
Depth 3 is the default (scikit-learn's and Friedman's usual depth).

Fit time of each, the ratio reference / jaxboost (jaxboost warm: fitted once
first to compile), and the training and test loss of both (mean pinball loss,
numpy float64, the same code for both).  ``--reference-rounds K`` runs the
reference for K rounds only and extrapolates its time per round to
``--rounds`` (the share of its one-off initial-score minimisation is scaled up
with it, a slight overestimate); its losses are then compared with jaxboost's
after K rounds.

    python benchmarks/bench_friedman.py                       # 500 and 100k rows
    python benchmarks/bench_friedman.py --rows 500 20000 --rounds 20
    python benchmarks/bench_friedman.py --rows 1000000 --reference-rounds 5
"""

from __future__ import annotations

import argparse
import functools

import numpy as np
from _common import (
    best_of,
    compile_summary,
    make_regression,
    print_header,
    print_table,
    split_rows,
    timed_report,
)
from scipy.optimize import minimize_scalar
from sklearn.tree import DecisionTreeRegressor

import jaxboost as jb
from jaxboost import losses


def pinball(y: np.ndarray, f, alpha: float) -> np.ndarray:
    """Pinball loss of the ``alpha`` quantile per sample, numpy float64."""
    diff = np.asarray(y, np.float64) - f
    return np.where(diff >= 0, alpha * diff, (alpha - 1.0) * diff)


def pinball_negative_gradient(y: np.ndarray, f: np.ndarray, alpha: float) -> np.ndarray:
    """``-d loss / d f``: ``alpha`` where ``y > f``, ``alpha - 1`` elsewhere."""
    return np.where(y > f, alpha, alpha - 1.0)


def best_constant(y: np.ndarray, f: np.ndarray | float, alpha: float) -> float:
    """``argmin_g sum_i loss(y_i, f_i + g)`` by Brent's method."""
    return minimize_scalar(lambda g: pinball(y, f + g, alpha).sum()).x


class FriedmanReference:
    """Friedman's gradient boosting with a line search per leaf (the
    reference): scikit-learn trees on the pseudo-residuals, scipy leaves."""

    def __init__(self, rounds: int, depth: int, learning_rate: float, alpha: float):
        self.rounds, self.depth = rounds, depth
        self.learning_rate, self.alpha = learning_rate, alpha

    def fit(self, X: np.ndarray, y: np.ndarray) -> FriedmanReference:
        """Grow ``rounds`` trees; keep ``(tree, leaf value per node)`` pairs."""
        y = y.astype(np.float64)
        self.base_score_ = best_constant(y, 0.0, self.alpha)
        raw = np.full(len(y), self.base_score_)
        self.trees_ = []
        for _ in range(self.rounds):
            residual = pinball_negative_gradient(y, raw, self.alpha)
            tree = DecisionTreeRegressor(max_depth=self.depth, random_state=0).fit(X, residual)
            node = tree.apply(X)
            values = self._leaf_values(y, raw, node, tree.tree_.node_count)
            raw += values[node]
            self.trees_.append((tree, values))
        return self

    def _leaf_values(self, y, raw, node, n_nodes: int) -> np.ndarray:
        """Learning rate x the line-search minimiser of every leaf (by node id)."""
        values = np.zeros(n_nodes)
        for leaf in np.unique(node):
            rows = node == leaf
            values[leaf] = self.learning_rate * best_constant(y[rows], raw[rows], self.alpha)
        return values

    def predict_raw(self, X: np.ndarray) -> np.ndarray:
        """``F0 + sum_t tree_t(x)``."""
        raw = np.full(X.shape[0], self.base_score_)
        for tree, values in self.trees_:
            raw += values[tree.apply(X)]
        return raw


@functools.cache
def pinball_jax(alpha: float):
    """The catalogue's pinball loss, one object per ``alpha``: jaxboost caches its
    compiled programs on the loss function's identity, so a fresh
    ``losses.quantile(alpha)`` in every fit would compile every fit again."""
    return losses.quantile(alpha)


def fit_jaxboost(X, y, args) -> jb.Booster:
    """jaxboost with Friedman's settings (line-search leaves, first-order splits)."""
    model = jb.Booster(
        loss=pinball_jax(args.alpha),
        n_estimators=args.rounds,
        learning_rate=args.learning_rate,
        max_depth=args.depth,
        leaf_method="line_search",
        split_criterion="first_order",
        reg_lambda=0.0,
        max_bins=255,
    )
    return model.fit(X, y)


def mean_losses(raw_train, raw_test, y_train, y_test, alpha: float) -> list[str]:
    """Mean pinball loss on the training and test rows, formatted."""
    return [
        f"{np.mean(pinball(y_train, raw_train, alpha)):.5f}",
        f"{np.mean(pinball(y_test, raw_test, alpha)):.5f}",
    ]


def run_size(n_rows: int, args) -> list[str]:
    """Time both on ``n_rows`` training rows; the table row."""
    X, y = make_regression(n_rows + args.test_rows, args.seed)
    X_train, X_test, y_train, y_test = split_rows(n_rows, X, y)
    ref_rounds = min(args.reference_rounds or args.rounds, args.rounds)
    print(f"\n## {n_rows} rows", flush=True)
    first = timed_report("jaxboost first fit (compiles)", fit_jaxboost, X_train, y_train, args)
    reference = FriedmanReference(ref_rounds, args.depth, args.learning_rate, args.alpha)
    best = best_of(
        {
            f"reference ({ref_rounds} rounds)": functools.partial(reference.fit, X_train, y_train),
            f"jaxboost ({args.rounds} rounds)": functools.partial(
                fit_jaxboost, X_train, y_train, args
            ),
        },
        args.repeat,
    )
    ref_timing, jb_timing = best.values()
    print("  " + compile_summary("jaxboost", first, jb_timing))
    ref_seconds = ref_timing.seconds * args.rounds / ref_rounds
    model = jb_timing.value
    at_k = (0, ref_rounds)  # compare the losses after the rounds the reference ran
    return [
        str(n_rows),
        f"{ref_seconds:.2f}"
        + ("" if ref_rounds == args.rounds else f" (extrapolated from {ref_rounds} rounds)"),
        f"{jb_timing.seconds:.3f}",
        f"{ref_seconds / jb_timing.seconds:.1f}x",
        f"{first.seconds - jb_timing.seconds:.2f}",
        str(ref_rounds),
        *mean_losses(
            reference.predict_raw(X_train),
            reference.predict_raw(X_test),
            y_train,
            y_test,
            args.alpha,
        ),
        *mean_losses(
            model.predict_raw(X_train, iteration_range=at_k),
            model.predict_raw(X_test, iteration_range=at_k),
            y_train,
            y_test,
            args.alpha,
        ),
    ]


def main(argv=None) -> None:
    """Parse the options, run every size and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rows", type=int, nargs="+", default=[500, 100_000], help="training rows (sizes)"
    )
    parser.add_argument("--test-rows", type=int, default=10_000, help="held-out rows")
    parser.add_argument("--rounds", type=int, default=100, help="boosting rounds")
    parser.add_argument(
        "--reference-rounds",
        type=int,
        default=None,
        help="rounds the reference runs (default: --rounds); its time is extrapolated",
    )
    parser.add_argument("--depth", type=int, default=3, help="tree depth")
    parser.add_argument("--learning-rate", type=float, default=0.1)
    parser.add_argument("--alpha", type=float, default=0.9, help="quantile of the pinball loss")
    parser.add_argument(
        "--repeat", type=int, default=1, help="timed fits of each (alternating); fastest kept"
    )
    parser.add_argument("--seed", type=int, default=0, help="data seed")
    args = parser.parse_args(argv)

    print_header(argv, ["scikit-learn", "scipy"])
    print(
        f"settings: pinball loss alpha {args.alpha}, {args.rounds} rounds, depth {args.depth}, "
        f"learning rate {args.learning_rate}; y = generating log-odds of make_data + "
        f"0.5 x Student-t(2) noise; {args.test_rows} test rows"
    )
    rows = [run_size(n_rows, args) for n_rows in args.rows]
    print()
    print(
        "Losses are mean pinball losses after the rounds the reference ran (jaxboost's "
        "model cut there with iteration_range); times are for --rounds rounds."
    )
    print_table(
        [
            "rows",
            "reference s",
            "jaxboost s (warm)",
            "reference / jaxboost",
            "jaxboost compile s",
            "rounds compared",
            "reference train loss",
            "reference test loss",
            "jaxboost train loss",
            "jaxboost test loss",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
