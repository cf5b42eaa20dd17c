"""How a Dask fit's training processes meet: a training process per worker,
started by a task on that worker, fed its partitions through a file, and
kept for the next fit on the same workers.

``jax.distributed.initialize`` must run once per process, before JAX's
backends start; a Dask worker lives across fits and may have run JAX
already, so it cannot join a job.  Instead a task on each worker that
holds rows (`jaxboost.dask.partitions`) writes its partitions to a file in
the worker's local directory and hands it to the worker's training process
(`jaxboost.dask.kept_processes`), which on its first fit joins the others
at process 0's address (a free port on process 0's worker, found by the
client).  The processes fit (histograms and leaf sums cross by gloo), and
process 0's model comes back to the client.  The processes stay for the
next fit of this client on the same workers with the same settings (a
*session*): it finds JAX imported, the job joined and its programs in
memory.  The cost of a new session: a process start and JAX import per
worker, and loading the programs (from the disk compilation cache once
warm): benchmarks/README.md.

Failures end in bounded time: the client polls the workers, and a worker
that leaves raises at once; a training process whose worker is gone ends
itself, so the others see a lost peer in their next exchange and stop;
processes that cannot meet stop after ``start_timeout`` seconds.  A failed
fit ends its session's processes.
"""

from __future__ import annotations

import os
import pickle
import socket
import threading
import time
import uuid
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
    """A Dask task: runs this worker's part of a fit on ``rows`` (its
    partitions, resolved by Dask) in its training process (kept across
    fits of ``spec["session"]``: `jaxboost.dask.kept_processes`) and returns
    process 0's fitted model (cloudpickle bytes), None from the others."""
    from distributed import get_worker

    from . import kept_processes

    where = f"process {spec['process_id']} on worker {get_worker().address}"
    # (a new process imports jaxboost while the rows are written)
    process = kept_processes.for_fit(spec["session"], spec["devices"], get_worker().local_directory)
    ok = False
    try:
        input_path, output_path = process.paths()
        with open(input_path, "wb") as file:
            pickle.dump({**spec, "rows": rows, "eval_sets": eval_sets}, file, protocol=5)
        del rows, eval_sets
        process.fit(input_path, output_path)  # (a failed fit's process ends: no answer)
        os.remove(input_path)
        if os.path.exists(output_path):
            with open(output_path, "rb") as file:
                result = pickle.load(file)
            os.remove(output_path)
            if "error" in result:
                kind, message = result["error"]
                raise _ERRORS.get(kind, RuntimeError)(f"{message} [{kind} in {where}]")
            ok = True
            return result["model"]
        code = process.exit_code()
        raise RuntimeError(
            f"jaxboost.dask: the training {where} ended (exit code {code}) without a "
            f"result; the end of its output:\n{_log_tail(process.log_path)}"
        )
    finally:
        kept_processes.done(process, ok)


def _present_workers(client) -> set[str]:
    return set(client.scheduler_info(n_workers=-1)["workers"])


class _Session:
    """A client's kept training processes on one list of workers: the
    session's name (None: processes for one fit), process 0's address, and
    a lock held during a fit (fits of one session run one at a time)."""

    def __init__(self, name: str | None = None, coordinator: str | None = None) -> None:
        self.name, self.coordinator = name, coordinator
        self.lock = threading.Lock()


_SESSIONS: dict[tuple, _Session] = {}
_SESSIONS_LOCK = threading.Lock()


def _coordinator(client, worker: str) -> str:
    """``host:port``: a free port on ``worker``'s host, for process 0."""
    host = worker.split("://")[-1].rsplit(":", 1)[0]
    return f"{host}:{client.run(free_port, workers=[worker])[worker]}"


def _session(client, workers: list[str], devices: list[int], spec: dict) -> _Session:
    """The session a fit runs in, its lock held: the processes the last fit
    on the same workers and settings kept, if every worker still holds
    them; else new ones (kept when ``spec["keep"]``); processes for this
    fit alone while another fit of this client runs on them."""
    from . import kept_processes

    if not spec["keep"]:
        return _Session(None, _coordinator(client, workers[0]))
    key = (client.id, tuple(workers), tuple(devices), spec["start_timeout"],
           spec["heartbeat_timeout"])  # fmt: skip
    with _SESSIONS_LOCK:
        session = _SESSIONS.setdefault(key, _Session())
    if not session.lock.acquire(blocking=False):  # (another thread's fit runs there)
        return _Session(None, _coordinator(client, workers[0]))
    kept = session.name is not None and all(
        client.run(kept_processes.is_kept, session.name, workers=workers).values()
    )
    if not kept:
        session.name, session.coordinator = uuid.uuid4().hex, _coordinator(client, workers[0])
        client.register_plugin(kept_processes.EndWithWorker(), name=kept_processes.__name__)
    return session


def run(
    client,
    placement: Placement,
    spec: dict,
    eval_sets: list | None,
    poll_seconds: float = 1.0,
) -> bytes:
    """Runs a fit in the training processes of ``placement`` (``spec``:
    what every process gets besides its rows) and returns process 0's fitted
    model, raising the first process's error, or a RuntimeError naming a
    worker that left, as soon as it is known."""
    workers = placement.workers
    threads = client.scheduler_info(n_workers=-1)["workers"]
    devices = [int(spec.get("devices") or threads[w].get("nthreads", 1)) for w in workers]
    session = _session(client, workers, devices, spec)
    futures, ok = [], False
    try:
        for process_id, (worker, parts) in enumerate(zip(workers, placement.parts)):
            process_spec = {
                **spec,
                "devices": devices[process_id],
                "process_id": process_id,
                "num_processes": len(workers),
                "coordinator": session.coordinator,
                "session": session.name,
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
        model = _result(client, futures, placement, poll_seconds)
        ok = True
        return model
    finally:
        if not ok:
            session.name = None  # (its processes end after a failed fit)
        if session.lock.locked():
            session.lock.release()


def _result(client, futures: list, placement: Placement, poll_seconds: float) -> bytes:
    """Process 0's model once every task of ``futures`` finished; the first
    error, or a worker that left, raised as soon as it is known."""
    from distributed import wait

    workers = placement.workers
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
