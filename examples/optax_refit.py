"""Refit every leaf of a boosted forest at once with optax's L-BFGS.

Boosting sets each tree's leaves greedily, one round at a time.  Once the
trees are grown, the raw score is a linear function of all leaf values, so
``jaxboost.refit_leaves`` can minimise the training loss over all of
them jointly, starting from the boosted values.  On scikit-learn's generated
Friedman #1 regression problem, this prints the training and held-out loss
before and after the refit, for a few L2 penalties on the leaf values, the
penalty being chosen on a validation split and reported on a test split.
Run: ``python examples/optax_refit.py``.
"""

import time

import numpy as np
import optax
from sklearn.datasets import make_friedman1
from sklearn.model_selection import train_test_split

import jaxboost as jb  # import before any JAX operation: exposes the CPU cores
from jaxboost.frontends.refit import refit_leaves


def mean_squared_loss(model: jb.Booster, X: np.ndarray, y: np.ndarray) -> float:
    """The training objective ``mean 0.5 (y - f)^2`` (losses.squared_error)."""
    return float(np.mean(0.5 * (y - model.predict(X)) ** 2))


def main() -> None:
    X, y = make_friedman1(n_samples=4000, noise=1.0, random_state=0)
    X_train, X_rest, y_train, y_rest = train_test_split(X, y, test_size=0.5, random_state=0)
    X_val, X_test, y_val, y_test = train_test_split(X_rest, y_rest, test_size=0.5, random_state=0)
    model = jb.Booster(loss="squared_error", n_estimators=100, learning_rate=0.1, max_depth=4).fit(
        X_train, y_train
    )

    def report(name, fitted):
        values = [
            mean_squared_loss(fitted, *part)
            for part in ((X_train, y_train), (X_val, y_val), (X_test, y_test))
        ]
        print(f"{name:34s} train {values[0]:.4f}  validation {values[1]:.4f}  test {values[2]:.4f}")
        return values

    print(f"loss 0.5 (y - f)^2; noise floor 0.5 * noise variance = {0.5 * 1.0**2:.4f}")
    report("boosted, 100 trees of depth 4", model)
    # one optimizer instance: the compiled refit program is reused across calls
    lbfgs = optax.lbfgs()
    results = {}
    for l2 in (0.0, 1e-3, 1e-2, 1e-1):
        start = time.perf_counter()
        refitted = refit_leaves(model, X_train, y_train, optimizer=lbfgs, steps=100, l2=l2)
        seconds = time.perf_counter() - start
        results[l2] = report(f"L-BFGS refit, l2={l2:<5g} ({seconds:.1f} s)", refitted)
    best = min(results, key=lambda l2: results[l2][1])
    before, after = mean_squared_loss(model, X_test, y_test), results[best][2]
    print(
        f"l2 chosen on the validation split: {best:g}; test loss {before:.4f} -> {after:.4f} "
        f"({'better' if after < before else 'worse'} than the boosted leaves)"
    )
    print(f"unpenalised refit: test loss {before:.4f} -> {results[0.0][2]:.4f}")


if __name__ == "__main__":
    main()
