"""Catalogue metadata attached to a per-sample loss.

A declared loss is a `DeclaredLoss`: a callable ``loss(y, f) -> scalar``
that calls the function it wraps (whose name, docstring and signature it
shows) and carries its metadata as one frozen record, ``loss_metadata``
(`jaxboost.losses.metadata.LossMetadata`, which readers reach through
``metadata_of``), whose fields it also shows as read-only attributes:

- ``name``: catalogue name; ``losses.get(name, **params)`` rebuilds the loss.
- ``params``: the factory parameters, e.g. ``{"alpha": 0.9}`` (``{}`` if none).
- ``link``: name of the link from raw scores to predictions (see ``links``).
- ``n_outputs``: raw scores per row: an int; ``"n_classes"`` when the engine
  takes it from the labels (``K = max label + 1``); or ``"n_targets"`` when
  it takes it from the width of 2-D targets (``y`` of shape ``(n_rows, K)``,
  one-hot or probability vectors; 1 for 1-D targets).
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
- ``target_domain``: a key of `TARGET_DOMAINS`, the values the targets
  may take (``"probability"`` for log loss: in ``[0, 1]``) and their shape
  (``"time_event"``: two columns, each with its rule); ``fit`` refuses
  others, as XGBoost and LightGBM do, rather than fit a meaningless model.
- ``smooth``: True when the loss's gradient in ``f`` is continuous (no kink
  such as ``|y - f|`` at ``f = y``), so that the engine takes JAX's gradient
  as it is; False (unknown) has it look for kinks at every row and take the
  middle of the subdifferential there (``jaxboost.derivatives.row_gradient``),
  at the cost of two more gradient evaluations per row and round.
- ``per``: ``"sample"`` for a loss ``loss(y, f)`` of one row; ``"group"`` for
  a loss ``loss(y, f, mask) -> scalar`` of one query group or stratum: ``y``
  ``(m,)`` or ``(m, k)``, ``f`` ``(m,)`` and ``mask`` ``(m,)`` bool, the
  group's rows padded to ``m`` (rows where ``mask`` is False are padding
  and must not change the value).  Never guessed from the argument count.
- ``row_derivatives``: for a group loss, None (the engine takes the gradient
  by ``jax.grad`` and the hessian's diagonal by Hessian-vector products), or
  a function ``(y, f, mask) -> (grad (m,), hess (m,))`` giving them in closed
  form, where that is cheaper (pairwise losses, Cox), 0 on padding.
- ``row_order``: for a group loss, None, or a function of the targets
  ``y (n, ...) -> (n,)`` numpy keys: the engine then gives each group's rows
  in the stable order of these keys (Cox: by time, so that its loss need not
  sort them every round); the loss's value must not depend on row order.

Declared losses are hashed by identity (a fit keys its compiled programs on
what the loss computes, traced, not on the object: see
``jaxboost.runtime.same_function``), copy to themselves, and pickle (so do the models holding
them): a catalogue or optax loss as ``(name, params)``, rebuilt through
``losses.get`` into the very same object; a loss built by a
`loss_factory` as that call; any other as its wrapped function, by
reference, with the metadata.
"""

from __future__ import annotations

import functools
import inspect
import math
import sys
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import jax
import numpy as np
from jax.typing import ArrayLike

from . import links
from .metadata import FIELDS, LossMetadata


class TargetColumn(NamedTuple):
    """One column of structured targets (Cox's time or event)."""

    name: str  # what the column holds, as a user names it: "time"
    description: str  # its rule, after "y[:, i] ": "the time, > 0"
    holds: Callable[[np.ndarray], np.ndarray]  # the rule on the column (n,) -> (n,) bool


class TargetDomain(NamedTuple):
    """The targets a loss takes: ``fit`` refuses others (as XGBoost and
    LightGBM do) rather than fit a meaningless model."""

    description: str  # what the targets must be, in words that follow "targets"
    # the test of every value, on a numpy array; None where any finite one is fine
    holds: Callable[[np.ndarray], np.ndarray] | None = None
    # the shape: None, y (n,) or (n, k) alike; (), one target per row, y (n,);
    # else y (n, len(columns)), each column with its own rule
    columns: tuple[TargetColumn, ...] | None = None
    fix: str = ""  # what to do with targets outside, where it is not obvious


# LightGBM's default label_gain table holds the gains 2^g - 1 of grades 0 to 30
MAX_GRADE = 30

TARGET_DOMAINS: dict[str, TargetDomain] = {
    "any": TargetDomain("that are finite"),
    "probability": TargetDomain(
        "in [0, 1] (labels 0 and 1, or probabilities)", lambda y: (y >= 0) & (y <= 1)
    ),
    "binary": TargetDomain("that are 0 or 1", lambda y: (y == 0) | (y == 1)),
    "sign": TargetDomain("that are -1 or 1", lambda y: (y == -1) | (y == 1)),
    "class": TargetDomain(
        "that are class labels 0, 1, 2, ... (whole numbers)",
        lambda y: (y >= 0) & (y == np.floor(y)),
    ),
    "non_negative": TargetDomain("that are >= 0", lambda y: y >= 0),
    "count": TargetDomain(
        "that are counts 0, 1, 2, ... (whole numbers)", lambda y: (y >= 0) & (y == np.floor(y))
    ),
    "open_unit_interval": TargetDomain(
        "in the open interval (0, 1)",
        lambda y: (y > 0) & (y < 1),
        fix="squeeze them inside, e.g. (y (n - 1) + 0.5) / n (Smithson and Verkuilen)",
    ),
    "positive": TargetDomain("that are > 0", lambda y: y > 0),
    "relevance": TargetDomain("that are relevance labels >= 0", lambda y: y >= 0, columns=()),
    "grade": TargetDomain(
        f"that are relevance grades 0, 1, ..., {MAX_GRADE} (whole numbers)",
        lambda y: (y >= 0) & (y <= MAX_GRADE) & (y == np.floor(y)),
        columns=(),
        fix=(
            f"lambdarank takes the gains 2^grade - 1 of grades 0 to {MAX_GRADE}, as LightGBM's "
            f"default label_gain table; map the grades onto 0 to {MAX_GRADE} in their order, "
            "e.g. np.unique(y, return_inverse=True)[1]"
        ),
    ),
    "time_event": TargetDomain(
        "of two columns (time, event)",
        columns=(
            TargetColumn("time", "the time > 0", lambda time: time > 0),
            TargetColumn(
                "event",
                "the event indicator 0/1 (1 observed, 0 censored)",
                lambda e: (e == 0) | (e == 1),
            ),
        ),
    ),
}

# what a distribution's declared parts are, for their errors
_DISTRIBUTION_PARTS = {
    "init": "a function (y (n,), weight (n,)) -> (K,) raw start",
    "fisher": "a function f (K,) -> (K, K) Fisher information",
    "sampler": "a function (key, f (K,), n) -> (n, ...) draws of y",
}

# what a loss is a function of: one row ``loss(y, f)``, or one group of rows
# ``loss(y, f, mask)`` (a query, a stratum)
PER = ("sample", "group")

# n_outputs that the engine reads off the targets rather than a number
DATA_OUTPUTS = ("n_classes", "n_targets")


class Loss(Protocol):
    """A declared loss: ``loss(y, f) -> scalar`` (or ``loss(y, f, mask)`` for
    a group loss) plus metadata."""

    name: str
    params: dict[str, Any]
    link: str
    n_outputs: int | str
    hessian_informative: bool | None
    convex: bool
    target_domain: str
    per: str

    def __call__(self, y: ArrayLike, f: ArrayLike, *mask: ArrayLike) -> jax.Array: ...


class DeclaredLoss:
    """A loss function with catalogue metadata: calls go to ``fn``.

    Built by `declare`; see the module docstring for the attributes,
    identity, copying and pickling.
    """

    def __init__(self, fn: Callable[..., jax.Array], **fields: Any):
        functools.update_wrapper(self, fn)  # __name__, __doc__, __wrapped__ (signature)
        fields["params"] = dict(fields.get("params") or {})
        # the record every reader reads (`metadata_of`); the fields show as attributes
        self.loss_metadata = LossMetadata(**fields, declared=True)
        # (factory, args, kwargs) that built it, set by loss_factory
        self.recipe: tuple[Callable[..., Loss], tuple, dict] | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> jax.Array:
        return self.__wrapped__(*args, **kwargs)

    def __repr__(self) -> str:
        params = ", ".join(f"{key}={value!r}" for key, value in self.params.items())
        return f"<declared loss {self.name}({params}), link {self.link!r}>"

    def metadata(self) -> dict[str, Any]:
        """The keyword arguments of `DeclaredLoss` that gave this loss: its
        record's fields (`LossMetadata`)."""
        return self.loss_metadata.arguments()

    # a declared loss is immutable: a copy (scikit-learn's clone) is itself
    def __copy__(self) -> DeclaredLoss:
        return self

    def __deepcopy__(self, memo: dict) -> DeclaredLoss:
        return self

    def __reduce__(self) -> str | tuple:
        from . import catalogue  # catalogue imports this module

        try:
            by_name = catalogue.get(self.name, **self.params)
        except (ValueError, TypeError, ImportError):
            by_name = None
        if by_name is self:
            return _by_name, (self.name, self.params)
        if self.recipe is not None:
            return _by_recipe, self.recipe
        if _module_global(self.__module__, self.__qualname__) is self:
            return self.__qualname__  # pickled by reference, as a function is
        return _redeclare, (self.__wrapped__, self.metadata())


def _field(name: str) -> property:
    return property(lambda self: getattr(self.loss_metadata, name), doc=f"``loss_metadata.{name}``")


for _name in FIELDS:  # loss.link, loss.convex, ...: read-only views of the record
    setattr(DeclaredLoss, _name, _field(_name))


def _by_name(name: str, params: dict[str, Any]) -> Loss:
    from . import catalogue

    return catalogue.get(name, **params)


def _by_recipe(factory: Callable[..., Loss], args: tuple, kwargs: dict) -> Loss:
    return factory(*args, **kwargs)


def _redeclare(fn: Callable[..., jax.Array], metadata: dict[str, Any]) -> Loss:
    return DeclaredLoss(fn, **metadata)


def _module_global(module: str, qualname: str) -> Any:
    """The object at ``module.qualname`` (None if there is none)."""
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return found


def declare(
    fn: Callable[..., jax.Array] | None = None,
    /,
    *,
    name: str | None = None,
    link: str = "identity",
    n_outputs: int | str = 1,
    hessian_informative: bool | None = None,
    convex: bool = False,
    target_domain: str = "any",
    params: dict[str, Any] | None = None,
    smooth: bool = False,
    per: str = "sample",
    row_derivatives: Callable[..., tuple[jax.Array, jax.Array]] | None = None,
    row_order: Callable[[np.ndarray], np.ndarray] | None = None,
    init: Callable[..., jax.Array] | None = None,
    fisher: Callable[[jax.Array], jax.Array] | None = None,
    sampler: Callable[..., jax.Array] | None = None,
) -> Any:
    """Attach catalogue metadata to a loss function.

    ``declare(fn, per="group")`` returns ``fn`` wrapped in a
    `DeclaredLoss` carrying these attributes (the function itself is
    left unchanged); without ``fn`` it returns a decorator that does so
    (``@declare(link="exp")``).  ``name`` defaults to the function's
    ``__name__``; every other argument to what an undeclared function gets
    (`jaxboost.losses.metadata.LossMetadata`): ``link`` ``"identity"``,
    ``hessian_informative`` None (probed on the data), ``convex`` False.
    Raises a ValueError for an unknown ``link`` or ``target_domain``, a bad
    ``n_outputs`` (a positive int, ``"n_classes"`` or ``"n_targets"``), a
    ``per`` other than ``"sample"`` or ``"group"``, or ``row_derivatives``
    on a per-sample loss, or an ``init``, ``fisher`` or ``sampler`` that is
    not a function or is given to a group loss (their values are checked
    when a fit first calls them: `check_distribution`).
    """
    if per not in PER:
        raise ValueError(f"per must be one of {list(PER)}, got {per!r}")
    if per == "group" and n_outputs != 1:
        raise ValueError(f"a group loss scores one output per row (n_outputs=1), got {n_outputs!r}")
    if row_derivatives is not None and (per != "group" or not callable(row_derivatives)):
        raise ValueError("row_derivatives: a function (y, f, mask) -> (grad, hess) of a group loss")
    if row_order is not None and (per != "group" or not callable(row_order)):
        raise ValueError("row_order: a function y -> keys of a group loss")
    for argument, value in (("init", init), ("fisher", fisher), ("sampler", sampler)):
        if value is not None and (per != "sample" or not callable(value)):
            raise ValueError(f"{argument}: {_DISTRIBUTION_PARTS[argument]} of a per-sample loss")
    if link not in links.LINKS:
        raise ValueError(f"link must be one of {sorted(links.LINKS)}, got {link!r}")
    valid_count = isinstance(n_outputs, int) and not isinstance(n_outputs, bool) and n_outputs >= 1
    if n_outputs not in DATA_OUTPUTS and not valid_count:
        raise ValueError(
            f"n_outputs must be a positive int, 'n_classes' or 'n_targets', got {n_outputs!r}"
        )
    if target_domain not in TARGET_DOMAINS:
        raise ValueError(
            f"target_domain must be one of {sorted(TARGET_DOMAINS)}, got {target_domain!r}"
        )

    def attach(fn: Callable[..., jax.Array]) -> Loss:
        if not callable(fn):
            raise TypeError(f"declare: expected a loss function, got {fn!r:.80}")
        return DeclaredLoss(
            fn,
            name=name if name is not None else getattr(fn, "__name__", type(fn).__name__),
            params=dict(params or {}),
            link=link,
            n_outputs=n_outputs,
            hessian_informative=hessian_informative,
            convex=convex,
            target_domain=target_domain,
            smooth=smooth,
            per=per,
            row_derivatives=row_derivatives,
            row_order=row_order,
            init=init,
            fisher=fisher,
            sampler=sampler,
        )

    return attach if fn is None else attach(fn)


def loss_factory(make: Callable[..., Loss]) -> Callable[..., Loss]:
    """Decorator for a function building a declared loss from parameters: the
    same parameters give the same loss object.

    jaxboost caches its compiled programs on the loss object, so
    ``quantile(0.9)`` built twice (or ``loss="huber"`` given by name to two
    fits) must not be two different functions, or every fit would compile
    again.  Arguments are normalised (positional or keyword, defaults filled)
    before the lookup; unhashable arguments skip the cache (each call builds a
    new loss).  The loss records the call (``recipe``), so that it pickles as
    that call when ``losses.get`` cannot rebuild it.
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
            return remembered(make(*bound.args, **bound.kwargs), bound)
        if key not in built:
            built[key] = remembered(make(*bound.args, **bound.kwargs), bound)
        return built[key]

    def remembered(loss: Loss, bound: inspect.BoundArguments) -> Loss:
        if isinstance(loss, DeclaredLoss) and loss.recipe is None:
            loss.recipe = (build, bound.args, bound.kwargs)
        return loss

    return build


def finite_number(factory: str, name: str, value: Any) -> float:
    """A loss factory's parameter ``name`` as a float: a ValueError naming
    ``factory`` and ``name`` where ``value`` is no finite real number (a
    string, None, inf, NaN)."""
    number = None
    if not isinstance(value, (str, bytes)):
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = None
    if number is None or not math.isfinite(number):
        raise ValueError(f"{factory}: {name} must be a finite number, got {value!r}")
    return number
