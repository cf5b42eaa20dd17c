"""Catalogue of per-sample losses for gradient boosting.

A loss is ``loss(y, f) -> scalar`` for one sample, written in plain
``jax.numpy``; the boosting engine differentiates it with ``jax.grad`` and
``jax.hessian``.  Catalogue losses carry metadata (``name``, ``params``,
``link``, ``n_outputs``, ``hessian_informative``, ``convex``); see
``losses._declare``.
Parametrised losses are factories: ``huber(delta)``, ``quantile(alpha)``,
``tweedie(power)``, ``focal(gamma)``.
"""

from losses import links
from losses._declare import TARGET_DOMAINS, Loss, declare
from losses.adapters import from_optax
from losses.catalogue import ALIASES, CATALOGUE, available, get
from losses.classification import binary_logloss, exponential, focal, softmax_cross_entropy
from losses.distributions import gamma, gaussian_nll, poisson, tweedie
from losses.regression import absolute_error, huber, log_cosh, quantile, squared_error

__all__ = [
    "ALIASES",
    "CATALOGUE",
    "TARGET_DOMAINS",
    "Loss",
    "absolute_error",
    "available",
    "binary_logloss",
    "declare",
    "exponential",
    "focal",
    "from_optax",
    "gamma",
    "gaussian_nll",
    "get",
    "huber",
    "links",
    "log_cosh",
    "poisson",
    "quantile",
    "softmax_cross_entropy",
    "squared_error",
    "tweedie",
]
