"""Fit time of jaxboost against LightGBM, XGBoost and scikit-learn on the same binary data.

Every library grows depth-6 trees (at most 64 leaves) with 255 bins for the
log loss, learning rate 0.1, L2 1 and a minimum leaf hessian of 1e-3, from the
same float32 matrix; the fit times include the binning (jaxboost's quantiles
and ``apply_bins``, LightGBM's ``Dataset``, XGBoost's ``QuantileDMatrix``,
scikit-learn's ``HistGradientBoostingClassifier`` bins inside ``fit``).
jaxboost is fitted twice: the first fit compiles its programs, the second
(same shapes and settings) compiles nothing, so ``compile ~= first - second``
and the second is its fit time.  Test log loss and AUC on held-out rows are
printed beside the times, so speed never hides a worse model.

Data: ``--data synthetic`` (the default) generates HIGGS-like rows with
:func:`make_data`, one data set per ``--rows`` value; ``--data binary`` loads
LightGBM's example data (``binary.train`` / ``binary.test``, 7000 / 500 rows
of a HIGGS subset) from ``--data-dir`` (default ``../shared/data`` beside the
repository), and is skipped with a message when the files are absent;
``--data integer`` is the synthetic data with each feature cut into 16
integer levels (its quantile bands), as counts and ratings are.

Threads: ``--threads`` (default: the usable cores) is LightGBM's
``num_threads``, XGBoost's ``nthread`` and, through threadpoolctl, the OpenMP
threads of scikit-learn's HGB (which otherwise uses its own OpenMP pool on
every core).  jaxboost runs one device per core (``--devices N``: the first N).

    python benchmarks/bench_fit.py                             # 1M rows, 100 rounds, all libraries
    python benchmarks/bench_fit.py --rows 100000               # quick check
    python benchmarks/bench_fit.py --rows 100000 1000000       # one table per size
    python benchmarks/bench_fit.py --data binary               # LightGBM's example data
    python benchmarks/bench_fit.py --data integer --rows 100000  # 16 integer levels per feature
    python benchmarks/bench_fit.py --libs jaxboost,lightgbm    # a subset of the libraries
    python benchmarks/bench_fit.py --devices 1                 # jaxboost on one device (one core)

``--skip-lightgbm`` (older spelling) removes LightGBM from ``--libs``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np
from _common import (  # before any JAX operation: it imports jaxboost, which exposes the cores
    Timed,
    command_line,
    jaxboost_booster,
    lightgbm_dataset,
    lightgbm_params,
    make_data,
    print_environment,
    print_table,
    timed,
    usable_cores,
    xgboost_params,
)
from sklearn.metrics import log_loss, roc_auc_score

from jaxboost import losses

LIBRARIES = ("jaxboost", "lightgbm", "xgboost", "sklearn")
LABELS = {
    "jaxboost": "jaxboost",
    "lightgbm": "LightGBM",
    "xgboost": "XGBoost",
    "sklearn": "sklearn HGB",
}
# what each library's timed fit includes, printed beside every fit
FIT_DESCRIPTIONS = {
    "jaxboost": "jaxboost fit (compiled):",
    "lightgbm": "LightGBM fit (with Dataset binning):",
    "xgboost": "XGBoost fit (with QuantileDMatrix):",
    "sklearn": "sklearn HGB fit (binning inside):",
}
# the packages whose versions head the report (bench_memory.py's too)
PACKAGES = ("jax", "jaxboost", "lightgbm", "xgboost", "sklearn", "numpy")
DATA_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def load_binary(data_dir: Path) -> tuple[np.ndarray, ...] | None:
    """LightGBM's example binary data ``(X_train, y_train, X_test, y_test)`` as
    float32, or None (with a message) when the files are absent.

    Tab separated, label in column 0, then 28 features.
    """
    paths = [data_dir / "binary.train", data_dir / "binary.test"]
    missing = [str(path) for path in paths if not path.is_file()]
    if missing:
        print(
            f"data binary: skipped, not found: {', '.join(missing)} "
            "(LightGBM's examples/binary_classification data; --data-dir to point elsewhere)"
        )
        return None
    train, test = (np.loadtxt(path, delimiter="\t", dtype=np.float32) for path in paths)
    return tuple(
        np.ascontiguousarray(part)
        for table in (train, test)
        for part in (table[:, 1:], table[:, 0])
    )


class BenchData(NamedTuple):
    """One train/test split and what to print about it."""

    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    oracle_auc: float | None  # test AUC of the noise-free log-odds, when known
    note: str


def synthetic(n_rows: int, n_test: int, seed: int) -> BenchData:
    """:func:`make_data` rows: the first ``n_rows`` train, the next ``n_test`` test."""
    start = time.perf_counter()
    X, y, logit = make_data(n_rows + n_test, seed)
    seconds = time.perf_counter() - start
    return BenchData(
        f"synthetic {n_rows} rows",
        X[:n_rows],
        y[:n_rows],
        X[n_rows:],
        y[n_rows:],
        roc_auc_score(y[n_rows:], logit[n_rows:]),
        f"HIGGS-like, seed {seed}, generated in {seconds:.1f} s",
    )


def integer_valued(n_rows: int, n_test: int, seed: int, levels: int = 16) -> BenchData:
    """:func:`synthetic` rows with every feature replaced by the number of its
    training quantile band among ``levels`` (integers ``0 .. levels - 1``), as
    counts, ratings and flags are: data whose histograms need few bins."""
    data = synthetic(n_rows, n_test, seed)
    bands = np.quantile(data.X_train, np.linspace(0, 1, levels + 1)[1:-1], axis=0).T

    def to_levels(X):
        columns = [np.searchsorted(edges, column) for edges, column in zip(bands, X.T)]
        return np.ascontiguousarray(np.stack(columns, axis=1).astype(np.float32))

    return data._replace(
        name=f"synthetic {n_rows} rows, {levels} integer levels per feature",
        X_train=to_levels(data.X_train),
        X_test=to_levels(data.X_test),
        note=f"{data.note}; each feature cut into {levels} quantile bands",
    )


def bench_datasets(args):
    """Yield the requested :class:`BenchData`, one at a time (so only one is held)."""
    for kind in args.data:
        if kind in ("synthetic", "integer"):
            make = synthetic if kind == "synthetic" else integer_valued
            for n_rows in args.rows:
                yield make(n_rows, args.test_rows, args.seed)
            continue
        loaded = load_binary(args.data_dir)
        if loaded is not None:
            yield BenchData(
                "LightGBM binary example",
                *loaded,
                None,
                f"{args.data_dir}/binary.train and binary.test; LightGBM's example "
                "settings for it (num_leaves=63, no depth limit) differ: every library "
                "keeps the common settings here (depth 6, at most 64 leaves)",
            )


def fit_jaxboost(X, y, args, devices=None) -> Timed:
    """jaxboost's fit, timed with the JAX compile events during it."""
    model = jaxboost_booster(losses.binary_logloss, args.rounds, devices)
    return timed(model.fit, X, y)  # fit blocks on the trees (device_get): the time is honest


def fit_lightgbm(X, y, args, devices=None) -> Timed:
    """``Dataset`` construction (binning) plus ``lgb.train``, timed."""
    import lightgbm as lgb  # here, so that --libs without it needs no LightGBM

    params = lightgbm_params(args.threads, "binary")
    # lgb.train constructs (bins) the Dataset inside
    return timed(lambda: lgb.train(params, lightgbm_dataset(X, y), num_boost_round=args.rounds))


def fit_xgboost(X, y, args, devices=None) -> Timed:
    """``QuantileDMatrix`` construction (binning) plus ``xgb.train``, timed."""
    import xgboost as xgb

    params = xgboost_params(args.threads, objective="binary:logistic")

    def train():
        data = xgb.QuantileDMatrix(X, label=y, max_bin=255, nthread=args.threads)
        return xgb.train(params, data, num_boost_round=args.rounds)

    return timed(train)


def fit_sklearn(X, y, args, devices=None) -> Timed:
    """``HistGradientBoostingClassifier.fit`` (it bins inside) on ``args.threads``
    OpenMP threads, timed."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from threadpoolctl import threadpool_limits  # a scikit-learn dependency

    model = HistGradientBoostingClassifier(
        max_iter=args.rounds,
        learning_rate=0.1,
        max_depth=6,
        max_leaf_nodes=64,
        max_bins=255,
        l2_regularization=1.0,
        min_samples_leaf=1,
        early_stopping=False,
        random_state=0,
    )

    def train():
        with threadpool_limits(limits=args.threads, user_api="openmp"):
            return model.fit(X, y)

    return timed(train)


FITTERS = {
    "jaxboost": fit_jaxboost,
    "lightgbm": fit_lightgbm,
    "xgboost": fit_xgboost,
    "sklearn": fit_sklearn,
}


def fit(name, X, y, args, devices=None) -> Timed:
    """Fit library ``name`` once, timed: the model (``.value``), its fit time,
    the JAX compile events during it and the load average before it."""
    return FITTERS[name](X, y, args, devices)


def predict_positive(name, model, X) -> np.ndarray:
    """The fitted model's probability of the positive class for each row of ``X``."""
    if name == "xgboost":
        return model.inplace_predict(X)
    if name == "sklearn":
        return model.predict_proba(X)[:, 1]
    return model.predict(X)  # jaxboost (through the sigmoid link) and LightGBM


def metrics(y, p):
    p = np.clip(p.astype(np.float64), 1e-15, 1 - 1e-15)
    return log_loss(y, p), roc_auc_score(y, p)


def parse_libs(text: str) -> list[str]:
    """``"jaxboost,lightgbm"`` -> the named libraries, in :data:`LIBRARIES` order."""
    names = {name.strip().lower() for name in text.split(",") if name.strip()}
    unknown = sorted(names - set(LIBRARIES))
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated subset of {','.join(LIBRARIES)}, got {text!r}"
        )
    return [name for name in LIBRARIES if name in names]


def add_libs_option(parser: argparse.ArgumentParser) -> None:
    """``--libs``: the libraries to fit (default: all of :data:`LIBRARIES`)."""
    parser.add_argument(
        "--libs",
        type=parse_libs,
        default=list(LIBRARIES),
        help=f"comma-separated subset of {','.join(LIBRARIES)} (default: all)",
    )


def add_threads_option(parser: argparse.ArgumentParser) -> None:
    """``--threads``: the peers' threads (default: the usable cores)."""
    parser.add_argument(
        "--threads",
        type=int,
        default=usable_cores(),
        help="LightGBM num_threads, XGBoost nthread, sklearn OpenMP threads "
        "(default: usable cores)",
    )


def print_fit(description: str, timing: Timed, compile_events: bool) -> None:
    """One fit's line: what was timed, seconds, load before it and (jaxboost)
    the JAX compile events during it."""
    events = f"  [JAX compile events {timing.compile_seconds:.2f} s]" if compile_events else ""
    print(f"{description:38} {timing.seconds:6.2f} s  (load {timing.load:.1f}){events}", flush=True)


def print_results(rows, reference: float | None) -> None:
    """Markdown table of ``(library, seconds, test log loss, test AUC)`` rows,
    with each time's ratio to ``reference`` (LightGBM's; None: no ratio)."""
    print_table(
        ["library", "fit s", "ratio to LightGBM", "test log loss", "test AUC"],
        [
            [
                name,
                f"{seconds:.2f}",
                f"{seconds / reference:.2f}x" if reference else "-",
                f"{test_loss:.5f}",
                f"{auc:.5f}",
            ]
            for name, seconds, test_loss, auc in rows
        ],
        blank_line=False,
    )


def bench(data: BenchData, args, devices, n_devices: int) -> None:
    """Time every library of ``args.libs`` on one data set and print the table.

    jaxboost is fitted once first (it compiles); then the timed fits of the
    libraries alternate ``args.repeat`` times, so on a shared machine all see
    similar load (the 1-minute load average before each fit is printed), and
    each library's fastest fit is kept.
    """
    print()
    print(f"## {data.name}")
    print()
    print(
        f"data:         {data.X_train.shape[0]} x {data.X_train.shape[1]} float32 train "
        f"({data.X_train.nbytes / 2**20:.0f} MiB), {data.X_test.shape[0]} test, "
        f"positive rate {data.y_train.mean():.3f}; {data.note}"
    )
    sys.stdout.flush()
    first = None
    if "jaxboost" in args.libs:
        first = fit_jaxboost(data.X_train, data.y_train, args, devices)
        print_fit("jaxboost first fit (with compilation):", first, compile_events=True)
    times = {name: [] for name in args.libs}
    models = {}
    for _ in range(args.repeat):
        for name in args.libs:
            timing = fit(name, data.X_train, data.y_train, args, devices)
            models[name] = timing.value
            times[name].append(timing.seconds)
            print_fit(FIT_DESCRIPTIONS[name], timing, compile_events=name == "jaxboost")

    rows = []
    for name in args.libs:
        test_loss, auc = metrics(data.y_test, predict_positive(name, models[name], data.X_test))
        rows.append((LABELS[name], min(times[name]), test_loss, auc))
    print()
    if data.oracle_auc is not None:
        print(f"reference: test AUC of the noise-free generating log-odds {data.oracle_auc:.5f}")
    if first is not None:
        jb_fit = min(times["jaxboost"])
        print(
            f"train log loss after {args.rounds} rounds, jaxboost: "
            f"{models['jaxboost'].train_loss_[-1]:.5f}"
        )
        print(
            f"jaxboost compile ~= first - fit = {first.seconds:.2f} - {jb_fit:.2f} = "
            f"{first.seconds - jb_fit:.2f} s  ({n_devices} device(s)); "
            f"JAX compile events in the first fit: {first.compile_seconds:.2f} s"
        )
    print()
    print_results(rows, min(times["lightgbm"]) if "lightgbm" in times else None)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rows", type=int, nargs="+", default=[1_000_000], help="training rows (synthetic data)"
    )
    parser.add_argument("--test-rows", type=int, default=100_000, help="held-out rows")
    parser.add_argument(
        "--data",
        nargs="+",
        choices=("synthetic", "integer", "binary"),
        default=["synthetic"],
        help="synthetic: make_data, one set per --rows; integer: the same rows cut into 16 "
        "integer levels per feature; binary: LightGBM's example data",
    )
    parser.add_argument(
        "--data-dir", type=Path, default=DATA_DIR, help="folder of binary.train / binary.test"
    )
    add_libs_option(parser)
    parser.add_argument("--rounds", type=int, default=100, help="boosting rounds")
    parser.add_argument(
        "--devices", type=int, default=None, help="jaxboost: use the first N JAX devices"
    )
    add_threads_option(parser)
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="timed fits of each (alternating); the fastest is reported",
    )
    parser.add_argument("--seed", type=int, default=0, help="data seed")
    parser.add_argument(
        "--skip-lightgbm", action="store_true", help="same as leaving lightgbm out of --libs"
    )
    args = parser.parse_args(argv)
    if args.skip_lightgbm:
        args.libs = [name for name in args.libs if name != "lightgbm"]

    command = command_line(argv)
    all_devices = jax.devices()
    devices = all_devices[: args.devices] if args.devices else None
    n_devices = len(devices if devices is not None else all_devices)
    print_environment(command, PACKAGES)
    print(f"jax.devices(): {all_devices}")
    print(
        f"libraries:    {', '.join(LABELS[name] for name in args.libs)}; jaxboost uses "
        f"{n_devices} device(s); LightGBM num_threads, XGBoost nthread and sklearn HGB "
        f"OpenMP threads = {args.threads}"
    )
    print(
        f"settings:     {args.rounds} rounds, depth 6 (at most 64 leaves), learning rate 0.1, "
        "255 bins, log loss, L2 1, min leaf hessian 1e-3"
    )
    for data in bench_datasets(args):
        bench(data, args, devices, n_devices)
    print()
    print(f"command: {command}")


if __name__ == "__main__":
    main()
