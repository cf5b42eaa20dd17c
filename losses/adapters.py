"""Adapters turning losses from other libraries into declared per-sample losses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from losses._declare import Loss, declare, loss_factory

OPTAX_PREFIX = "optax:"


@loss_factory
def from_optax(
    fn: Callable[..., jax.Array],
    link: str = "identity",
    n_outputs: int | str = 1,
    *,
    hessian_informative: bool | None = None,
    **kwargs: Any,
) -> Loss:
    """Wrap an optax loss ``fn(predictions, targets, **kwargs)`` as ``loss(y, f)``.

    For example ``from_optax(optax.losses.huber_loss, delta=2.0)`` or
    ``from_optax(optax.sigmoid_binary_cross_entropy, link="sigmoid")``.  The
    targets are passed as stored (labels as floats).  The result of ``fn`` is
    summed, so an elementwise optax loss on a vector score still gives a scalar.

    Args:
      fn: optax loss taking predictions (or logits) first and targets second.
      link: name of the link from raw scores to predictions (see ``links``).
      n_outputs: raw scores per row, or ``"n_classes"``.
      hessian_informative: False if the hessian of ``fn`` is zero almost
        everywhere, True if it is not; None (the default) has the engine probe
        it on the data at the initial score, as for a plain function (optax's
        Huber loss has curvature only within ``delta`` of the target).
      **kwargs: keyword arguments passed to ``fn`` on every call, e.g. ``delta``.
    Returns:
      a declared loss named ``"optax:<fn.__name__>"`` whose ``params`` hold
      ``link``, ``n_outputs``, ``hessian_informative`` and ``kwargs``, so that
      ``losses.get(name, **params)`` rebuilds it for functions found in optax.
    """
    params = {
        "link": link,
        "n_outputs": n_outputs,
        "hessian_informative": hessian_informative,
        **kwargs,
    }

    @declare(
        name=OPTAX_PREFIX + fn.__name__,
        link=link,
        n_outputs=n_outputs,
        hessian_informative=hessian_informative,
        params=params,
    )
    def optax_loss(y: ArrayLike, f: ArrayLike) -> jax.Array:
        return jnp.sum(fn(f, y, **kwargs))

    return optax_loss


def optax_function(name: str) -> Callable[..., jax.Array]:
    """The optax loss called ``name``, looked up in ``optax.losses`` then ``optax``."""
    import optax  # imported here so that `import losses` does not pay for optax

    for namespace in (optax.losses, optax):
        fn = getattr(namespace, name, None)
        if callable(fn):
            return fn
    raise ValueError(f"no optax loss named {name!r} in optax.losses or optax")
