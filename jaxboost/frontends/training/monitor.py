"""Watching training between chunks of rounds: evaluation sets, metrics,
early stopping, callbacks and a progress display.  Python-side only; the
per-round work on the evaluation rows is one jitted call per chunk.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ...engine.groups import GroupBucket
from ...engine.metrics import Metric, metric_per_round
from ...engine.predict import round_increments
from ...engine.tree import Tree
from ...runtime.precision import loss_scale


class EvalSet(NamedTuple):
    name: str
    X: jnp.ndarray  # (n_rows, n_features) float32
    y: jnp.ndarray  # (n_rows,) or (n_rows, n_targets)
    weight: jnp.ndarray  # (n_rows,)
    # the set's groups (jaxboost.engine.groups) for group losses and metrics
    groups: tuple[GroupBucket, ...] = ()
    # (n_rows, K) raw scores added to the model's (fit's eval_init_score), or None
    offset: jnp.ndarray | None = None


class CallbackEnv(NamedTuple):
    """What a callback sees after each round; return True from it to stop.

    ``model`` is the model of the rounds grown so far (a ``Booster`` of
    ``iteration`` rounds, as LightGBM's and XGBoost's callbacks see theirs):
    ``env.model.predict(X)`` equals the final model's
    ``predict(X, iteration_range=(0, iteration))``, and ``env.model.save``
    writes a checkpoint.  The model being fitted keeps its previous fit (or
    none) until the fit ends.
    """

    model: Any
    iteration: int  # rounds done (1-based)
    train_loss: float
    evals_result: dict  # {set name: {metric name: [value per round]}} so far


def time_left(chunk_ends: Sequence[tuple[int, float]], done: int, n_rounds: int) -> float | None:
    """Seconds the rounds not yet run should take, at the pace of the chunks
    watched after the first (whose time is mostly compiling: the rounds'
    program, then the evaluation's): 0 when every round has run, None while
    rounds remain and fewer than two chunks are watched.

    Args:
      chunk_ends: ``(rounds run, seconds since the fit started)`` when the
        monitor was done with each chunk so far (its rounds trained, evaluated
        and called back), in order.
      done: the rounds run now.
      n_rounds: the rounds asked for.
    """
    if done >= n_rounds:
        return 0.0
    if len(chunk_ends) < 2:
        return None
    (first_done, first_end), (last_done, last_end) = chunk_ends[0], chunk_ends[-1]
    return (last_end - first_end) / (last_done - first_done) * (n_rounds - done)


class Monitor:
    """Records metrics per round and decides when to stop.

    Early stopping watches the first metric on the last evaluation set, as
    XGBoost does; the best round (1-based) is kept in ``best_iteration``.
    """

    def __init__(
        self,
        model_at: Callable[[Tree, list[float]], Any],
        eval_sets: Sequence[EvalSet],
        metrics: Sequence[Metric],
        init_score: np.ndarray,
        trees_per_round: int,
        n_rounds: int,
        early_stopping_rounds: int | None = None,
        callbacks: Sequence[Callable[[CallbackEnv], Any]] = (),
        verbose: int = 0,
        init_loss: float = float("nan"),
    ):
        # (forest of the rounds so far, training loss before and after each)
        # -> the model a callback sees
        self.model_at = model_at
        self.eval_sets = list(eval_sets)
        self.metrics = list(metrics)
        self.trees_per_round = trees_per_round
        self.n_rounds = n_rounds
        self.early_stopping_rounds = early_stopping_rounds
        self.callbacks = list(callbacks)
        self.verbose = int(verbose)
        self._chunk_ends: list[tuple[int, float]] = []  # for time_left
        self.evals_result = {s.name: {m.name: [] for m in self.metrics} for s in self.eval_sets}
        self.best_iteration: int | None = None
        self.best_score: float | None = None
        self._eval_raw = [
            jnp.broadcast_to(jnp.asarray(init_score), (s.X.shape[0], len(init_score)))
            + (0.0 if s.offset is None else s.offset)
            for s in self.eval_sets
        ]
        self._start = time.perf_counter()
        self._kept: list[Tree] = []  # the forest of the rounds kept (with callbacks)
        self._train_loss = [float(init_loss)]  # before the first round, then after each

    @property
    def watched(self) -> tuple[str, Metric] | None:
        if not self.eval_sets or not self.metrics:
            return None
        return self.eval_sets[-1].name, self.metrics[0]

    def _evaluate_chunk(self, trees: Tree) -> list[dict[str, np.ndarray]]:
        """Per evaluation set, ``{metric: (n_rounds_in_chunk,)}``."""
        results = []
        for index, eval_set in enumerate(self.eval_sets):
            increments = round_increments(trees, eval_set.X, self.trees_per_round)
            staged = self._eval_raw[index] + jnp.cumsum(increments, axis=0)
            self._eval_raw[index] = staged[-1]
            results.append(
                {
                    # (the training loss's values carry the engine's scale)
                    metric.name: np.asarray(
                        metric_per_round(
                            metric, eval_set.y, staged, eval_set.weight, eval_set.groups
                        ),
                        np.float64,
                    )
                    / loss_scale(metric.per_sample)
                    for metric in self.metrics
                }
            )
        return results

    def after_chunk(
        self, trees: Tree, train_loss: np.ndarray, first_round: int
    ) -> tuple[int, bool]:
        """Record the chunk's rounds; returns (rounds of the chunk to keep, stop)."""
        chunk_results = self._evaluate_chunk(trees) if self.eval_sets else []
        # the forest of every round so far, joined once per chunk, only for callbacks
        grown = _joined(self._kept + [trees]) if self.callbacks else None
        n_kept = len(train_loss)
        stop = False
        for offset, loss_value in enumerate(train_loss):
            iteration = first_round + offset + 1
            self._train_loss.append(float(loss_value))
            for eval_set, results in zip(self.eval_sets, chunk_results):
                for name, values in results.items():
                    self.evals_result[eval_set.name][name].append(float(values[offset]))
            stop = self._early_stop(iteration)
            if self.callbacks:
                stop = self._call_back(grown, iteration, float(loss_value)) or stop
            self._report(iteration, float(loss_value), first_round + len(train_loss), stop)
            if stop:
                n_kept = offset + 1
                break
        # (after evaluating: the first chunk's evaluation compiles, and is no pace)
        self._chunk_ends.append((first_round + len(train_loss), time.perf_counter() - self._start))
        if self.callbacks:  # (the rounds before this chunk, and those kept of it)
            n_trees = (first_round + n_kept) * self.trees_per_round
            self._kept = [jax.tree.map(lambda leaf: leaf[:n_trees], grown)]
        return n_kept, stop

    def _call_back(self, grown: Tree, iteration: int, loss_value: float) -> bool:
        """Every callback on the model of the first ``iteration`` rounds of
        ``grown``; whether any asked to stop (all run either way)."""
        n_trees = iteration * self.trees_per_round
        model = self.model_at(
            jax.tree.map(lambda leaf: leaf[:n_trees], grown), list(self._train_loss)
        )
        env = CallbackEnv(model, iteration, loss_value, self.evals_result)
        stop = False
        for callback in self.callbacks:
            stop = bool(callback(env)) or stop
        return stop

    def _early_stop(self, iteration: int) -> bool:
        watched = self.watched
        if watched is None:
            return False
        set_name, metric = watched
        value = self.evals_result[set_name][metric.name][-1]
        better = self.best_score is None or (
            value > self.best_score if metric.greater_is_better else value < self.best_score
        )
        if better:
            self.best_score, self.best_iteration = value, iteration
        if self.early_stopping_rounds is None:
            return False
        return iteration - self.best_iteration >= self.early_stopping_rounds

    def _report(self, iteration: int, loss_value: float, done: int, stopping: bool) -> None:
        """Print round ``iteration``'s line (every ``verbose`` rounds, the last
        and the stopping one), with ``done`` rounds trained so far."""
        if not self.verbose or not (
            stopping or iteration % self.verbose == 0 or iteration == self.n_rounds
        ):
            return
        parts = [
            f"[{iteration:>{len(str(self.n_rounds))}}/{self.n_rounds}]",
            f"train-loss: {loss_value:.6g}",
        ]
        for set_name, metrics in self.evals_result.items():
            parts += [f"{set_name}-{name}: {values[-1]:.6g}" for name, values in metrics.items()]
        parts.append(f"elapsed {time.perf_counter() - self._start:.1f}s")
        left = 0.0 if stopping else time_left(self._chunk_ends, done, self.n_rounds)
        if left is not None:
            # early stopping may end the fit before the last round
            bound = "at most " if left and self.early_stopping_rounds is not None else ""
            parts[-1] += f", left {bound}~{left:.1f}s"
        print("  ".join(parts), flush=True)


def _joined(chunks: list[Tree]) -> Tree:
    """One forest of the trees of ``chunks`` (numpy arrays), in order."""
    return jax.tree.map(
        lambda *leaves: np.concatenate([np.asarray(leaf) for leaf in leaves]), *chunks
    )
