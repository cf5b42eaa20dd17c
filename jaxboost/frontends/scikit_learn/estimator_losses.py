"""The losses the scikit-learn estimators hand their `jaxboost.Booster`,
and their outputs: a Regressor's (`regressor_loss`: a per-target loss
summed over the columns of 2-D targets, `SumOverTargets`) and a
Classifier's (`classifier_loss_and_outputs`: a callable declaring the link
it predicts through, `WithLink`).  Classes rather than closures, so that a
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

# links whose predictions are class probabilities
_PROBABILITY_LINKS = ("sigmoid", "sigmoid2", "softmax")


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


def regressor_loss(
    loss: Any, loss_params: Any, n_outputs: int | None, y: Any
) -> tuple[Callable, int | None]:
    """A Regressor's ``loss`` (with ``loss_params``) and outputs for the
    engine targets ``y``: the ``n_outputs`` setting, but for 2-D ``y`` one
    output per target, where a loss declaring one output, or an undeclared
    elementwise one, is summed over the targets (`SumOverTargets`)."""
    resolved = loss_catalogue.resolve(loss, loss_params)
    stated = metadata_of(resolved)
    declared = stated.n_outputs if stated.declared else None
    if y.ndim == 1 or declared not in (None, 1) or n_outputs not in (None, y.shape[1]):
        return resolved, n_outputs
    n_targets = y.shape[1]
    vector = jax.ShapeDtypeStruct((n_targets,), jnp.float32)
    if declared == 1 or jax.eval_shape(resolved, vector, vector).shape != ():
        resolved = SumOverTargets(resolved)
    return resolved, n_targets


def classifier_loss_and_outputs(
    loss: Any, loss_params: Any, n_classes: int
) -> tuple[Callable, int]:
    """A Classifier's ``loss`` (``"auto"``: the logloss for two classes,
    else the softmax cross-entropy; with ``loss_params``) as it trains
    (`classifier_loss`) and its outputs for ``n_classes`` labels; a loss
    whose link gives no probabilities, or whose outputs do not fit the
    classes, is refused naming the fix."""
    if isinstance(loss, str) and loss == "auto":
        binary = n_classes == 2
        loss = loss_catalogue.binary_logloss if binary else loss_catalogue.softmax_cross_entropy
    resolved = loss_catalogue.resolve(loss, loss_params)
    stated = metadata_of(resolved)
    name = stated.name
    link = stated.link if stated.declared else None  # None: sigmoid or softmax below
    if link is not None and link not in _PROBABILITY_LINKS:
        raise ValueError(
            f"loss: {name!r} has the {link!r} link, which does not give class "
            "probabilities (predict_proba would not either); use a classification loss "
            "('auto', 'logloss', 'softmax_cross_entropy', 'focal', 'exponential') or "
            "jaxboost.Regressor"
        )
    declared = stated.n_outputs if stated.declared else None
    if declared == "n_targets":
        raise ValueError(
            f"loss: {name!r} takes one-hot or probability-vector targets, and a Classifier "
            "passes class labels; use 'softmax_cross_entropy' (or optax's "
            "softmax_cross_entropy_with_integer_labels), or jaxboost.Booster with 2-D y"
        )
    if declared == "n_classes":
        n_outputs = n_classes
    elif declared is None:
        n_outputs = 1 if n_classes == 2 else n_classes
    else:
        n_outputs = int(declared)
    if n_outputs == 1 and n_classes > 2:
        raise ValueError(
            f"loss: {name!r} has one output (a binary loss) but y "
            f"has {n_classes} classes; use loss='auto' or 'softmax_cross_entropy'"
        )
    if n_outputs not in (1, n_classes):
        raise ValueError(
            f"loss: {name!r} declares {n_outputs} outputs, "
            f"expected 1 (binary) or one per class ({n_classes})"
        )
    # a link the model's own: booster_ and a saved file predict through it
    return classifier_loss(resolved, n_outputs), n_outputs
