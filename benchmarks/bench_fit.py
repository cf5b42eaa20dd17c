"""Fit time of jaxboost against LightGBM on the same synthetic binary data.

Both libraries grow depth-6 trees with 255 bins for the log loss, from the same
float32 matrix; the fit times include the binning (jaxboost's quantiles and
``apply_bins``, LightGBM's ``Dataset`` construction).  jaxboost is fitted
twice: the first fit compiles its programs, the second (same shapes and
settings) compiles nothing, so ``compile ~= first - second`` and the second is
its fit time.  Test log loss and AUC on held-out rows are printed beside the
times, so speed never hides a worse model.

    python benchmarks/bench_fit.py                  # 1M rows, 100 rounds, all CPU devices
    python benchmarks/bench_fit.py --rows 100000    # quick check
    python benchmarks/bench_fit.py --devices 1      # jaxboost on one device (one core)
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shlex
import sys
import time

import jax
import lightgbm as lgb
import numpy as np
from sklearn.metrics import log_loss, roc_auc_score

import jaxboost as jb  # before any JAX operation: it exposes the CPU cores as devices
import losses

N_FEATURES = 28
N_LOW_LEVEL = 21  # like HIGGS: 21 "measured" features, 7 derived from them


def make_data(n_rows: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(n_rows, 28)`` float32 features, ``{0, 1}`` float32 labels, and the
    noise-free generating log-odds (a reference for the attainable AUC).

    HIGGS-like in spirit: 21 "low-level" features (heavy-tailed momenta,
    symmetric angles, uniform azimuths, a discrete tag), 7 "high-level" ones
    computed from them with noise (mass-like, products, ratios), and a label
    drawn from a logistic model of a nonlinear function of a few features.  The
    Bayes AUC is well below 1 (the label noise is large), so the task is not
    separable and the trees' quality shows in the test metrics.
    """
    rng = np.random.default_rng(seed)
    n = n_rows
    # four "objects" with (pt, eta, phi), one missing-energy (pt, phi), one tag
    pt = rng.lognormal(mean=0.0, sigma=0.55, size=(n, 5))
    eta = rng.standard_normal((n, 4)) * 1.1
    phi = rng.uniform(-np.pi, np.pi, size=(n, 5))
    tag = rng.integers(0, 3, size=(n, 1)).astype(np.float64)
    low = np.concatenate(
        [pt, eta, phi, tag, rng.standard_normal((n, N_LOW_LEVEL - 15))], axis=1
    )  # 5 + 4 + 5 + 1 + 6 = 21 columns

    def pair_mass(i, j):
        d_eta = eta[:, i] - eta[:, j]
        d_phi = phi[:, i] - phi[:, j]
        return np.sqrt(2.0 * pt[:, i] * pt[:, j] * np.maximum(np.cosh(d_eta) - np.cos(d_phi), 0))

    m01, m23, m02 = pair_mass(0, 1), pair_mass(2, 3), pair_mass(0, 2)
    high = np.stack(
        [
            m01,
            m23,
            m02,
            np.log1p(pt[:, 0] * pt[:, 1] + pt[:, 4]),
            pt[:, 0] / (pt[:, 1] + pt[:, 2]),
            np.abs(eta[:, 0] - eta[:, 3]),
            np.cos(phi[:, 0] - phi[:, 4]) * pt[:, 4],
        ],
        axis=1,
    )
    high = high * rng.lognormal(0.0, 0.1, size=high.shape)  # measured with noise

    # signal: resonance bumps in two masses, an interaction, a tag effect, and
    # a smooth trend; then heavy logistic noise
    logit = (
        1.4 * np.exp(-(((m01 - 1.3) / 0.35) ** 2))
        + 1.0 * np.exp(-(((m23 - 1.0) / 0.3) ** 2))
        + 0.8 * np.tanh(eta[:, 0] * eta[:, 1])
        + 0.5 * (tag[:, 0] == 2)
        - 0.6 * np.abs(eta[:, 2])
        + 0.4 * np.sin(2.0 * phi[:, 0] - phi[:, 4]) * (pt[:, 4] > 1.0)
        + 0.3 * low[:, 15] * low[:, 16]
        - 0.5
    )
    noisy = logit + 0.5 * rng.standard_normal(n)  # unobserved variation
    y = (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-noisy))).astype(np.float32)
    X = np.concatenate([low, high], axis=1).astype(np.float32)
    assert X.shape == (n, N_FEATURES)
    return X, y, logit


# JAX reports the time it spends tracing, lowering and compiling each program;
# summing those events measures compilation directly, beside first - second.
COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)
_compile_seconds = [0.0]


def _on_duration(event: str, seconds: float, **_: object) -> None:
    if event in COMPILE_EVENTS:
        _compile_seconds[0] += seconds


jax.monitoring.register_event_duration_secs_listener(_on_duration)


def fit_jaxboost(X, y, args, devices):
    model = jb.Booster(
        loss=losses.binary_logloss,
        n_estimators=args.rounds,
        learning_rate=0.1,
        max_depth=6,
        max_bins=255,
        reg_lambda=1.0,
        devices=devices,
    )
    _compile_seconds[0] = 0.0
    start = time.perf_counter()
    model.fit(X, y)  # fit blocks on the trees (device_get), so the time is honest
    return model, time.perf_counter() - start, _compile_seconds[0]


def fit_lightgbm(X, y, args):
    params = {
        "objective": "binary",
        "max_depth": 6,
        "num_leaves": 64,
        "learning_rate": 0.1,
        "max_bin": 255,
        "num_threads": args.threads,
        "lambda_l2": 1.0,
        "min_sum_hessian_in_leaf": 1e-3,
        "min_data_in_leaf": 1,
        "verbose": -1,
        "seed": 0,
    }
    start = time.perf_counter()
    data = lgb.Dataset(X, label=y, params={"max_bin": 255, "verbose": -1})
    model = lgb.train(params, data, num_boost_round=args.rounds)  # constructs (bins) inside
    return model, time.perf_counter() - start


def metrics(y, p):
    p = np.clip(p.astype(np.float64), 1e-15, 1 - 1e-15)
    return log_loss(y, p), roc_auc_score(y, p)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="training rows")
    parser.add_argument("--test-rows", type=int, default=100_000, help="held-out rows")
    parser.add_argument("--rounds", type=int, default=100, help="boosting rounds")
    parser.add_argument(
        "--devices", type=int, default=None, help="jaxboost: use the first N JAX devices"
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="LightGBM num_threads (default: usable cores)"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="timed fits of each (alternating); the fastest is reported",
    )
    parser.add_argument("--seed", type=int, default=0, help="data seed")
    parser.add_argument("--skip-lightgbm", action="store_true")
    args = parser.parse_args(argv)
    if args.threads is None:
        args.threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 2

    command = "python " + " ".join(shlex.quote(a) for a in [sys.argv[0], *(argv or sys.argv[1:])])
    all_devices = jax.devices()
    devices = all_devices[: args.devices] if args.devices else None
    used = devices if devices is not None else all_devices
    print(f"command:      {command}")
    print(f"date:         {datetime.datetime.now().isoformat(timespec='seconds')}")
    print(
        f"machine:      {platform.machine()}, {os.cpu_count()} cores visible, "
        f"{len(os.sched_getaffinity(0))} usable"
    )
    print(
        f"versions:     jax {jax.__version__}, jaxboost {jb.__version__}, "
        f"lightgbm {lgb.__version__}, numpy {np.__version__}"
    )
    print(f"jax.devices(): {all_devices}")
    print(f"jaxboost uses {len(used)} device(s); LightGBM num_threads={args.threads}")

    start = time.perf_counter()
    X, y, logit = make_data(args.rows + args.test_rows, args.seed)
    X_train, y_train = X[: args.rows], y[: args.rows]
    X_test, y_test = X[args.rows :], y[args.rows :]
    oracle_auc = roc_auc_score(y_test, logit[args.rows :])
    del X, y, logit
    print(
        f"data:         {args.rows} x {N_FEATURES} float32 train "
        f"({X_train.nbytes / 2**20:.0f} MiB), {args.test_rows} test, "
        f"positive rate {y_train.mean():.3f}, generated in {time.perf_counter() - start:.1f} s"
    )
    print(
        f"settings:     {args.rounds} rounds, depth 6, learning rate 0.1, 255 bins, "
        "log loss, lambda 1"
    )
    sys.stdout.flush()

    # jaxboost: the first fit compiles, later fits reuse the cached programs.
    # Timed fits of the two libraries alternate, so on a shared machine both
    # see similar load; the 1-minute load average before each fit is printed.
    load = f"(load {os.getloadavg()[0]:.1f})"
    _, first, first_compile = fit_jaxboost(X_train, y_train, args, devices)
    print(
        f"jaxboost first fit (with compilation): {first:6.2f} s  {load}"
        f"  [JAX compile events {first_compile:.2f} s]",
        flush=True,
    )
    jb_times, lgb_times, jb_model, lgb_model = [], [], None, None
    for _ in range(args.repeat):
        load = f"(load {os.getloadavg()[0]:.1f})"
        jb_model, seconds, compiled = fit_jaxboost(X_train, y_train, args, devices)
        jb_times.append(seconds)
        print(
            f"jaxboost fit (compiled):               {seconds:6.2f} s  {load}"
            f"  [JAX compile events {compiled:.2f} s]",
            flush=True,
        )
        if not args.skip_lightgbm:
            load = f"(load {os.getloadavg()[0]:.1f})"
            lgb_model, seconds = fit_lightgbm(X_train, y_train, args)
            lgb_times.append(seconds)
            print(f"LightGBM fit (with Dataset binning):   {seconds:6.2f} s  {load}", flush=True)
    jb_fit = min(jb_times)
    jb_loss, jb_auc = metrics(y_test, jb_model.predict(X_test))
    rows = [("jaxboost", jb_fit, jb_loss, jb_auc)]
    if not args.skip_lightgbm:
        lgb_fit = min(lgb_times)
        lgb_loss, lgb_auc = metrics(y_test, lgb_model.predict(X_test))
        rows.append(("LightGBM", lgb_fit, lgb_loss, lgb_auc))
    reference = rows[-1][1] if not args.skip_lightgbm else None

    print()
    print(f"reference: test AUC of the noise-free generating log-odds {oracle_auc:.5f}")
    print(f"train log loss after {args.rounds} rounds, jaxboost: {jb_model.train_loss_[-1]:.5f}")
    print(
        f"jaxboost compile ~= first - fit = {first:.2f} - {jb_fit:.2f} = "
        f"{first - jb_fit:.2f} s  ({len(used)} device(s)); "
        f"JAX compile events in the first fit: {first_compile:.2f} s"
    )
    print()
    print("| library | fit seconds | ratio to LightGBM | test log loss | test AUC |")
    print("| --- | --- | --- | --- | --- |")
    for name, seconds, test_loss, auc in rows:
        ratio = f"{seconds / reference:.2f}x" if reference else "-"
        print(f"| {name} | {seconds:.2f} | {ratio} | {test_loss:.5f} | {auc:.5f} |")
    print()
    print(f"command: {command}")


if __name__ == "__main__":
    main()
