"""A loss's metadata as one frozen record: `LossMetadata`, read through `metadata_of`.

Every field the engine, the front ends and the model files read about a
loss lives here once, with its type and the default an undeclared function
gets.  A declared loss (`jaxboost.losses.DeclaredLoss`: the catalogue,
`declare`, `distribution`, optax adapters) builds its record once, when it
is declared, and shows the fields as read-only attributes (``loss.link``);
any other callable gets the defaults, or the fields it carries as
attributes (the front ends' wrappers, a class of the user's).  Code reads
``metadata_of(loss).link``, never ``getattr(loss, "link", default)``, so
that an undeclared loss has one set of defaults everywhere.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any


@dataclasses.dataclass(frozen=True)
class LossMetadata:
    """What a loss declares about itself; the defaults are an undeclared function's."""

    # its name in messages and model files (a catalogue name rebuilds it:
    # ``losses.get(name, **params)``); undeclared: the function's ``__name__``
    name: str = "loss"
    # the factory's arguments that built it (``{"alpha": 0.9}``), {} for none
    params: dict[str, Any] = dataclasses.field(default_factory=dict)
    # raw scores -> predictions, a key of ``losses.links.LINKS``
    link: str = "identity"
    # raw scores per row: an int, "n_classes" or "n_targets" (read off the targets)
    n_outputs: int | str = 1
    # False: the hessian is 0 almost everywhere (line-search leaves); True:
    # Newton leaves; None: the engine probes it on the data at the start
    hessian_informative: bool | None = None
    # True: convex in f for every target (no second start, no curvature probe)
    convex: bool = False
    # the targets fit accepts, a key of ``losses.TARGET_DOMAINS``
    target_domain: str = "any"
    # True: the gradient is continuous in f (no kink check)
    smooth: bool = False
    # "sample": loss(y, f) of one row; "group": loss(y, f, mask) of a query or stratum
    per: str = "sample"
    # a group loss's closed-form (y, f, mask) -> (grad, hess), or None (autodiff)
    row_derivatives: Callable[..., tuple] | None = None
    # a group loss's keys y -> (n,) giving each group's row order, or None
    row_order: Callable[..., Any] | None = None
    # a distribution's start (y, weight) -> (K,) raw scores, or None (searched)
    init: Callable[..., Any] | None = None
    # a distribution's Fisher information f (K,) -> (K, K), or None
    fisher: Callable[..., Any] | None = None
    # a distribution's draws (key, f (K,), n) -> (n, ...), or None
    sampler: Callable[..., Any] | None = None
    # a distribution's family ("gamma", or the numpyro class's name), or None
    family: str | None = None
    # a distribution's parameter names and their links, one per raw output
    parameter_names: tuple[str, ...] = ()
    parameter_links: tuple[str, ...] = ()
    # a distribution's targets are (time, event) rows, right-censored
    censored: bool = False
    # whether a declaration gave these fields (`losses.declare`, the catalogue,
    # or a wrapper of such a loss); False: a function's defaults above
    declared: bool = False

    def arguments(self) -> dict[str, Any]:
        """The fields as `jaxboost.losses.DeclaredLoss`'s keyword arguments
        (all but ``declared``)."""
        return {name: getattr(self, name) for name in FIELDS}


# the fields a loss states (all but ``declared``), in the record's order
FIELDS: tuple[str, ...] = tuple(
    field.name for field in dataclasses.fields(LossMetadata) if field.name != "declared"
)
_DEFAULTS = LossMetadata()


def metadata_of(loss: Any) -> LossMetadata:
    """``loss``'s `LossMetadata` (a catalogue name: its loss's): a declared
    loss's own record (also through a wrapper that forwards attributes to
    it), else, not ``declared``, one with the defaults and any fields
    ``loss`` carries as attributes, named by its ``__name__`` where it has
    no ``name``."""
    if isinstance(loss, str):  # a catalogue name, as ``loss=`` takes it
        from .catalogue import get

        return metadata_of(get(loss))
    found = getattr(loss, "loss_metadata", None)
    if isinstance(found, LossMetadata):
        return found
    carried = {}
    for name in FIELDS:
        value = getattr(loss, name, _DEFAULTS)
        if value is not _DEFAULTS:
            carried[name] = value
    if "name" not in carried:
        carried["name"] = getattr(loss, "__name__", None) or type(loss).__name__
    return LossMetadata(**carried)
