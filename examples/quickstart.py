"""Quickstart: boost a loss written as a plain JAX lambda, on real data.

Fits scikit-learn's bundled diabetes data (442 patients, 10 features) with a
log-cosh loss written inline, and prints the held-out error next to a
constant-prediction baseline.  Run: ``python examples/quickstart.py``.
"""

import jax.numpy as jnp
import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split

import jaxboost as jb  # import before any JAX operation: exposes the CPU cores


def main() -> None:
    X, y = load_diabetes(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)

    # log(cosh(f - y)), written so that it cannot overflow for large residuals
    log_cosh = lambda y, f: jnp.logaddexp(f - y, y - f) - jnp.log(2.0)
    model = jb.Booster(loss=log_cosh, n_estimators=200, learning_rate=0.05, max_depth=3)
    model.fit(X_train, y_train)

    prediction = model.predict(X_test)
    mae = np.mean(np.abs(prediction - y_test))
    baseline = np.mean(np.abs(np.median(y_train) - y_test))
    print(f"initial score F0 = {model.base_score_[0]:.2f} (median of y: {np.median(y_train):.2f})")
    print(f"training loss: {model.train_loss_[0]:.3f} -> {model.train_loss_[-1]:.3f}")
    print(f"test MAE: {mae:.2f}  (constant prediction: {baseline:.2f})")


if __name__ == "__main__":
    main()
