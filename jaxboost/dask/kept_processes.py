"""A Dask worker's training processes, kept across fits.

A training process (`jaxboost.dask.training_process`) joins one JAX
distributed job for its life: the processes of one set of workers, with
one coordinator, device count and timeouts (a *session*, named by the
client, `jaxboost.dask.launch`).  Kept alive between fits, it takes the
next fit of the same session with JAX imported, the job joined and the
training programs already traced and compiled in memory: a later fit's
start-up is the hand-off of its rows (benchmarks/README.md, Dask).

The worker holds its processes in this module (a worker process keeps its
imported modules between tasks).  A fit's task asks for its session's
process (`for_fit`): the kept one if alive and idle, else a new one,
which replaces this worker's idle processes of other sessions.  The
process reads one request line per fit on its standard input (``INPUT
OUTPUT``, two pickle paths) and answers a line on its standard output once
``OUTPUT`` is written; its log (standard error, and what the fit prints)
goes to a file.  It ends after a failed fit, after `IDLE_SECONDS` without
one, when its input closes, and when its worker is gone.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from distributed import WorkerPlugin

# an idle kept process ends after this long; the worker counts one idle
# for a minute less as gone, so a fit never reaches one that is ending
IDLE_SECONDS = 600.0
_ENDING_MARGIN = 60.0


class TrainingProcess:
    """One training process: its request pipe, answer pipe, and its folder
    (in the worker's local directory) for its log and the fits' files."""

    def __init__(self, session: str | None, devices: int, local_directory: str) -> None:
        self.session = session
        self.folder = tempfile.mkdtemp(prefix="jaxboost-training-", dir=local_directory)
        self.log_path = os.path.join(self.folder, "log.txt")
        self.fits = 0
        environment = {**os.environ, "JAXBOOST_CPU_DEVICES": str(devices)}
        idle = IDLE_SECONDS if session is not None else 0.0  # (0: one fit, then end)
        command = [sys.executable, "-m", "jaxboost.dask.training_process", str(idle)]
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=environment,
            )
        self.busy = False
        self.last_used = time.monotonic()

    def usable(self) -> bool:
        """Running, idle, and not about to end for being idle."""
        idle_for = time.monotonic() - self.last_used
        return (
            self.process.poll() is None
            and not self.busy
            and idle_for < IDLE_SECONDS - _ENDING_MARGIN
        )

    def paths(self) -> tuple[str, str]:
        """``(INPUT, OUTPUT)``: where the next fit's files go."""
        self.fits += 1
        return tuple(os.path.join(self.folder, f"{name}-{self.fits}.pickle")
                     for name in ("input", "output"))  # fmt: skip

    def fit(self, input_path: str, output_path: str) -> None:
        """Hands over a fit's ``INPUT``; returns once the process answered
        or ended."""
        try:
            self.process.stdin.write(f"{input_path}\t{output_path}\n".encode())
            self.process.stdin.flush()
            self.process.stdout.readline()
        except OSError:  # (it had ended: a broken pipe)
            pass
        self.last_used = time.monotonic()

    def exit_code(self, timeout: float = 10.0) -> int | None:
        """The exit code of a process that stopped answering (None: still
        running after ``timeout`` seconds)."""
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def end(self) -> int | None:
        """Ends the process (its input closed, then killed if it lingers);
        its exit code."""
        try:
            self.process.stdin.close()
        except OSError:
            pass
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)
        return code


_KEPT: dict[str, TrainingProcess] = {}  # session -> this worker's process of it
_LOCK = threading.Lock()


@atexit.register
def _end_all() -> None:
    """This worker's kept processes end at once (no waiting at the shutdown
    barrier for the other workers' processes)."""
    with _LOCK:
        for process in _KEPT.values():
            process.process.kill()
            shutil.rmtree(process.folder, ignore_errors=True)
        _KEPT.clear()


class EndWithWorker(WorkerPlugin):
    """A Dask worker plugin (registered by the client with a session): the
    worker's kept processes end when it closes (a worker holding one took
    the nanny's 4 s to close otherwise, then was killed)."""

    def teardown(self, worker) -> None:
        _end_all()


def is_kept(session: str) -> bool:
    """Whether this worker holds a usable process of ``session`` (run on the
    worker by the client before it reuses a session)."""
    with _LOCK:
        kept = _KEPT.get(session)
        return kept is not None and kept.usable()


def for_fit(session: str | None, devices: int, local_directory: str) -> TrainingProcess:
    """The process a fit of ``session`` runs in, marked busy: the kept one,
    else a new one (kept, replacing this worker's idle processes of other
    sessions, if ``session`` is not None; None: a process for one fit)."""
    replaced = []
    with _LOCK:
        kept = _KEPT.get(session) if session is not None else None
        if kept is not None and kept.usable():
            kept.busy = True
            return kept
        started = TrainingProcess(session, devices, local_directory)
        started.busy = True
        if session is not None:  # (it replaces this worker's idle ones)
            for name, other in list(_KEPT.items()):
                if not other.busy:  # (a busy one is another client's fit)
                    replaced.append(_KEPT.pop(name))
            _KEPT[session] = started
    for other in replaced:  # (outside the lock: is_kept runs on the worker's event loop)
        other.end()
    return started


def done(process: TrainingProcess, ok: bool) -> None:
    """After a fit: the process idles for the next one, or (a failed fit,
    a one-off process) ends."""
    with _LOCK:
        process.busy = False
        if ok and process.session is not None:
            return
        process.end()
        if _KEPT.get(process.session) is process:
            del _KEPT[process.session]
