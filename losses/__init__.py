"""Catalogue of per-sample losses for gradient boosting.

A loss is ``loss(y, f) -> scalar`` for one sample, written in plain
``jax.numpy``; the boosting engine differentiates it with ``jax.grad`` and
``jax.hessian``.  Catalogue losses are `DeclaredLoss` objects carrying
metadata as one record (``name``, ``params``, ``link``, ``n_outputs``,
``hessian_informative``, ``convex``, ``target_domain``, ...: `LossMetadata`,
read for any loss, declared or not, by `metadata_of`); they pickle, and
``get(name, **params)`` rebuilds one.
`resolve` turns a ``loss`` argument (a name, a declared loss, an optax
function, any callable) into what the engine trains on.
Parametrised losses are factories: ``huber(delta)``, ``quantile(alpha)``,
``tweedie(power)``, ``focal(gamma)``, ``ranknet(sigma)``,
``lambdarank(k, sigma, norm)``; ``distribution(family)`` turns a numpyro
distribution into its negative log-likelihood (``"distribution:gamma"``,
...).  Group losses (``per="group"``: ``listnet``, ``ranknet``,
``lambdarank`` on a query, ``cox`` on a stratum) are ``loss(y, f, mask) -> scalar`` on one padded group of rows.
"""

from . import links
from ._declare import DATA_OUTPUTS, TARGET_DOMAINS, DeclaredLoss, Loss, TargetDomain, declare
from .adapters import from_optax
from .catalogue import ALIASES, CATALOGUE, available, get, resolve
from .classification import binary_logloss, exponential, focal, softmax_cross_entropy
from .distribution_loss import distribution
from .distributions import gamma, gaussian_nll, poisson, tweedie
from .families import FAMILIES
from .metadata import LossMetadata, metadata_of
from .ranking import lambdarank, listnet, ranknet
from .regression import absolute_error, huber, log_cosh, quantile, squared_error
from .survival import cox

__all__ = [
    "ALIASES",
    "CATALOGUE",
    "DATA_OUTPUTS",
    "FAMILIES",
    "TARGET_DOMAINS",
    "DeclaredLoss",
    "Loss",
    "LossMetadata",
    "TargetDomain",
    "absolute_error",
    "available",
    "binary_logloss",
    "cox",
    "declare",
    "distribution",
    "exponential",
    "focal",
    "from_optax",
    "gamma",
    "gaussian_nll",
    "get",
    "huber",
    "lambdarank",
    "links",
    "listnet",
    "log_cosh",
    "metadata_of",
    "poisson",
    "quantile",
    "ranknet",
    "resolve",
    "softmax_cross_entropy",
    "squared_error",
    "tweedie",
]
