"""Checks of the settings at the boundary: every error names the setting,
what it must be, and what it got."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np

from ...engine.leafwise import DEFAULT_MAX_LEAVES, live_capacity
from ...runtime.devices import default_training_devices
from .constraints import monotone_directions


def whole_number(name: str, value: int) -> int:
    """``value`` as an int, after checking it is a whole number >= 1 (an int,
    or a float such as 3.0; not 2.5, which would be cut to 2)."""
    whole = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    whole = whole or (isinstance(value, (float, np.floating)) and float(value).is_integer())
    if not (whole and int(value) >= 1):
        raise ValueError(f"{name}: expected a whole number >= 1, got {value!r}")
    return int(value)


def depth_bound(name: str, value: Any) -> int:
    """`whole_number`, naming None where ``value`` is LightGBM's -1 or
    XGBoost's 0 (no bound on the depth)."""
    number = isinstance(value, (int, float, np.integer, np.floating))
    if number and not isinstance(value, bool) and value in (0, -1):
        raise ValueError(
            f"{name}: expected a whole number >= 1, or None for no bound, got {value!r} "
            "(LightGBM's -1 and XGBoost's 0 are None here)"
        )
    return whole_number(name, value)


def finite_number(name: str, value: float, positive: bool = False) -> float:
    """``value`` as a float, after checking it is finite and ``> 0``
    (``positive``) or ``>= 0``, as XGBoost and LightGBM require of these."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not (math.isfinite(number) and (number > 0 if positive else number >= 0)):
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"{name}: expected a finite number {bound}, got {value!r}")
    return number


# min_child_samples="auto": LightGBM's min_data_in_leaf and scikit-learn
# HGB's min_samples_leaf, and the best held-out loss of 0 to 40 on four real
# data sets (benchmarks/README.md, bench_min_child_samples.py)
DEFAULT_MIN_CHILD_SAMPLES = 20


def least_child_rows(value: int | str, quantised: bool) -> float:
    """``min_child_samples`` as a float: ``"auto"`` is
    `DEFAULT_MIN_CHILD_SAMPLES`, or 0 with ``quantised`` gradients (their
    packed histograms carry no row count); a number must be finite and >= 0."""
    if isinstance(value, str) and value == "auto":
        return 0.0 if quantised else float(DEFAULT_MIN_CHILD_SAMPLES)
    try:
        number = math.nan if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not (math.isfinite(number) and number >= 0):
        raise ValueError(
            f'min_child_samples: expected "auto" or a finite number >= 0, got {value!r}'
        )
    if number > 0 and quantised:
        raise ValueError(
            "min_child_samples: the quantised histograms (use_quantized_grad=True) "
            'carry no row count; set min_child_samples=0 (or "auto") or '
            "use_quantized_grad=False"
        )
    return number


def fraction(name: str, value: float) -> float:
    """``value`` as a float, after checking it is a number in ``(0, 1]``."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not 0.0 < number <= 1.0:
        raise ValueError(f"{name}: expected a fraction in (0, 1], got {value!r}")
    return number


def choice(name: str, value: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise ValueError(f"{name}: expected one of {list(allowed)}, got {value!r}")
    return value


_SEEDS = 2**32  # the hashes take a uint32 seed


def check_random_state(random_state: Any) -> None:
    """Raises a ValueError unless ``random_state`` is None, a whole number in
    ``[0, 2**32 - 1]`` (an int, or a float such as 7.0, as counts are
    taken; not 1.5, nor a bool) or a numpy ``RandomState`` or ``Generator``."""
    if random_state is None or isinstance(
        random_state, (np.random.RandomState, np.random.Generator)
    ):
        return
    whole = isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool)
    whole = whole or (
        isinstance(random_state, (float, np.floating)) and float(random_state).is_integer()
    )
    if not (whole and 0 <= int(random_state) < _SEEDS):
        raise ValueError(
            f"random_state: expected a whole number in [0, {_SEEDS - 1}], a numpy "
            "RandomState or Generator to draw the seed from, or None for a fresh seed "
            f"each fit; got {random_state!r}"
        )


def draw_seed(random_state: Any) -> np.uint32:
    """The seed of ``random_state`` (checked by `check_random_state`):
    the number itself, or one drawn from the given ``RandomState`` or
    ``Generator``, or for None from numpy's global ``RandomState`` (a fresh
    seed each call, as scikit-learn's ``check_random_state(None)`` gives)."""
    check_random_state(random_state)
    if random_state is None:
        return np.uint32(np.random.randint(_SEEDS, dtype=np.uint32))
    if isinstance(random_state, np.random.RandomState):
        return np.uint32(random_state.randint(_SEEDS, dtype=np.uint32))
    if isinstance(random_state, np.random.Generator):
        return np.uint32(random_state.integers(_SEEDS, dtype=np.uint32))
    return np.uint32(int(random_state))


# rounds per device program when something watches every round
MONITORED_ROUNDS_PER_CHUNK = 10

# rounds per device program otherwise: the same for every n_estimators, so
# changing it (a grid search) compiles nothing; the last chunk's unused rounds
# are skipped inside the program (their trees are allocated all the same)
UNMONITORED_ROUNDS_PER_CHUNK = 50

# bytes a tree's heap arrays take per leaf (jaxboost.engine.tree.Tree): an
# internal node's feature, threshold, threshold_bin, split_gain and
# missing_left (17), a leaf's weight and cover (8), plus 4 per output
_TREE_BYTES_PER_LEAF = 25


def histogram_nodes(max_depth: int, max_leaves: int = 0) -> list[int]:
    """The nodes whose histograms each level of a tree of ``max_depth``
    holds: every node, ``2^depth``, or with ``max_leaves`` (leaf-wise growth)
    the live ones only (`jaxboost.engine.leafwise.live_capacity`)."""
    held = []
    for depth in range(max_depth):
        nodes = 2**depth
        if max_leaves and depth > 0:
            nodes = min(nodes, live_capacity(depth, max_leaves))
        held.append(nodes)
    return held


def check_histogram_memory(
    max_depth: int,
    n_features: int,
    n_bins: int,
    outputs_per_tree: int,
    memory: int | None,
    *,
    max_leaves: int = 0,
    n_outputs: int = 1,
    trees_per_chunk: int = 0,
) -> None:
    """Raises a ValueError when what a fit allocates per device for its
    trees would not fit in a device's ``memory`` bytes (None: unknown, not
    checked).

    Two parts grow with ``max_depth``.  The histograms of a level's nodes
    (every node; with ``max_leaves``, leaf-wise growth, only the live ones,
    `histogram_nodes`): about 12 bytes (the float64 sums, the float32
    running sums) per (feature, node, bin, statistic) of the level and 8
    (the level above's sums, read by the subtraction) per one of the level
    above, 2 statistics per output a tree fits; the widest level counts.
    And the heap arrays of the trees a program returns
    (``trees_per_chunk``, each ``2^max_depth`` leaves of ``n_outputs``
    values: `jaxboost.engine.tree.Tree`).  Without this check a deep tree
    fails inside XLA's allocator.  ``max_depth`` 0 (leaf-wise node tables):
    every leaf's histograms and ``max_leaves`` leaves a tree.
    """
    if memory is None:
        return
    per_node = n_features * n_bins * 2 * outputs_per_tree
    if max_depth == 0:  # node tables (jaxboost.engine.bestfirst): by the leaves alone
        # every leaf's (the native step's table), and a step's two leaves
        histogram_bytes = per_node * 4 * (max_leaves + 3)
        tree_bytes = trees_per_chunk * max_leaves * (_TREE_BYTES_PER_LEAF + 8 + 4 * n_outputs)
        if histogram_bytes + tree_bytes > memory:
            raise ValueError(
                f"max_leaves: {max_leaves} needs about "
                f"{(histogram_bytes + tree_bytes) / 2**30:.1f} GiB per device, more than "
                f"the {memory / 2**30:.1f} GiB a device has; use a smaller max_leaves, "
                "max_bins or rounds_per_chunk"
            )
        return
    held = histogram_nodes(max_depth, max_leaves)
    level_bytes = [
        per_node * (12 * nodes + (8 * held[depth - 1] if depth else 0))
        for depth, nodes in enumerate(held)
    ]
    histogram_bytes = max(level_bytes)
    widest = held[level_bytes.index(histogram_bytes)]
    tree_bytes = trees_per_chunk * 2**max_depth * (_TREE_BYTES_PER_LEAF + 4 * n_outputs)
    needed = histogram_bytes + tree_bytes
    if needed > memory:
        fewer = ", max_leaves" if max_leaves else ""
        trees = ""
        if tree_bytes:
            trees = (
                f" and {tree_bytes / 2**30:.1f} GiB for the {trees_per_chunk} trees of "
                f"2^{max_depth} leaves a program of rounds returns"
            )
        raise ValueError(
            f"max_depth: {max_depth} needs about {needed / 2**30:.1f} GiB per device: "
            f"{histogram_bytes / 2**30:.1f} GiB for the histograms of its widest level "
            f"({widest} nodes x {n_features} features x {n_bins} bins){trees}, more than "
            f"the {memory / 2**30:.1f} GiB a device has; use a smaller max_depth{fewer}, "
            "max_bins or rounds_per_chunk"
        )


GROW_POLICIES = ("depthwise", "lossguide")
# max_depth None: depth-wise trees' depth (and leaf-wise trees' bound under
# monotone or interaction constraints)
DEFAULT_MAX_DEPTH = 6


def tree_shape(settings: Any) -> tuple[int, int]:
    """``(max_depth, max_leaves)`` the engine grows for ``settings``
    (``max_depth``, ``max_leaves``, ``grow_policy`` and the constraints).

    ``max_leaves`` as `tree_leaves` gives it.  ``max_depth`` as given;
    None: `DEFAULT_MAX_DEPTH` for depth-wise trees, and 0 for leaf-wise
    ones, whose depth ``max_leaves`` alone bounds, but for monotone or
    interaction constraints, which leaf-wise trees keep within
    `DEFAULT_MAX_DEPTH` (`jaxboost.engine.leafwise`).  Leaf-wise trees
    without constraints are node tables (`grows_node_tables`)."""
    given = settings.max_depth is not None
    max_depth = whole_number("max_depth", settings.max_depth) if given else DEFAULT_MAX_DEPTH
    max_leaves = tree_leaves(
        settings.grow_policy, settings.max_leaves, max_depth if given else None
    )
    if max_leaves and not given and not _constrained(settings):
        return 0, max_leaves
    if max_leaves and not given and max_leaves > 2**max_depth:  # (constrained: the heap)
        raise ValueError(
            f"max_leaves: leaf-wise trees under monotone or interaction constraints grow "
            f"within max_depth (None: {max_depth}, at most {2**max_depth} leaves), "
            f"{max_leaves} leaves do not fit; set max_depth >= {(max_leaves - 1).bit_length()} "
            f"or max_leaves <= {2**max_depth}"
        )
    return max_depth, max_leaves


def grows_node_tables(settings: Any) -> bool:
    """Whether ``settings`` grow leaf-wise trees as node tables of
    ``max_leaves`` (`jaxboost.engine.bestfirst`, whatever ``max_depth``):
    leaf-wise without monotone or interaction constraints, which keep the
    depth-bounded heap (`jaxboost.engine.leafwise`); as
    `jaxboost.engine.training.StaticSettings.node_tables` decides."""
    return bool(tree_shape(settings)[1]) and not _constrained(settings)


def _constrained(settings: Any) -> bool:
    """Monotone constraints of a direction other than 0, or interaction
    constraints (the engine's ``monotone`` and ``interaction`` not empty)."""
    monotone = settings.monotone_constraints
    if isinstance(monotone, Mapping):
        monotone = list(monotone.values())
    return settings.interaction_constraints is not None or bool(monotone_directions(monotone))


def tree_leaves(grow_policy: str, max_leaves: int | None, max_depth: int | None) -> int:
    """The leaves of a leaf-wise tree (``max_leaves``, None:
    `jaxboost.engine.leafwise.DEFAULT_MAX_LEAVES`), or 0 for depth-wise trees;
    ``grow_policy="auto"`` grows leaf-wise when ``max_leaves`` is given, as
    LightGBM's ``num_leaves`` does; ``max_depth`` None: no bound on the
    depth.  A ValueError names the setting out of range and the fix."""
    choice("grow_policy", grow_policy, ("auto", *GROW_POLICIES))
    if grow_policy == "auto":
        grow_policy = "depthwise" if max_leaves is None else "lossguide"
    if grow_policy == "depthwise":
        if max_leaves is not None:
            raise ValueError(
                f"max_leaves: {max_leaves!r} bounds leaf-wise trees only; set "
                'grow_policy="lossguide" (or "auto") to grow them, or max_leaves=None'
            )
        return 0
    if max_leaves is None:  # LightGBM's num_leaves=31 within a given max_depth
        max_leaves = DEFAULT_MAX_LEAVES
        if max_depth is not None:
            max_leaves = min(max_leaves, 2 ** max(int(max_depth), 1))
    whole = isinstance(max_leaves, (int, np.integer)) and not isinstance(max_leaves, bool)
    whole = whole or (
        isinstance(max_leaves, (float, np.floating)) and float(max_leaves).is_integer()
    )
    if not (whole and int(max_leaves) >= 2):
        raise ValueError(
            f"max_leaves: expected a whole number >= 2 (a tree of one leaf does not split), "
            f"got {max_leaves!r}"
        )
    if max_depth is not None and int(max_leaves) > 2**max_depth:
        needed = (int(max_leaves) - 1).bit_length()
        raise ValueError(
            f"max_leaves: {int(max_leaves)} leaves do not fit in trees of max_depth={max_depth} "
            f"(at most 2^{max_depth} = {2**max_depth} leaves); set max_depth >= {needed} or "
            f"max_leaves <= {2**max_depth}"
        )
    return int(max_leaves)


def devices_for_jobs(n_jobs: Any, devices: Any, n_rows: int) -> list | None:
    """The devices of an estimator's ``n_jobs`` (scikit-learn's, LightGBM's
    and XGBoost's count of threads; jaxboost's parallel workers are devices,
    on CPU one per core: `jaxboost.runtime.devices`): None or -1 the
    default (None: all the devices the ``n_rows`` warrant), ``k > 0`` at
    most ``k`` of those, ``-k`` all but ``k - 1`` (joblib's count).  With
    ``devices`` given, ``n_jobs`` must be None."""
    if n_jobs is None:
        return devices
    whole = isinstance(n_jobs, (int, np.integer)) and not isinstance(n_jobs, bool)
    if not whole or n_jobs == 0:
        raise ValueError(
            "n_jobs: expected a whole number other than 0 (the devices to train on, on CPU "
            f"cores: -1 for all, the default), or None; got {n_jobs!r}"
        )
    if devices is not None:
        raise ValueError(
            "n_jobs, devices: give one of them (devices names the devices, n_jobs only how "
            "many of the default ones); set n_jobs=None to keep devices"
        )
    if n_jobs == -1:
        return None
    available = len(jax.devices())
    limit = int(n_jobs) if n_jobs > 0 else max(1, available + 1 + int(n_jobs))
    return default_training_devices(n_rows)[:limit]


def progress_rounds(verbose: Any, verbosity: Any) -> int:
    """An estimator's ``verbose`` and ``verbosity`` as ``Booster.fit``'s
    ``verbose``: print progress every this many rounds, 0 for none.
    ``verbose`` says it (True: every round; False, 0 and negative numbers
    none: LightGBM's ``verbose=-1`` is silent); without it, ``verbosity``
    (XGBoost's and LightGBM's log level) of 2 or more (their info and debug
    levels) is every round, and below none (warnings are Python warnings,
    shown at every level)."""
    whole = isinstance(verbose, (int, np.integer, np.bool_))  # (True and False too)
    if not whole:
        raise ValueError(
            "verbose: expected True, False or a whole number of rounds between progress "
            f"lines (0 or less: none), got {verbose!r}"
        )
    rounds = max(int(verbose), 0)
    level = isinstance(verbosity, (int, np.integer)) and not isinstance(verbosity, bool)
    if not (verbosity is None or level):
        raise ValueError(
            "verbosity: expected None or a whole number (XGBoost's and LightGBM's log "
            f"level: 2 or more prints progress every round), got {verbosity!r}"
        )
    return rounds or int(verbosity is not None and verbosity >= 2)


def given_base_score(base_score: Any, n_outputs: int | None) -> np.ndarray | None:
    """``base_score`` as ``(n_outputs,)`` float32 (None: not given), after
    checking it is one finite number or one per output (``n_outputs``
    None: not known yet, the count is not checked)."""
    if base_score is None:
        return None
    score = None
    try:
        if np.ndim(base_score) <= 1:
            score = np.asarray(base_score, dtype=np.float32).reshape(-1)
    except (TypeError, ValueError):
        pass
    fits = score is not None and score.size >= 1 and bool(np.all(np.isfinite(score)))
    if fits and n_outputs is not None:
        fits = score.size in (1, n_outputs)
    if not fits:
        count = "" if n_outputs is None else f" ({n_outputs} here)"
        raise ValueError(
            f"base_score: expected a finite number or one per output{count}, got {base_score!r}"
        )
    return score if n_outputs is None else np.broadcast_to(score, (n_outputs,)).copy()


def check_early_stopping(setting: Any) -> None:
    """``early_stopping``: ``"auto"``, True or False (not 1 or 0), or a ValueError naming it."""
    auto = isinstance(setting, str) and setting == "auto"
    if not (auto or setting is True or setting is False):  # (not 1, 0: bools only)
        raise ValueError(f"early_stopping: expected 'auto', True or False, got {setting!r}")
