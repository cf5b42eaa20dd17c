"""Train one model across 2 processes, each holding its own rows.

Run ``python examples/distributed_training.py``: it launches two worker
processes on this machine that talk over loopback (127.0.0.1), like two hosts
would over a network.  Each worker generates the same data set but keeps only
its own slice of the rows (60% / 40%), calls
``jaxboost.distributed.initialize`` and fits; histograms and leaf sums are
combined across the processes by ``psum`` (gloo collectives on CPU).  The
launcher prints each worker's line (a worker's whole output, gloo's log
included, is in ``worker<i>.log`` beside the saved models), then fits the
same model in one process on all rows and compares: same splits, and raw
scores within 1e-5 of their largest magnitude (float32 sums of the same rows
in another order: each process's, then across them).  ``--rows 500000``
tries it above the 200,000-row sample the bin edges come from.

On real hosts, run the worker command on every host with the coordinator's
address (``--coordinator host0:12345``), ``--num-processes`` and each host's
``--process-id``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import TextIO

import jax.numpy as jnp
import numpy as np
from sklearn.datasets import make_friedman1

import jaxboost as jb  # before any JAX operation

N_ROWS = 6000
SHARE_OF_PROCESS_0 = 0.6
OUTPUT = Path(__file__).resolve().parent / "output" / "distributed"


def pseudo_huber(y, f):
    """A robust loss as a plain JAX function: ``sqrt(1 + (f - y)^2) - 1``."""
    return jnp.sqrt(1.0 + (f - y) ** 2) - 1.0


def make_model() -> jb.Booster:
    return jb.Booster(
        loss=pseudo_huber,
        n_estimators=30,
        max_depth=4,
        learning_rate=0.2,
        subsample=0.8,
        colsample_bytree=0.8,
    )


def all_rows(n_rows: int = N_ROWS) -> tuple[np.ndarray, np.ndarray]:
    """The full data set; every process can make it, but keeps only its rows."""
    X, y = make_friedman1(n_samples=n_rows, n_features=8, noise=1.0, random_state=0)
    return X.astype(np.float32), y.astype(np.float32)


def rows_of_process(process_id: int, num_processes: int, n_rows: int = N_ROWS) -> slice:
    """Process 0 gets 60% of the rows, the others share the rest."""
    first = int(n_rows * SHARE_OF_PROCESS_0)
    if process_id == 0:
        return slice(0, first)
    bounds = np.linspace(first, n_rows, num_processes).astype(int)
    return slice(bounds[process_id - 1], bounds[process_id])


def worker(args: argparse.Namespace) -> None:
    """One process: initialise jax.distributed, fit on its own rows, save."""
    jb.distributed.initialize(args.coordinator, args.num_processes, args.process_id, cpu_devices=1)
    X, y = all_rows(args.rows)
    mine = rows_of_process(args.process_id, args.num_processes, args.rows)
    model = make_model().fit(X[mine], y[mine])
    model.save(Path(args.output) / f"model_process{args.process_id}.json")
    print(
        f"process {args.process_id}: {mine.stop - mine.start} of {args.rows} rows, "
        f"training loss {model.train_loss_[0]:.4f} -> {model.train_loss_[-1]:.4f}"
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_worker(
    args: argparse.Namespace, process_id: int, coordinator: str, log: TextIO
) -> subprocess.Popen:
    """Worker ``process_id``, writing its output (stdout and stderr) to ``log``."""
    command = [
        sys.executable,
        __file__,
        "--process-id", str(process_id),
        "--num-processes", str(args.num_processes),
        "--coordinator", coordinator,
        "--output", args.output,
        "--rows", str(args.rows),
    ]  # fmt: skip
    return subprocess.Popen(
        command,
        env={**os.environ, "JAXBOOST_CPU_DEVICES": "1"},
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def launch(args: argparse.Namespace) -> None:
    """Start the workers on loopback, wait, and compare with one process."""
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    coordinator = f"127.0.0.1:{free_port()}"
    # a log per worker: its line, and the gloo and JAX logs that would
    # otherwise interleave with the other workers'; its line is shown
    logs = [output / f"worker{process_id}.log" for process_id in range(args.num_processes)]
    with contextlib.ExitStack() as files:
        workers = [
            start_worker(args, process_id, coordinator, files.enter_context(log.open("w")))
            for process_id, log in enumerate(logs)
        ]
        codes = [process.wait(timeout=300) for process in workers]
    for process_id, (code, log) in enumerate(zip(codes, logs)):
        lines = log.read_text().splitlines()
        if code:
            print(f"worker {process_id} failed (exit code {code}); the end of {log}:")
            print("\n".join(lines[-40:]))
        else:
            print("\n".join(line for line in lines if line.startswith(f"process {process_id}:")))
    if any(codes):
        raise SystemExit(f"a worker failed: exit codes {codes}")

    distributed = jb.load(output / "model_process0.json")
    X, y = all_rows(args.rows)
    single = make_model().fit(X, y)
    same_splits = np.array_equal(
        distributed.forest_.feature, single.forest_.feature
    ) and np.array_equal(distributed.forest_.threshold_bin, single.forest_.threshold_bin)
    expected = single.predict_raw(X)
    gap = np.max(np.abs(distributed.predict_raw(X) - expected))
    close = bool(gap <= 1e-5 * np.max(np.abs(expected)))
    print(f"{args.num_processes} processes vs one process: same splits {same_splits}, "
          f"raw scores within 1e-5 of their largest: {close} (largest gap {gap:.2g})")  # fmt: skip
    if not (same_splits and close):
        raise SystemExit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-processes", type=int, default=2)
    parser.add_argument("--process-id", type=int, help="worker mode: this process's number")
    parser.add_argument("--coordinator", help="worker mode: host:port of process 0")
    parser.add_argument("--output", default=str(OUTPUT), help="folder for the saved models")
    parser.add_argument("--rows", type=int, default=N_ROWS, help="rows of all processes together")
    args = parser.parse_args()
    if args.process_id is None:
        launch(args)
    else:
        worker(args)


if __name__ == "__main__":
    main()
