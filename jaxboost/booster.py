"""``Booster``: the Python shell around the jitted boosting program.

Validation, binning, sharding the rows over the mesh, dispatching chunks of
rounds, and keeping the forest.  Nothing here loops over rows, nodes or
features.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import losses as loss_catalogue

from .binning import apply_bins, fit_bin_edges
from .boost import (
    HESSIANS,
    LEAF_METHODS,
    MULTI_STRATEGIES,
    SPLIT_CRITERIA,
    BoostConfig,
    ShardData,
    init_score_program,
    train_chunk_program,
)
from .devices import ROWS, make_mesh
from .predict import predict_forest
from .tree import Tree, TreeParams


def _choice(name: str, value: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise ValueError(f"{name}: expected one of {list(allowed)}, got {value!r}")
    return value


def _as_features(X: Any, name: str = "X") -> np.ndarray:
    """``(n_rows, n_features)`` float32 with NaN for missing, or a clear error."""
    try:
        array = np.asarray(X, dtype=np.float32)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name}: expected a numeric 2-D array, could not convert: {error}")
    if array.ndim != 2:
        raise ValueError(
            f"{name}: expected a 2-D array (n_rows, n_features), got shape {array.shape}"
        )
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise ValueError(
            f"{name}: expected at least one row and one feature, got shape {array.shape}"
        )
    return array


def _resolve_loss(loss: str | Callable) -> Callable:
    if isinstance(loss, str):
        return loss_catalogue.get(loss)
    if not callable(loss):
        raise TypeError(f"loss: expected a catalogue name or a callable loss(y, f), got {loss!r}")
    return loss


def _raise_if_not_finite(round_losses: np.ndarray, first_round: int) -> None:
    bad = np.flatnonzero(~np.isfinite(round_losses))
    if bad.size:
        raise FloatingPointError(
            f"training loss became {round_losses[bad[0]]} at round {first_round + bad[0] + 1}: "
            "the loss or its derivatives overflowed; lower learning_rate, raise reg_lambda, "
            "or write the loss in a numerically stable form"
        )


class Booster:
    """Gradient-boosted trees for any per-sample JAX loss ``loss(y, f) -> scalar``.

    Args:
      loss: a function of one sample (``y`` one target, ``f`` the raw score: a
        scalar, or a vector of ``n_outputs`` scores), or a catalogue name.
      n_estimators: boosting rounds.
      learning_rate: shrinkage of every tree.
      max_depth: depth of the (complete, padded) trees.
      n_outputs: raw scores per sample; None takes the loss's declared
        ``n_outputs`` (``"n_classes"``: max label + 1), else 1.
      leaf_method: ``"newton"`` (``-G / (H + lambda)``), ``"line_search"``
        (argmin of the leaf's loss, exact quantiles for pinball losses) or
        ``"auto"``: line search for losses that declare
        ``hessian_informative = False`` (absolute, quantile), else Newton.
      reg_lambda: L2 penalty on leaf values (split gain and Newton leaves).
      min_child_weight: least hessian sum in a child (sample weight with
        ``split_criterion="first_order"``).
      min_split_gain: least loss decrease for a split.
      max_bins: value bins per feature (at most 255; one more bin holds NaN).
      split_criterion: ``"second_order"`` (Newton gain), ``"first_order"``
        (Friedman: least squares on the pseudo-residuals) or ``"auto"``: first
        order for losses whose hessian is zero almost everywhere, else second.
      hessian: ``"diag"`` or ``"full"`` hessian for vector outputs' leaves.
      multi_strategy: ``"multi_output_tree"`` (one tree with vector leaves per
        round) or ``"one_output_per_tree"`` (Friedman's multi-class algorithm).
      random_state: seed for the binning sample.
      devices: devices to shard rows over (default: all devices).
      rounds_per_chunk: rounds run in one device program.
    """

    def __init__(
        self,
        loss: str | Callable = "squared_error",
        n_estimators: int = 100,
        learning_rate: float = 0.1,
        max_depth: int = 6,
        n_outputs: int | None = None,
        leaf_method: str = "auto",
        reg_lambda: float = 1.0,
        min_child_weight: float = 1e-3,
        min_split_gain: float = 0.0,
        max_bins: int = 255,
        split_criterion: str = "auto",
        hessian: str = "diag",
        multi_strategy: str = "multi_output_tree",
        random_state: int | None = 0,
        devices: Sequence[jax.Device] | None = None,
        rounds_per_chunk: int = 100,
    ):
        self.loss = loss
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.max_depth = max_depth
        self.n_outputs = n_outputs
        self.leaf_method = leaf_method
        self.reg_lambda = reg_lambda
        self.min_child_weight = min_child_weight
        self.min_split_gain = min_split_gain
        self.max_bins = max_bins
        self.split_criterion = split_criterion
        self.hessian = hessian
        self.multi_strategy = multi_strategy
        self.random_state = random_state
        self.devices = devices
        self.rounds_per_chunk = rounds_per_chunk

    # -- configuration -------------------------------------------------------
    def _n_outputs(self, loss: Callable, y: np.ndarray) -> int:
        if self.n_outputs is not None:
            if int(self.n_outputs) < 1:
                raise ValueError(f"n_outputs: expected a positive integer, got {self.n_outputs}")
            return int(self.n_outputs)
        declared = getattr(loss, "n_outputs", 1)
        if declared == "n_classes":
            return int(np.max(y)) + 1
        return int(declared)

    def _config(self, loss: Callable, n_outputs: int) -> BoostConfig:
        if int(self.max_depth) < 1:
            raise ValueError(f"max_depth: expected an integer >= 1, got {self.max_depth}")
        if int(self.n_estimators) < 1:
            raise ValueError(f"n_estimators: expected an integer >= 1, got {self.n_estimators}")
        tree = TreeParams(
            max_depth=int(self.max_depth),
            reg_lambda=float(self.reg_lambda),
            min_child_weight=float(self.min_child_weight),
            min_split_gain=float(self.min_split_gain),
        )
        hessian_informative = getattr(loss, "hessian_informative", True)
        leaf_method, split_criterion = self.leaf_method, self.split_criterion
        if leaf_method == "auto":
            leaf_method = "newton" if hessian_informative else "line_search"
        if split_criterion == "auto":
            split_criterion = "second_order" if hessian_informative else "first_order"
        return BoostConfig(
            loss=loss,
            n_outputs=n_outputs,
            tree=tree,
            learning_rate=float(self.learning_rate),
            leaf_method=_choice("leaf_method", leaf_method, LEAF_METHODS),
            split_criterion=_choice("split_criterion", split_criterion, SPLIT_CRITERIA),
            hessian=_choice("hessian", self.hessian, HESSIANS),
            multi_strategy=_choice("multi_strategy", self.multi_strategy, MULTI_STRATEGIES),
            rounds_per_chunk=max(1, min(int(self.rounds_per_chunk), int(self.n_estimators))),
        )

    # -- data ----------------------------------------------------------------
    def _validate_targets(self, y: Any, sample_weight: Any, n_rows: int):
        y = np.asarray(y, dtype=np.float32)
        if y.ndim not in (1, 2) or y.shape[0] != n_rows:
            raise ValueError(
                f"y: expected shape ({n_rows},) or ({n_rows}, n_targets) to match X's "
                f"{n_rows} rows, got {y.shape}"
            )
        if not np.all(np.isfinite(y)):
            raise ValueError("y: contains NaN or infinite values")
        if sample_weight is None:
            weight = np.ones(n_rows, np.float32)
        else:
            weight = np.asarray(sample_weight, dtype=np.float32)
            if weight.shape != (n_rows,):
                raise ValueError(f"sample_weight: expected shape ({n_rows},), got {weight.shape}")
            if not np.all(np.isfinite(weight)) or np.any(weight < 0) or not np.any(weight > 0):
                raise ValueError(
                    "sample_weight: expected finite, non-negative values, not all zero"
                )
        return y, weight

    def _shard_rows(self, mesh, bins: jax.Array, y: np.ndarray, weight: np.ndarray) -> ShardData:
        """Pad rows to a multiple of the mesh size (copies of row 0, weight 0) and
        place each shard on its device."""
        n_rows = y.shape[0]
        n_padded = -(-n_rows // mesh.size) * mesh.size
        extra = n_padded - n_rows
        if extra:
            bins = jnp.concatenate([bins, jnp.repeat(bins[:, :1], extra, axis=1)], axis=1)
            y = np.concatenate([y, np.repeat(y[:1], extra, axis=0)])
            weight = np.concatenate([weight, np.zeros(extra, np.float32)])

        def put(array, spec):
            return jax.device_put(array, NamedSharding(mesh, spec))

        return ShardData(
            bins=put(bins, P(None, ROWS)), y=put(y, P(ROWS)), weight=put(weight, P(ROWS))
        )

    # -- training ------------------------------------------------------------
    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> Booster:
        """Grow ``n_estimators`` rounds of trees on ``X (n_rows, n_features)`` and
        ``y (n_rows,)`` or ``(n_rows, n_targets)``; returns ``self``."""
        features = _as_features(X)
        targets, weight = self._validate_targets(y, sample_weight, features.shape[0])
        loss = _resolve_loss(self.loss)
        n_outputs = self._n_outputs(loss, targets)
        cfg = self._config(loss, n_outputs)
        mesh = make_mesh(self.devices)

        seed = 0 if self.random_state is None else int(self.random_state)
        edges = fit_bin_edges(features, int(self.max_bins), seed=seed)
        bins = apply_bins(jnp.asarray(features), jnp.asarray(edges))
        data = self._shard_rows(mesh, bins, targets, weight)
        replicated_edges = jax.device_put(edges, NamedSharding(mesh, P()))

        init_score, init_loss = init_score_program(loss, n_outputs, mesh)(data)
        if not (np.all(np.isfinite(init_score)) and np.isfinite(init_loss)):
            raise ValueError(
                f"loss: the training loss at the initial score {np.asarray(init_score)} is "
                f"{float(init_loss)} (not finite); check the loss for overflow, e.g. write "
                "log(cosh(d)) as logaddexp(d, -d) - log(2)"
            )
        raw = jax.device_put(
            jnp.broadcast_to(init_score, (data.weight.shape[0], n_outputs)),
            NamedSharding(mesh, P(ROWS)),
        )
        program = train_chunk_program(cfg, mesh)
        chunks, train_loss = [], [float(init_loss)]
        for first_round in range(0, int(self.n_estimators), cfg.rounds_per_chunk):
            n_active = min(cfg.rounds_per_chunk, int(self.n_estimators) - first_round)
            raw, trees, chunk_loss = program(data, replicated_edges, raw, n_active)
            # block before the next dispatch: queued collective programs can
            # deadlock on CPU devices
            trees, chunk_loss = jax.device_get((trees, chunk_loss))
            chunks.append(jax.tree.map(lambda leaf, n=n_active: leaf[:n], trees))
            _raise_if_not_finite(chunk_loss[:n_active], first_round)
            train_loss.extend(float(value) for value in chunk_loss[:n_active])

        forest = jax.tree.map(lambda *parts: np.concatenate(parts), *chunks)
        self.forest_ = jax.tree.map(lambda leaf: leaf.reshape((-1,) + leaf.shape[2:]), forest)
        self.init_score_ = np.asarray(init_score)
        self.bin_edges_ = edges
        self.loss_ = loss
        self.n_outputs_ = n_outputs
        self.n_features_in_ = features.shape[1]
        self.n_estimators_ = int(self.n_estimators)
        self.train_loss_ = np.asarray(train_loss)
        return self

    # -- prediction ----------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "forest_"):
            raise RuntimeError("this Booster is not fitted yet: call fit(X, y) first")

    def predict_raw(self, X: Any) -> np.ndarray:
        """Raw scores ``F(x)``: ``(n_rows,)``, or ``(n_rows, n_outputs)`` when
        ``n_outputs > 1``."""
        self._check_fitted()
        features = _as_features(X)
        if features.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X: expected {self.n_features_in_} features as in fit, got {features.shape[1]}"
            )
        forest = jax.tree.map(jnp.asarray, self.forest_)
        raw = np.asarray(predict_forest(Tree(*forest), jnp.asarray(self.init_score_), features))
        return raw[:, 0] if self.n_outputs_ == 1 else raw

    def predict(self, X: Any) -> np.ndarray:
        """Predictions on the response scale, through the loss's declared link
        (identity when the loss declares none)."""
        raw = self.predict_raw(X)
        link = loss_catalogue.links.get(getattr(self.loss_, "link", "identity"))
        return np.asarray(link(jnp.asarray(raw)))
