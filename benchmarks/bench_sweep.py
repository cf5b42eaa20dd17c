"""A loss parameter swept: the seconds of each fit of a new value, beside LightGBM.

The loop this library exists for: write an objective, fit, change a number,
fit again.  On scikit-learn's diabetes (442 rows, 10 features), 200 rounds,
depth 3, learning rate 0.05 (other settings default), each loss is fitted at
five values drawn at random around a centre (so that no run of this script
has seen them before), in this order:

- pseudo-Huber ``d**2 (sqrt(1 + (r/d)**2) - 1)`` with ``d`` bound by
  ``functools.partial`` and by a closure;
- Cauchy ``c**2/2 log(1 + (r/c)**2)`` (non-convex: Armijo-safeguarded
  leaves), bound both ways;
- smooth pinball ``tau r + s log(1 + exp(-r/s))`` at five levels ``tau``,
  with line-search leaves (``leaf_method="line_search"``).

With ``--ranking`` (LightGBM's ``rank.train`` in ``--data``, default
``../shared/data`` beside the repository: 3005 rows, 300 features, 201
queries), a group loss too: ListNet with a temperature ``t`` (scores
divided by ``t``), bound by ``functools.partial``, at the same settings,
beside LightGBM's lambdarank.

A scikit-learn ``GridSearchCV`` too: the quantile level as the nested
setting ``loss__alpha`` of a ``Regressor(loss="quantile")``
(docs/sklearn.md), four levels, 3-fold, so 13 fits with the refit; then the
same search at four new levels, and LightGBM's (``objective="quantile"``,
``alpha``) beside them.

The first value of a loss compiles its programs (unless the persistent
compilation cache holds them: the header says whether it is on); each later
value runs them with its numbers (`jaxboost.runtime.lifted_values`).  The
table gives the first value's seconds, the median of the later four, the
programs XLA compiled during the later fits (JAX's compile events), the
seconds of a fit of the last value again (nothing new: the floor), and the
ratio of that median to LightGBM's built-in Huber at the same settings
(``alpha`` 30, ``num_leaves`` 8, ``--threads`` 2, the median of five fits,
in the same run; on a loaded machine its threads wait at every barrier:
``--threads 1`` is then the fairer peer).

    python benchmarks/bench_sweep.py
    JAXBOOST_COMPILATION_CACHE=off python benchmarks/bench_sweep.py --ranking
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import lightgbm as lgb
import numpy as np
from _common import print_header, print_table
from sklearn.datasets import load_diabetes, load_svmlight_file

import jaxboost as jb

SETTINGS = {"n_estimators": 200, "max_depth": 3, "learning_rate": 0.05}
DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"
_compiles = [0]


def _on_compile(event: str, seconds: float, **_: object) -> None:
    if event == "/jax/core/compile/backend_compile_duration":
        _compiles[0] += 1


def pseudo_huber(y, f, d):
    r = f - y
    return d**2 * (jnp.sqrt(1.0 + (r / d) ** 2) - 1.0)


def cauchy(y, f, c):
    r = f - y
    return c**2 / 2.0 * jnp.log1p((r / c) ** 2)


def smooth_pinball(y, f, tau, s=1.0):
    r = y - f
    return tau * r + s * jax.nn.softplus(-r / s)


def listnet(y, f, mask, t):
    target = jax.nn.softmax(jnp.where(mask, y, -jnp.inf))
    scores = jnp.where(mask, f / t, -jnp.inf)
    return -jnp.sum(jnp.where(mask, target * jax.nn.log_softmax(scores), 0.0))


def by_group_partial(fn, name):
    def bind(value):
        loss = functools.partial(fn, **{name: value})
        return jb.losses.declare(loss, name=fn.__name__, per="group")

    return bind


def by_partial(fn, name):
    return lambda value: functools.partial(fn, **{name: value})


def by_closure(fn, name):
    def bind(value):
        return lambda y, f: fn(y, f, **{name: value})

    return bind


def sweep(X, y, bind, values, group=None, **settings) -> tuple[list[float], int, float]:
    """Seconds of each value's fit, the programs compiled after the first,
    and the seconds of a fit of the last value again (what a fit costs
    with nothing new)."""
    seconds, compiled = [], 0
    for i, value in enumerate([*values, values[-1]]):
        before = _compiles[0]
        start = time.perf_counter()
        jb.Booster(loss=bind(value), **SETTINGS, **settings).fit(X, y, group=group)
        seconds.append(time.perf_counter() - start)
        if i:
            compiled += _compiles[0] - before
    return seconds[:-1], compiled, seconds[-1]


def lightgbm_seconds(X, y, threads: int, group=None, repeat: int = 5) -> float:
    """The median seconds of LightGBM's Huber (``alpha`` 30), or lambdarank
    where ``group`` is given, at `SETTINGS`."""
    objective = {"objective": "huber", "alpha": 30.0}
    if group is not None:
        objective = {"objective": "lambdarank"}
    params = {
        **objective,
        "n_estimators": SETTINGS["n_estimators"],
        "max_depth": SETTINGS["max_depth"],
        "num_leaves": 2 ** SETTINGS["max_depth"],
        "learning_rate": SETTINGS["learning_rate"],
        "n_jobs": threads,
        "verbose": -1,
    }
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        if group is None:
            lgb.LGBMRegressor(**params).fit(X, y)
        else:
            lgb.LGBMRanker(**params).fit(X, y, group=group)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def search_seconds(X, y, levels: list[float], threads: int) -> tuple[float, int, float]:
    """Seconds of a 3-fold GridSearchCV of a quantile Regressor over
    ``levels`` (as ``loss__alpha``), the programs it compiled, and
    LightGBM's seconds for the same search."""
    from sklearn.model_selection import GridSearchCV

    before = _compiles[0]
    start = time.perf_counter()
    model = jb.Regressor(loss="quantile", **SETTINGS)
    GridSearchCV(model, {"loss__alpha": levels}, cv=3).fit(X, y)
    seconds = time.perf_counter() - start
    compiled = _compiles[0] - before
    peer = lgb.LGBMRegressor(
        objective="quantile",
        num_leaves=2 ** SETTINGS["max_depth"],
        n_jobs=threads,
        verbose=-1,
        **SETTINGS,
    )
    start = time.perf_counter()
    GridSearchCV(peer, {"alpha": levels}, cv=3).fit(X, y)
    return seconds, compiled, time.perf_counter() - start


def _row(name: str, seconds: list[float], compiled: int, again: float, peer: float) -> list[str]:
    later = statistics.median(seconds[1:])
    ratio = f"{later / peer:.1f}"
    return [name, f"{seconds[0]:.2f}", f"{later:.3f}", str(compiled), f"{again:.3f}", ratio]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--values", type=int, default=5, help="values per loss")
    parser.add_argument("--seed", type=int, default=None, help="values' seed (default: the clock)")
    parser.add_argument("--ranking", action="store_true", help="ListNet on rank.train too")
    parser.add_argument("--threads", type=int, default=2, help="LightGBM's threads")
    parser.add_argument("--data", type=Path, default=DATA_DIR, help="folder of rank.train")
    args = parser.parse_args(argv)
    print_header(argv, ["lightgbm", "scikit-learn"])
    cache = os.environ.get("JAXBOOST_COMPILATION_CACHE", "").strip() or "on (default)"
    print(f"compilation cache: {cache}")
    jax.monitoring.register_event_duration_secs_listener(_on_compile)
    X, y = load_diabetes(return_X_y=True)
    X, y = X.astype(np.float32), y.astype(np.float32)
    rng = np.random.default_rng(args.seed if args.seed is not None else time.time_ns())
    # values new to this run: the centre times a random factor in [0.5, 1.5)
    new = lambda centre: list(centre * (0.5 + rng.random(args.values)))
    levels = sorted(0.1 + 0.8 * rng.random(args.values))
    cases = [
        ("pseudo-Huber, partial", by_partial(pseudo_huber, "d"), new(30.0), {}),
        ("pseudo-Huber, closure", by_closure(pseudo_huber, "d"), new(30.0), {}),
        ("Cauchy, partial", by_partial(cauchy, "c"), new(30.0), {}),
        ("Cauchy, closure", by_closure(cauchy, "c"), new(30.0), {}),
        (
            "smooth pinball, line search",
            by_partial(smooth_pinball, "tau"),
            levels,
            {"leaf_method": "line_search"},
        ),
    ]
    rows = []
    results = []
    for name, bind, values, settings in cases:
        seconds, compiled, again = sweep(X, y, bind, values, **settings)
        results.append((name, seconds, compiled, again))
        print(name, [round(s, 3) for s in seconds], f"compiles after the first: {compiled}")
    # the search: compiled at its first values (unless another fit did), then new ones
    searched = [list(0.1 + 0.8 * rng.random(4)) for _ in range(2)]
    searches = [search_seconds(X, y, values, args.threads) for values in searched]
    for i, (seconds, compiled, peer) in enumerate(searches):
        print(f"GridSearchCV {i + 1}: {seconds:.2f} s ({compiled} compiles), LightGBM {peer:.2f} s")
    lightgbm = lightgbm_seconds(X, y, args.threads)
    for name, seconds, compiled, again in results:
        rows.append(_row(name, seconds, compiled, again, lightgbm))
    rows.append(["LightGBM Huber (built in)", "", f"{lightgbm:.3f}", "", "", "1.0"])
    if args.ranking:
        X, y = load_svmlight_file(str(args.data / "rank.train"), n_features=300, zero_based=False)
        X, y = np.asarray(X.toarray(), np.float32), y.astype(np.float32)
        group = np.loadtxt(args.data / "rank.train.query", dtype=np.int64, ndmin=1)
        temperatures = new(1.0)
        bind = by_group_partial(listnet, "t")
        seconds, compiled, again = sweep(X, y, bind, temperatures, group=group)
        print("ListNet", [round(s, 3) for s in seconds], f"compiles after the first: {compiled}")
        lambdarank = lightgbm_seconds(X, y, args.threads, group=group)
        name = "ListNet temperature, partial (rank.train)"
        rows.append(_row(name, seconds, compiled, again, lambdarank))
        rows.append(["LightGBM lambdarank (rank.train)", "", f"{lambdarank:.3f}", "", "", "1.0"])
    print_table(
        [
            "loss, bound as",
            "first value s",
            "later values s (median)",
            "compiles",
            "same value again s",
            "x LightGBM",
        ],
        rows,
    )
    print_table(
        ["GridSearchCV of loss__alpha (13 fits)", "s", "compiles", "LightGBM s", "x LightGBM"],
        [
            [
                f"{when} values",
                f"{seconds:.2f}",
                str(compiled),
                f"{peer:.2f}",
                f"{seconds / peer:.1f}",
            ]
            for when, (seconds, compiled, peer) in zip(("first", "new"), searches)
        ],
    )


if __name__ == "__main__":
    main()
