"""Prediction intervals from three quantile models (pinball losses).

Generates a heteroscedastic data set (the noise grows with ``x``), fits the
10 %, 50 % and 90 % conditional quantiles with ``losses.quantile(alpha)`` and
prints the empirical coverage of the 80 % interval ``[q10, q90]`` on held-out
rows, overall and where the noise is small or large.  Saves a plot to
``examples/output/quantile_intervals.png``.  Run:
``python examples/quantile_intervals.py``.
"""

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import jaxboost as jb  # import before any JAX operation: exposes the CPU cores
from jaxboost import losses

OUTPUT = Path(__file__).parent / "output"


def make_data(n_rows: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``y = x sin(x) / 2 + noise`` with noise standard deviation ``0.1 + 0.3 x``,
    plus two uninformative features."""
    x = rng.uniform(0, 10, n_rows)
    y = 0.5 * x * np.sin(x) + (0.1 + 0.3 * x) * rng.normal(size=n_rows)
    X = np.column_stack([x, rng.normal(size=(n_rows, 2))])
    return X.astype(np.float32), y.astype(np.float32)


def main() -> None:
    rng = np.random.default_rng(0)
    X_train, y_train = make_data(5000, rng)
    X_test, y_test = make_data(5000, rng)

    models, quantiles = {}, {}
    for alpha in (0.1, 0.5, 0.9):
        model = jb.Booster(
            loss=losses.quantile(alpha), n_estimators=200, learning_rate=0.1, max_depth=3
        )
        models[alpha] = model.fit(X_train, y_train)
        quantiles[alpha] = model.predict(X_test)
        below = np.mean(y_test <= quantiles[alpha])
        print(f"q{int(alpha * 100):02d}: fraction of held-out y below it = {below:.3f}")

    inside = (y_test >= quantiles[0.1]) & (y_test <= quantiles[0.9])
    width = quantiles[0.9] - quantiles[0.1]
    low_noise = X_test[:, 0] < 5
    print(f"80% interval coverage on held-out rows: {inside.mean():.3f} (target 0.800)")
    print(
        f"  x < 5 (small noise): coverage {inside[low_noise].mean():.3f}, "
        f"mean width {width[low_noise].mean():.2f}"
    )
    print(
        f"  x >= 5 (large noise): coverage {inside[~low_noise].mean():.3f}, "
        f"mean width {width[~low_noise].mean():.2f}"
    )
    print(f"crossing quantiles (q10 > q90): {np.mean(width < 0):.3%} of rows")

    # curves on a grid of x, the uninformative features held at 0
    OUTPUT.mkdir(exist_ok=True)
    x = np.linspace(0, 10, 400, dtype=np.float32)
    grid = np.column_stack([x, np.zeros((len(x), 2), np.float32)])
    curve = {alpha: model.predict(grid) for alpha, model in models.items()}
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.scatter(X_test[:, 0], y_test, s=2, alpha=0.2, color="grey", label="held-out data")
    ax.fill_between(x, curve[0.1], curve[0.9], alpha=0.3, label="q10 to q90")
    ax.plot(x, curve[0.5], color="C1", label="median")
    ax.set(xlabel="x", ylabel="y", title="Quantile boosting: 80% prediction interval")
    ax.legend()
    fig.tight_layout()
    fig.savefig(OUTPUT / "quantile_intervals.png", dpi=120)
    print(f"plot saved to {OUTPUT / 'quantile_intervals.png'}")


if __name__ == "__main__":
    main()
