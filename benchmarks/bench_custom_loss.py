"""Fit time with a custom regression loss: jaxboost against XGBoost and LightGBM.

jaxboost takes the loss as a plain JAX function of one sample and derives its
gradient and hessian itself; XGBoost and LightGBM take a hand-written numpy
objective returning ``(grad, hess)``, called once per round.  Two losses:
log-cosh ``log(cosh(f - y))`` and Huber with delta 1.  For Huber the peers get
the exact derivatives, as a user writing them would: gradient ``clip(f - y,
-1, 1)``, hessian 1 inside delta and 0 outside (the same values jaxboost's
``jax.hessian`` gives, so all three run the same Newton algorithm; with L2 1
no leaf divides by zero, and a child whose rows all lie outside delta has
hessian sum 0 < 1e-3 and is refused by every library).

All three start from the same constant: jaxboost's initial score (the
minimiser of the training loss, computed inside its fit) is passed to XGBoost
as ``base_score`` and to LightGBM as ``init_score`` (which LightGBM's
``predict`` leaves out, so it is added back).  Fit times include binning
(``DMatrix``/``Dataset`` construction); jaxboost is fitted once to compile,
and the table has its warm fit.  Test loss is the mean of the loss, in numpy
float64 on the raw scores, over held-out rows, the same code for all three.

    python benchmarks/bench_custom_loss.py                      # 1M rows, 100 rounds
    python benchmarks/bench_custom_loss.py --rows 50000 --rounds 20

Both jaxboost and LightGBM are also timed with ``use_quantized_grad`` (split
statistics rounded to 4 integer levels; ``--no-quantised`` leaves them out).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

import jax.numpy as jnp
import lightgbm as lgb
import numpy as np
import xgboost as xgb
from _common import (
    Timed,
    best_of,
    compile_summary,
    jaxboost_booster,
    lightgbm_dataset,
    lightgbm_params,
    make_regression,
    print_header,
    print_table,
    split_rows,
    timed_report,
    usable_cores,
    xgboost_params,
)

import jaxboost as jb
from jaxboost.engine.derivatives import probe_hessian

HUBER_DELTA = 1.0
# rows of y on which jaxboost probes whether a loss has curvature (its "auto"
# choice between Newton and line-search leaves), as in Booster.fit
HESSIAN_PROBE_ROWS = 1024


def log_cosh_jax(y, f):
    """log(cosh(f - y)) for one sample, overflow-free."""
    d = f - y
    return jnp.logaddexp(d, -d) - jnp.log(2.0)


def huber_jax(y, f):
    """Huber loss (delta 1) for one sample."""
    d = jnp.abs(f - y)
    return jnp.where(d <= HUBER_DELTA, 0.5 * d * d, HUBER_DELTA * (d - 0.5 * HUBER_DELTA))


def log_cosh_np(y, f):
    """log(cosh(f - y)) per sample, numpy float64."""
    d = np.asarray(f, np.float64) - y
    return np.logaddexp(d, -d) - np.log(2.0)


def log_cosh_grad_hess(y, f):
    """Gradient tanh(f - y) and hessian 1 - tanh^2 (0 far from the target)."""
    t = np.tanh(np.asarray(f, np.float64) - y)
    return t, 1.0 - t * t


def huber_np(y, f):
    """Huber loss (delta 1) per sample, numpy float64."""
    d = np.abs(np.asarray(f, np.float64) - y)
    return np.where(d <= HUBER_DELTA, 0.5 * d * d, HUBER_DELTA * (d - 0.5 * HUBER_DELTA))


def huber_grad_hess(y, f):
    """Exact Huber derivatives: clip(f - y, -delta, delta), hessian 1 inside
    delta and 0 outside."""
    d = np.asarray(f, np.float64) - y
    return np.clip(d, -HUBER_DELTA, HUBER_DELTA), (np.abs(d) <= HUBER_DELTA).astype(np.float64)


@dataclass(frozen=True)
class CustomLoss:
    """One loss in the three forms the libraries take."""

    name: str
    jax_loss: Callable  # loss(y, f) of one sample, for jaxboost
    value: Callable  # numpy loss per sample, for the test loss
    grad_hess: Callable  # numpy (y, f) -> (grad, hess), for XGBoost and LightGBM


LOSSES = {
    "log_cosh": CustomLoss("log-cosh", log_cosh_jax, log_cosh_np, log_cosh_grad_hess),
    "huber": CustomLoss("Huber (delta 1)", huber_jax, huber_np, huber_grad_hess),
}


def xgboost_objective(loss: CustomLoss) -> Callable:
    """``obj(preds, dtrain) -> (grad, hess)`` for ``xgb.train``."""

    def objective(preds, dtrain):
        return loss.grad_hess(dtrain.get_label(), preds)

    return objective


def lightgbm_objective(loss: CustomLoss) -> Callable:
    """``fobj(preds, train_data) -> (grad, hess)`` for LightGBM 4's ``objective``."""

    def objective(preds, train_data):
        return loss.grad_hess(train_data.get_label(), preds)

    return objective


def fit_jaxboost(loss: CustomLoss, X, y, rounds: int, quantised: bool = False) -> jb.Booster:
    """jaxboost with the plain JAX loss (its own initial score); ``quantised``:
    with ``use_quantized_grad`` (4 levels, as LightGBM's default)."""
    return jaxboost_booster(loss.jax_loss, rounds, use_quantized_grad=quantised).fit(X, y)


def fit_xgboost(loss: CustomLoss, X, y, rounds: int, base: float, threads: int) -> xgb.Booster:
    """XGBoost ``hist`` with the numpy objective, starting from ``base``."""
    params = xgboost_params(threads, base_score=base, disable_default_eval_metric=1)
    data = xgb.DMatrix(X, label=y, nthread=threads)
    return xgb.train(params, data, num_boost_round=rounds, obj=xgboost_objective(loss))


def fit_lightgbm(
    loss: CustomLoss, X, y, rounds: int, base: float, threads: int, quantised: bool = False
) -> lgb.Booster:
    """LightGBM with the numpy objective, starting from ``init_score = base``;
    ``quantised``: with ``use_quantized_grad`` (its default 4 levels)."""
    params = lightgbm_params(threads, lightgbm_objective(loss))
    if quantised:
        params["use_quantized_grad"] = True
    return lgb.train(params, lightgbm_dataset(X, y, base), num_boost_round=rounds)


def raw_scores(name: str, model, X, base: float, threads: int) -> np.ndarray:
    """Raw scores F(x) of a fitted model, the initial constant included."""
    if name.startswith("jaxboost"):
        return model.predict_raw(X)
    if name == "XGBoost":
        return model.inplace_predict(X, predict_type="margin")  # base_score included
    return model.predict(X, raw_score=True, num_threads=threads) + base  # init_score left out


def run_loss(loss: CustomLoss, data: list[np.ndarray], args) -> list[list[str]]:
    """Fit the three libraries with one loss; the table rows for it."""
    X_train, X_test, y_train, y_test = data
    print(f"\n## {loss.name}", flush=True)
    first = timed_report(
        "jaxboost first fit (compiles)", fit_jaxboost, loss, X_train, y_train, args.rounds
    )
    base = float(first.value.base_score_[0])
    probe = y_train[:HESSIAN_PROBE_ROWS]
    newton = probe_hessian(
        loss.jax_loss, jnp.asarray(probe), jnp.full((len(probe), 1), base, jnp.float32)
    ).informative
    print(
        f"  initial score (jaxboost's, given to the peers): {base:.6f}; jaxboost 'auto' "
        f"leaves: {'newton' if newton else 'line_search'}"
    )
    fits = {
        "jaxboost": lambda: fit_jaxboost(loss, X_train, y_train, args.rounds),
        "XGBoost": lambda: fit_xgboost(loss, X_train, y_train, args.rounds, base, args.threads),
        "LightGBM": lambda: fit_lightgbm(loss, X_train, y_train, args.rounds, base, args.threads),
    }
    if args.quantised:
        timed_report(  # compiles the quantised program
            "jaxboost quantised first fit", fit_jaxboost, loss, X_train, y_train, 1, True
        )
        fits["jaxboost quantised"] = lambda: fit_jaxboost(
            loss, X_train, y_train, args.rounds, quantised=True
        )
        fits["LightGBM quantised"] = lambda: fit_lightgbm(
            loss, X_train, y_train, args.rounds, base, args.threads, quantised=True
        )
    best = best_of(fits, args.repeat)
    print("  " + compile_summary("jaxboost", first, best["jaxboost"]))
    return [
        table_row(loss, name, timing, best["XGBoost"], X_test, y_test, base, args)
        for name, timing in best.items()
    ]


def table_row(loss, name: str, timing: Timed, reference: Timed, X_test, y_test, base, args):
    """``[loss, library, fit s, ratio to XGBoost, test loss]``."""
    test_loss = np.mean(
        loss.value(y_test, raw_scores(name, timing.value, X_test, base, args.threads))
    )
    return [
        loss.name,
        name,
        f"{timing.seconds:.2f}",
        f"{timing.seconds / reference.seconds:.2f}x",
        f"{test_loss:.5f}",
    ]


def main(argv=None) -> None:
    """Parse the options, make the data, fit and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="training rows")
    parser.add_argument("--test-rows", type=int, default=100_000, help="held-out rows")
    parser.add_argument("--rounds", type=int, default=100, help="boosting rounds")
    parser.add_argument(
        "--losses", nargs="+", choices=sorted(LOSSES), default=["log_cosh", "huber"]
    )
    parser.add_argument("--threads", type=int, default=usable_cores(), help="peers' threads")
    parser.add_argument(
        "--repeat", type=int, default=1, help="timed fits of each (alternating); fastest kept"
    )
    parser.add_argument("--seed", type=int, default=0, help="data seed")
    parser.add_argument(
        "--no-quantised",
        dest="quantised",
        action="store_false",
        help="leave out the fits with use_quantized_grad (jaxboost's and LightGBM's)",
    )
    args = parser.parse_args(argv)

    print_header(argv, ["xgboost", "lightgbm"])
    X, y = make_regression(args.rows + args.test_rows, args.seed)
    data = split_rows(args.rows, X, y)
    print(
        f"data:     {args.rows} x {X.shape[1]} train, {args.test_rows} test; y = generating "
        "log-odds of make_data + 0.5 x Student-t(2) noise"
    )
    print(
        f"settings: {args.rounds} rounds, depth 6 (LightGBM: num_leaves 64), learning rate 0.1, "
        f"255 bins, L2 1, min child hessian 1e-3; XGBoost/LightGBM threads {args.threads}"
    )
    rows = [row for key in args.losses for row in run_loss(LOSSES[key], data, args)]
    print()
    print_table(
        ["loss", "library", "fit seconds", "fit time / XGBoost's", "test loss (mean)"], rows
    )


if __name__ == "__main__":
    main()
