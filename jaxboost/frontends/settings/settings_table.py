"""The settings of `jaxboost.Booster`, `jaxboost.Regressor`,
`jaxboost.Classifier` and `jaxboost.Ranker`, defined once.

`SETTINGS` holds every setting's name, default, check, documentation and
the front ends that take it, in the order of their signatures.  The four
classes take from it (`takes_settings`) their ``__init__`` (a real
signature, so ``help()``, tab completion and scikit-learn's ``get_params``,
``set_params`` and ``clone`` see every argument with its default), the Args
section of their docstrings, and the checks `check_settings` runs before a
fit.  A setting added here appears in all four (or in those named) with its
default and documentation.  Checks that weigh several settings together
(``max_leaves`` against ``max_depth``, ``base_score`` against the outputs)
stay with the fit that needs them.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import Any

from ...engine.training import (
    HESSIAN_MODES,
    HESSIANS,
    LEAF_METHODS,
    MULTI_STRATEGIES,
    SPLIT_CRITERIA,
)
from ...runtime.devices import check_devices
from ...runtime.precision import LOSS_DTYPES
from ..data.categories import check_category_count, check_smoothing
from .checks import (
    GROW_POLICIES,
    check_early_stopping,
    check_random_state,
    choice,
    depth_bound,
    finite_number,
    fraction,
    whole_number,
)
from .constraints import MONOTONE_METHODS, interaction_sets, monotone_directions
from .loss_params import check_loss_params

BOOSTER, REGRESSOR, CLASSIFIER, RANKER = "Booster", "Regressor", "Classifier", "Ranker"
ALL = frozenset({BOOSTER, REGRESSOR, CLASSIFIER, RANKER})
ESTIMATORS = ALL - {BOOSTER}
# Ranker takes the settings a fit of a group loss reads: group losses fit
# Newton leaves on their diagonal hessian (no line search, Fisher scoring or
# Armijo's check), one output, no holdout (early_stopping="auto" never holds
# out groups); a Ranker's fit leaves the rest at the Booster's defaults.
NOT_RANKER = ALL - {RANKER}

# the Booster's hessian settings: the engine's, and "auto" (Fisher scoring for
# a loss that declares its Fisher information or a sampler: bench_distributional.py)
HESSIAN_SETTINGS = ("auto", *HESSIANS)


@dataclasses.dataclass(frozen=True)
class Setting:
    """One constructor argument: its ``name``, ``default``, type
    ``annotation`` (as written in a signature), ``check`` (``check(name,
    value)`` raises a ValueError naming the setting, or returns the value
    as the fit uses it; None: checked where the fit uses it), the
    ``front_ends`` that take it and its ``doc`` (the Args entry, Markdown;
    indentation and the blank first line are dropped)."""

    name: str
    default: Any
    annotation: str
    check: Callable[[str, Any], Any] | None = None
    front_ends: frozenset[str] = ALL
    doc: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "doc", inspect.cleandoc(self.doc))


def _optional(check: Callable[[str, Any], Any]) -> Callable[[str, Any], Any]:
    """``check``, letting None through."""
    return lambda name, value: None if value is None else check(name, value)


def _of_value(check: Callable[[Any], Any]) -> Callable[[str, Any], Any]:
    """A check of the value alone (its messages name the setting already)."""
    return lambda name, value: check(value)


_POSITIVE = functools.partial(finite_number, positive=True)


def _one_of(*allowed: str) -> Callable[[str, Any], Any]:
    return functools.partial(choice, allowed=allowed)


# (a table: a setting a line, its doc below it)
# fmt: off
SETTINGS: tuple[Setting, ...] = (
    Setting("loss", "squared_error", "str | Callable", front_ends=frozenset({BOOSTER}), doc="""
        a function of one sample (``y`` one target, ``f`` the raw score: a
        scalar, or a vector of ``n_outputs`` scores), a group loss declared
        ``per="group"`` (``fit``'s ``group``/``qid``; docs/ranking.md), or a
        catalogue name.
        """),
    Setting("loss", "squared_error", "str | Callable", front_ends=frozenset({REGRESSOR}), doc="""
        a catalogue name (``"squared_error"``, ``"huber"``, ``"poisson"``,
        ...), a catalogue loss, an optax loss (adapted, see ``losses.resolve``),
        or any callable ``loss(y, f) -> scalar`` of one sample.  With a 2-D
        ``y`` an elementwise loss (or one declaring one output) is summed over
        the targets and the model gets one output per target.
        """),
    Setting("loss", "auto", "str | Callable", front_ends=frozenset({CLASSIFIER}), doc="""
        ``"auto"`` (binary log loss for two classes, softmax cross-entropy
        for more), a catalogue name or loss, or a callable ``loss(y, f)`` that
        receives the encoded label ``y`` in ``0..K-1`` (as a float).  The loss's
        declared ``n_outputs`` (``"n_classes"`` gives one per class) and ``link``
        are used, and the link must give probabilities (sigmoid, sigmoid2 or
        softmax: ``"squared_error"`` is refused); a callable without them gets
        one output and a sigmoid link for two classes, ``K`` outputs and a
        softmax link for more.  An optax function is adapted (see
        ``losses.resolve``).
        """),
    Setting("loss", "lambdarank", "str | Callable", front_ends=frozenset({RANKER}), doc="""
        a group loss (``losses.declare(..., per="group")``) or a
        catalogue name: ``"lambdarank"`` (LightGBM's gradients, truncation
        30), ``"listnet"``, ``"ranknet"``.
        """),
    Setting("n_estimators", 100, "int", whole_number, doc="boosting rounds."),
    Setting("learning_rate", 0.1, "float", _POSITIVE, doc="shrinkage of every tree."),
    Setting("max_depth", None, "int | None", _optional(depth_bound), doc="""
        depth of the (complete, padded) trees; None: 6, but leaf-wise trees
        (``grow_policy="lossguide"``) then have no depth bound but
        ``max_leaves`` (LightGBM's ``max_depth=-1``; docs/tabular.md).
        """),
    Setting("n_outputs", None, "int | None", front_ends=frozenset({BOOSTER, REGRESSOR}), doc="""
        raw scores per sample; None takes the loss's declared
        ``n_outputs`` (``"n_classes"``: max label + 1; ``"n_targets"``: the
        columns of a 2-D ``y``), else 1; a Regressor's 2-D ``y`` with a loss of
        one output: one per target.
        """),
    Setting("subsample", 1.0, "float", fraction, doc="""
        fraction of rows drawn (without replacement) for each round.
        """),
    Setting("colsample_bytree", 1.0, "float", fraction, doc="""
        fraction of features each round's tree may use.
        """),
    Setting("leaf_method", "auto", "str", _one_of("auto", *LEAF_METHODS), doc="""
        ``"newton"`` (``-G / (H + lambda)``), ``"line_search"``
        (argmin of the leaf's loss plus ``lambda/2 v^2``; for losses without
        curvature the leaf's loss alone: exact quantiles for pinball losses)
        ``"joint_newton"`` (one Newton step on all of a tree's leaves, with
        their exact ``L x L`` hessian: for group losses, whose leaves interact;
        one output) or ``"auto"``: line search for losses whose hessian is zero almost
        everywhere (declared by ``hessian_informative = False``, as absolute
        and quantile losses do, or found so at the initial score), else Newton.
        """),
    Setting("reg_lambda", None, "float | None", _optional(finite_number), doc="""
        L2 penalty ``lambda/2 v^2`` on leaf values (split gains,
        Newton leaves, and the line-search leaves of losses with curvature);
        with ``hessian="fisher"`` in rows' Fisher information.  None: 1, or
        5 (rows) where the hessian resolves to ``"fisher"``
        (`jaxboost.frontends.settings.regularisation_defaults`, docs/distributions.md);
        for a loss not from the catalogue, at most 100 rows' mean hessian
        (weighted; of the output where it is smallest) at the initial
        score, with a warning (docs/algorithm.md).  Group losses take 1.
        """),
    Setting("min_child_weight", None, "float | None", _optional(finite_number), doc="""
        least hessian sum in a child (sample weight with
        ``split_criterion="first_order"``).  None: 1e-3, scaled as
        ``reg_lambda=None`` is (by ``reg_lambda``'s default over 1) for a
        loss not from the catalogue whose hessian is small: at most a tenth
        of its rows' mean hessian (docs/algorithm.md).
        """),
    Setting("min_split_gain", 0.0, "float", finite_number, doc="least loss decrease for a split."),
    Setting("max_bins", 255, "int", doc="""
        value bins per feature (at most 255; one more bin holds NaN).
        """),
    Setting("split_criterion", "auto", "str", _one_of("auto", *SPLIT_CRITERIA), doc="""
        ``"second_order"`` (Newton gain), ``"first_order"``
        (Friedman: least squares on the pseudo-residuals) or ``"auto"``: first
        order for losses whose hessian is zero almost everywhere, else second.
        """),
    Setting("hessian", "auto", "str", _one_of(*HESSIAN_SETTINGS), NOT_RANKER, doc="""
        ``"diag"`` or ``"full"`` hessian for vector outputs' leaves;
        ``"fisher"``: the Fisher information in its place (Fisher scoring,
        NGBoost's natural gradients; the loss's declared ``fisher``, else
        sampled from its ``sampler``, else the empirical ``grad grad^T``:
        `jaxboost.engine.fisher`), as a full matrix; ``"auto"``:
        ``"fisher"`` for a loss that declares ``fisher`` or ``sampler`` (a
        distribution, ``losses.gaussian_nll``), else ``"diag"``.
        """),
    Setting("multi_strategy", "multi_output_tree", "str", _one_of(*MULTI_STRATEGIES),
            NOT_RANKER, doc="""
        ``"multi_output_tree"`` (one tree with vector leaves per
        round) or ``"one_output_per_tree"`` (Friedman's multi-class algorithm).
        """),
    Setting("hessian_mode", "raw", "str", _one_of(*HESSIAN_MODES), NOT_RANKER, doc="""
        ``"raw"``, ``"clip"`` (hessians raised to
        ``hessian_floor``) or ``"abs"`` (``max(|h|, hessian_floor)``): makes
        Newton steps usable for non-convex losses (Cauchy, Tukey, Welsch).
        """),
    Setting("hessian_floor", 0.0, "float", finite_number, NOT_RANKER, doc="""
        the floor of ``hessian_mode``.
        """),
    Setting("armijo", None, "bool | None", front_ends=NOT_RANKER, doc="""
        shrink each leaf's (learning-rate scaled) value until it lowers
        that leaf's training loss, so no round increases the training loss;
        None: on for line-search leaves, and for Newton leaves of a loss whose
        hessian has negative curvature on some row at the initial score (a
        negative diagonal entry, or with ``hessian="full"`` a negative
        eigenvalue: a non-convex loss such as Tukey's or Welsch's, or the
        Gaussian likelihood's full hessian, whose Newton steps can
        overshoot); off otherwise, and for losses declared convex.
        """),
    Setting("use_quantized_grad", False, "bool", doc="""
        quantise the split statistics (gradients and
        hessians) to a few integer levels each round, with unbiased stochastic
        rounding, and build the histograms from the integers (LightGBM 4's
        quantised training): faster histograms on CPU, splits chosen from
        slightly noisier sums.  Leaf values still use the exact gradients.
        """),
    Setting("num_grad_quant_bins", 4, "int", doc="""
        the levels of ``use_quantized_grad``: gradients
        are rounded to integers in ``[-bins / 2, bins / 2]`` times a per-round
        scale, hessians to ``[0, bins]`` (``[-bins, bins]`` when negative).
        """),
    Setting("random_state", 0, "int | None", _of_value(check_random_state), doc="""
        seed of the subsamples, of the binning sample and of the
        quantisation's rounding: a whole number in ``[0, 2**32 - 1]``, a
        numpy ``RandomState`` or ``Generator`` (each fit draws its seed from
        it), or None: a fresh seed each fit, drawn from numpy's global
        ``RandomState`` (as scikit-learn does).  With several processes,
        process 0's seed is used by all.
        """),
    Setting("devices", None, "Sequence[jax.Device] | None", _of_value(check_devices), doc="""
        devices to shard rows over, a list of distinct ``jax.Device``
        objects of one platform (or one device); default: all devices (in a
        single process, fewer for small data, so that each has at least
        16,384 rows).
        """),
    Setting("rounds_per_chunk", None, "int | None", _optional(whole_number), doc="""
        rounds run in one device program (default 50, whatever
        ``n_estimators`` is, so that changing it compiles nothing; 10 when
        evaluation sets, callbacks or ``verbose`` watch the rounds).
        """),
    Setting("base_score", None, "float | list | None", front_ends=NOT_RANKER, doc="""
        the initial raw score ``F0`` (XGBoost's ``base_score``, on
        the raw scale: log-odds for log loss), one number or one per output;
        None (the default) finds it by minimising the training loss.
        """),
    Setting("loss_dtype", "auto", "str", _one_of(*LOSS_DTYPES), NOT_RANKER, doc="""
        the precision the loss's value, gradient and hessian are
        computed in: ``"float32"``, ``"float64"`` (the loss's own arithmetic
        only: trees, histograms and predictions stay float32), or ``"auto"``:
        float32, and float64 from the first round (or the initial score)
        where the loss or its derivatives are not finite in float32, with a
        warning saying so (``log(cosh(f - y))`` overflows float32 at
        residuals beyond 89).  ``loss_dtype_`` says which the fit ended with.
        Where the loss's float64 values or gradients are beyond float32 still
        (squared errors of targets of 1e20), it is fitted times a power of
        two, with the settings in its units scaled alike: the same trees.
        """),
    Setting("warm_start", False, "bool", front_ends=frozenset({REGRESSOR, CLASSIFIER}), doc="""
        a new ``fit`` adds rounds to the fitted model, up to
        ``n_estimators`` in all (scikit-learn's ``HistGradientBoosting``
        ``warm_start``; `jaxboost.Booster.fit`'s ``init_model``).
        """),
    Setting("min_child_samples", "auto", "int | str", doc="""
        least training rows of positive weight (of the
        round's subsample) in a child: a split leaving fewer is not taken
        (LightGBM's ``min_data_in_leaf``, HGB's ``min_samples_leaf``).  A
        child's rows are read off its hessian sum: exactly where every row
        adds the same to it (squared error, weights 0 and 1), else
        estimated as LightGBM does, its share of its node's hessian sum
        times the node's rows (counted), which may let a child of fewer
        rows pass, never an empty one (docs/tabular.md); 0 checks none.
        ``"auto"`` (the default) is 20, as LightGBM's and HGB's defaults
        (``benchmarks/README.md``), or 0 with ``use_quantized_grad``, whose
        kernels count no rows (a number > 0 with it is an error).
        """),
    Setting("monotone_constraints", None, "list | dict | None", _of_value(monotone_directions),
            doc="""
        per column ``-1`` (predictions non-increasing
        in it), ``0`` (free) or ``+1`` (non-decreasing): a list with one
        entry per column, or a dict by column name or index (others free);
        models of one output only.  Exact for every row: leaves are bounded
        by their neighbours' (`jaxboost.engine.constraints`), whatever the
        ``leaf_method``, and after `jaxboost.refit_leaves`, which puts
        the refitted leaves back in order.
        """),
    Setting("interaction_constraints", None, "list | None", _of_value(interaction_sets),
            doc="""
        sets of columns (indices or names), such as
        ``[[0, 1], [2, 3, 4]]``: the columns split on along any path from
        the root to a leaf lie within one set; a column in no set is never
        split on (LightGBM's rule).
        """),
    Setting("monotone_constraints_method", "basic", "str", _one_of(*MONOTONE_METHODS),
            doc="""
        how the leaves' bounds are found
        (LightGBM's names): ``"basic"`` bounds every node below a split by
        the midpoint of its children's values; ``"intermediate"`` bounds
        each node by the nodes that touch it along a constrained column
        (`jaxboost.engine.neighbours`), which frees regions split apart.
        """),
    Setting("early_stopping", "auto", "str | bool", _of_value(check_early_stopping),
            NOT_RANKER, doc="""
        ``True``: hold out 20% of the rows, stop when their
        loss has not improved for 10 rounds, then fit all rows for the
        rounds they chose (``best_iteration_``; ``evals_result_`` holds the
        held-out curve); ``"auto"``: so where the hessian resolves to
        ``"fisher"`` (a distribution: docs/distributions.md) and ``fit`` is
        given no ``eval_set``, ``early_stopping_rounds``, groups or
        ``init_model``, on one process; ``False``: never.
        """),
    Setting("categorical_features", None, "Any", doc="""
        the categorical columns: indices, names or a
        boolean mask (None: none but a frame's pandas ``category``, polars
        ``Categorical``/``Enum`` or string column, always categorical).  A
        split on one sends a set of categories left (docs/tabular.md);
        numeric columns hold category codes, non-negative integers; an
        array's column of strings is categorical when named here.  Up to
        ``max_bins`` categories keep a bin each; beyond, the rarest share one.
        """),
    Setting("max_cat_to_onehot", 4, "int", check_category_count, doc="""
        a column of at most this many categories splits
        one category against the rest (LightGBM's default 4).
        """),
    Setting("max_cat_threshold", 32, "int", check_category_count, doc="""
        otherwise the node's categories sorted by
        gradient over hessian, and a prefix whose smaller side holds at
        most this many categories goes left (LightGBM's default 32).
        """),
    Setting("cat_smooth", 10.0, "float", check_smoothing, doc="""
        added to each category's hessian sum in that order (10).
        """),
    Setting("grow_policy", "auto", "str", _one_of("auto", *GROW_POLICIES), doc="""
        ``"depthwise"`` (every node of a level splits where it
        gains: complete trees of ``max_depth``), ``"lossguide"`` (the leaf
        of largest gain splits next, up to ``max_leaves`` leaves, within
        ``max_depth`` where it is given: LightGBM's leaf-wise growth;
        docs/tabular.md) or
        ``"auto"`` (the default): ``"lossguide"`` when ``max_leaves`` is
        given, as LightGBM's ``num_leaves``, else ``"depthwise"``.
        """),
    Setting("max_leaves", None, "int | None", doc="""
        the leaves of a leaf-wise tree, at most ``2^max_depth`` where
        ``max_depth`` is given (LightGBM's ``num_leaves``, XGBoost's
        ``max_leaves``); given alone
        it grows trees leaf-wise (``grow_policy="auto"``).  None: 31,
        LightGBM's default, with ``grow_policy="lossguide"`` (at most
        ``2^max_depth`` where ``max_depth`` is given); depth-wise
        trees take None.
        """),
    Setting("n_jobs", None, "int | None", front_ends=ESTIMATORS, doc="""
        how many devices to train on (LightGBM's and XGBoost's
        threads: jaxboost's workers are devices, on CPU the cores): None or
        -1 as many as the rows warrant (the default), ``k`` at most ``k``;
        ``devices`` names them instead.
        """),
    Setting("verbose", False, "bool | int", front_ends=ESTIMATORS, doc="""
        ``fit`` prints progress every ``verbose`` rounds (False, 0 or
        LightGBM's -1: none), unless ``fit(verbose=...)`` says otherwise.
        """),
    Setting("verbosity", None, "int | None", front_ends=ESTIMATORS, doc="""
        XGBoost's and LightGBM's log level, for their users' code:
        without ``verbose``, 2 or more (their info and debug levels) prints
        progress every round, less nothing (warnings are Python warnings).
        """),
    Setting("loss_params", None, "dict | None", check_loss_params, doc="""
        the catalogue loss's parameters by name, in place of its own:
        ``loss="quantile", loss_params={"alpha": 0.9}`` fits
        ``losses.quantile(0.9)``.  Each is also the nested setting
        ``loss__<name>`` of ``get_params``/``set_params``, so scikit-learn's
        searches take it (``{"loss__alpha": [0.1, 0.5, 0.9]}``); its values
        are inputs of the compiled programs: a new value compiles nothing
        (docs/sklearn.md).
        """),
)
# fmt: on


def settings_of(front_end: str) -> tuple[Setting, ...]:
    """The settings ``front_end`` (`BOOSTER`, `REGRESSOR`, ...) takes, in
    the order of its signature."""
    return tuple(setting for setting in SETTINGS if front_end in setting.front_ends)


def check_settings(model: Any, front_end: str) -> None:
    """Runs the check of every setting of ``front_end`` on ``model``'s value:
    a ValueError (a TypeError for ``devices`` of the wrong type) names the
    first one out of range."""
    for setting in settings_of(front_end):
        if setting.check is not None:
            setting.check(setting.name, getattr(model, setting.name))


@functools.cache
def _record_class(front_end: str) -> type:
    names = [setting.name for setting in settings_of(front_end)]
    return dataclasses.make_dataclass(f"{front_end}Settings", names, frozen=True, eq=False)


def settings_record(model: Any, front_end: str = BOOSTER, **changes: Any) -> Any:
    """``model``'s settings of ``front_end`` as one frozen record (each an
    attribute of its name, ``changes`` replacing some): what one fit reads,
    whatever ``set_params`` does to ``model`` meanwhile."""
    values = {setting.name: getattr(model, setting.name) for setting in settings_of(front_end)}
    return _record_class(front_end)(**{**values, **changes})


_CHECKS = {setting.name: setting.check for setting in SETTINGS if setting.check is not None}


def checked(model: Any, name: str) -> Any:
    """``model``'s setting ``name``, checked, as the fit uses it."""
    return _CHECKS[name](name, getattr(model, name))


def _signature(settings: tuple[Setting, ...]) -> inspect.Signature:
    keyword = inspect.Parameter.POSITIONAL_OR_KEYWORD
    return inspect.Signature(
        [inspect.Parameter("self", keyword)]
        + [
            inspect.Parameter(s.name, keyword, default=s.default, annotation=s.annotation)
            for s in settings
        ]
    )


def _args_section(settings: tuple[Setting, ...]) -> str:
    """The Google-style Args entries of ``settings`` (two spaces in, their
    continuation lines four)."""
    entries = []
    for setting in settings:
        first, *rest = setting.doc.splitlines()
        entries.append(f"  {setting.name}: {first}")
        entries.extend(f"    {line}" if line else "" for line in rest)
    return "\n".join(entries)


def _with_args(doc: str, settings: tuple[Setting, ...]) -> str:
    """``doc`` (cleaned) with the lines after its ``Args:`` line, up to the
    next blank line, replaced by the entries of ``settings``."""
    lines = inspect.cleandoc(doc).splitlines()
    start = lines.index("Args:") + 1
    end = lines.index("", start) if "" in lines[start:] else len(lines)
    return "\n".join([*lines[:start], _args_section(settings), *lines[end:]])


def takes_settings(front_end: str) -> Callable[[type], type]:
    """A class decorator: the class's ``__init__`` takes the settings of
    ``front_end`` (keyword or positional, in `SETTINGS`' order, each kept
    as an attribute of its name, unchanged, as scikit-learn requires), and
    its docstring's Args section lists them."""
    settings = settings_of(front_end)
    signature = _signature(settings)

    def decorate(cls: type) -> type:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            try:
                bound = signature.bind(self, *args, **kwargs)
            except TypeError as error:
                raise TypeError(f"{cls.__name__}(): {error}") from None
            bound.apply_defaults()
            for name, value in list(bound.arguments.items())[1:]:
                setattr(self, name, value)

        __init__.__doc__ = "Keeps each setting, as given, in the attribute of its name."
        __init__.__signature__ = signature
        __init__.__qualname__ = f"{cls.__qualname__}.__init__"
        __init__.__module__ = cls.__module__
        cls.__init__ = __init__
        cls.__doc__ = _with_args(cls.__doc__, settings)
        return cls

    return decorate
