"""What running round by round costs a fit whose programs are compiled.

Fits of at most 262,144 rows with Newton leaves run each round as two
programs (a small one per loss, a loss-free tree program), which saves
compiling the fused program for every new loss but costs a dispatch per
program (docs/performance.md).  This times warm fits (the same loss object,
programs compiled) both ways, at several row counts: log-cosh, 20 features,
100 rounds of depth 6, the devices jaxboost picks; the two paths alternate,
best of ``--repeat``.

    python benchmarks/bench_round_paths.py
    python benchmarks/bench_round_paths.py --rows 5000 50000
"""

from __future__ import annotations

import argparse
import sys

import jax.numpy as jnp
from _common import make_regression, print_header, print_table, timed

import jaxboost as jb
from jaxboost.frontends.training import round_by_round

ROUND_BY_ROUND = round_by_round.runs_round_by_round


def warm_seconds(X, y, path: str) -> float:
    """A fit's seconds on ``path`` (``"round by round"`` or ``"fused"``),
    after one fit that compiles its programs."""
    round_by_round.runs_round_by_round = (
        ROUND_BY_ROUND if path == "round by round" else (lambda cfg: False)
    )
    model = jb.Booster(loss=_log_cosh, n_estimators=100, max_depth=6)
    model.fit(X, y)
    return timed(model.fit, X, y).seconds


def _log_cosh(y, f):
    return jnp.logaddexp(f - y, y - f)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[5000, 50000, 150000, 262000])
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    print_header(argv if argv is not None else sys.argv[1:], packages=[])
    rows = []
    for n_rows in args.rows:
        X, y = make_regression(n_rows, 0)
        paths = ("round by round", "fused")
        best = dict.fromkeys(paths, float("inf"))
        for _ in range(args.repeat):
            for path in paths:
                best[path] = min(best[path], warm_seconds(X, y, path))
        slower = best["round by round"] / best["fused"] - 1
        rows.append(
            (n_rows, f"{best['round by round']:.3f} s", f"{best['fused']:.3f} s", f"{slower:+.0%}")
        )
    round_by_round.runs_round_by_round = ROUND_BY_ROUND
    print_table(["rows", "round by round", "fused", "round by round slower by"], rows)


if __name__ == "__main__":
    main()
