"""Distributional regression: boost the mean and the scale of a Gaussian.

``losses.gaussian_nll`` takes two raw scores per row, the mean and the log of
the standard deviation, and ``predict`` returns ``(mean, std)``.  On generated
data whose noise changes with ``x``, this prints the held-out negative
log-likelihood next to a model with one constant variance (a squared-error
booster for the mean plus the training residuals' standard deviation), and
the calibration: the fraction of held-out rows with ``|y - mean| < 1.96 std``
(0.95 for a calibrated model).  Saves ``examples/output/distributional.png``.
Run: ``python examples/distributional.py``.
"""

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import jaxboost as jb  # import before any JAX operation: exposes the CPU cores
from jaxboost import losses

OUTPUT = Path(__file__).parent / "output"


def make_data(n_rows: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``y = 2 sin(x) + noise``, noise standard deviation ``0.2 + 0.2 |x|``,
    plus one uninformative feature."""
    x = rng.uniform(-3, 3, n_rows)
    y = 2 * np.sin(x) + (0.2 + 0.2 * np.abs(x)) * rng.normal(size=n_rows)
    X = np.column_stack([x, rng.normal(size=n_rows)])
    return X.astype(np.float32), y.astype(np.float32)


def gaussian_nll(y: np.ndarray, mean: np.ndarray, std: np.ndarray) -> float:
    """Mean negative log-likelihood, including ``0.5 log(2 pi)``."""
    return float(np.mean(np.log(std) + 0.5 * ((y - mean) / std) ** 2 + 0.5 * np.log(2 * np.pi)))


def main() -> None:
    rng = np.random.default_rng(0)
    X_train, y_train = make_data(5000, rng)
    X_test, y_test = make_data(5000, rng)
    # shallow trees: a deep leaf holding a few rows with small residuals shrinks
    # its predicted scale, and one badly overconfident row costs a lot of NLL
    settings = {"n_estimators": 300, "learning_rate": 0.05, "max_depth": 2}

    model = jb.Booster(loss=losses.gaussian_nll, **settings).fit(X_train, y_train)
    mean, std = model.predict(X_test).T

    mean_model = jb.Booster(loss=losses.squared_error, **settings).fit(X_train, y_train)
    constant_std = float(np.std(y_train - mean_model.predict(X_train)))
    baseline_mean = mean_model.predict(X_test)
    baseline_std = np.full_like(baseline_mean, constant_std)

    def covered(mu, sigma):
        return np.mean(np.abs(y_test - mu) < 1.96 * sigma)

    print("held-out Gaussian negative log-likelihood (lower is better):")
    print(f"  gaussian_nll booster (mean and scale): {gaussian_nll(y_test, mean, std):.4f}")
    print(
        f"  constant variance (std {constant_std:.3f}):      "
        f"{gaussian_nll(y_test, baseline_mean, baseline_std):.4f}"
    )
    print("fraction of held-out rows with |y - mean| < 1.96 std (target 0.950):")
    print(f"  gaussian_nll booster: {covered(mean, std):.3f}")
    print(f"  constant variance:    {covered(baseline_mean, baseline_std):.3f}")
    for name, rows in (
        ("|x| < 1", np.abs(X_test[:, 0]) < 1),
        ("|x| > 2", np.abs(X_test[:, 0]) > 2),
    ):
        true_std = 0.2 + 0.2 * np.abs(X_test[rows, 0])
        print(
            f"  {name}: booster {np.mean(np.abs(y_test - mean)[rows] < 1.96 * std[rows]):.3f}, "
            f"constant {np.mean(np.abs(y_test - baseline_mean)[rows] < 1.96 * constant_std):.3f}"
            f"  (mean predicted std {std[rows].mean():.3f}, true {true_std.mean():.3f})"
        )

    # curves on a grid of x, the uninformative feature held at 0
    OUTPUT.mkdir(exist_ok=True)
    x = np.linspace(-3, 3, 400, dtype=np.float32)
    grid = np.column_stack([x, np.zeros_like(x)])
    grid_mean, grid_std = model.predict(grid).T
    grid_baseline = mean_model.predict(grid)
    true_half_width = 1.96 * (0.2 + 0.2 * np.abs(x))
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.scatter(X_test[:, 0], y_test, s=2, alpha=0.2, color="grey", label="held-out data")
    ax.plot(x, grid_mean, color="C0", label="predicted mean")
    band = 1.96 * grid_std
    ax.fill_between(
        x, grid_mean - band, grid_mean + band, alpha=0.3, color="C0", label="mean +/- 1.96 std"
    )
    for sign in (-1, 1):
        ax.plot(
            x,
            grid_baseline + sign * 1.96 * constant_std,
            "--",
            color="C3",
            lw=1,
            label="constant-variance band" if sign == 1 else None,
        )
        ax.plot(
            x,
            2 * np.sin(x) + sign * true_half_width,
            ":",
            color="black",
            lw=1,
            label="true 95% band" if sign == 1 else None,
        )
    ax.set(xlabel="x", ylabel="y", title="Gaussian NLL boosting: mean and uncertainty")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(OUTPUT / "distributional.png", dpi=120)
    print(f"plot saved to {OUTPUT / 'distributional.png'}")


if __name__ == "__main__":
    main()
