"""A catalogue loss's parameters as settings: ``loss_params`` and the nested
names ``loss__<parameter>`` of scikit-learn's ``get_params``/``set_params``.

``loss_params`` (a dict, default None) holds the parameters a fit builds the
catalogue loss with, in place of the loss's own: ``Regressor(loss="quantile",
loss_params={"alpha": 0.9})`` fits ``losses.quantile(0.9)``.  Each
parameter is also a nested setting, as a pipeline's steps' are:
``get_params()`` lists ``loss__alpha`` (its value in ``loss_params``, else
the loss's own, else its default, None where it has none) and
``set_params(loss__alpha=0.9)`` writes it into a new ``loss_params``, so
that ``GridSearchCV(Regressor(loss="quantile"), {"loss__alpha": [...]})``
searches it.  The values are inputs of the compiled programs, not part of
them (`jaxboost.runtime.lifted_values`): a new value compiles nothing.
"""

from __future__ import annotations

from typing import Any

from ...losses.catalogue import parameters

PREFIX = "loss__"


def check_loss_params(name: str, value: Any) -> dict | None:
    """``value`` unless it is neither None nor a dict of parameter names (which
    the fit checks against the loss)."""
    if value is None or (isinstance(value, dict) and all(isinstance(key, str) for key in value)):
        return value
    raise ValueError(
        f"{name}: expected None or a dict of the loss's parameters by name "
        f"(such as {{'alpha': 0.9}} for loss='quantile'), got {value!r}"
    )


def nested_params(model: Any) -> dict[str, Any]:
    """``{"loss__<parameter>": value}`` of ``model``'s catalogue loss (none
    for a loss not from the catalogue)."""
    loss = model.loss
    known = parameters(loss) if isinstance(loss, str) or callable(loss) else None
    if known is None:
        return {}
    given = model.loss_params if isinstance(model.loss_params, dict) else {}
    return {PREFIX + name: value for name, value in {**known, **given}.items()}


def pop_nested(params: dict[str, Any]) -> dict[str, Any]:
    """Removes the ``loss__<parameter>`` entries from ``params``; returns
    them by parameter name."""
    return {key[len(PREFIX) :]: params.pop(key) for key in list(params) if key.startswith(PREFIX)}


def set_nested(model: Any, nested: dict[str, Any]) -> None:
    """Sets the loss's parameters ``nested`` (by parameter name) in a new
    ``model.loss_params``; a ValueError names a parameter the loss lacks."""
    if not nested:
        return
    loss = model.loss
    known = parameters(loss) if isinstance(loss, str) or callable(loss) else None
    unknown = sorted(set(nested) - set(known or ()))
    if known is None or unknown:
        names = [PREFIX + name for name in (sorted(nested) if known is None else unknown)]
        takes = f"takes {[PREFIX + n for n in known]}" if known else "takes none"
        raise ValueError(
            f"{', '.join(names)}: not a parameter of loss {loss!r}, which {takes} "
            "(only catalogue losses take parameters by name)"
        )
    given = model.loss_params if isinstance(model.loss_params, dict) else {}
    model.loss_params = {**given, **nested}
