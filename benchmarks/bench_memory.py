"""Peak memory of one fit of jaxboost, LightGBM, XGBoost and scikit-learn HGB.

Same data and settings as ``bench_fit.py`` (``_common.make_data`` and its fit
functions).  Each library is fitted in a fresh subprocess (this script run
again with the hidden ``--child LIB``), which generates the float32 training
rows and imports the libraries (the jaxboost child also starts JAX's CPU
backend: its threads and devices are not fit memory), then:

1. resets the kernel's peak-RSS counter (``5`` written to
   ``/proc/self/clear_refs`` sets ``VmHWM`` back to the current ``VmRSS``;
   Linux only) and reads ``VmRSS`` from ``/proc/self/status`` as the baseline;
2. fits (jaxboost: its first fit, compilation included);
3. reads ``VmHWM``, the peak resident memory since the reset.

``extra = VmHWM - baseline`` is the memory the fit needed beyond the data it
was given, also shown in units of the float32 feature matrix (rows x 28 x 4
bytes).  The project's target is jaxboost's extra <= 2x that matrix.  The
jaxboost child then fits a second time (compiled, nothing to compile), reset
and measured the same way, which separates the compiler's memory from the
memory that grows with the data.

The baseline includes the libraries' code (every child imports
``bench_fit``, hence jax and jaxboost), X, y and, for jaxboost, the started
CPU backend; peaks are of resident memory (RSS), so pages allocated but never
touched do not count.

JAX's CPU allocator: XLA's CPU client takes each buffer from the C heap (an
aligned ``malloc``) and frees it when the last reference goes; there is no
pool and no preallocation, so RSS follows the live buffers, plus what the C
library keeps for reuse (hence the second fit's higher baseline).
``XLA_PYTHON_CLIENT_PREALLOCATE``, ``XLA_PYTHON_CLIENT_MEM_FRACTION`` and
``XLA_PYTHON_CLIENT_ALLOCATOR`` are read only when JAX builds a GPU client
(``generate_pjrt_gpu_plugin_options`` in ``jaxlib/xla_client.py``), so they
change nothing on CPU (checked: the same peaks with ``PREALLOCATE=true``,
``MEM_FRACTION=0.9``, ``ALLOCATOR=bfc``).

    python benchmarks/bench_memory.py                            # 1M rows, 100 rounds
    python benchmarks/bench_memory.py --rows 100000 --rounds 10  # quick check
    python benchmarks/bench_memory.py --libs jaxboost,lightgbm   # a subset
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
from pathlib import Path

import jax
from _common import N_FEATURES, command_line, make_data, print_environment, print_table
from bench_fit import LABELS, LIBRARIES, PACKAGES, add_libs_option, add_threads_option, fit

MIB = 2**20
RESULT_PREFIX = "bench_memory result: "  # marks the child's answer among library output


def status_bytes(field: str) -> int:
    """A ``kB`` field of ``/proc/self/status`` (``VmRSS``, ``VmHWM``) in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field} field")


def reset_peak_rss() -> int:
    """Set the peak-RSS counter (``VmHWM``) to the current RSS; return that RSS."""
    gc.collect()
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
    except OSError as error:
        raise SystemExit(
            f"bench_memory needs Linux's /proc/self/clear_refs to reset the peak RSS: {error}"
        ) from None
    return status_bytes("VmRSS")


def measure_fit(name, X, y, args) -> dict:
    """Baseline RSS and peak RSS (bytes) of one fit of library ``name``."""
    baseline = reset_peak_rss()
    timing = fit(name, X, y, args)
    peak = status_bytes("VmHWM")
    seconds = timing.seconds
    del timing  # and the model with it
    return {"baseline": baseline, "peak": peak, "seconds": seconds}


def child(args) -> None:
    """Measure library ``args.child`` in this (fresh) process; print the result as JSON."""
    X, y, logit = make_data(args.rows, args.seed)
    del logit  # only X and y are kept, and made before the baseline is read
    if args.child == "jaxboost":
        jax.devices()  # start the CPU backend (threads, device objects) before the baseline
    results = [{"library": LABELS[args.child], **measure_fit(args.child, X, y, args)}]
    if args.child == "jaxboost":
        results[0]["library"] = "jaxboost, first fit (compiles)"
        second = measure_fit(args.child, X, y, args)
        results.append({"library": "jaxboost, second fit (compiled)", **second})
    print(RESULT_PREFIX + json.dumps(results))


def run_child(name, args) -> list[dict]:
    """Run this script with ``--child name`` in a fresh process; return its results."""
    command = [sys.executable, __file__, "--child", name]
    command += ["--rows", str(args.rows), "--rounds", str(args.rounds)]
    command += ["--seed", str(args.seed), "--threads", str(args.threads)]
    try:
        done = subprocess.run(command, check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as error:
        sys.stderr.write(error.stdout + error.stderr)
        raise
    answer = [line for line in done.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    return json.loads(answer[-1][len(RESULT_PREFIX) :])


def print_results(results, matrix_bytes: int) -> None:
    """Markdown table of the children's results, extra memory also in units of
    the float32 feature matrix."""
    rows = []
    for result in results:
        extra = result["peak"] - result["baseline"]
        rows.append(
            [
                result["library"],
                f"{result['baseline'] / MIB:.0f}",
                f"{result['peak'] / MIB:.0f}",
                f"{extra / MIB:.0f}",
                f"{extra / matrix_bytes:.2f}x",
            ]
        )
    print_table(
        ["library", "baseline RSS MiB", "peak during fit MiB", "extra MiB", "extra / float32 X"],
        rows,
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="training rows")
    parser.add_argument("--rounds", type=int, default=100, help="boosting rounds")
    add_libs_option(parser)
    add_threads_option(parser)
    parser.add_argument("--seed", type=int, default=0, help="data seed")
    parser.add_argument("--child", choices=LIBRARIES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return

    command = command_line(argv)
    print_environment(command, PACKAGES)
    matrix_bytes = args.rows * N_FEATURES * 4
    print(
        f"data:         {args.rows} x {N_FEATURES} float32 (X: {matrix_bytes / MIB:.1f} MiB), "
        f"{args.rounds} rounds, depth 6, 255 bins, log loss; threads {args.threads}; "
        "one fresh process per library"
    )
    results = []
    for name in args.libs:
        for result in run_child(name, args):
            print(
                f"{result['library']}: peak {result['peak'] / MIB:.0f} MiB, "
                f"fit {result['seconds']:.2f} s",
                flush=True,
            )
            results.append(result)
    print()
    print_results(results, matrix_bytes)  # and a blank line
    print("target: jaxboost's extra <= 2x the float32 X")
    print(f"command: {command}")


if __name__ == "__main__":
    main()
