"""Robust regression with a non-convex loss: Tukey's biweight against gross label errors.

scikit-learn's diabetes data (442 patients, targets 25 to 346); a fifth of the
training targets are replaced by values drawn anywhere in [0, 1000], as a
botched data entry would.  Squared error chases those; Huber's loss bounds
their pull; Tukey's biweight, a five-line function below, gives a residual
beyond ``c`` no pull at all.

Tukey's loss is not convex: its hessian is negative for residuals between
``c / sqrt(5)`` and ``c`` and zero beyond.  jaxboost sees that at the initial
score and, with the default settings, turns on Armijo's check (no round may
raise the training loss) and, as most rows there have no curvature,
line-search leaves; its initial score is also searched for from the targets'
median (a loss flat at 0 would otherwise stop there).  The printout shows
what was chosen and the held-out mean absolute error against the clean
targets.  Run: ``python examples/robust_outliers.py``.
"""

import jax.numpy as jnp
import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split

import jaxboost as jb  # import before any JAX operation: exposes the CPU cores
from jaxboost import losses

TUKEY_C = 150.0  # about 2.5 times the spread of the clean targets around a good model


def tukey_biweight(y, f):
    r = jnp.minimum(jnp.abs(f - y) / TUKEY_C, 1.0)
    return TUKEY_C**2 / 6 * (1 - (1 - r**2) ** 3)


def main() -> None:
    X, y = load_diabetes(return_X_y=True)
    X, y = X.astype(np.float32), y.astype(np.float32)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)
    rng = np.random.default_rng(0)
    corrupted = rng.uniform(size=y_train.shape[0]) < 0.2
    y_noisy = y_train.copy()
    y_noisy[corrupted] = rng.uniform(0, 1000, corrupted.sum()).astype(np.float32)
    print(
        f"{len(y_train)} training rows, {corrupted.sum()} of them with a corrupted target; "
        f"{len(y_test)} clean test rows"
    )

    settings = {"n_estimators": 150, "learning_rate": 0.05, "max_depth": 2}
    models = {
        "squared error": jb.Booster(loss="squared_error", **settings),
        "Huber (delta 30)": jb.Booster(loss=losses.huber(30.0), **settings),
        "Tukey's biweight (c 150)": jb.Booster(loss=tukey_biweight, **settings),
    }
    constant = np.median(y_train[~corrupted])
    print(
        f"  {'median of the clean targets':<26} test MAE {np.mean(np.abs(y_test - constant)):6.1f}"
    )
    for name, model in models.items():
        model.fit(X_train, y_noisy)
        mae = np.mean(np.abs(model.predict(X_test) - y_test))
        print(
            f"  {name:<26} test MAE {mae:6.1f}   (initial score {model.base_score_[0]:6.1f}, "
            f"leaves {model.leaf_method_}, armijo {model.armijo_})"
        )


if __name__ == "__main__":
    main()
