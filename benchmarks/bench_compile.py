"""Compile time and size of a fit's programs, per setting.

Each setting fits a 2000 x 20 table in a fresh process with jaxboost's
persistent compilation cache off, and prints, per program JAX compiled
(its ``jit`` name), the seconds JAX's monitoring events report for tracing,
lowering to StableHLO and XLA's backend compile.  ``--hlo`` runs each
setting a second time with XLA dumping its programs and prints the op count
of the largest (the trees' program) before XLA's optimisations (the
lowered program) and after (the compiled one), and with ``--lines N`` the N
source lines of jaxboost that lowered to the most ops (from the HLO
metadata).  Op counts do not depend on the machine's load; times do (run A/B
alternately, pinned: ``taskset -c 0``).

    python benchmarks/bench_compile.py [--settings default6,fused6] [--hlo] [--lines 15]

Settings: ``default4/6/8`` (squared error, default settings, depth 4/6/8:
a fit of at most 262,144 rows, run round by round), ``logloss6``,
``categorical6`` (two categorical columns of 50 and 200 levels),
``lossguide`` (``grow_policy="lossguide"``, 31 leaves, depth 8),
``fused6`` (the default fit's fused program, as fits of more than 262,144
rows compile it).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

N_ROWS, N_FEATURES = 2000, 20
SETTINGS = {
    "default4": {"max_depth": 4},
    "default6": {},
    "default8": {"max_depth": 8},
    "logloss6": {"loss": "binary_logloss"},
    "categorical6": {"categorical_features": [0, 1]},
    "lossguide": {"grow_policy": "lossguide", "max_depth": 8},
    "fused6": {},
}
_EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    "/jax/core/compile/backend_compile_duration": "compile",
}
# an HLO instruction line: "  [ROOT ]%name = type op(...)"
_INSTRUCTION = re.compile(r"^\s+(?:ROOT )?%?[\w.\-]+ = ")
_FRAME = re.compile(r"stack_frame_id=(\d+)")
_TABLE_ROW = re.compile(r"^(\d+) (.*)$")


def _table(name: str, seed: int = 0):
    """``(X, y)``: 2000 x 20 float32 features (the first two category codes
    of 50 and 200 levels in ``categorical6``) and the setting's targets."""
    import numpy as np

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N_ROWS, N_FEATURES)).astype(np.float32)
    X[rng.random(X.shape) < 0.02] = np.nan
    if name == "categorical6":
        X[:, 0] = rng.integers(0, 50, N_ROWS)
        X[:, 1] = rng.integers(0, 200, N_ROWS)
    y = np.nan_to_num(X[:, 2]) - 0.5 * np.nan_to_num(X[:, 3]) ** 2 + rng.standard_normal(N_ROWS)
    if name == "logloss6":
        y = (y > 0).astype(np.float32)
    return X, y.astype(np.float32)


def _child(name: str) -> None:
    """Fit setting ``name`` and print ``{program: {trace, lower, compile}}`` as JSON."""
    import jax

    import jaxboost as jb
    from jaxboost.frontends.training import (
        compile_ahead,
        hessian_probe,
        initial_score_search,
        program_settings,
        round_by_round,
    )

    seconds = collections.defaultdict(lambda: collections.defaultdict(float))
    last_event = [time.process_time()]

    def listen(event: str, duration: float, fun_name: str = "?", **_) -> None:
        if event in _EVENTS:
            seconds[fun_name][_EVENTS[event]] += duration
            # the process's CPU seconds since the last event (its lowering):
            # XLA's compile on every thread, less sensitive to load than wall time
            now = time.process_time()
            if _EVENTS[event] == "compile":
                seconds[fun_name]["compile_cpu"] += now - last_event[0]
            last_event[0] = now

    jax.monitoring.register_event_duration_secs_listener(listen)
    if name.startswith("fused"):  # as a fit of more than FAST_COMPILE_ROWS rows
        # (every module that reads it: booster no longer does)
        for module in (
            compile_ahead,
            hessian_probe,
            initial_score_search,
            program_settings,
            round_by_round,
        ):
            module.FAST_COMPILE_ROWS = 0
    X, y = _table(name)
    start = time.perf_counter()
    jb.Booster(n_estimators=2, **SETTINGS[name]).fit(X, y)
    wall = time.perf_counter() - start
    print(json.dumps({"wall": wall, "programs": seconds}))


def _run_child(name: str, dump: str | None) -> dict:
    env = dict(os.environ, JAXBOOST_COMPILATION_CACHE="off")
    if dump is not None:
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_dump_to={dump} --xla_dump_hlo_as_text"
    done = subprocess.run(
        [sys.executable, __file__, "--child", name],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{name}: the fit failed\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _instructions(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if _INSTRUCTION.match(line)]


def _frame_sources(text: str) -> dict[str, str]:
    """``{stack_frame_id: "file:line (function)"}`` of a dumped module's
    stack frame tables, each frame named by its innermost call."""
    tables, table = {}, None
    for line in text.splitlines():
        if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            table = tables.setdefault(line, {})
        elif table is not None and (row := _TABLE_ROW.match(line)):
            table[row.group(1)] = row.group(2)
        elif line and not line[0].isdigit():
            table = None

    def field(row: str, name: str) -> str:
        return re.search(rf"{name}=(\d+)", row).group(1)

    sources = {}
    for frame, row in tables.get("StackFrames", {}).items():
        location = tables["FileLocations"][field(row, "file_location_id")]
        path = tables["FileNames"][field(location, "file_name_id")].strip('"')
        function = tables["FunctionNames"][field(location, "function_name_id")].strip('"')
        short = path.split("jaxboost/", 1)[-1] if "jaxboost/" in path else path
        sources[frame] = f"{short}:{field(location, 'line')} ({function})"
    return sources


def hlo_sizes(dump: str, n_lines: int) -> dict:
    """The largest dumped program's name, op counts before and after XLA's
    optimisations, and its ``n_lines`` jaxboost source lines of most ops
    (before optimisations)."""
    befores = list(Path(dump).glob("*.before_optimizations.txt"))
    largest = max(befores, key=lambda path: len(_instructions(path)))
    after = Path(str(largest).replace("before_optimizations", "cpu_after_optimizations"))
    sources = _frame_sources(largest.read_text())
    lines = collections.Counter()
    for line in _instructions(largest):
        match = _FRAME.search(line)
        lines[sources.get(match.group(1), "?") if match else "(no source)"] += 1
    return {
        "program": largest.name.split(".")[1],
        "ops_lowered": len(_instructions(largest)),
        "ops_compiled": len(_instructions(after)) if after.exists() else -1,
        "top_lines": lines.most_common(n_lines),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--hlo", action="store_true", help="also count the programs' HLO ops")
    parser.add_argument("--lines", type=int, default=0, help="source lines of most ops to list")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child)
        return
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M')}  load {os.getloadavg()[0]:.1f}  "
        f"cores {len(os.sched_getaffinity(0))}"
    )
    header = ("setting", "program", "trace", "lower", "compile", "cpu", "ops lowered", "compiled")
    print("{:<14}{:<22}{:>7}{:>7}{:>9}{:>7}{:>13}{:>10}".format(*header))
    for name in args.settings.split(","):
        result = _run_child(name, None)
        programs = sorted(result["programs"].items(), key=lambda kv: -kv[1].get("compile", 0))
        total = collections.Counter()
        for _, times in programs:
            total.update(times)
        sizes = {}
        if args.hlo:
            with tempfile.TemporaryDirectory() as dump:
                _run_child(name, dump)
                sizes = hlo_sizes(dump, args.lines)
        for program, times in [programs[0], ("all programs", total)]:
            print(
                f"{name:<14}{program[:21]:<22}{times.get('trace', 0):>7.2f}"
                f"{times.get('lower', 0):>7.2f}{times.get('compile', 0):>9.2f}"
                f"{times.get('compile_cpu', 0):>7.2f}"
                + (
                    f"{sizes.get('ops_lowered', ''):>13}{sizes.get('ops_compiled', ''):>10}"
                    if program != "all programs"
                    else f"   (fit {result['wall']:.1f} s)"
                )
            )
        for source, count in sizes.get("top_lines", []):
            print(f"{'':<16}{count:>6}  {source}")


if __name__ == "__main__":
    main()
