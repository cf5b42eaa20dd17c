"""The losses the scikit-learn estimators hand their `jaxboost.Booster`:
a per-target loss summed over the columns of 2-D targets
(`SumOverTargets`), and a Classifier's callable declaring the link it
predicts through (`WithLink`).  Classes rather than closures, so that a
fitted estimator pickles.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from ... import losses as loss_catalogue
from ...losses.metadata import LossMetadata, metadata_of


class SumOverTargets:
    """``loss(y, f) = sum_k base(y_k, f_k)``: an elementwise loss made multi-target.

    A class rather than a closure so that a fitted estimator pickles.
    """

    def __init__(self, base: Callable):
        self.base = base
        # the fields the programs' keys read as attributes (jaxboost.runtime.same_function)
        stated = metadata_of(base)
        self.name = stated.name
        self.link = stated.link
        self.target_domain = stated.target_domain
        self.hessian_informative = stated.hessian_informative
        self.convex = stated.convex
        self.smooth = stated.smooth

    @property
    def loss_metadata(self) -> LossMetadata:
        """``base``'s fields that hold for the sum, one output per target column
        (so that a model file does not take the sum for ``base``)."""
        return LossMetadata(
            name=self.name,
            link=self.link,
            n_outputs="n_targets",
            hessian_informative=self.hessian_informative,
            convex=self.convex,
            target_domain=self.target_domain,
            smooth=self.smooth,
            declared=metadata_of(self.base).declared,
        )

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

    @property
    def loss_metadata(self) -> LossMetadata:
        """``base``'s, with the ``link`` (an undeclared ``base`` stays undeclared:
        its outputs are the Classifier's to set)."""
        return dataclasses.replace(metadata_of(self.base), link=self.link)

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
    if not metadata_of(resolved).declared:
        return WithLink(resolved, "sigmoid" if n_outputs == 1 else "softmax")
    return resolved
