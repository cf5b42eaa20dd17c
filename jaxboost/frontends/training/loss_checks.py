"""Checks of a loss and of the metrics before training: called on a few
rows' shapes (traced, not run), their targets' domains, and ``n_outputs``
against what the loss declares; every error names the argument and the fix."""

from __future__ import annotations

import functools
import inspect

import jax
import jax.numpy as jnp
import numpy as np

from ...engine.metrics import Metric
from ...losses import TARGET_DOMAINS, TargetDomain
from ...losses.catalogue import is_catalogue_loss
from ...losses.distributions import gaussian_nll
from ...losses.families import FAMILIES
from ...losses.metadata import metadata_of
from ...runtime.same_function import SameComputation, plain
from .padding_check import check_mask_respected


def check_target_domain(loss, y: np.ndarray, name: str = "y") -> None:
    """Raises a ValueError if a declared loss's ``target_domain``
    (`losses._declare.TARGET_DOMAINS`) excludes ``y`` (``(n_rows,)`` or
    ``(n_rows, k)``): its shape, a column's rule, or a value; the message
    names the column, the row and the fix."""
    domain = TARGET_DOMAINS[metadata_of(loss).target_domain]
    problem = target_problem(domain, y)
    if problem is not None:
        raise ValueError(f"{name}: the loss {metadata_of(loss).name!r} needs targets {problem}")


def check_target_spread(loss, y: np.ndarray, weight: np.ndarray, name: str = "y") -> None:
    """Raises a ValueError naming ``name``, the loss and the fix where a
    catalogue distribution whose parameters need targets that vary
    (`jaxboost.losses.families.Family.needs_spread`: Normal, Student-t,
    LogNormal, Gamma, Beta, Weibull, and ``gaussian_nll``) gets targets
    ``y`` (``(n_rows,)``, or censored ``(n_rows, 2)`` of (time, event))
    without spread on the rows of positive ``weight``: there the likelihood
    grows without bound as the distribution narrows, and a fit ended in a
    NaN loss or concentrations of 1e12.  Censored targets also need an
    observed row."""
    family = "normal" if loss is gaussian_nll else metadata_of(loss).family
    if family not in FAMILIES or not FAMILIES[family].needs_spread:
        return
    rows = np.asarray(weight) > 0
    if metadata_of(loss).censored:
        observed = rows & (y[:, 1] > 0)
        if not np.any(observed):
            raise ValueError(
                f"{name}: every row is censored (event 0): the loss "
                f"{metadata_of(loss).name!r} learns nothing of the distribution from censored "
                "rows alone (each says only that the time is later); give rows with event 1"
            )
        times = y[observed, 0]
        spread = np.any(times != times[0]) or np.any(y[rows, 0] > times[0])
        value = times[0]
    else:
        targets = y[rows]
        spread = np.any(targets != targets[0]) if targets.size else True
        value = targets[0] if targets.size else None
    if not spread:
        raise ValueError(
            f"{name}: every target is {float(value):g} (on the rows of positive weight): the "
            f"loss {metadata_of(loss).name!r} fits no distribution to targets without spread (its "
            "likelihood grows without bound as the distribution narrows onto them); a "
            "constant target needs no distribution: predict the constant, or fit targets "
            "that vary"
        )


# catalogue losses whose minimiser over a constant raw score is infinite where
# every target sits at an end of their domain: loss name -> (the ends, what
# the model of such targets is, in words)
_COUNTS = ((0.0,), "a mean of 0 (a log-mean raw score of -inf)")
_CLASSES = ((0.0, 1.0), "a probability of {value:g} (a raw score of {sign}inf)")
_UNBOUNDED_AT = {
    "binary_logloss": _CLASSES,
    "focal": _CLASSES,
    "exponential": _CLASSES,
    "poisson": _COUNTS,
    "tweedie": _COUNTS,
    "distribution:poisson": _COUNTS,
    "distribution:negative_binomial": _COUNTS,
    "distribution:zero_inflated_poisson": _COUNTS,
}


def unbounded_targets_problem(
    loss, y: np.ndarray, weight: np.ndarray, name: str = "y"
) -> str | None:
    """The ValueError message (or None) for targets ``y`` whose catalogue
    ``loss`` has no finite minimiser: every target on the rows of positive
    ``weight`` 0 for a count loss (Poisson, Tweedie, the count
    distributions), every one 0 or every one 1 for a log loss (binary log
    loss, focal, exponential), one class alone for the softmax.  There the
    initial score's search and the trees run towards an infinite raw score:
    a fit gave predictions of 0.37 for all-zero counts, or warned of
    float32 where nothing was the user's to rescale.  LightGBM refuses a
    Poisson fit of zero counts ("sum of labels is zero")."""
    base = getattr(loss, "base", None)  # an estimator's wrapper of a catalogue loss
    if base is not None and base is not loss:
        y = np.asarray(y)
        if y.ndim == 2:  # summed over targets: each column is its own fit
            problems = (
                unbounded_targets_problem(base, y[:, k], weight, f"{name}[:, {k}]")
                for k in range(y.shape[1])
            )
            return next((problem for problem in problems if problem is not None), None)
        return unbounded_targets_problem(base, y, weight, name)
    stated = metadata_of(loss)
    loss_name = stated.name
    if not stated.declared or stated.censored:
        return None
    if loss_name not in (*_UNBOUNDED_AT, "softmax_cross_entropy") or not is_catalogue_loss(loss):
        return None
    targets = np.asarray(y)[np.asarray(weight) > 0]
    if targets.size == 0 or np.any(targets != targets.reshape(targets.shape[0], -1)[0]):
        return None
    value = float(np.ravel(targets)[0]) if targets.ndim == 1 else None
    rows = "on the rows of positive weight" if np.any(np.asarray(weight) == 0) else "on every row"
    if loss_name == "softmax_cross_entropy":
        if targets.ndim != 1:
            return None
        return (
            f"{name}: every label is {value:g} ({rows}): the loss 'softmax_cross_entropy' is "
            "lowest at a probability of 1 for that class, the other classes' raw scores at "
            "-inf, which no finite model reaches (its predictions would be an artefact of "
            "the number of rounds); predict that class, or fit rows of at least two classes"
        )
    ends, model = _UNBOUNDED_AT[loss_name]
    if value not in ends:
        return None
    model = model.format(value=value, sign="+" if value > 0 else "-")
    what = "targets" if ends == (0.0,) else "labels"
    other = "a target above 0" if ends == (0.0,) else f"a label of {1 - value:g}"
    return (
        f"{name}: every target is {value:g} ({rows}): the loss {loss_name!r} of {what} that "
        f"are all {value:g} is lowest at {model}, which no finite model reaches (its "
        "predictions would be an artefact of the number of rounds); such rows need no "
        f"model: predict {value:g}, or fit rows that include {other} (a fold or slice "
        "of such rows alone: merge it with others)"
    )


def check_unbounded_targets(loss, y: np.ndarray, weight: np.ndarray, name: str = "y") -> None:
    """Raises `unbounded_targets_problem`'s ValueError, if any."""
    problem = unbounded_targets_problem(loss, y, weight, name)
    if problem is not None:
        raise ValueError(problem)


def target_problem(domain: TargetDomain, y: np.ndarray) -> str | None:
    """What in ``y`` falls outside ``domain``, in words following "targets"
    (the domain, then what ``y`` holds instead); None if nothing does."""
    columns = domain.columns
    if columns == () and y.ndim != 1:
        ravel = "; pass y.ravel()" if y.ndim == 2 and y.shape[1] == 1 else ""
        return (
            f"{domain.description}, one per row: y of shape (n_rows,), got shape {y.shape}{ravel}"
        )
    if columns:
        return _column_problem(domain, columns, y)
    if domain.holds is None:
        return None
    outside = ~domain.holds(y)
    if not np.any(outside):
        return None
    row = int(np.argmax(outside.reshape(y.shape[0], -1).any(axis=1)))
    problem = (
        f"{domain.description}; {int(outside.sum())} are not, the first at row {row}: {y[row]}"
    )
    if domain.fix:
        problem += f"; the largest is {np.max(y):g}: {domain.fix}"
    return problem


def _column_problem(domain: TargetDomain, columns: tuple, y: np.ndarray) -> str | None:
    """`target_problem` for targets of one column per rule: the shape,
    then the first column and row breaking its rule, or the columns swapped."""
    names = ", ".join(column.name for column in columns)
    rules = ", ".join(f"y[:, {i}] {column.description}" for i, column in enumerate(columns))
    wanted = f"{domain.description}: {rules}"
    if y.ndim != 2 or y.shape[1] != len(columns):
        return (
            f"{wanted}; got y of shape {y.shape}, where ({y.shape[0]}, {len(columns)}) is "
            f"needed: np.column_stack([{names}])"
        )
    broken = [~column.holds(y[:, i]) for i, column in enumerate(columns)]
    if not any(rows.any() for rows in broken):
        return None
    reversed_holds = all(column.holds(y[:, -1 - i]).all() for i, column in enumerate(columns))
    if len(columns) == 2 and reversed_holds:
        return (
            f"{wanted}; the columns look swapped: y[:, 0] looks like the {columns[1].name}, "
            f"y[:, 1] like the {columns[0].name}; pass np.column_stack([{names}]) (y[:, ::-1])"
        )
    i = next(i for i, rows in enumerate(broken) if rows.any())
    row, count = int(np.argmax(broken[i])), int(broken[i].sum())
    return (
        f"{wanted}; got {columns[i].name} {y[row, i]:g} at row {row} "
        f"({count} row{'s' if count > 1 else ''} in all)"
    )


_CONTROL_FLOW_ERRORS = tuple(
    getattr(jax.errors, name)
    for name in (
        "ConcretizationTypeError",
        "TracerBoolConversionError",
        "TracerIntegerConversionError",
        "TracerArrayConversionError",
    )
    if hasattr(jax.errors, name)
)


def check_loss(loss, y: np.ndarray, n_outputs: int, n_rows: int = 8) -> None:
    """Check ``n_outputs`` against the loss, then call the loss and its
    derivatives on a few rows before training.

    Raises a ValueError naming the problem: ``n_outputs`` other than the
    count a loss declares (an int; one per column of ``y`` for
    ``"n_targets"``; at least 2 for ``"n_classes"``), class labels outside
    ``[0, n_outputs)`` for a loss whose targets are classes, Python control
    flow on traced values, numpy called on traced values, a vector ``f``
    indexed when ``n_outputs`` is 1, a non-scalar result per sample, an
    integer result, or a failure on the given target and score shapes.
    """
    check_not_a_group_loss(loss)
    stated = metadata_of(loss)
    declared = stated.n_outputs if stated.declared else None
    name = stated.name
    fix = "leave n_outputs unset (None) or set it to"
    count, why = declared, f"it declares n_outputs={declared}"
    if declared == "n_targets":
        count, why = (int(y.shape[1]) if y.ndim == 2 else 1), "one per column of y"
    if isinstance(count, (int, np.integer)) and count != n_outputs:
        raise ValueError(
            f"n_outputs: the loss {name!r} takes f of {count} raw score(s) per sample "
            f"({why}), got n_outputs={n_outputs}; {fix} {count}"
        )
    if declared == "n_classes" and n_outputs < 2:
        raise ValueError(
            f"n_outputs: the loss {name!r} takes one raw score per class, at least 2, got "
            f"n_outputs={n_outputs}; {fix} the number of classes"
        )
    if stated.target_domain == "class" and y.size:
        outside = (y >= n_outputs).reshape(y.shape[0], -1).any(axis=1)
        if outside.any():
            row = int(np.argmax(outside))
            raise ValueError(
                f"y: the loss {name!r} scores n_outputs={n_outputs} classes, labels 0 to "
                f"{n_outputs - 1}, but {int(outside.sum())} labels are not, the first at row "
                f"{row}: {y[row]}; {fix} at least {int(np.max(y)) + 1} (max(y) + 1)"
            )
    check_per_sample(loss, y, n_outputs, "loss", "loss", differentiate=True, n_rows=n_rows)


def required_positional(fn) -> tuple[str, ...] | None:
    """The names of ``fn``'s positional parameters without a default; None
    where its signature is unknown or takes ``*args``."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a builtin or C function: no signature
        return None
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters):
        return None
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return tuple(
        p.name for p in parameters if p.kind in positional and p.default is inspect.Parameter.empty
    )


def check_not_a_group_loss(loss) -> None:
    """Raises a ValueError when a loss trained per sample, ``loss(y, f)``,
    needs a third argument: a group loss ``loss(y, f, mask)`` that was not
    declared one (the engine never guesses that from the argument count)."""
    required = required_positional(loss)
    if required is None or len(required) < 3:
        return
    name = metadata_of(loss).name
    raise ValueError(
        f"loss: {name!r} takes {len(required)} arguments ({', '.join(required)}), but a loss "
        "of one sample is called as loss(y, f). If it is a group loss loss(y, f, mask) of a "
        f'query or stratum, declare it: losses.declare({name}, per="group") (or add '
        'per="group" to its losses.declare); else give the extra arguments defaults or bind '
        "them with functools.partial"
    )


def check_per_sample(
    fn,
    y: np.ndarray,
    n_outputs: int,
    name: str,
    role: str,
    differentiate: bool,
    n_rows: int = 8,
) -> None:
    """Call ``fn(y, f)`` of one sample (a loss or a metric; ``role`` names it in
    the message, ``name`` is the argument the error starts with) on a few rows
    of ``y`` and scores of ``n_outputs``, with its gradient if
    ``differentiate``; raises a ValueError as `check_loss` describes.

    Only shapes and dtypes are traced, so a function that passed with these
    shapes passes again: repeated fits skip the tracing (a few ms), and so
    do fits of a keyed function of the same structure with other numbers
    (`jaxboost.runtime.lifted_values`: a new ``alpha``, the same jaxpr)."""
    y_rows = jax.ShapeDtypeStruct(
        (min(n_rows, y.shape[0]), *y.shape[1:]), jax.dtypes.canonicalize_dtype(y.dtype)
    )
    if isinstance(fn, SameComputation) and fn.structure is not None:
        fn = _ByStructure(fn)
    arguments = (fn, y_rows, n_outputs, name, role, differentiate)
    try:
        hash(arguments)
    except TypeError:  # an unhashable callable: traced every time
        _traced_per_sample.__wrapped__(*arguments)
        return
    _traced_per_sample(*arguments)


class _ByStructure:
    """A keyed function called as itself, compared and hashed by its
    structure alone (its lifted values aside): what decides the shapes
    and dtypes of its values and gradients."""

    def __init__(self, fn: SameComputation):
        self.fn = fn
        self.structure = fn.structure

    def __call__(self, *args):
        return self.fn(*args)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ByStructure) and other.structure == self.structure

    def __hash__(self) -> int:
        return hash(self.structure)


@functools.lru_cache(maxsize=64)
def _traced_per_sample(
    fn, y_rows: jax.ShapeDtypeStruct, n_outputs: int, name: str, role: str, differentiate: bool
) -> None:
    """`check_per_sample` on the shapes of a few rows (cached on
    success; a failure raises, and is not cached)."""
    n_rows = y_rows.shape[0]
    f_rows = jax.ShapeDtypeStruct((n_rows,) if n_outputs == 1 else (n_rows, n_outputs), jnp.float32)
    f_shape = "()" if n_outputs == 1 else f"({n_outputs},)"
    where = (
        f"{role}(y, f) with one sample's y of shape {tuple(y_rows.shape[1:])} and f of shape "
        f"{f_shape}"
    )
    try:
        values = jax.eval_shape(jax.vmap(fn), y_rows, f_rows)
        if values.shape != (n_rows,):
            hint = ""
            if len(y_rows.shape) == 2 and y_rows.shape[1] == 1 and values.shape[1:] == (1,):
                hint = "; for one target per sample pass y of shape (n_rows,), e.g. y.ravel()"
            elif len(y_rows.shape) == 2 and n_outputs == 1:
                hint = (
                    f"; for {y_rows.shape[1]} targets per sample fit jb.Regressor (one output "
                    "per column of y), or write a loss of the vector y returning a scalar "
                    "(declared with losses.declare(..., n_outputs=...))"
                )
            raise ValueError(
                f"{name}: {where} must return a scalar per sample, got shape "
                f"{values.shape[1:]}{hint}"
            )
        if not jnp.issubdtype(values.dtype, jnp.floating):
            raise ValueError(f"{name}: {where} must return a float, got dtype {values.dtype}")
        if differentiate:
            jax.eval_shape(jax.vmap(jax.grad(fn, argnums=1)), y_rows, f_rows)
    except jax.errors.TracerArrayConversionError as error:
        raise ValueError(
            f"{name}: {where} calls numpy (np.*) on a traced value, where jax.numpy (jnp.*) is "
            "needed: write it with jnp.exp, jnp.log, ... so that JAX can trace and "
            f"differentiate it. JAX said: {str(error).splitlines()[0]}"
        ) from None
    except _CONTROL_FLOW_ERRORS as error:
        raise ValueError(
            f"{name}: {where} uses Python control flow (if, while, bool(), int()) on a traced "
            "value; write it with jnp.where or jax.lax.cond. JAX said: "
            f"{str(error).splitlines()[0]}"
        ) from None
    except (TypeError, ValueError, IndexError) as error:
        if str(error).startswith(f"{name}: "):
            raise
        said = str(error).splitlines()[0]
        indexes_f = False
        if isinstance(error, IndexError) and n_outputs == 1:
            # it is f that is indexed when a vector f (of ample width) passes
            wide = jax.ShapeDtypeStruct((n_rows, 64), jnp.float32)
            try:
                jax.eval_shape(jax.vmap(fn), y_rows, wide)
                indexes_f = True
            except Exception:  # noqa: BLE001, S110  any failure: the plain message below
                pass
        if indexes_f:
            raise ValueError(
                f"{name}: {where} failed ({said}): the {role} indexes f as a vector: set "
                "n_outputs to the number of scores it takes"
            ) from None
        raise ValueError(f"{name}: {where} failed: {said}") from None


def check_metric(
    metric: Metric, y: np.ndarray, n_outputs: int, targets: str = "the eval_set's y"
) -> None:
    """Raises a ValueError when ``metric`` cannot measure a model of
    ``n_outputs`` raw scores on targets like ``y`` (``targets`` names them in
    the message): a one-output metric on several outputs would read the
    first only, a per-sample function of the wrong shape would fail inside
    JAX, and targets outside the metric's domain (log loss or AUC of
    regression targets, see `check_metric_targets`) give meaningless
    numbers."""
    name = f"eval_metric {metric.name!r}"
    if metric.outputs == "one" and n_outputs != 1:
        raise ValueError(
            f"{name}: measures models with one output, this one has {n_outputs}; for "
            "classes use 'mlogloss' or 'merror', else a function metric(y, f) of one sample"
        )
    if metric.outputs == "several" and n_outputs == 1:
        raise ValueError(
            f"{name}: measures models with one output per class, this one has one "
            "(for two classes: 'logloss', 'error' or 'auc')"
        )
    if metric.per_sample is not None:
        check_per_sample(metric.per_sample, y, n_outputs, name, "metric", differentiate=False)
    check_metric_targets(metric, y, n_outputs, targets)


def check_metric_targets(
    metric: Metric, y: np.ndarray, n_outputs: int, targets: str = "the eval_set's y"
) -> None:
    """Raises a ValueError naming the first row of ``y`` outside ``metric``'s
    target domain (`losses._declare.TARGET_DOMAINS`: ``"logloss"``,
    ``"error"`` and ``"auc"`` need targets in [0, 1], a catalogue loss's
    name its declared domain); class labels (``"mlogloss"``, ``"merror"``)
    must also be below ``n_outputs``."""
    domain = metric.target_domain or metadata_of(metric.per_sample).target_domain
    description, holds = TARGET_DOMAINS[domain].description, TARGET_DOMAINS[domain].holds
    if holds is None:
        return
    outside = ~holds(y)
    if domain == "class" and n_outputs > 1:
        description = f"that are class labels 0, 1, ..., {n_outputs - 1} (n_outputs = {n_outputs})"
        outside |= y >= n_outputs
    if np.any(outside):
        row = int(np.argmax(outside.reshape(y.shape[0], -1).any(axis=1)))
        raise ValueError(
            f"eval_metric {metric.name!r}: needs targets {description}; {targets} is "
            f"{y[row]!s} at row {row}; pick a metric for these targets (rmse or mae for "
            "regression)"
        )


def check_group_loss(loss, y: np.ndarray) -> None:
    """Call a group loss ``loss(y, f, mask)`` and its gradient on the shapes
    of one group of eight rows of targets like ``y`` before training, then on
    one padded group (`check_mask_respected`); raises a ValueError
    naming the problem, as `check_loss` does for per-sample losses.  The
    catalogue's group losses are not called: their tests check all this."""
    if is_catalogue_loss(plain(loss)):
        return
    width = 8
    y_group = jax.ShapeDtypeStruct((width, *y.shape[1:]), jax.dtypes.canonicalize_dtype(y.dtype))
    f_group = jax.ShapeDtypeStruct((width,), jnp.float32)
    mask = jax.ShapeDtypeStruct((width,), jnp.bool_)
    name = metadata_of(loss).name
    where = (
        f"loss {name!r}: loss(y, f, mask) on one group of {width} rows (y of shape "
        f"{y_group.shape}, f and mask of shape ({width},))"
    )
    try:
        value = jax.eval_shape(loss, y_group, f_group, mask)
        if value.shape != ():
            raise ValueError(f"{where} must return one number per group, got shape {value.shape}")
        if not jnp.issubdtype(value.dtype, jnp.floating):
            raise ValueError(f"{where} must return a float, got dtype {value.dtype}")
        jax.eval_shape(jax.grad(loss, argnums=1), y_group, f_group, mask)
    except jax.errors.TracerArrayConversionError as error:
        raise ValueError(
            f"{where} calls numpy (np.*) on a traced value; write it with jax.numpy (jnp.*). "
            f"JAX said: {str(error).splitlines()[0]}"
        ) from None
    except _CONTROL_FLOW_ERRORS as error:
        raise ValueError(
            f"{where} uses Python control flow on a traced value; write it with jnp.where. "
            f"JAX said: {str(error).splitlines()[0]}"
        ) from None
    except (TypeError, ValueError, IndexError) as error:
        if str(error).startswith(where):
            raise
        raise ValueError(f"{where} failed: {str(error).splitlines()[0]}") from None
    _check_row_derivatives(loss, name, y_group, f_group, mask)
    check_mask_respected(loss, y)


def _check_row_derivatives(loss, name: str, y_group, f_group, mask) -> None:
    """A group loss's declared ``row_derivatives(y, f, mask)`` returns
    ``(grad, hess)``, two arrays of ``f``'s shape, at the shapes of
    `check_group_loss`'s group; else a ValueError naming it and the fix."""
    row_derivatives = metadata_of(loss).row_derivatives
    if row_derivatives is None:
        return
    width = f_group.shape[0]
    where = (
        f"loss {name!r}: row_derivatives(y, f, mask) on one group of {width} rows (f and mask "
        f"of shape ({width},))"
    )
    try:
        found = jax.eval_shape(row_derivatives, y_group, f_group, mask)
    except (TypeError, ValueError, IndexError) as error:
        raise ValueError(f"{where} failed: {str(error).splitlines()[0]}") from None
    pair = isinstance(found, (tuple, list)) and len(found) == 2
    if pair and all(getattr(part, "shape", None) == (width,) for part in found):
        return
    got = jax.tree.map(lambda part: f"{part.dtype}{list(part.shape)}", found)
    raise ValueError(
        f"{where} must return (grad, hess): two arrays of shape ({width},), the "
        f"gradient and the hessian's diagonal at each row; got {got}"
    )
