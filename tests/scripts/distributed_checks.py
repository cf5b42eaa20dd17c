"""Two processes on loopback where the inputs of one are bad, or odd, or
more than the bin-edge sample.

Launcher (no ``--process-id``): starts the two workers for ``--case``, waits
at most ``--timeout`` seconds, and prints one JSON line: each worker's exit
code and its last output line.  Worker: fits on its own rows, saves the model
to ``--output`` if given, and prints ``ok <train loss>`` or
``error <type>: <message>``.

``--case`` may name several cases that end ``ok``, comma-separated: the same
two workers run them in turn (a pair of processes costs some 15 s to start
and join), each case's models in ``--output``/<case>, and the launcher
prints one JSON object instead, each case's list of the workers' exit code
and last line of that case.

Cases:
  nan-target         process 1 has a NaN target;
  constant-each      each process's rows are constant, with different values;
  constant-all       every row of every process is the same;
  above-sample       each process holds half of `all_rows`, together
                     more rows than the bin-edge sample;
  watched-on-0       only process 0 has an evaluation set (and early stopping);
  peer-leaves        process 1 kills itself (SIGKILL) after round 2 (process 0
                     has no callback);
  gather-64bit       no fit: prints ``ok`` and, as JSON, what
                     `exchanged_64bit_values` gives.
  categories         each process holds part of `category_rows` (a frame
                     with a category column; process 0 lacks one category,
                     process 1 another and lists them in reverse order).
  categories-differ  as ``categories``, but process 1's shops are numbers.
  groups             a ranking loss: each process holds whole queries of
                     `query_rows` (process 0 the first 23 of 40, ids in
                     order), given by ``qid``.
  custom-groups      as ``groups``, with a user's group loss (`listnet`:
                     lifted, its temperature a value of its programs).
  groups-absent      as ``groups`` without ``qid``: all rows one group.
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys

import numpy as np

import jaxboost as jb  # before any JAX operation

ABOVE_SAMPLE_ROWS = 220_000  # 2 x 110,000: more than the 200,000-row edge sample


def all_rows() -> tuple[np.ndarray, np.ndarray]:
    """The ``above-sample`` case's rows: ``(220000, 4)`` features, a target."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(ABOVE_SAMPLE_ROWS, 4)).astype(np.float32)
    y = X[:, 0] - 2.0 * X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=ABOVE_SAMPLE_ROWS)
    return X, y.astype(np.float32)


def category_rows(process_id: int | None = None) -> tuple[object, np.ndarray]:
    """The ``categories`` case's rows (all, or one process's): a frame of a
    category column ``shop`` (12 labels, a set effect) and two numbers, and
    the target.  Process 0 has no shop "l", process 1 no shop "a" and lists
    the shops in reverse order."""
    import pandas as pd

    rng = np.random.default_rng(5)
    shops = rng.integers(0, 12, 800)
    numbers = rng.normal(size=(800, 2)).astype(np.float32)
    y = np.isin(shops, [1, 4, 7, 10]) - 0.5 * np.isin(shops, [2, 3]) + numbers[:, 0]
    y = (y + 0.2 * rng.normal(size=800)).astype(np.float32)
    part_of = np.where(np.arange(800) < 400, 0, 1)
    keep = np.where(part_of == 0, shops != 11, shops != 0)
    if process_id is not None:
        keep &= part_of == process_id
    order = list("abcdefghijkl")[:: -1 if process_id == 1 else 1]
    labels = np.array(list("abcdefghijkl"), dtype=object)[shops[keep]]
    frame = pd.DataFrame({"shop": pd.Categorical(labels, categories=order)})
    frame["a"], frame["b"] = numbers[keep, 0], numbers[keep, 1]
    return frame, y[keep]


def query_rows(process_id: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``groups`` case's rows (all, or one process's): features,
    relevance 0 to 3, and query ids; 40 queries of 3 to 17 rows."""
    rng = np.random.default_rng(7)
    sizes = rng.integers(3, 18, 40)
    qid = np.repeat(np.arange(40), sizes)
    X = rng.normal(size=(qid.size, 3)).astype(np.float32)
    relevance = np.clip(np.round(X[:, 0] + 0.5 * rng.normal(size=qid.size) + 1), 0, 3)
    keep = slice(None)
    if process_id is not None:
        first = int(np.searchsorted(qid, 23))
        keep = slice(0, first) if process_id == 0 else slice(first, None)
    return X[keep], relevance[keep].astype(np.float32), qid[keep]


TEMPERATURE = 0.7  # the custom-groups case's ListNet's, read from this global


@jb.losses.declare(per="group")
def listnet(y, f, mask):
    """ListNet's cross-entropy of one query's softmaxes, scores over TEMPERATURE."""
    import jax
    import jax.numpy as jnp

    target = jax.nn.softmax(jnp.where(mask, y, -jnp.inf))
    scores = jax.nn.log_softmax(jnp.where(mask, f / TEMPERATURE, -jnp.inf))
    return -jnp.sum(jnp.where(mask, target * scores, 0.0))


def make_model(case: str = "") -> jb.Booster:
    if case in ("groups", "groups-absent"):
        return jb.Booster(loss=jb.losses.lambdarank(), n_estimators=3, max_depth=2)
    if case == "custom-groups":
        return jb.Booster(loss=listnet, n_estimators=3, max_depth=2)
    return jb.Booster(n_estimators=3, max_depth=2)


def watchers(case: str, process_id: int) -> dict:
    """``fit``'s evaluation set or callbacks for ``case`` in this process."""

    def leave(env) -> None:
        if env.iteration == 2:
            os.kill(os.getpid(), signal.SIGKILL)

    if case == "watched-on-0" and process_id == 0:
        X, y = rows(case, process_id)
        return {"eval_set": [(X[:50], y[:50])], "early_stopping_rounds": 2}
    if case == "peer-leaves" and process_id == 1:
        return {"callbacks": [leave]}
    if case in ("groups", "custom-groups"):
        return {"qid": query_rows(process_id)[2]}
    return {}


def exchanged_64bit_values(process_id: int) -> dict:
    """64-bit values that 32 bits would change, through ``gather`` and
    ``first_process_value``; floats as ``float.hex`` (exact)."""
    from jaxboost.runtime.distributed import first_process_value, gather

    big = np.array([2**40 + process_id, 2**64 - 1 - process_id], np.uint64)
    negative = np.array([[-(2**40) - process_id]], np.int64)
    third = np.array([1 / 3 + process_id], np.float64)  # not a float32
    first = first_process_value((np.int64(2**33 + process_id), np.float64(0.1 + process_id)))
    return {
        "uint64": [int(value) for value in gather(big)],
        "int64": gather(negative).tolist(),
        "float64": [float(value).hex() for value in gather(third)],
        "first": [int(first[0]), float(first[1]).hex()],
        "dtypes": [str(first[0].dtype), str(first[1].dtype)],
    }


def rows(case: str, process_id: int) -> tuple[np.ndarray, np.ndarray]:
    if case in ("groups", "custom-groups", "groups-absent"):
        return query_rows(process_id)[:2]
    if case in ("categories", "categories-differ"):
        X, y = category_rows(process_id)
        if case == "categories-differ" and process_id == 1:
            X["shop"] = X["shop"].cat.codes.astype(np.float32)
        return X, y
    if case == "above-sample":
        half = slice(process_id * ABOVE_SAMPLE_ROWS // 2, (process_id + 1) * ABOVE_SAMPLE_ROWS // 2)
        X, y = all_rows()
        return X[half], y[half]
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


_CASE_MARK = "case "  # a worker's line before each of several cases


def worker(args: argparse.Namespace) -> None:
    jb.distributed.initialize(args.coordinator, 2, args.process_id, cpu_devices=1)
    cases = args.case.split(",")
    for case in cases:
        output = args.output
        if len(cases) > 1:
            print(_CASE_MARK + case, flush=True)
            output = output and os.path.join(output, case)
            if output:
                os.makedirs(output, exist_ok=True)
        run_case(case, args.process_id, output)


def run_case(case: str, process_id: int, output: str | None) -> None:
    """One case in this worker: prints ``ok ...``, or ``error ...`` and exits 3."""
    if case == "gather-64bit":
        print("ok " + json.dumps(exchanged_64bit_values(process_id)), flush=True)
        return
    X, y = rows(case, process_id)
    try:
        model = make_model(case).fit(X, y, **watchers(case, process_id))
    except (ValueError, TypeError) as error:
        print(f"error {type(error).__name__}: {error}", flush=True)
        sys.exit(3)
    except RuntimeError as error:  # another process is gone
        print(f"error {type(error).__name__}: {error}", flush=True)
        os._exit(3)  # (sys.exit would wait for the coordination service's abort)
    if output:
        model.save(os.path.join(output, f"model_process{process_id}.json"))
    print(f"ok {model.train_loss_[-1]:.6f}", flush=True)


def last_lines(output: str, cases: list[str]) -> list[str]:
    """The last line a worker printed for each of ``cases`` ("" where none,
    "hung" where it never reached the case)."""
    lines = output.strip().splitlines() or [""]
    if len(cases) == 1:
        return [lines[-1]]
    found = {}
    for line in lines:
        if line.startswith(_CASE_MARK):
            current = line[len(_CASE_MARK) :]
            found[current] = ""
        elif found:
            found[current] = line
    return [found.get(case, "hung") for case in cases]


def launch(args: argparse.Namespace) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    output = ("--output", args.output) if args.output else ()
    workers = [
        subprocess.Popen(
            [sys.executable, __file__, "--case", args.case, "--process-id", str(process_id),
             "--coordinator", f"127.0.0.1:{port}", *output],
            env={**os.environ, "JAXBOOST_CPU_DEVICES": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for process_id in range(2)
    ]  # fmt: skip
    cases = args.case.split(",")
    results = []  # per worker, per case
    for process in workers:
        try:
            output, _ = process.communicate(timeout=args.timeout)
            results.append(
                [{"code": process.returncode, "last": last} for last in last_lines(output, cases)]
            )
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            results.append([{"code": None, "last": "hung"} for _ in cases])
    by_case = {case: [worker[i] for worker in results] for i, case in enumerate(cases)}
    print(json.dumps(by_case[cases[0]] if len(cases) == 1 else by_case))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", required=True)
    parser.add_argument("--process-id", type=int)
    parser.add_argument("--coordinator")
    parser.add_argument("--output", help="folder for the workers' models")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    if args.process_id is None:
        launch(args)
    else:
        worker(args)


if __name__ == "__main__":
    main()
