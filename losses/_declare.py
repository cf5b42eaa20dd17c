"""Catalogue metadata attached to a per-sample loss.

A declared loss is a plain function ``loss(y, f) -> scalar`` carrying seven
attributes that the engine and the model files read:

- ``name``: catalogue name; ``losses.get(name, **params)`` rebuilds the loss.
- ``params``: the factory parameters, e.g. ``{"alpha": 0.9}`` (``{}`` if none).
- ``link``: name of the link from raw scores to predictions (see ``links``).
- ``n_outputs``: raw scores per row: an int, or ``"n_classes"`` when the engine
  takes it from the labels (``K = max label + 1``).
- ``hessian_informative``: False when the hessian is zero almost everywhere
  (absolute error, quantile), so leaf values should come from a line search;
  None when that depends on the targets' scale (Huber and log-cosh have
  curvature only near the target: on targets in the thousands their hessian
  is 0 on nearly every row, and Newton leaves ``-G / lambda`` would barely
  move), so the engine probes it at the initial score as for an undeclared
  loss.
- ``convex``: True when the loss is convex in ``f`` (for every target), so
  that the initial score's search from 0 finds the minimum and Newton steps
  need no check; False (unknown) has the engine also search from the
  targets' median (``jaxboost.init_score``) and probe the hessian for
  negative curvature (``jaxboost.derivatives.probe_hessian``).
- ``target_domain``: a key of :data:`TARGET_DOMAINS`, the values the targets
  may take (``"probability"`` for log loss: in ``[0, 1]``); ``fit`` refuses
  others, as XGBoost and LightGBM do, rather than fit a meaningless model.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, Protocol

import jax
import numpy as np
from jax.typing import ArrayLike

from losses import links

# target_domain: (what the targets must be, in words that follow "targets";
# the test of every value, on a numpy array; None where any finite one is fine)
TARGET_DOMAINS: dict[str, tuple[str, Callable[[np.ndarray], np.ndarray] | None]] = {
    "any": ("that are finite", None),
    "probability": (
        "in [0, 1] (labels 0 and 1, or probabilities)",
        lambda y: (y >= 0) & (y <= 1),
    ),
    "binary": ("that are 0 or 1", lambda y: (y == 0) | (y == 1)),
    "class": (
        "that are class labels 0, 1, 2, ... (whole numbers)",
        lambda y: (y >= 0) & (y == np.floor(y)),
    ),
    "non_negative": ("that are >= 0", lambda y: y >= 0),
    "positive": ("that are > 0", lambda y: y > 0),
}


class Loss(Protocol):
    """A declared per-sample loss: ``loss(y, f) -> scalar`` plus metadata."""

    name: str
    params: dict[str, Any]
    link: str
    n_outputs: int | str
    hessian_informative: bool | None
    convex: bool
    target_domain: str

    def __call__(self, y: ArrayLike, f: ArrayLike) -> jax.Array: ...


def declare(
    *,
    name: str,
    link: str,
    n_outputs: int | str = 1,
    hessian_informative: bool | None = True,
    convex: bool = False,
    target_domain: str = "any",
    params: dict[str, Any] | None = None,
) -> Callable[[Callable[..., jax.Array]], Loss]:
    """Decorator attaching catalogue metadata to a loss function.

    Returns a decorator that sets the attributes on the function and returns
    that same function.
    """
    if link not in links.LINKS:
        raise ValueError(f"link must be one of {sorted(links.LINKS)}, got {link!r}")
    if n_outputs != "n_classes" and not (isinstance(n_outputs, int) and n_outputs >= 1):
        raise ValueError(f"n_outputs must be a positive int or 'n_classes', got {n_outputs!r}")
    if target_domain not in TARGET_DOMAINS:
        raise ValueError(
            f"target_domain must be one of {sorted(TARGET_DOMAINS)}, got {target_domain!r}"
        )

    def attach(fn: Callable[..., jax.Array]) -> Loss:
        fn.name = name
        fn.params = dict(params or {})
        fn.link = link
        fn.n_outputs = n_outputs
        fn.hessian_informative = hessian_informative
        fn.convex = convex
        fn.target_domain = target_domain
        return fn

    return attach


def loss_factory(make: Callable[..., Loss]) -> Callable[..., Loss]:
    """Decorator for a function building a declared loss from parameters: the
    same parameters give the same loss object.

    jaxboost caches its compiled programs on the loss object, so
    ``quantile(0.9)`` built twice (or ``loss="huber"`` given by name to two
    fits) must not be two different functions, or every fit would compile
    again.  Arguments are normalised (positional or keyword, defaults filled)
    before the lookup; unhashable arguments skip the cache.
    """
    signature = inspect.signature(make)
    built: dict[tuple, Loss] = {}

    @functools.wraps(make)
    def build(*args: Any, **kwargs: Any) -> Loss:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        key = tuple(
            (name, tuple(sorted(value.items())) if isinstance(value, dict) else value)
            for name, value in bound.arguments.items()
        )
        try:
            hash(key)
        except TypeError:
            return make(*args, **kwargs)
        if key not in built:
            built[key] = make(*bound.args, **bound.kwargs)
        return built[key]

    return build
