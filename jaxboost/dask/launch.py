"""How a Dask fit's training processes meet: one fresh process per worker per
fit, started by a task on that worker and fed its partitions through a file.

``jax.distributed.initialize`` must run once per process, before JAX's
backends start; a Dask worker lives across fits and may have run JAX
already, so it cannot join a new job.  Instead a task on each worker that
holds rows (`jaxboost.dask.partitions`) writes its partitions to a file in
the worker's local directory and starts ``python -m
jaxboost.dask.training_process`` on it, with process 0's address (a free
port on process 0's worker, found by the client) and the process count.
The processes meet there, fit (histograms and leaf sums cross by gloo),
and process 0's model comes back to the client.  The cost: a process start
and JAX import per worker per fit, and loading the programs (from the disk
compilation cache once warm): benchmarks/README.md.

Failures end in bounded time: the client polls the workers, and a worker
that leaves raises at once; a training process whose worker is gone ends
itself, so the others see a lost peer in their next exchange and stop;
processes that cannot meet stop after ``start_timeout`` seconds.
"""

from __future__ import annotations

import os
import pickle
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import CancelledError

from .partitions import Placement

_ERRORS = {"ValueError": ValueError, "TypeError": TypeError}
# how long a process's "lost process" error waits for the scheduler to say
# which worker left (its message names it)
_LOST_GRACE_SECONDS = 10.0


def free_port() -> int:
    """A TCP port free now on this host (run on process 0's worker)."""
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


def _log_tail(path: str, lines: int = 30) -> str:
    try:
        with open(path, errors="replace") as file:
            return "".join(file.readlines()[-lines:])
    except OSError:
        return ""


def train_on_worker(spec: dict, rows: dict[str, list], eval_sets: list | None) -> bytes | None:
    """A Dask task: runs this worker's training process on ``rows`` (its
    partitions, resolved by Dask) and returns process 0's fitted model
    (cloudpickle bytes), None from the other processes."""
    from distributed import get_worker

    folder = tempfile.mkdtemp(prefix="jaxboost-fit-", dir=get_worker().local_directory)
    where = f"process {spec['process_id']} on worker {get_worker().address}"
    try:
        input_path = os.path.join(folder, "input.pickle")
        output_path = os.path.join(folder, "output.pickle")
        log_path = os.path.join(folder, "log.txt")
        with open(input_path, "wb") as file:
            pickle.dump({**spec, "rows": rows, "eval_sets": eval_sets}, file, protocol=5)
        del rows, eval_sets
        environment = {**os.environ, "JAXBOOST_CPU_DEVICES": str(spec["devices"])}
        command = [sys.executable, "-m", "jaxboost.dask.training_process", input_path, output_path]
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=environment
            )
            code = process.wait()
        if os.path.exists(output_path):
            with open(output_path, "rb") as file:
                result = pickle.load(file)
            if "error" in result:
                kind, message = result["error"]
                raise _ERRORS.get(kind, RuntimeError)(f"{message} [{kind} in {where}]")
            return result["model"]
        raise RuntimeError(
            f"jaxboost.dask: the training {where} ended (exit code {code}) without a "
            f"result; the end of its output:\n{_log_tail(log_path)}"
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _present_workers(client) -> set[str]:
    return set(client.scheduler_info(n_workers=-1)["workers"])


def run(
    client,
    placement: Placement,
    spec: dict,
    eval_sets: list | None,
    poll_seconds: float = 1.0,
) -> bytes:
    """Starts the training processes of ``placement`` (``spec``: what every
    process gets besides its rows) and returns process 0's fitted model,
    raising the first process's error, or a RuntimeError naming a worker
    that left, as soon as it is known."""
    from distributed import wait

    workers = placement.workers
    host = workers[0].split("://")[-1].rsplit(":", 1)[0]
    port = client.run(free_port, workers=[workers[0]])[workers[0]]
    threads = client.scheduler_info(n_workers=-1)["workers"]
    futures = []
    for process_id, (worker, parts) in enumerate(zip(workers, placement.parts)):
        devices = spec.get("devices") or threads[worker].get("nthreads", 1)
        process_spec = {
            **spec,
            "devices": int(devices),
            "process_id": process_id,
            "num_processes": len(workers),
            "coordinator": f"{host}:{port}",
        }
        futures.append(
            client.submit(
                train_on_worker,
                process_spec,
                parts,
                eval_sets if process_id == 0 else None,
                workers=[worker],
                allow_other_workers=False,
                pure=False,
                retries=0,
            )
        )
    lost_grace_end = 0.0
    try:
        while True:
            try:
                unfinished = [future for future in futures if not future.done()]
                wait(unfinished, timeout=poll_seconds, return_when="FIRST_COMPLETED")
            except (TimeoutError, CancelledError):  # (cancelled: its worker's rows were lost)
                pass
            gone = [worker for worker in workers if worker not in _present_workers(client)]
            if gone:
                raise RuntimeError(
                    f"jaxboost.dask.fit: worker {gone[0]} left the cluster during the fit "
                    f"(it held {placement.n_rows[workers.index(gone[0])]} of the training "
                    "rows); the fit cannot continue without every worker's rows. The other "
                    "workers' training processes stop at their next exchange; fit again "
                    "once the cluster is whole"
                )
            failed = [future for future in futures if future.status == "error"]
            if failed:
                error = failed[0].exception()
                # a peer's lost process: its worker may be leaving; the
                # scheduler's word names the worker, so wait for it a little
                if " lost " in str(error) and time.monotonic() < lost_grace_end:
                    time.sleep(poll_seconds)
                    continue
                raise error
            lost_grace_end = time.monotonic() + _LOST_GRACE_SECONDS
            cancelled = [future for future in futures if future.cancelled()]
            if cancelled:
                worker = workers[futures.index(cancelled[0])]
                raise RuntimeError(
                    f"jaxboost.dask.fit: the training task on worker {worker} was cancelled "
                    "(its rows were lost, or the client cancelled it); fit again"
                )
            if all(future.status == "finished" for future in futures):
                return futures[0].result()
    except BaseException:
        client.cancel(futures)
        raise
