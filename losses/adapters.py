"""Adapters turning losses from other libraries into declared per-sample losses.

optax's losses take ``(predictions, targets)``, jaxboost's ``(y, f)``: every
function of optax is adapted (never called with its arguments swapped), with
the link, raw scores per row and target domain of `OPTAX_LOSSES`.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from . import links
from ._declare import Loss, declare, loss_factory

OPTAX_PREFIX = "optax:"


class OptaxLoss(NamedTuple):
    """What an optax loss needs to boost (the defaults of `from_optax`)."""

    link: str
    n_outputs: int | str = 1
    target_domain: str = "any"
    # targets cast to int32 before the call (optax indexes classes with them)
    integer_targets: bool = False
    convex: bool = False
    # optax maps the function over a leading batch axis: called on a batch of one
    batched: bool = False


_SOFTMAX_VECTOR = OptaxLoss("softmax", "n_targets", "probability", convex=True)
_CLASS_SCORES = OptaxLoss("identity", "n_classes", "class", integer_targets=True, convex=True)
_MARGIN = OptaxLoss("identity", 1, "sign", convex=True)
_REGRESSION = OptaxLoss("identity", 1, convex=True)

# optax 0.2.8's per-sample losses fn(predictions, targets), by __name__
OPTAX_LOSSES: dict[str, OptaxLoss] = {
    "sigmoid_binary_cross_entropy": OptaxLoss("sigmoid", 1, "probability", convex=True),
    "sigmoid_focal_loss": OptaxLoss("sigmoid", 1, "probability"),
    "softmax_cross_entropy": _SOFTMAX_VECTOR,
    "safe_softmax_cross_entropy": _SOFTMAX_VECTOR,
    "poly_loss_cross_entropy": OptaxLoss("softmax", "n_targets", "probability"),
    "softmax_cross_entropy_with_integer_labels": OptaxLoss(
        "softmax", "n_classes", "class", integer_targets=True, convex=True
    ),
    "multiclass_hinge_loss": _CLASS_SCORES,
    "multiclass_perceptron_loss": _CLASS_SCORES,
    "multiclass_sparsemax_loss": _CLASS_SCORES._replace(batched=True),
    "hinge_loss": _MARGIN,
    "perceptron_loss": _MARGIN,
    "sparsemax_loss": OptaxLoss("identity", 1, "binary", convex=True),
    "l2_loss": _REGRESSION,
    "squared_error": _REGRESSION,
    "huber_loss": _REGRESSION,
    "log_cosh": _REGRESSION,
    "cosine_distance": OptaxLoss("identity", "n_targets"),
    "generalized_kl_divergence": OptaxLoss("exp", "n_targets", "non_negative", convex=True),
    "convex_kl_divergence": OptaxLoss("exp", "n_targets", "non_negative", convex=True),
}

# optax functions that are not a loss of one sample's (predictions, targets)
NOT_PER_SAMPLE: dict[str, str] = {
    "kl_divergence": "its predictions must be normalised log-probabilities, which raw scores "
    "are not (it decreases without bound); use softmax_cross_entropy or "
    "generalized_kl_divergence",
    "kl_divergence_with_log_targets": "its predictions must be normalised log-probabilities, "
    "which raw scores are not (it decreases without bound); use softmax_cross_entropy",
    "cosine_similarity": "it is a similarity, to be maximised; use cosine_distance",
    "ctc_loss": "it scores sequences with paddings",
    "ctc_loss_with_forward_probs": "it scores sequences with paddings",
    "triplet_margin_loss": "it takes anchors, positives and negatives",
    "ntxent": "it compares the embeddings of a whole batch",
    "ranking_softmax_loss": "it scores a list of items together",
    "dice_loss": "it is a segmentation loss over a batch of pixels",
    "binary_dice_loss": "it is a segmentation loss over a batch of pixels",
    "multiclass_generalized_dice_loss": "it is a segmentation loss over a batch of pixels",
    "make_fenchel_young_loss": "it makes a loss from a max function; pass the loss it makes",
    "smooth_labels": "it transforms labels",
}

_UNKNOWN = OptaxLoss("identity")
_warned_unknown: set[str] = set()


def is_optax(fn: Any) -> bool:
    """Whether ``fn`` is a function of the optax package (or a ``functools.partial`` of one)."""
    if isinstance(fn, functools.partial):
        fn = fn.func
    return (getattr(fn, "__module__", None) or "").startswith("optax")


def adapt_optax(fn: Callable[..., jax.Array]) -> Loss:
    """An optax function passed as the loss itself, adapted by `from_optax`.

    A ``functools.partial`` with keyword arguments passes them on.  A function
    missing from `OPTAX_LOSSES` gets the identity link and a warning
    (once per function) saying how to set it.
    """
    kwargs: dict[str, Any] = {}
    if isinstance(fn, functools.partial):
        if fn.args:
            raise ValueError(
                f"loss: functools.partial of {fn.func.__name__} binds positional arguments; "
                "bind its options by keyword, or pass losses.from_optax(fn, **options)"
            )
        fn, kwargs = fn.func, dict(fn.keywords)
    name = getattr(fn, "__name__", repr(fn))
    _refuse_if_not_per_sample(fn, "loss")
    if _listed(fn) is _UNKNOWN and name not in _warned_unknown:
        _warned_unknown.add(name)
        warnings.warn(
            f"loss: the link of optax.{name} is unknown, so predictions are its raw scores "
            f"(identity link); pass losses.from_optax(optax.{name}, link=...) to set it "
            f"(one of {', '.join(links.LINKS)})",
            stacklevel=3,
        )
    return from_optax(fn, **kwargs)


def _listed(fn: Callable[..., Any]) -> OptaxLoss:
    """``fn``'s entry in `OPTAX_LOSSES` (identity, one output for others)."""
    if not is_optax(fn):  # a function of one's own may share an optax name
        return _UNKNOWN
    return OPTAX_LOSSES.get(getattr(fn, "__name__", ""), _UNKNOWN)


def _refuse_if_not_per_sample(fn: Callable[..., Any], argument: str) -> None:
    name = getattr(fn, "__name__", "")
    if is_optax(fn) and name in NOT_PER_SAMPLE:
        raise ValueError(
            f"{argument}: optax.{name} is not a loss of one sample's (predictions, targets) "
            f"that boosting can minimise: {NOT_PER_SAMPLE[name]}"
        )


def from_optax(
    fn: Callable[..., jax.Array],
    link: str | None = None,
    n_outputs: int | str | None = None,
    *,
    hessian_informative: bool | None = None,
    target_domain: str | None = None,
    integer_targets: bool | None = None,
    **kwargs: Any,
) -> Loss:
    """Wrap an optax loss ``fn(predictions, targets, **kwargs)`` as ``loss(y, f)``.

    For example ``from_optax(optax.losses.huber_loss, delta=2.0)`` or
    ``from_optax(optax.sigmoid_binary_cross_entropy)``.  Settings left at None
    come from `OPTAX_LOSSES` for a function listed there (the identity
    link, one output, any targets otherwise).  The result of ``fn`` is summed,
    so an elementwise optax loss on a vector score still gives a scalar.  The
    same arguments give the same loss object.

    Args:
      fn: optax loss taking predictions (or logits) first and targets second.
      link: name of the link from raw scores to predictions (see ``links``).
      n_outputs: raw scores per row, ``"n_classes"`` or ``"n_targets"``.
      hessian_informative: False if the hessian of ``fn`` is zero almost
        everywhere, True if it is not; None (the default) has the engine probe
        it on the data at the initial score, as for a plain function (optax's
        Huber loss has curvature only within ``delta`` of the target).
      target_domain: the targets ``fit`` accepts (a key of
        ``losses.TARGET_DOMAINS``).
      integer_targets: cast the targets (stored as floats) to int32 before
        calling ``fn``, for losses taking integer labels such as
        ``softmax_cross_entropy_with_integer_labels``.
      **kwargs: keyword arguments passed to ``fn`` on every call, e.g. ``delta``.
    Returns:
      a declared loss named ``"optax:<fn.__name__>"`` whose ``params`` hold
      ``link``, ``n_outputs``, ``hessian_informative``, ``kwargs``, and
      ``target_domain`` and ``integer_targets`` where they differ from the
      table's, so that ``losses.get(name, **params)`` rebuilds it (the same
      object) for functions found in optax.
    Raises:
      ValueError: for an optax function that is no loss of one sample
        (``kl_divergence``, ``ctc_loss``, ...), saying why.
    """
    if isinstance(fn, functools.partial):  # (its keywords are options, as kwargs)
        if fn.args:
            raise ValueError(
                f"fn: functools.partial of {fn.func.__name__} binds positional arguments; "
                "pass losses.from_optax(fn, **options)"
            )
        fn, kwargs = fn.func, {**fn.keywords, **kwargs}
    _refuse_if_not_per_sample(fn, "fn")
    listed = _listed(fn)
    return _adapted(
        fn,
        listed.link if link is None else link,
        listed.n_outputs if n_outputs is None else n_outputs,
        hessian_informative,
        listed.target_domain if target_domain is None else target_domain,
        listed.integer_targets if integer_targets is None else bool(integer_targets),
        kwargs,
    )


@loss_factory
def _adapted(
    fn: Callable[..., jax.Array],
    link: str,
    n_outputs: int | str,
    hessian_informative: bool | None,
    target_domain: str,
    integer_targets: bool,
    kwargs: dict[str, Any],
) -> Loss:
    """`from_optax` with every setting resolved (cached on them)."""
    listed = _listed(fn)
    params = {"link": link, "n_outputs": n_outputs, "hessian_informative": hessian_informative}
    params.update(kwargs)
    if target_domain != listed.target_domain:
        params["target_domain"] = target_domain
    if integer_targets != listed.integer_targets:
        params["integer_targets"] = integer_targets
    vector = n_outputs == "n_targets"  # optax reduces over the last axis

    def optax_loss(y: ArrayLike, f: ArrayLike) -> jax.Array:
        y, f = jnp.asarray(y), jnp.asarray(f)
        if vector:
            y, f = jnp.atleast_1d(y), jnp.atleast_1d(f)
        if integer_targets:
            y = y.astype(jnp.int32)
        if listed.batched:
            y, f = y[None], f[None]
        return jnp.sum(fn(f, y, **kwargs))

    optax_loss.__doc__ = f"``sum(optax.{fn.__name__}(f, y))``: one sample's loss(y, f)."
    return declare(
        name=OPTAX_PREFIX + fn.__name__,
        link=link,
        n_outputs=n_outputs,
        hessian_informative=hessian_informative,
        convex=listed.convex,
        target_domain=target_domain,
        params=params,
    )(optax_loss)


def optax_function(name: str) -> Callable[..., jax.Array]:
    """The optax loss called ``name``, looked up in ``optax.losses`` then ``optax``."""
    import optax  # imported here so that `import losses` does not pay for optax

    for namespace in (optax.losses, optax):
        fn = getattr(namespace, name, None)
        if callable(fn):
            return fn
    raise ValueError(f"no optax loss named {name!r} in optax.losses or optax")
