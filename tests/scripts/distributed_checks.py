"""Two processes on loopback where the inputs of one are bad, or odd.

Launcher (no ``--process-id``): starts the two workers for ``--case``, waits
at most ``--timeout`` seconds, and prints one JSON line: each worker's exit
code and its last output line.  Worker: fits on its own rows and prints
``ok <train loss>`` or ``error <type>: <message>``.

Cases:
  nan-target         process 1 has a NaN target;
  constant-each      each process's rows are constant, with different values;
  constant-all       every row of every process is the same.
"""

import argparse
import json
import os
import socket
import subprocess
import sys

import numpy as np

import jaxboost as jb  # before any JAX operation


def rows(case: str, process_id: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(process_id)
    X = rng.normal(size=(200, 3)).astype(np.float32)
    y = (X[:, 0] + 0.1 * rng.normal(size=200)).astype(np.float32)
    if case == "nan-target" and process_id == 1:
        y[3] = np.nan
    if case == "constant-each":
        X[:] = float(process_id)
    if case == "constant-all":
        X[:] = 1.0
    return X, y


def worker(args: argparse.Namespace) -> None:
    jb.distributed.initialize(args.coordinator, 2, args.process_id, cpu_devices=1)
    X, y = rows(args.case, args.process_id)
    try:
        model = jb.Booster(n_estimators=3, max_depth=2).fit(X, y)
    except (ValueError, TypeError) as error:
        print(f"error {type(error).__name__}: {error}", flush=True)
        sys.exit(3)
    print(f"ok {model.train_loss_[-1]:.6f}", flush=True)


def launch(args: argparse.Namespace) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    workers = [
        subprocess.Popen(
            [sys.executable, __file__, "--case", args.case, "--process-id", str(process_id),
             "--coordinator", f"127.0.0.1:{port}"],
            env={**os.environ, "JAXBOOST_CPU_DEVICES": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for process_id in range(2)
    ]  # fmt: skip
    results = []
    for process in workers:
        try:
            output, _ = process.communicate(timeout=args.timeout)
            lines = output.strip().splitlines() or [""]
            results.append({"code": process.returncode, "last": lines[-1]})
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            results.append({"code": None, "last": "hung"})
    print(json.dumps(results))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", required=True)
    parser.add_argument("--process-id", type=int)
    parser.add_argument("--coordinator")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    if args.process_id is None:
        launch(args)
    else:
        worker(args)


if __name__ == "__main__":
    main()
