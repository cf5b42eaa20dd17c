"""A business loss written inline: under-forecasting costs 5x over-forecasting.

Any per-sample JAX function is a loss.  Here a lambda charges five times more
for predicting below the target than above it (think stock-outs against
surplus stock), on scikit-learn's bundled diabetes data.  Prints the held-out
business cost of that model next to a squared-error model with the same
settings.  Run: ``python examples/asymmetric_loss.py``.
"""

import jax.numpy as jnp
import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split

import jaxboost as jb  # import before any JAX operation: exposes the CPU cores
from jaxboost import losses


def business_cost(y: np.ndarray, f: np.ndarray) -> float:
    """Mean of ``5 (f - y)^2`` where ``f < y`` and ``(f - y)^2`` elsewhere."""
    return float(np.mean(np.where(f < y, 5.0, 1.0) * (f - y) ** 2))


def main() -> None:
    X, y = load_diabetes(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)

    asymmetric = lambda y, f: jnp.where(f < y, 5.0, 1.0) * (f - y) ** 2
    settings = {"n_estimators": 200, "learning_rate": 0.05, "max_depth": 2}
    business = jb.Booster(loss=asymmetric, **settings).fit(X_train, y_train)
    squared = jb.Booster(loss=losses.squared_error, **settings).fit(X_train, y_train)

    print("held-out results (diabetes, 133 test patients):")
    for name, model in (("business loss (5x under)", business), ("squared error", squared)):
        f = model.predict(X_test)
        print(
            f"  {name:25s} business cost {business_cost(y_test, f):8.0f}  "
            f"RMSE {np.sqrt(np.mean((f - y_test) ** 2)):5.1f}  "
            f"under-forecast on {np.mean(f < y_test):.0%} of patients"
        )
    print(
        f"  initial score F0: business {business.base_score_[0]:.1f}, squared {squared.base_score_[0]:.1f}"
    )


if __name__ == "__main__":
    main()
