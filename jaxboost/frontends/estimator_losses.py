"""The losses the scikit-learn estimators hand their `jaxboost.Booster`:
a per-target loss summed over the columns of 2-D targets
(`SumOverTargets`), and a Classifier's callable declaring the link it
predicts through (`WithLink`).  Classes rather than closures, so that a
fitted estimator pickles.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from .. import losses as loss_catalogue


class SumOverTargets:
    """``loss(y, f) = sum_k base(y_k, f_k)``: an elementwise loss made multi-target.

    A class rather than a closure so that a fitted estimator pickles.
    """

    def __init__(self, base: Callable):
        self.base = base
        self.name = getattr(base, "name", getattr(base, "__name__", "loss"))
        self.link = getattr(base, "link", "identity")
        self.target_domain = getattr(base, "target_domain", "any")
        # undeclared (None): the engine probes the hessian, as for ``base``
        self.hessian_informative = getattr(base, "hessian_informative", None)
        self.convex = getattr(base, "convex", False)
        self.smooth = getattr(base, "smooth", False)

    def __call__(self, y: jax.Array, f: jax.Array) -> jax.Array:
        return jnp.sum(self.base(y, f))


class WithLink:
    """``base`` declaring the ``link`` a Classifier predicts through (a
    callable without one: sigmoid or softmax), so that ``booster_`` and a
    saved file predict the same probabilities; the rest is ``base``'s.
    A class rather than a closure so that a fitted estimator pickles."""

    def __init__(self, base: Callable, link: str):
        self.base = base
        self.link = link

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "base":  # (copy and pickle probe these)
            raise AttributeError(name)
        return getattr(self.base, name)

    def __call__(self, y: jax.Array, f: jax.Array) -> jax.Array:
        return self.base(y, f)


def classifier_loss(loss: Any, n_outputs: int) -> Any:
    """A Classifier's ``loss`` (a name or callable) of ``n_outputs`` as it
    trains: a callable declaring no link predicts through the sigmoid (one
    output) or the softmax (`WithLink`)."""
    if isinstance(loss, str):
        return loss
    resolved = loss_catalogue.resolve(loss)
    if getattr(resolved, "link", None) is None:
        return WithLink(resolved, "sigmoid" if n_outputs == 1 else "softmax")
    return resolved
