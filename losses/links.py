"""Links: maps from raw scores to predictions on the response scale.

Every link takes the raw scores of a model, ``(n_rows,)`` for one output or
``(n_rows, n_outputs)`` for several, and returns an array of the same shape.
A loss names its link in its ``link`` attribute; `get` turns the name
back into the function, e.g. when a saved model is loaded.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

Link = Callable[[ArrayLike], jax.Array]


def identity(raw: ArrayLike) -> jax.Array:
    """The raw scores unchanged: ``(n_rows,)`` or ``(n_rows, K)`` -> same shape."""
    return jnp.asarray(raw)


def sigmoid(raw: ArrayLike) -> jax.Array:
    """Probability of the positive class from log-odds: ``1 / (1 + exp(-raw))``."""
    return jax.nn.sigmoid(raw)


def sigmoid2(raw: ArrayLike) -> jax.Array:
    """Probability of the positive class for the exponential loss: ``sigmoid(2 raw)``.

    The exponential (AdaBoost) loss is minimised at half the log-odds, so the
    probability is ``sigmoid(2 raw)``, as in scikit-learn.
    """
    return jax.nn.sigmoid(2.0 * jnp.asarray(raw))


def softmax(raw: ArrayLike) -> jax.Array:
    """Class probabilities: ``(n_rows, K)`` scores -> ``(n_rows, K)`` rows summing to 1."""
    return jax.nn.softmax(raw, axis=-1)


def exp(raw: ArrayLike) -> jax.Array:
    """Mean of a log-link model (Poisson, gamma, Tweedie): ``exp(raw)``."""
    return jnp.exp(raw)


def mean_scale(raw: ArrayLike) -> jax.Array:
    """Mean and scale of a Gaussian: ``(n_rows, 2)`` ``(mean, log_scale)`` -> ``(mean, scale)``.

    Column 0 is returned unchanged and column 1 is exponentiated.
    """
    raw = jnp.asarray(raw)
    if raw.shape[-1] != 2:
        raise ValueError(
            f"mean_scale link expects raw scores with last axis of size 2, got shape {raw.shape}"
        )
    return jnp.stack([raw[..., 0], jnp.exp(raw[..., 1])], axis=-1)


LINKS: dict[str, Link] = {
    "identity": identity,
    "sigmoid": sigmoid,
    "sigmoid2": sigmoid2,
    "softmax": softmax,
    "exp": exp,
    "mean_scale": mean_scale,
}


def get(name: str) -> Link:
    """The link function called ``name`` (one of the keys of ``LINKS``)."""
    if name not in LINKS:
        raise ValueError(f"unknown link {name!r}; expected one of {sorted(LINKS)}")
    return LINKS[name]
