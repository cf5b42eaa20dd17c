"""Survival: a Cox proportional-hazards model boosted on censored times.

Draws 3000 subjects whose log hazard depends non-linearly on 6 features,
exponential event times and independent censoring (45% of them censored),
fits ``losses.cox`` (Breslow's partial likelihood, tied times handled) with
the concordance index watched on a held-out set, and prints that c-index
next to the one of the true log hazard.  Run: ``python examples/survival.py``.
"""

import numpy as np

import jaxboost as jb  # import before any JAX operation: exposes the CPU cores
from jaxboost import losses
from jaxboost.engine.group_metrics import concordance_index


def subjects(n: int, rng: np.random.Generator):
    """Features, ``(time, event)`` targets and the true log hazard."""
    X = rng.normal(size=(n, 6)).astype(np.float32)
    log_hazard = 0.8 * X[:, 0] - 0.6 * np.abs(X[:, 1]) + 0.5 * np.tanh(2 * X[:, 2])
    event_time = rng.exponential(np.exp(-log_hazard))
    censor_time = rng.exponential(2.0, size=n)
    time = np.minimum(event_time, censor_time)
    event = (event_time <= censor_time).astype(np.float32)
    # times recorded to 2 decimals: ties, as real follow-up data has
    y = np.column_stack([np.round(time, 2) + 0.01, event]).astype(np.float32)
    return X, y, log_hazard


def main() -> None:
    rng = np.random.default_rng(0)
    X, y, _ = subjects(3000, rng)
    X_test, y_test, true_test = subjects(1000, rng)
    model = jb.Booster(loss=losses.cox, n_estimators=300, max_depth=3, learning_rate=0.05)
    model.fit(X, y, eval_set=[(X_test, y_test)], eval_metric="cindex", early_stopping_rounds=30)
    weight = np.ones(len(y_test), np.float32)
    truth = float(concordance_index(y_test, true_test[:, None].astype(np.float32), weight))
    print(f"censored: {1 - y[:, 1].mean():.0%} of the training subjects")
    print(f"best round {model.best_iteration_}: held-out c-index {model.best_score_:.3f}")
    print(f"the true log hazard's c-index: {truth:.3f}")


if __name__ == "__main__":
    main()
