"""What the host checks after every chunk of rounds, and what it does then.

A chunk reports, per round, the training loss after the round, the number
of rows whose gradient or hessian was not finite at its start
(`jaxboost.engine.training._train_chunk`) and, in a subsampled fit, the loss
of the round's in-bag rows before and after it: a tree fitted to some rows
moves the others' scores too, so a rise is judged on the rows it was fitted
to there.  The first round where something went
wrong is an `Event`; the fit keeps the rounds before it and either
runs that round again with a remedy (the loss evaluated in float64, Armijo's
safeguard switched on) or stops with an error naming the round.  A model is
never built from a round whose derivatives were NaN.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..runtime.precision import rows_in_float64

# a round "raises" the training loss when it grows by more than this fraction
# of its size: float32 sums of the loss over rows round at about 1e-6
_RISE_TOLERANCE = 1e-3


class Event(NamedTuple):
    """The first round of a chunk that went wrong."""

    index: int  # the round's position in its chunk (rounds before it are kept)
    # "not_finite_derivatives", "stuck_leaves", "not_finite_loss" or "loss_rose"
    kind: str
    n_rows: int  # rows with non-finite derivatives ("not_finite_derivatives")
    before: float  # the training loss before the round
    after: float  # the training loss after it
    in_bag: bool = False  # before and after are those of the round's in-bag rows


def first_event(
    chunk_loss: np.ndarray,
    n_not_finite: np.ndarray,
    loss_before: float,
    watch_rises: bool,
    n_stuck: np.ndarray | None = None,
    in_bag: np.ndarray | None = None,
) -> Event | None:
    """The first round of a chunk with non-finite derivatives, leaves that
    needed a line search the program did not run, a non-finite loss or
    (``watch_rises``) a loss that rose; None if every round is fine.

    Args:
      chunk_loss: ``(n_rounds,)`` training loss after each round.
      n_not_finite: ``(n_rounds,)`` rows whose derivatives were not finite at
        the start of each round.
      loss_before: the training loss before the chunk's first round.
      n_stuck: ``(n_rounds,)`` such leaves per round (a loss-free tree
        program's, `jaxboost.engine.round_programs`), or None.
      in_bag: ``(n_rounds, 2)`` the loss of each round's in-bag rows before
        and after it (a subsampled fit's), on which rises are then judged;
        or None: on the training loss.
    """
    before = float(loss_before)
    stuck = [0] * len(chunk_loss) if n_stuck is None else n_stuck.tolist()
    for index, (after, n_rows) in enumerate(zip(chunk_loss.tolist(), n_not_finite.tolist())):
        if n_rows > 0:
            return Event(index, "not_finite_derivatives", int(n_rows), before, after)
        if stuck[index] > 0:
            return Event(index, "stuck_leaves", 0, before, after)
        if not math.isfinite(after):
            return Event(index, "not_finite_loss", 0, before, after)
        judged = (before, after) if in_bag is None else tuple(in_bag[index].tolist())
        if watch_rises and _rose(*judged):
            return Event(index, "loss_rose", 0, *judged, in_bag=in_bag is not None)
        before = after
    return None


def _rose(before: float, after: float) -> bool:
    """Whether a loss went from ``before`` to ``after`` by more than rounding."""
    return after > before + _RISE_TOLERANCE * abs(before)


def float64_message(what: str, where: str) -> str:
    """The line saying a fit evaluates its loss in float64 from ``where`` on
    (``"at round 3"``), where ``what`` (``"the training loss is"``) was not
    finite in float32."""
    return (
        f"loss: {what} not finite in float32 {where} but finite in float64: from there on"
        " the loss's value and derivatives are evaluated in float64 (trees, "
        "histograms and predictions stay float32); loss_dtype='float64' does so from the "
        "start, loss_dtype='float32' never"
    )


def not_finite_error(
    event: Event, first_round: int, catalogue: str | None = None, fisher: bool = False
) -> FloatingPointError:
    """The error for a round whose derivatives or loss were not finite in
    every precision tried (``first_round``: the chunk's first round, 0-based).
    ``catalogue``: the name of the catalogue loss trained, where it is one
    (there is nothing to rewrite: the message names the targets and the
    settings); ``fisher``: its steps were Fisher scoring's."""
    number = first_round + event.index + 1
    where = "the initial score" if number == 1 else f"the scores after round {number - 1}"
    if catalogue is not None:
        what = (
            f"its gradient or hessian is NaN or infinite on {event.n_rows} rows"
            if event.kind == "not_finite_derivatives"
            else f"the training loss became {event.after}"
        )
        settings = "a lower learning_rate or a larger reg_lambda"
        if fisher:
            settings = (
                "hessian='diag' (Newton steps on the loss's own curvature in place of its "
                f"Fisher information, which vanishes there), {settings}"
            )
        return FloatingPointError(
            f"y: with the catalogue loss {catalogue!r}, {what} at round {number} (at {where}): "
            "its steps overflowed on these targets, as where the loss's minimiser runs to an "
            "infinite raw score (counts nearly all 0, one class nearly alone). Check y, or "
            f"try {settings}"
        )
    if event.kind == "not_finite_derivatives":
        return FloatingPointError(
            f"loss: its gradient or hessian is NaN or infinite on {event.n_rows} rows at round "
            f"{number} (at {where}), although the loss is {event.before:.6g} there. The classic "
            "cause is jnp.where(cond, g(f), c) with g not finite where cond is False (sqrt or "
            "log of a score <= 0, a division by 0): JAX differentiates both branches, so make "
            "g's argument safe as well, e.g. jnp.sqrt(jnp.where(f > 0, f, 1.0)). Otherwise the "
            "loss overflows at these scores: write it in a stable form, lower learning_rate or "
            "raise reg_lambda"
        )
    return FloatingPointError(
        f"training loss became {event.after} at round {number}: the loss or its derivatives "
        "overflowed; lower learning_rate, raise reg_lambda, or write the loss in a "
        "numerically stable form"
    )


def loss_rose_message(event: Event, first_round: int, switched_on: bool) -> str:
    """The line saying a round raised the training loss, and what the fit does."""
    number = first_round + event.index + 1
    rows = " on the rows its trees were fitted to" if event.in_bag else ""
    rose = f"training loss rose at round {number}{rows} ({event.before:.6g} -> {event.after:.6g})"
    if switched_on:
        return (
            f"{rose}: Newton steps overshoot on this loss, so Armijo's safeguard (each leaf's "
            "value shrunk until it lowers its rows' loss) is on from that round; armijo=True "
            "has it from the start, armijo=False keeps it off"
        )
    return f"{rose}; armijo=False keeps Armijo's safeguard off (armijo=None would switch it on)"


def scaled_message(scale: float) -> str:
    """The clause saying the loss is fitted times ``scale`` (a power of two)."""
    exponent = int(np.log2(scale))
    return (
        "the loss's values or gradients are beyond float32's range, in which the engine "
        f"sums them, so it fits the loss times 2^{exponent} (the same trees: reg_lambda, "
        "min_child_weight, min_split_gain and hessian_floor are scaled with it; train_loss_ "
        "and the metrics are not)"
    )


def not_finite_init_error(loss, rows, score: np.ndarray, mean_loss: float, tried: str):
    """The error for a training loss not finite at the initial score in every
    precision ``tried``, naming the first row (of ``rows``, this process's
    ``(targets, weight)``, or None) whose loss or gradient is not finite in
    float64 at ``score (K,)``, and whether its weight is 0."""
    start = f"loss: the training loss at the initial score is {mean_loss} (not finite, in {tried})"
    fix = "check the loss for overflow, e.g. write log(cosh(d)) as logaddexp(d, -d) - log(2)"
    if rows is None:
        return ValueError(f"{start}; {fix}")
    y, weight = rows
    try:
        with np.errstate(all="ignore"):
            values, peak_grad = rows_in_float64(loss, y, score)
    except (TypeError, ValueError, IndexError, FloatingPointError):  # no row to name
        return ValueError(f"{start}; {fix}")
    bad = ~(np.isfinite(values) & np.isfinite(peak_grad))
    if bad.any():
        row = int(np.argmax(bad))
        where = (
            f"row {row} (y = {y[row]}) has loss {values[row]} and gradient magnitude "
            f"{peak_grad[row]} at the raw score {score} even in float64"
        )
        if weight[row] == 0:
            rows_bad = int(bad.sum())
            return ValueError(
                f"{start}: {where}. Its sample_weight is 0, but a row's loss still enters "
                f"the sums (0 x inf is NaN): drop such rows ({rows_bad} here) from X and y"
            )
        return ValueError(f"{start}: {where}; {fix}")
    row = int(np.argmax(np.abs(values)))
    if tried == "float32":
        return ValueError(
            f"{start}: every row's loss is finite in float64 (the largest {values[row]:.3g}, "
            f"row {row}); loss_dtype='auto' or 'float64' evaluates it there"
        )
    return ValueError(
        f"{start}: every row's loss is finite in float64 (the largest {values[row]:.3g}, row "
        f"{row}, at the raw score {score}) but they span more than float32, in which the "
        "engine sums them, holds even scaled; rescale the targets (and the predictions back)"
    )
