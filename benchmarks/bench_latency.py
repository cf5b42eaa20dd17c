"""The experiment loop: how long a fit takes when the loss is new to the process.

In one process, after ``import jaxboost`` and a warm-up fit of another loss
on other data, each of three data sets is fitted first with a loss new to
the process (its loss-free programs, one per data shape and settings,
compile then or load from the on-disk cache), then with (a) another loss
never seen in the process (the median of three such), (b) the same lambda text written again (a new
function object, as a notebook cell run again makes it), (c) the same
function object again; then a fresh process's
first fit, with the on-disk compilation cache warm (a temporary cache
directory, filled by one process before the measured one).  LightGBM fits
the same data with its built-in loss and with a numpy custom objective, in
the same run.  Wall time per fit, and the JAX compile events (tracing,
lowering, XLA compiling) apart.

    python benchmarks/bench_latency.py

Data sets: scikit-learn's diabetes (442 x 10, pseudo-Huber, 200 rounds,
depth 3), breast cancer (569 x 30, log loss, 200 rounds, depth 3), and a 20k
x 20 synthetic regression (log-cosh, 100 rounds, depth 6).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax.numpy as jnp
import lightgbm as lgb
import numpy as np
from _common import print_header, print_table, timed, usable_cores
from sklearn.datasets import load_breast_cancer, load_diabetes, make_regression

import jaxboost as jb

# loss texts per data set, ``{s}`` a scale within 1% of 1 that makes a text
# new to the process, and its derivatives too (an added constant would leave
# the derivatives' programs as they were: cached on disk)
LOSSES = {
    "diabetes": "lambda y, f: jnp.sqrt(1.0 + jnp.square((f - y) * {s})) - 1.0",
    "breast_cancer": "lambda y, f: jnp.logaddexp(0.0, f * {s}) - y * f * {s}",
    "synthetic_20k": "lambda y, f: jnp.logaddexp((f - y) * {s}, (y - f) * {s})",
    "first_fit": "lambda y, f: jnp.square((f - y) * {s})",
}
SETTINGS = {
    "diabetes": {"n_estimators": 200, "max_depth": 3},
    "breast_cancer": {"n_estimators": 200, "max_depth": 3},
    "synthetic_20k": {"n_estimators": 100, "max_depth": 6},
}
# a start unique to the run: a "new" loss is new to the disk cache too
_counter = [time.time_ns() % 1000 * 64]


def datasets() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    X_d, y_d = load_diabetes(return_X_y=True)
    X_b, y_b = load_breast_cancer(return_X_y=True)
    X_s, y_s = make_regression(20000, 20, noise=10.0, random_state=0)
    return {
        "diabetes": (X_d, y_d / 100.0),
        "breast_cancer": (X_b, y_b.astype(np.float64)),
        "synthetic_20k": (X_s, y_s / 100.0),
    }


def written(text: str):
    """A function made from ``text``, as a cell run makes it."""
    return eval(text, {"jnp": jnp})


def new_text(name: str) -> str:
    _counter[0] += 1
    scale = 1.0 + _counter[0] * 2.0**-23  # float32's step at 1: each text differs
    return LOSSES[name].format(s=repr(scale))


def fit(loss, X, y, settings):
    return jb.Booster(loss=loss, **settings).fit(X, y).train_loss_[-1]


def lightgbm_times(name: str, X: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """LightGBM's built-in loss and a numpy custom objective: two seconds."""
    settings = SETTINGS[name]
    depth = settings["max_depth"]
    params = {
        "num_leaves": 2**depth,
        "max_depth": depth,
        "learning_rate": 0.1,
        "verbose": -1,
        "num_threads": usable_cores(),
        "min_child_samples": 1,
        "min_sum_hessian_in_leaf": 1e-3,
    }
    builtin = {"diabetes": "huber", "breast_cancer": "binary", "synthetic_20k": "huber"}[name]

    def objective(preds, data):
        labels = data.get_label()
        if name == "breast_cancer":
            p = 1.0 / (1.0 + np.exp(-preds))
            return p - labels, p * (1.0 - p)
        d = preds - labels
        if name == "diabetes":
            root = np.sqrt(1.0 + d * d)
            return d / root, 1.0 / root**3
        return np.tanh(d), 1.0 - np.tanh(d) ** 2

    rounds = settings["n_estimators"]
    start = time.perf_counter()
    lgb.train({**params, "objective": builtin}, lgb.Dataset(X, y), num_boost_round=rounds)
    built_in = time.perf_counter() - start
    start = time.perf_counter()
    lgb.train({**params, "objective": objective}, lgb.Dataset(X, y), num_boost_round=rounds)
    return built_in, time.perf_counter() - start


_FRESH_PROCESS = """
import time
start = time.perf_counter()
import jaxboost as jb, jax.numpy as jnp
from sklearn.datasets import load_diabetes
X, y = load_diabetes(return_X_y=True)
imported = time.perf_counter()
loss = lambda y, f: jnp.sqrt(1.0 + jnp.square(f - y)) - 1.0
jb.Booster(loss=loss, n_estimators=200, max_depth=3).fit(X, y / 100.0)
print(imported - start, time.perf_counter() - imported)
"""


def fresh_process(cache: Path) -> tuple[float, float]:
    """``(import seconds, first fit seconds)`` of a new process with ``cache``."""
    env = {**os.environ, "JAXBOOST_COMPILATION_CACHE": str(cache)}
    result = subprocess.run(
        [sys.executable, "-c", _FRESH_PROCESS], check=False, env=env, capture_output=True, text=True
    )
    if result.returncode:
        raise RuntimeError(result.stderr[-2000:])
    imported, fitted = map(float, result.stdout.split()[-2:])
    return imported, fitted


def main() -> None:
    print_header(sys.argv[1:], ["lightgbm", "scikit-learn"])
    data = datasets()
    rng = np.random.default_rng(0)
    X_w, y_w = rng.normal(size=(300, 5)), rng.normal(size=300)
    warm_up = timed(
        fit, written("lambda y, f: 0.5 * jnp.square(f - y)"), X_w, y_w, SETTINGS["diabetes"]
    )
    print(f"warm-up fit (another loss, 300 x 5 random rows): {warm_up.seconds:.2f} s\n")
    rows = []
    for name, (X, y) in data.items():
        settings = SETTINGS[name]
        # the first fit of this data in the process: its loss-free programs
        # (one per data shape and settings) compile, or load from the disk cache
        first = timed(fit, written(new_text("first_fit")), X, y, settings)
        # (a): the median of three new losses, on this shared machine
        texts = [new_text(name) for _ in range(3)]
        news = [timed(fit, written(text), X, y, settings) for text in texts]
        new = sorted(news, key=lambda timing: timing.seconds)[1]
        text = texts[-1]
        loss = written(text)
        timed(fit, loss, X, y, settings)  # this object's programs
        again = timed(fit, written(text), X, y, settings)
        same = timed(fit, loss, X, y, settings)
        built_in, custom = lightgbm_times(name, X, y)
        rows.append(
            [
                f"{name} ({X.shape[0]} x {X.shape[1]})",
                *(
                    f"{t.seconds:.3f} s ({t.compile_seconds:.2f})"
                    for t in (first, new, again, same)
                ),
                f"{built_in:.3f} s",
                f"{custom:.3f} s",
            ]
        )
    print_table(
        [
            "data",
            "first fit of the data, a new loss",
            "(a) another new loss (compile events)",
            "(b) same text again",
            "(c) same object",
            "LightGBM built-in",
            "LightGBM numpy objective",
        ],
        rows,
    )
    with tempfile.TemporaryDirectory() as cache:
        fresh_process(Path(cache))  # fills the cache
        imported, fitted = fresh_process(Path(cache))
    print(
        f"fresh process, cache warm: import {imported:.2f} s, first fit (diabetes, "
        f"pseudo-Huber) {fitted:.2f} s beyond import"
    )


if __name__ == "__main__":
    main()
