"""Poisson claim frequency and Tweedie pure premium on generated insurance data.

Each generated policy has an exposure (years insured), a driver age, a car
power, a region and a bonus-malus level; claims arrive as a Poisson process
whose rate depends on them, and each claim costs a gamma-distributed amount,
so most policies have no claim at all.  Two models, with the exposure as the
sample weight, as in scikit-learn's Poisson/Tweedie regression tutorial:

- ``losses.poisson`` on the claim frequency ``n_claims / exposure``;
- ``losses.tweedie(1.5)`` on the pure premium ``total_amount / exposure``.

Prints the held-out mean Poisson / Tweedie deviance of each next to a
constant model (the weighted training mean), then the total claim amount,
observed, predicted and expected by the simulation: the Tweedie model's total
is under the observed one, and the last line says why.  Run:
``python examples/tweedie_counts.py``.
"""

import numpy as np
from sklearn.metrics import mean_poisson_deviance, mean_tweedie_deviance

import jaxboost as jb  # import before any JAX operation: exposes the CPU cores
from jaxboost import losses


def make_policies(n_rows: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    exposure = rng.uniform(0.1, 1.0, n_rows)
    driver_age = rng.uniform(18, 85, n_rows)
    car_power = rng.integers(4, 15, n_rows).astype(float)
    region = rng.integers(0, 10, n_rows).astype(float)
    bonus_malus = rng.uniform(50, 150, n_rows)
    log_rate = (
        -2.6
        + 0.9 * np.exp(-(driver_age - 18) / 10)  # young drivers
        + 0.08 * (car_power - 9)
        + 0.015 * (bonus_malus - 100)
        + np.where(region < 3, 0.4, 0.0)
    )
    n_claims = rng.poisson(exposure * np.exp(log_rate))
    # gamma claim sizes, larger for powerful cars; the sum of k gammas is gamma(k shape)
    mean_cost = 1500.0 * np.exp(0.05 * (car_power - 9))
    # the amount the simulation expects: what a model's total should come near
    expected_amount = exposure * np.exp(log_rate) * mean_cost
    shape = 2.0
    amount = np.where(
        n_claims > 0, rng.gamma(np.maximum(n_claims, 1) * shape, mean_cost / shape), 0
    )
    X = np.column_stack([driver_age, car_power, region, bonus_malus]).astype(np.float32)
    return {
        "X": X,
        "exposure": exposure,
        "n_claims": n_claims,
        "amount": amount,
        "expected_amount": expected_amount,
    }


def main() -> None:
    rng = np.random.default_rng(0)
    train, test = make_policies(30_000, rng), make_policies(30_000, rng)
    print(
        f"policies with no claim: {np.mean(train['n_claims'] == 0):.1%}; "
        f"mean frequency {train['n_claims'].sum() / train['exposure'].sum():.3f} claims/year"
    )
    settings = {"n_estimators": 200, "learning_rate": 0.05, "max_depth": 3}

    frequency = {
        part: data["n_claims"] / data["exposure"]
        for part, data in (("train", train), ("test", test))
    }
    poisson = jb.Booster(loss=losses.poisson, **settings)
    poisson.fit(train["X"], frequency["train"], sample_weight=train["exposure"])
    constant = np.average(frequency["train"], weights=train["exposure"])
    model_deviance = mean_poisson_deviance(
        frequency["test"], poisson.predict(test["X"]), sample_weight=test["exposure"]
    )
    constant_deviance = mean_poisson_deviance(
        frequency["test"], np.full(len(frequency["test"]), constant), sample_weight=test["exposure"]
    )
    print(
        f"claim frequency, mean Poisson deviance: model {model_deviance:.4f}, "
        f"constant {constant_deviance:.4f} ({1 - model_deviance / constant_deviance:.1%} explained)"
    )

    premium = {
        part: data["amount"] / data["exposure"] for part, data in (("train", train), ("test", test))
    }
    tweedie = jb.Booster(loss=losses.tweedie(1.5), **settings)
    tweedie.fit(train["X"], premium["train"], sample_weight=train["exposure"])
    constant = np.average(premium["train"], weights=train["exposure"])
    model_deviance = mean_tweedie_deviance(
        premium["test"], tweedie.predict(test["X"]), sample_weight=test["exposure"], power=1.5
    )
    constant_deviance = mean_tweedie_deviance(
        premium["test"],
        np.full(len(premium["test"]), constant),
        sample_weight=test["exposure"],
        power=1.5,
    )
    print(
        f"pure premium, mean Tweedie(1.5) deviance: model {model_deviance:.2f}, "
        f"constant {constant_deviance:.2f} ({1 - model_deviance / constant_deviance:.1%} explained)"
    )
    report_totals(tweedie, train, test)


def report_totals(tweedie: jb.Booster, train: dict, test: dict) -> None:
    """The total claim amount: observed, predicted, expected by the simulation."""
    predicted = {
        part: np.sum(tweedie.predict(data["X"]) * data["exposure"])
        for part, data in (("training", train), ("held-out", test))
    }
    for part, data in (("training", train), ("held-out", test)):
        print(
            f"{part} total claim amount: observed {data['amount'].sum():,.0f}, "
            f"predicted {predicted[part]:,.0f}, expected {data['expected_amount'].sum():,.0f}"
        )
    # with log link, a leaf's first-order condition is sum w (y - mu) mu^(1-p) = 0:
    # residuals weighted by mu^-0.5 balance, and rows fitted to few claims
    # (low mu) outweigh those fitted to many, so the total falls as the trees
    # fit closer (13% under at 1000 rounds); the Poisson loss (p = 1) keeps it
    observed = train["amount"].sum()
    print(
        "(a log-link Tweedie fit balances sum w (y - mu) / sqrt(mu), not the total:\n"
        f" the training total is {1 - predicted['training'] / observed:.1%} under the observed "
        "one. Rebalanced to it, as actuaries do,\n the held-out total is "
        f"{observed / predicted['training'] * predicted['held-out']:,.0f}; "
        "observed totals are noisy themselves)"
    )


if __name__ == "__main__":
    main()
