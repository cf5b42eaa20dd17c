"""jaxboost.dask vs xgboost.dask vs lightgbm.dask on a LocalCluster, and the
bytes a round sends between the training processes.

``make_data`` rows (HIGGS-like, 28 features), log loss, depth 6, 255 bins,
learning rate 0.1, L2 1 (`_common`'s settings), on a ``LocalCluster`` of 2
worker processes of 1 thread each on 127.0.0.1; the training rows a
``dask.array`` of ``--partitions`` chunks persisted on the workers.  Each
library's wall time covers its whole fit call, its own start-up included
(jaxboost in new processes: a training process per worker, ``import jax``,
meeting, programs from the disk compilation cache; in kept ones: the rows'
hand-off; XGBoost: its Rabit tracker; LightGBM: its socket network); test AUC on held-out rows predicted in this process.  The
libraries run in turn, ``--repeat`` times, alternating.

jaxboost.dask runs twice in each turn: in the training processes the
previous fit kept (``keep_processes=True``, the default: the fit after the
first on the same workers) and in new ones (``keep_processes=False``: what
the first fit of a session pays).  Beside them: the same jaxboost model
fitted in this process on all rows (its first fit, programs from the disk
cache), and the start-up a fit pays: a 1-round ``jaxboost.dask`` fit in new
processes twice (the first compiles what the disk cache lacks, the second
reads it), then in the kept ones.  Bytes per round: the loopback
interface's byte count (``/proc/net/dev``, every process of the machine on
it) over a fit of ``--rounds`` rounds minus one of 1 round, divided by the
rounds between, against the histograms one tree sums: ``28 features x 256
bins x 2 stats x 4 bytes`` per node.

``--startup`` instead launches 2 processes by hand (no Dask), each with
half the rows, and prints where a training process's time goes: ``import
jaxboost``, ``jax.distributed.initialize``, a first 1-round fit (programs
from the disk cache, binning, the edge sample's exchange) and then a fit of
``--rounds`` rounds in the same process (programs in memory).

    python benchmarks/bench_dask.py                    # 2M rows, 100 rounds
    python benchmarks/bench_dask.py --rows 200000 --rounds 50
    python benchmarks/bench_dask.py --rows 200000 --startup
"""

from __future__ import annotations

import time

_STARTED = time.perf_counter()  # (``import jaxboost``, by _common, timed for --startup)

import argparse
import os
import socket
import subprocess
import sys

import numpy as np
from _common import (
    jaxboost_booster,
    lightgbm_params,
    load_average,
    make_data,
    print_header,
    print_table,
    xgboost_params,
)

IMPORT_SECONDS = time.perf_counter() - _STARTED

N_FEATURES, N_BINS, DEPTH = 28, 256, 6


def loopback_bytes() -> int:
    """Bytes received on the loopback interface so far (all processes)."""
    try:
        with open("/proc/net/dev") as file:
            for line in file:
                name, _, fields = line.partition(":")
                if name.strip() == "lo":
                    return int(fields.split()[0])
    except OSError:
        pass
    return -1


def histogram_bytes_per_tree() -> int:
    nodes = sum(2**d for d in range(DEPTH))
    return N_FEATURES * N_BINS * 2 * 4 * nodes


def fit_jaxboost(client, dX, dy, rounds: int, keep: bool = True):
    import jaxboost.dask as jbd

    model = jaxboost_booster("binary_logloss", rounds)
    return jbd.fit(client, dX, dy, model=model, keep_processes=keep)


def fit_jaxboost_new_processes(client, dX, dy, rounds: int):
    return fit_jaxboost(client, dX, dy, rounds, keep=False)


def fit_xgboost(client, dX, dy, rounds: int):
    import xgboost as xgb

    train = xgb.dask.DaskDMatrix(client, dX, dy)
    params = xgboost_params(1, objective="binary:logistic")
    return xgb.dask.train(client, params, train, num_boost_round=rounds)["booster"]


def fit_lightgbm(client, dX, dy, rounds: int):
    import lightgbm as lgb

    params = lightgbm_params(1, "binary")
    params.pop("objective")
    model = lgb.DaskLGBMClassifier(client=client, n_estimators=rounds, **params)
    return model.fit(dX, dy).to_local()


def raw_scores(library: str, model, X: np.ndarray) -> np.ndarray:
    if library == "xgboost.dask":
        import xgboost as xgb

        return model.predict(xgb.DMatrix(X), output_margin=True)
    if library == "lightgbm.dask":
        return model.predict(X, raw_score=True)
    return np.asarray(model.predict_raw(X))


def startup_process(process_id: int, port: int, args) -> None:
    """One of the ``--startup`` processes (``import jaxboost`` was timed by
    the caller: the module imports it first)."""
    import jaxboost as jb

    start = time.perf_counter()
    jb.distributed.initialize(f"127.0.0.1:{port}", 2, process_id, cpu_devices=1)
    joined = time.perf_counter() - start
    X, y, _ = make_data(args.rows, seed=0)
    half = args.rows // 2
    mine = slice(0, half) if process_id == 0 else slice(half, args.rows)
    times = []
    for rounds in (1, args.rounds):
        start = time.perf_counter()
        jaxboost_booster("binary_logloss", rounds).fit(X[mine], y[mine])
        times.append(time.perf_counter() - start)
    print(
        f"process {process_id}: import {IMPORT_SECONDS:.1f} s, initialize {joined:.1f} s, "
        f"first fit (1 round) {times[0]:.1f} s, then {args.rounds} rounds {times[1]:.1f} s",
        flush=True,
    )


def startup(args) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, __file__, "--rows", str(args.rows), "--rounds", str(args.rounds)]
    environment = {**os.environ, "JAXBOOST_CPU_DEVICES": "1"}
    processes = [
        subprocess.Popen(
            [*command, "--startup-process", str(i), "--port", str(port)],
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for i in range(2)
    ]
    for process in processes:
        output = process.communicate(timeout=600)[0]
        print("\n".join(line for line in output.splitlines() if line.startswith("process")))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000, help="training rows")
    parser.add_argument("--test-rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--startup", action="store_true", help="where the start-up goes")
    parser.add_argument("--startup-process", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.startup_process is not None:
        startup_process(args.startup_process, args.port, args)
        return
    if args.startup:
        print_header(argv, [], show_devices=False)
        startup(args)
        return
    import dask.array as da
    from distributed import Client, LocalCluster
    from sklearn.metrics import roc_auc_score

    import jaxboost.dask  # noqa: F401  (before the timings: its import is this process's)

    print_header(argv, ["dask", "distributed", "xgboost", "lightgbm"], show_devices=False)
    X, y, _ = make_data(args.rows + args.test_rows, seed=0)
    X_train, y_train = X[: args.rows], y[: args.rows]
    X_test, y_test = X[args.rows :], y[args.rows :]
    chunk = -(-args.rows // args.partitions)
    libraries = {
        "jaxboost.dask": fit_jaxboost,
        "jaxboost.dask, new processes": fit_jaxboost_new_processes,
    }
    for name, fit in (("xgboost.dask", fit_xgboost), ("lightgbm.dask", fit_lightgbm)):
        try:
            __import__(name)
            libraries[name] = fit
        except ImportError as missing:
            print(f"{name}: not installed ({missing})")
    rows, bytes_seen = [], {}
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        Client(cluster) as client,
    ):
        dX = da.from_array(X_train, chunks=(chunk, N_FEATURES)).persist()
        dy = da.from_array(y_train, chunks=chunk).persist()
        client.rebalance()
        # the start-up (1 round in new processes: the first fit compiles what
        # the disk cache lacks, the second reads it; then in kept ones), and
        # loopback bytes apart from rounds
        steps = (
            ("new processes, first", 1, False),
            ("new processes, again", 1, False),
            ("new processes, kept", 1, True),
            ("kept processes", 1, True),
            ("bytes", args.rounds, True),
        )
        for label, rounds, keep in steps:
            before, start = loopback_bytes(), time.perf_counter()
            fit_jaxboost(client, dX, dy, rounds, keep)
            seconds = time.perf_counter() - start
            bytes_seen[rounds] = loopback_bytes() - before
            if rounds == 1:
                print(f"jaxboost.dask, 1 round ({label}): {seconds:.1f} s", flush=True)
        for repeat in range(args.repeat):
            for library, fit in libraries.items():
                load = load_average()
                start = time.perf_counter()
                model = fit(client, dX, dy, args.rounds)
                seconds = time.perf_counter() - start
                auc = roc_auc_score(y_test, raw_scores(library, model, X_test))
                rows.append([library, repeat, f"{seconds:.1f}", f"{auc:.4f}", f"{load:.1f}"])
                print(rows[-1], flush=True)
    load = load_average()
    start = time.perf_counter()
    single = jaxboost_booster("binary_logloss", args.rounds).fit(X_train, y_train)
    seconds = time.perf_counter() - start
    auc = roc_auc_score(y_test, np.asarray(single.predict_raw(X_test)))
    rows.append(
        ["jaxboost, this process (2 devices)", 0, f"{seconds:.1f}", f"{auc:.4f}", f"{load:.1f}"]
    )
    print(f"\n{args.rows:,} rows x {N_FEATURES}, {args.rounds} rounds, depth {DEPTH}, "
          f"{args.partitions} partitions, 2 workers x 1 thread:")  # fmt: skip
    print_table(["library", "repeat", "wall s", "test AUC", "load"], rows)
    per_round = (bytes_seen[args.rounds] - bytes_seen[1]) / max(args.rounds - 1, 1)
    print(
        f"\nloopback bytes per round (all processes on lo, {args.rounds}-round fit minus "
        f"1-round): {per_round:,.0f}; histograms summed per tree: "
        f"{histogram_bytes_per_tree():,} bytes"
    )


if __name__ == "__main__":
    main()
