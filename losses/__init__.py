"""Catalogue of per-sample losses for gradient boosting.

A loss is ``loss(y, f) -> scalar`` for one sample, written in plain
``jax.numpy``; the boosting engine differentiates it with ``jax.grad`` and
``jax.hessian``.  Catalogue losses are :class:`DeclaredLoss` objects carrying
metadata (``name``, ``params``, ``link``, ``n_outputs``,
``hessian_informative``, ``convex``, ``target_domain``; see
``losses._declare``); they pickle, and ``get(name, **params)`` rebuilds one.
:func:`resolve` turns a ``loss`` argument (a name, a declared loss, an optax
function, any callable) into what the engine trains on.
Parametrised losses are factories: ``huber(delta)``, ``quantile(alpha)``,
``tweedie(power)``, ``focal(gamma)``.
"""

from . import links
from ._declare import DATA_OUTPUTS, TARGET_DOMAINS, DeclaredLoss, Loss, declare
from .adapters import from_optax
from .catalogue import ALIASES, CATALOGUE, available, get, resolve
from .classification import binary_logloss, exponential, focal, softmax_cross_entropy
from .distributions import gamma, gaussian_nll, poisson, tweedie
from .regression import absolute_error, huber, log_cosh, quantile, squared_error

__all__ = [
    "ALIASES",
    "CATALOGUE",
    "DATA_OUTPUTS",
    "TARGET_DOMAINS",
    "DeclaredLoss",
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
    "resolve",
    "softmax_cross_entropy",
    "squared_error",
    "tweedie",
]
