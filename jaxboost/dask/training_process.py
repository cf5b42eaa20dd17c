"""A training process of Dask fits: ``python -m jaxboost.dask.training_process
IDLE_SECONDS``.

A Dask worker starts one of these (`jaxboost.dask.kept_processes`): a fresh
Python process can call ``jax.distributed.initialize`` before its backends
start, which a long-lived worker that may already have run JAX cannot.  It
reads one request per fit on its standard input, a line ``INPUT\tOUTPUT``:
``INPUT`` is a pickle written by the worker: the unfitted model (cloudpickle
bytes from the client), this process's rows (the worker's partitions, in
collection order), ``fit``'s other arguments, and where process 0 listens.
The first request joins the other processes (once: the process serves fits
of that job only); each fits on its rows, writes to ``OUTPUT`` a pickle
``{"model": bytes}`` (process 0: the fitted model, cloudpickled; the
others: None) or ``{"error": (type name, message)}``, and answers a line on
standard output.  What a fit prints goes to standard error (the worker's
log file of the process).

It ends after a failed fit, after ``IDLE_SECONDS`` without a request (0:
after its first fit), when its input closes, and when the worker that
started it is gone (killed, crashed), so the other processes see a lost
peer and stop instead of waiting.
"""

from __future__ import annotations

import gc
import os
import pickle
import select
import sys
import threading
import time
from typing import Any

import numpy as np


def _end_with_parent(parent: int, every: float = 0.5) -> None:
    """A daemon thread that ends this process once ``parent`` is gone."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every)
        os._exit(4)

    threading.Thread(target=watch, daemon=True).start()


def joined(parts: list | None) -> Any:
    """The partitions ``parts`` (numpy arrays or pandas objects) as one, in
    order; None stays None."""
    if parts is None:
        return None
    if hasattr(parts[0], "iloc"):
        import pandas as pd

        return pd.concat(parts, axis=0)
    return np.concatenate([np.asarray(part) for part in parts], axis=0)


# how long an ending process waits for the others at the shutdown barrier
_END_SECONDS = 20.0
_joined = []  # (the job this process joined, once)


def _fit(inputs: dict) -> Any:
    import cloudpickle

    import jaxboost as jb

    if inputs["num_processes"] > 1 and not _joined:
        _joined.append(inputs["coordinator"])
        jb.distributed.initialize(
            inputs["coordinator"],
            inputs["num_processes"],
            inputs["process_id"],
            cpu_devices=inputs["devices"],
            initialization_timeout=int(inputs["start_timeout"]),
            heartbeat_timeout_seconds=int(inputs["heartbeat_timeout"]),
        )
    model = cloudpickle.loads(inputs["model"])
    rows = {name: joined(parts) for name, parts in inputs["rows"].items()}
    fit_kwargs = cloudpickle.loads(inputs["fit_kwargs"])
    eval_sets = inputs.get("eval_sets")
    if eval_sets:  # process 0 only: [{"X": parts, "y": parts, ...}, ...]
        eval_sets = [{name: joined(parts) for name, parts in one.items()} for one in eval_sets]
        fit_kwargs["eval_set"] = [(one["X"], one["y"]) for one in eval_sets]
        for name in ("sample_weight", "init_score"):
            if any(one.get(name) is not None for one in eval_sets):
                fit_kwargs[f"eval_{name}"] = [one.get(name) for one in eval_sets]
    X, y = rows.pop("X"), rows.pop("y")
    fit_kwargs.update({name: value for name, value in rows.items() if value is not None})
    return model.fit(X, y, **fit_kwargs)


def _serve_one(input_path: str, output_path: str) -> None:
    """One fit's request; a failed fit ends the process."""
    with open(input_path, "rb") as file:
        inputs = pickle.load(file)
    first = inputs["process_id"] == 0
    try:
        model = _fit(inputs)
    except Exception as error:  # noqa: BLE001 (every failure goes back to the client, named)
        with open(output_path, "wb") as file:
            pickle.dump({"error": (type(error).__name__, str(error))}, file)
        sys.stdout.flush()
        sys.stderr.flush()
        # (a normal exit would wait for jax.distributed's shutdown barrier,
        # which a lost peer never reaches)
        os._exit(3)
    import cloudpickle

    result = cloudpickle.dumps(model) if first else None
    with open(output_path, "wb") as file:
        pickle.dump({"model": result}, file)


def main(idle_seconds: float) -> None:
    _end_with_parent(os.getppid())
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # (what a fit prints goes to the log, not among the answers)
    while True:
        if idle_seconds and not select.select([sys.stdin], [], [], idle_seconds)[0]:
            break
        request = sys.stdin.readline()
        if not request:
            break
        _serve_one(*request.rstrip("\n").split("\t"))
        gc.collect()  # (the fit's rows, before the next)
        answers.write("done\n")
        answers.flush()
        if not idle_seconds:
            break
    # a normal exit waits at jax.distributed's shutdown barrier for the
    # other processes, which end after the same fit; bounded, for a peer
    # that ended otherwise (its worker ended it for another session)
    ending = threading.Timer(_END_SECONDS, os._exit, (0,))
    ending.daemon = True
    ending.start()


if __name__ == "__main__":
    main(float(sys.argv[1]))
