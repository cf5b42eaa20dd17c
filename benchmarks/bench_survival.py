"""Survival: jaxboost's Cox loss against XGBoost's ``survival:cox``.

    python benchmarks/bench_survival.py

(a) Small data, 5-fold cross-validation (``KFold(5, shuffle=True,
random_state=0)``): lifelines' ``load_gbsg2`` (686 rows, 8 features; horTh
no/yes -> 0/1, menostat Pre/Post -> 0/1, tgrade I/II/III -> 1/2/3; time, cens)
and ``load_rossi`` (432 rows, 7 features; week = time, arrest = event).
Settings for ~500 training rows: ``--small-rounds`` 100 rounds, ``--small-depth``
3, ``--learning-rate`` 0.05.  Printed: the mean over folds of Harrell's
c-index on the held-out fold, and of the fit time (each fold's best of
``--repeat``; jaxboost fitted once on fold 0 before, to compile).

(b) Synthetic: ``--rows`` (100000) training rows plus a 20000-row holdout, 20
standard normal features, log hazard ``0.6 x0 - 0.5 x1 + 0.4 x2 - 0.3 x3 +
0.8 sin(2 x4) + 0.5 x5 x6 + 0.6 [x7 > 0.5] - 0.4 x8^2`` (x9..x19 noise),
exponential event times of rate ``exp(log hazard)``, exponential censoring
times whose rate gives 30% censored rows, ``--seed`` 0.  ``--rounds`` 100,
``--depth`` 6, learning rate 0.1 (as the other benchmarks; ``--learning-rate``
is (a)'s only).  Fit time best of ``--repeat`` (after one jaxboost fit that
compiles), and the c-index on the holdout.

Both libraries: 255 bins, L2 1, least child hessian ``--min-child-weight``
(1e-3, the other benchmarks' value; XGBoost's default is 1), ``--threads`` (2)
for XGBoost's ``nthread`` and the CPU devices jaxboost may use (it picks: one
for a stratum of all rows, which is never split between devices).  Fit times
include the binning (jaxboost's inside ``fit``, XGBoost's
``QuantileDMatrix``).  XGBoost gets the label ``time`` for an event and
``-time`` for a censored row, and its predictions are margins (``predict_type
="margin"``, the log hazard); jaxboost's Cox loss gets ``y = (time, event)``
with no strata (all rows one group) and predicts with ``predict_raw``.  Every
c-index is jaxboost's ``concordance_index`` (scikit-survival's definition;
lifelines' ``concordance_index`` of the negated log hazard beside it as a
cross-check).
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np
import xgboost as xgb
from _common import (  # before any JAX operation: it imports jaxboost, which exposes the cores
    Timed,
    command_line,
    compile_summary,
    print_environment,
    print_table,
    timed,
    timed_report,
    xgboost_params,
)
from lifelines.datasets import load_gbsg2, load_rossi
from lifelines.utils import concordance_index as lifelines_cindex
from sklearn.model_selection import KFold

import jaxboost as jb
from jaxboost import losses
from jaxboost.engine.group_metrics import concordance_index

PACKAGES = ("jax", "jaxboost", "xgboost", "lifelines", "numpy")
N_HOLDOUT = 20_000
N_SYNTHETIC_FEATURES = 20
CENSORED_FRACTION = 0.3
SYNTHETIC_LEARNING_RATE = 0.1

_cindex = jax.jit(concordance_index)


def cindex(y: np.ndarray, log_hazard: np.ndarray) -> float:
    """Harrell's c-index of ``log_hazard`` (n,) for ``y`` (n, 2) = (time, event)."""
    raw = np.asarray(log_hazard, np.float32).reshape(-1, 1)
    return float(_cindex(y.astype(np.float32), raw, np.ones(len(y), np.float32)))


def cindex_lifelines(y: np.ndarray, log_hazard: np.ndarray) -> float:
    """lifelines' c-index (it takes a score that is higher for longer survival)."""
    return float(lifelines_cindex(y[:, 0], -np.asarray(log_hazard).reshape(-1), y[:, 1]))


def gbsg2() -> tuple[np.ndarray, np.ndarray]:
    frame = load_gbsg2()
    X = np.column_stack(
        [
            (frame["horTh"] == "yes").astype(float),
            frame["age"],
            (frame["menostat"] == "Post").astype(float),
            frame["tsize"],
            frame["tgrade"].map({"I": 1, "II": 2, "III": 3}).astype(float),
            frame["pnodes"],
            frame["progrec"],
            frame["estrec"],
        ]
    )
    return X.astype(np.float32), frame[["time", "cens"]].to_numpy(np.float32)


def rossi() -> tuple[np.ndarray, np.ndarray]:
    frame = load_rossi()
    X = frame.drop(columns=["week", "arrest"]).to_numpy(np.float32)
    return X, frame[["week", "arrest"]].to_numpy(np.float32)


def synthetic(n_rows: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(X (n, 20) float32, y (n, 2) float32 (time, event), log hazard (n,))``."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_rows, N_SYNTHETIC_FEATURES))
    log_hazard = (
        0.6 * X[:, 0]
        - 0.5 * X[:, 1]
        + 0.4 * X[:, 2]
        - 0.3 * X[:, 3]
        + 0.8 * np.sin(2.0 * X[:, 4])
        + 0.5 * X[:, 5] * X[:, 6]
        + 0.6 * (X[:, 7] > 0.5)
        - 0.4 * X[:, 8] ** 2
    )
    rate = np.exp(log_hazard)
    event_time = rng.exponential(1.0 / rate)
    # censoring rate c with mean P(C < T) = mean c / (c + rate) = CENSORED_FRACTION
    low, high = -20.0, 20.0
    for _ in range(100):
        middle = 0.5 * (low + high)
        c = np.exp(middle)
        if np.mean(c / (c + rate)) < CENSORED_FRACTION:
            low = middle
        else:
            high = middle
    censor_time = rng.exponential(1.0 / np.exp(0.5 * (low + high)), n_rows)
    observed = np.minimum(event_time, censor_time)
    event = (event_time <= censor_time).astype(np.float32)
    y = np.column_stack([observed, event]).astype(np.float32)
    return X.astype(np.float32), y, log_hazard


def jaxboost_fitter(X, y, rounds, depth, learning_rate, args, devices):
    def fit():
        model = jb.Booster(
            loss=losses.cox,
            n_estimators=rounds,
            learning_rate=learning_rate,
            max_depth=depth,
            max_bins=255,
            reg_lambda=1.0,
            min_child_weight=args.min_child_weight,
            devices=devices,
        )
        return model.fit(X, y)

    return fit


def xgboost_fitter(X, y, rounds, depth, learning_rate, args):
    label = np.where(y[:, 1] > 0.5, y[:, 0], -y[:, 0])  # negative: censored
    params = xgboost_params(
        args.threads,
        objective="survival:cox",
        max_depth=depth,
        eta=learning_rate,
        min_child_weight=args.min_child_weight,
    )

    def fit():
        data = xgb.QuantileDMatrix(X, label=label, max_bin=255, nthread=args.threads)
        return xgb.train(params, data, num_boost_round=rounds)

    return fit


def log_hazard(name: str, model, X: np.ndarray) -> np.ndarray:
    if name == "jaxboost":
        return model.predict_raw(X)
    return model.inplace_predict(X, predict_type="margin")


def best_fits(calls: dict, repeat: int, quiet: bool) -> dict[str, Timed]:
    """Each call's fastest of ``repeat`` runs, alternating between them."""
    best: dict[str, Timed] = {}
    for _ in range(repeat):
        for name, call in calls.items():
            timing = timed(call) if quiet else timed_report(name, call)
            if name not in best or timing.seconds < best[name].seconds:
                best[name] = timing
    return best


def cross_validate(name: str, X: np.ndarray, y: np.ndarray, args, devices) -> dict:
    """5-fold means: c-index (ours and lifelines') and fit seconds per library."""
    folds = list(KFold(5, shuffle=True, random_state=0).split(X))
    settings = (args.small_rounds, args.small_depth, args.learning_rate)
    train, _ = folds[0]
    first = timed(jaxboost_fitter(X[train], y[train], *settings, args, devices))
    print(
        f"  {name}: jaxboost first fit (compiling), fold 0: {first.seconds:.3f} s "
        f"[JAX compile events {first.compile_seconds:.2f} s]",
        flush=True,
    )
    result = {
        lib: {"cindex": [], "lifelines": [], "seconds": [], "compile": []}
        for lib in ("jaxboost", "XGBoost")
    }
    for train, test in folds:
        calls = {
            "jaxboost": jaxboost_fitter(X[train], y[train], *settings, args, devices),
            "XGBoost": xgboost_fitter(X[train], y[train], *settings, args),
        }
        best = best_fits(calls, args.repeat, quiet=True)
        for lib, timing in best.items():
            risk = log_hazard(lib, timing.value, X[test])
            result[lib]["cindex"].append(cindex(y[test], risk))
            result[lib]["lifelines"].append(cindex_lifelines(y[test], risk))
            result[lib]["seconds"].append(timing.seconds)
            result[lib]["compile"].append(timing.compile_seconds)
    summary = {
        lib: {key: float(np.mean(v)) for key, v in values.items()} for lib, values in result.items()
    }
    summary["jaxboost"]["first"] = first.seconds
    summary["folds"] = result
    return summary


def jaxboost_eval_cindex(X, y, args, devices) -> tuple[float, float]:
    """jaxboost's own ``eval_metric="cindex"`` on fold 0's held-out rows after the
    last round (an untimed fit), to compare with :func:`cindex`."""
    train, test = next(KFold(5, shuffle=True, random_state=0).split(X))
    booster = jb.Booster(
        loss=losses.cox,
        n_estimators=args.small_rounds,
        learning_rate=args.learning_rate,
        max_depth=args.small_depth,
        max_bins=255,
        reg_lambda=1.0,
        min_child_weight=args.min_child_weight,
        devices=devices,
    ).fit(X[train], y[train], eval_set=[(X[test], y[test])], eval_metric=["cindex"])
    own = float(booster.evals_result_["validation_0"]["cindex"][-1])
    return own, cindex(y[test], booster.predict_raw(X[test]))


def small_data(args, devices) -> dict[str, dict]:
    print(
        f"## (a) 5-fold CV: {args.small_rounds} rounds, depth {args.small_depth}, learning "
        f"rate {args.learning_rate}, fit time each fold's best of {args.repeat}"
    )
    print()
    results = {}
    for name, (X, y) in {"gbsg2": gbsg2(), "rossi": rossi()}.items():
        print(
            f"  {name}: {X.shape[0]} x {X.shape[1]}, {100 * (1 - y[:, 1].mean()):.1f}% censored, "
            f"{len(y) - len(np.unique(y[:, 0]))} tied times",
            flush=True,
        )
        results[name] = cross_validate(name, X, y, args, devices)
        own, ours = jaxboost_eval_cindex(X, y, args, devices)
        print(
            f"  {name}: jaxboost eval_metric 'cindex' on fold 0 {own:.4f}, "
            f"concordance_index on its predict_raw {ours:.4f}"
        )
        compile_folds = results[name]["folds"]["jaxboost"]["compile"]
        print(
            f"  {name}: JAX compile events in jaxboost's timed fold fits: "
            f"{', '.join(f'{s:.2f}' for s in compile_folds)} s",
            flush=True,
        )
    print()
    rows = []
    for name, result in results.items():
        reference = result["XGBoost"]["seconds"]
        for lib in ("jaxboost", "XGBoost"):
            r = result[lib]
            rows.append(
                [
                    name,
                    lib,
                    f"{r['cindex']:.4f}",
                    f"{r['lifelines']:.4f}",
                    f"{r['seconds']:.3f}",
                    f"{r['seconds'] / reference:.2f}x",
                    f"{r['first']:.2f}" if "first" in r else "-",
                ]
            )
    print_table(
        [
            "data",
            "library",
            "c-index (5-fold mean)",
            "lifelines c-index",
            "fit s (fold mean)",
            "/ XGBoost",
            "first fit s (compiling)",
        ],
        rows,
    )
    return results


def large_data(args, devices) -> dict[str, float]:
    start = time.perf_counter()
    X, y, truth = synthetic(args.rows + N_HOLDOUT, args.seed)
    X_train, y_train = X[: args.rows], y[: args.rows]
    X_test, y_test, truth_test = X[args.rows :], y[args.rows :], truth[args.rows :]
    print(
        f"## (b) synthetic Cox data: {args.rows} x {N_SYNTHETIC_FEATURES} train, {N_HOLDOUT} "
        f"holdout, {100 * (1 - y[:, 1].mean()):.1f}% censored, seed {args.seed} (made in "
        f"{time.perf_counter() - start:.1f} s); {args.rounds} rounds, depth {args.depth}, "
        f"learning rate {SYNTHETIC_LEARNING_RATE}, best of {args.repeat}"
    )
    print()
    settings = (args.rounds, args.depth, SYNTHETIC_LEARNING_RATE)
    calls = {
        "jaxboost": jaxboost_fitter(X_train, y_train, *settings, args, devices),
        "XGBoost": xgboost_fitter(X_train, y_train, *settings, args),
    }
    first = timed_report("jaxboost first fit (compiling)", calls["jaxboost"])
    best = best_fits(calls, args.repeat, quiet=False)
    print()
    print(compile_summary("jaxboost", first, best["jaxboost"]))
    start = time.perf_counter()
    oracle = cindex(y_test, truth_test)
    seconds = time.perf_counter() - start
    print(
        f"holdout c-index of the true log hazard {oracle:.4f} (lifelines "
        f"{cindex_lifelines(y_test, truth_test):.4f}); one {N_HOLDOUT}-row c-index "
        f"took {seconds:.2f} s (with its compile)"
    )
    print()
    reference = best["XGBoost"].seconds
    rows, result = [], {}
    for lib, timing in best.items():
        risk = log_hazard(lib, timing.value, X_test)
        start = time.perf_counter()
        value = cindex(y_test, risk)
        c_seconds = time.perf_counter() - start
        result[lib] = {"seconds": timing.seconds, "cindex": value}
        rows.append(
            [
                lib,
                f"{timing.seconds:.3f}",
                f"{timing.seconds / reference:.2f}x",
                f"{value:.4f}",
                f"{cindex_lifelines(y_test, risk):.4f}",
                f"{c_seconds:.3f}",
            ]
        )
    print_table(
        ["library", "fit s", "/ XGBoost", "holdout c-index", "lifelines c-index", "c-index s"],
        rows,
    )
    return result


def check_targets(small: dict, large: dict, args) -> None:
    print("## Targets")
    print()
    for name, result in small.items():
        ours, theirs = result["jaxboost"]["cindex"], result["XGBoost"]["cindex"]
        verdict = "met" if ours >= theirs - 0.01 else "NOT met"
        print(
            f"c-index on {name} >= XGBoost's - 0.01: jaxboost {ours:.4f}, XGBoost "
            f"{theirs:.4f} ({ours - theirs:+.4f}): {verdict}"
        )
    ratio = large["jaxboost"]["seconds"] / large["XGBoost"]["seconds"]
    verdict = "met" if ratio <= 2.0 else "NOT met"
    print(f"fit time <= 2x XGBoost at {args.rows} rows: jaxboost {ratio:.2f}x: {verdict}")
    print()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000, help="synthetic training rows")
    parser.add_argument("--rounds", type=int, default=100, help="rounds on the synthetic data")
    parser.add_argument("--depth", type=int, default=6, help="depth on the synthetic data")
    parser.add_argument("--small-rounds", type=int, default=100, help="rounds on gbsg2 / rossi")
    parser.add_argument("--small-depth", type=int, default=3, help="depth on gbsg2 / rossi")
    parser.add_argument(
        "--learning-rate", type=float, default=0.05, help="learning rate on gbsg2 / rossi"
    )
    parser.add_argument("--min-child-weight", type=float, default=1e-3, help="least child hessian")
    parser.add_argument("--threads", type=int, default=2, help="XGBoost nthread, jaxboost devices")
    parser.add_argument(
        "--repeat", type=int, default=3, help="timed fits of each (alternating); fastest kept"
    )
    parser.add_argument("--seed", type=int, default=0, help="synthetic data seed")
    args = parser.parse_args(argv)

    command = command_line(argv)
    print_environment(command, PACKAGES)
    all_devices = jax.devices()
    # jaxboost's own choice among the cores given: one device for a stratum
    # of all rows (a group is never split between devices)
    devices = None if args.threads >= len(all_devices) else all_devices[: args.threads]
    print(
        f"jax.devices(): {all_devices}; jaxboost chooses among "
        f"{len(all_devices) if devices is None else len(devices)}"
    )
    print(
        f"settings:      255 bins, L2 1, least child hessian {args.min_child_weight}, "
        f"{args.threads} threads"
    )
    print(flush=True)
    small = small_data(args, devices)
    large = large_data(args, devices)
    check_targets(small, large, args)
    print(f"command: {command}")


if __name__ == "__main__":
    main()
