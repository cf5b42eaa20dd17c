"""Helpers shared by the benchmark scripts (not a benchmark itself).

The HIGGS-like data of every script (``make_data``) and the regression data of
``bench_custom_loss.py`` and ``bench_friedman.py``; the run header (date,
machine, versions, command line) in its two layouts; timing of a call with the
compile time JAX reports during it, alternating best-of-N timing of peers, the
load average; markdown tables; and the settings of jaxboost, LightGBM and
XGBoost that ``bench_fit.py`` compares (depth 6, 255 bins, learning rate 0.1,
L2 1, least child hessian 1e-3), which the other scripts reuse.

Scripts run as ``python benchmarks/NAME.py``, so ``benchmarks/`` is on
``sys.path`` and ``from _common import ...`` works.  Importing this module
imports jaxboost first, before any JAX operation (it exposes the CPU cores as
JAX devices).
"""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np

# importing jax runs no JAX operation; jaxboost must come before any (it
# exposes the CPU cores as devices)
import jaxboost as jb

N_FEATURES = 28
N_LOW_LEVEL = 21  # like HIGGS: 21 "measured" features, 7 derived from them

# Regression targets: the generating log-odds of make_data plus heavy-tailed
# noise (Student-t with 2 degrees of freedom, infinite variance), scaled so
# that about 40% of the residuals at the initial score exceed 1 (the Huber
# delta): most rows still have curvature.
NOISE_SCALE = 0.5
NOISE_DF = 2

# the distribution behind a short name in the printed versions
DISTRIBUTIONS = {"sklearn": "scikit-learn"}

# JAX reports the time it spends tracing, lowering and compiling each program;
# summing those events measures compilation directly, beside first - warm.
COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)
_compile_seconds = [0.0]


def _on_duration(event: str, seconds: float, **_: object) -> None:
    """Add JAX's trace, lower and compile durations to the running total."""
    if event in COMPILE_EVENTS:
        _compile_seconds[0] += seconds


jax.monitoring.register_event_duration_secs_listener(_on_duration)


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


def make_regression(n_rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(n_rows, 28)`` float32 features of ``make_data`` and float32 targets:
    its noise-free generating log-odds plus ``NOISE_SCALE`` x Student-t
    (``NOISE_DF``) noise, drawn from a stream of its own."""
    X, _, logit = make_data(n_rows, seed)
    noise = NOISE_SCALE * np.random.default_rng([seed, 1]).standard_t(NOISE_DF, n_rows)
    return X, (logit + noise).astype(np.float32)


def split_rows(n_train: int, *arrays: np.ndarray) -> list[np.ndarray]:
    """``[a[:n_train], a[n_train:], b[:n_train], ...]`` for every array."""
    return [part for array in arrays for part in (array[:n_train], array[n_train:])]


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask, where known)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def load_average() -> float:
    """The 1-minute load average of the machine."""
    return os.getloadavg()[0]


def command_line(argv: Sequence[str] | None) -> str:
    """The command that ran this script, ready to paste into a shell."""
    arguments = sys.argv[1:] if argv is None else list(argv)
    return "python " + shlex.join([sys.argv[0], *arguments])


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(DISTRIBUTIONS.get(name, name))
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def versions(names: Iterable[str]) -> str:
    """``"name version, ..."`` for each package (a distribution name, or a
    short name of :data:`DISTRIBUTIONS`)."""
    return ", ".join(f"{name} {_version(name)}" for name in names)


def _machine_details() -> str:
    """CPU model and total memory from /proc (Linux), or ``platform.processor()``."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
        meminfo = Path("/proc/meminfo").read_text().splitlines()
    except OSError:
        return platform.processor() or "unknown CPU"
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo if "model name" in line), "")
    total_kib = next((int(line.split()[1]) for line in meminfo if line.startswith("MemTotal")), 0)
    return f"{model or 'unknown CPU'}, {total_kib / 2**20:.0f} GiB memory"


def _print_fields(width: int, **fields: str) -> None:
    """Print ``name:`` padded to ``width`` characters, then the value, a line each."""
    for name, value in fields.items():
        print(f"{name + ':':<{width}}{value}")


def _now() -> str:
    return datetime.datetime.now().isoformat(timespec="seconds")


def _platform() -> str:
    return f"{platform.platform()}, {platform.machine()}"


def print_header(
    argv: Sequence[str] | None, packages: Sequence[str], show_devices: bool = True
) -> None:
    """Print the command line, date, machine, cores, package versions and load.

    ``show_devices`` also prints ``jax.devices()``, which initialises JAX's
    backend (leave it off in a process that only starts others).
    """
    _print_fields(
        10,
        command=command_line(argv),
        date=_now(),
        machine=_platform(),
        cores=f"{os.cpu_count()} visible, {usable_cores()} usable (sched_getaffinity)",
        python=platform.python_version(),
        versions=versions(["jax", "jaxlib", "jaxboost", "numpy", *packages]),
    )
    if show_devices:
        print(f"jax.devices(): {jax.devices()}")
    print(f"load:     {load_average():.2f} (1-minute average)", flush=True)


def print_environment(command: str, packages: Sequence[str]) -> None:
    """The command, date, machine (CPU, memory, cores) and the versions of
    python and ``packages``: the head of ``bench_fit.py``'s and
    ``bench_memory.py``'s reports, in their wider layout."""
    _print_fields(
        14,
        command=command,
        date=_now(),
        machine=f"{_platform()}, {_machine_details()}, "
        f"{os.cpu_count()} cores visible, {usable_cores()} usable",
        versions=f"python {platform.python_version()}, {versions(packages)}",
    )


@dataclass
class Timed:
    """What :func:`timed` measured: the call's result and wall time, the JAX
    compile time reported during it, and the load average before it."""

    value: Any
    seconds: float
    compile_seconds: float
    load: float


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Timed:
    """Call ``fn`` once and time it (wall clock).

    ``fn`` must return host values (numpy), so the time covers the work:
    jaxboost's ``fit`` and ``predict_raw`` do.
    """
    load = load_average()
    compiled_before = _compile_seconds[0]
    start = time.perf_counter()
    value = fn(*args, **kwargs)
    seconds = time.perf_counter() - start
    return Timed(value, seconds, _compile_seconds[0] - compiled_before, load)


def report(label: str, timing: Timed) -> None:
    """Print one timed call: seconds, load before it, JAX compile events."""
    print(
        f"  {label:<44} {timing.seconds:9.3f} s  (load {timing.load:.1f})"
        f"  [JAX compile events {timing.compile_seconds:.2f} s]",
        flush=True,
    )


def timed_report(label: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Timed:
    """:func:`timed`, then :func:`report` under ``label``."""
    timing = timed(fn, *args, **kwargs)
    report(label, timing)
    return timing


def best_of(calls: dict[str, Callable[[], Any]], repeat: int) -> dict[str, Timed]:
    """Time every call ``repeat`` times, alternating between them so that on a
    shared machine all see similar load; keep each one's fastest run."""
    best: dict[str, Timed] = {}
    for _ in range(repeat):
        for name, call in calls.items():
            timing = timed_report(name, call)
            if name not in best or timing.seconds < best[name].seconds:
                best[name] = timing
    return best


def compile_summary(name: str, first: Timed, warm: Timed) -> str:
    """``compile ~= first - warm`` and the compile events of both calls."""
    return (
        f"{name} compile ~= first - warm = {first.seconds:.2f} - {warm.seconds:.2f} = "
        f"{first.seconds - warm.seconds:.2f} s; JAX compile events: first call "
        f"{first.compile_seconds:.2f} s, warm call {warm.compile_seconds:.2f} s"
    )


def print_table(
    headers: Sequence[str], rows: Iterable[Sequence[object]], blank_line: bool = True
) -> None:
    """Print a markdown table (cells formatted with ``str``), then a blank line
    unless ``blank_line`` is false."""
    print("| " + " | ".join(headers) + " |")
    print("|" + " --- |" * len(headers))
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |")
    if blank_line:
        print(flush=True)


def jaxboost_booster(
    loss: Any, rounds: int, devices: Sequence[jax.Device] | None = None, **extra: Any
) -> jb.Booster:
    """An unfitted jaxboost ``Booster`` with ``bench_fit.py``'s settings: depth
    6, learning rate 0.1, 255 bins, L2 1 (its default least child hessian 1e-3),
    on ``devices`` (default: all), no least rows in a child (the peers'
    ``min_data_in_leaf=1``); ``extra`` are further ``Booster`` arguments."""
    return jb.Booster(
        loss=loss,
        n_estimators=rounds,
        learning_rate=0.1,
        max_depth=6,
        max_bins=255,
        reg_lambda=1.0,
        devices=devices,
        **{"min_child_samples": 0, **extra},
    )


def xgboost_params(threads: int, **extra: Any) -> dict[str, Any]:
    """XGBoost ``hist`` settings matched to ``bench_fit.py``'s: depth 6, 255
    bins, eta 0.1, L2 1, least hessian sum in a child 1e-3 (XGBoost's default
    is 1; jaxboost's and LightGBM's is 1e-3)."""
    return {
        "tree_method": "hist",
        "max_depth": 6,
        "max_bin": 255,
        "eta": 0.1,
        "lambda": 1.0,
        "min_child_weight": 1e-3,
        "nthread": threads,
        "seed": 0,
        "verbosity": 0,
        **extra,
    }


def lightgbm_params(threads: int, objective: Any) -> dict[str, Any]:
    """LightGBM settings of ``bench_fit.py`` with any objective (a
    name or, in LightGBM 4, a callable ``fobj(preds, train_data) -> (grad,
    hess)``)."""
    return {
        "objective": objective,
        "max_depth": 6,
        "num_leaves": 64,
        "learning_rate": 0.1,
        "max_bin": 255,
        "num_threads": threads,
        "lambda_l2": 1.0,
        "min_sum_hessian_in_leaf": 1e-3,
        "min_data_in_leaf": 1,
        "verbose": -1,
        "seed": 0,
    }


def lightgbm_dataset(X: np.ndarray, y: np.ndarray, init_score: float | None = None) -> Any:
    """A LightGBM ``Dataset`` binned with 255 bins (built lazily by ``lgb.train``,
    so its binning is inside the timed training); ``init_score`` starts every
    row from that constant."""
    import lightgbm as lgb  # only the scripts that compare with LightGBM need it

    start = None if init_score is None else np.full(len(y), init_score)
    return lgb.Dataset(X, label=y, init_score=start, params={"max_bin": 255, "verbose": -1})
