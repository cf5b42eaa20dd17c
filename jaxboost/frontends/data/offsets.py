"""Per-row offsets: a raw score per row added before the loss (LightGBM's
``init_score``, XGBoost's ``base_margin``; a Poisson model's ``log(exposure)``).

A fit with offsets ``o (n_rows, K)`` starts its rounds from the raw scores
``F0 + o``, and its initial score ``F0`` minimises ``sum_i w_i loss(y_i, c +
o_i)`` over constants ``c`` (``base_score`` given: that one; a group loss:
0, as without offsets).  The search is the one of a fit without offsets
(`jaxboost.engine.init_score`), run on `OffsetLoss`: the loss of rows whose
targets carry their offsets in ``K`` more columns.  The trees and
``base_score_`` then hold what the rows have beyond their offsets, and
``predict_raw(X, init_score=o)`` adds a new row's offsets back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...losses.metadata import metadata_of
from ...runtime.padding import pad_rows

# the catalogue metadata (jaxboost.losses._declare) the wrapped loss keeps
_METADATA = (
    "name",
    "params",
    "link",
    "hessian_informative",
    "convex",
    "target_domain",
    "smooth",
    "per",
)


def as_offsets(
    init_score: Any, n_rows: int, n_outputs: int, name: str = "init_score", loss: Any = None
) -> np.ndarray | None:
    """``init_score`` as ``(n_rows, n_outputs)`` float32, or None where not
    given; a ValueError names ``name``, the expected shape (with ``loss``'s
    columns, `column_hint`) or the first row that is not finite."""
    if init_score is None:
        return None
    try:
        with np.errstate(over="ignore"):  # beyond float32: infinite, refused below
            offsets = np.asarray(init_score, dtype=np.float32)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected numbers, got {type(init_score).__name__}") from None
    if offsets.ndim == 1 and n_outputs == 1:
        offsets = offsets[:, None]
    if offsets.shape != (n_rows, n_outputs):
        expected = f"({n_rows},)" if n_outputs == 1 else f"({n_rows}, {n_outputs})"
        message = (
            f"{name}: expected one raw score per row and output, shape {expected}, "
            f"got {np.shape(offsets)}"
        )
        if n_outputs > 1:
            message += f"; {column_hint(loss, n_outputs)}"
        raise ValueError(message)
    finite = np.all(np.isfinite(offsets), axis=1)
    if not finite.all():
        row = int(np.argmin(finite))
        raise ValueError(
            f"{name}: row {row} is not finite ({offsets[row].tolist()}); offsets are raw "
            "scores (log(exposure) for a Poisson loss): give finite numbers"
        )
    return offsets


# the parameters an exposure multiplies, through a log link: its log is their offset
_EXPOSURE_PARAMETERS = ("rate", "mean")


def column_hint(loss: Any, n_outputs: int) -> str:
    """What the offsets of a loss of ``n_outputs`` outputs hold, column by
    column: a distribution's parameter names (``parameter_names``) and,
    where one is a rate or mean on the log scale, the column that
    ``log(exposure)`` goes in, as an ``np.c_[...]`` of that order (the
    zero-inflated Poisson's rate is its second column, the gate its first)."""
    hint = (
        f"a loss of {n_outputs} outputs takes one column per output, each added to that "
        "output's raw score"
    )
    stated = metadata_of(loss)
    names, links = tuple(stated.parameter_names or ()), tuple(stated.parameter_links or ())
    if len(names) != n_outputs:
        return hint
    hint += f" ({', '.join(f'{k}: {n}' for k, n in enumerate(names))})"
    exposed = [
        k
        for k, (n, link) in enumerate(zip(names, links))
        if n in _EXPOSURE_PARAMETERS and link == "exp"
    ]
    if len(exposed) != 1:
        return hint
    k = exposed[0]
    columns = ", ".join(
        "log_exposure" if column == k else "np.zeros(n_rows)" for column in range(n_outputs)
    )
    return (
        f"{hint}; a count model's log(exposure) goes in its {names[k]!r} column ({k}), "
        f"zeros in the others: np.c_[{columns}]"
    )


class OffsetLoss:
    """``loss(y, f + offset)`` of a row whose targets are ``[y, offset]``:
    the original target columns (``target_ndim`` 0: one number), then
    ``n_outputs`` offsets.  A group loss (``per="group"``) takes a group's
    ``(m, T + K)`` rows and its mask.  The loss's declared metadata
    (convexity, link, ...) is the original's."""

    def __init__(self, loss: Callable, n_outputs: int, target_ndim: int):
        self.loss = loss
        self.offset_columns = n_outputs
        self.target_ndim = target_ndim
        for name in _METADATA:
            if hasattr(loss, name):
                setattr(self, name, getattr(loss, name))

    def _split(self, rows: Any) -> tuple[Any, Any]:
        """``(targets, offsets)`` of one row ``(T + K,)`` or of rows ``(m, T + K)``."""
        K = self.offset_columns
        targets = rows[..., 0] if self.target_ndim == 0 else rows[..., :-K]
        offsets = rows[..., -1] if K == 1 else rows[..., -K:]
        return targets, offsets

    def __call__(self, y: Any, f: Any, *mask: Any) -> Any:
        targets, offsets = self._split(y)
        return self.loss(targets, f + offsets, *mask)


def start_scores(init_score: np.ndarray, offsets: np.ndarray | None, n_rows: int) -> np.ndarray:
    """``(n_rows, K)`` float32 raw scores the rounds start from:
    ``init_score (K,)`` plus ``offsets (n_rows, K)`` (padding rows past the
    offsets' get ``init_score``)."""
    raw = np.broadcast_to(np.asarray(init_score, np.float32), (n_rows, len(init_score)))
    if offsets is None:
        return raw
    padded = np.zeros((n_rows, offsets.shape[1]), np.float32)
    padded[: offsets.shape[0]] = offsets
    return raw + padded


def round_start(init_score: np.ndarray, start: np.ndarray | None, n_padded: int) -> np.ndarray:
    """``(n_padded, K)`` float32 scores of the first round: ``start`` (a
    placed fit's, `jaxboost.frontends.training.placement.PlacedRows`) padded with
    copies of its first row, else ``init_score (K,)`` on every row."""
    if start is None:
        return np.broadcast_to(init_score, (n_padded, len(init_score))).astype(np.float32)
    return pad_rows(np.asarray(start, np.float32), n_padded)


def with_offsets(raw: np.ndarray, init_score: Any, n_outputs: int, loss: Any = None) -> np.ndarray:
    """``raw (n_rows, K)`` scores plus ``init_score`` (``predict_raw``'s
    offsets, checked as `as_offsets`, ``loss`` naming the columns; None: ``raw``)."""
    offsets = as_offsets(init_score, raw.shape[0], n_outputs, loss=loss)
    return raw if offsets is None else raw + offsets
