"""Two jaxboost versions' group-loss fits on rank.train, alternating, beside
LightGBM on one thread: the CPU seconds a loaded machine still compares.

    python benchmarks/bench_ranking_ab.py --old /path/to/old/.venv/bin/python

Each version is a process of its own (``--old`` and ``--new`` name their
Python; each imports the jaxboost installed beside it) that loads
LightGBM's ``rank.train`` (``--data``) once, fits once to compile, then
answers fits one at a time; the script asks the two in turn (old, new, then
new, old...), ``--repeat`` times a loss, and LightGBM's ``lambdarank`` (one
thread, the same settings) after each pair.  It prints the median wall and
CPU (process time) seconds of each, and the median of the pairs' new/old
ratios.  Settings: ``bench_ranking.py``'s (100 rounds, depth 6, learning rate
0.1, 255 bins, L2 1, least child hessian 1e-3); ``sweep`` is
``bench_sweep.py --ranking``'s ListNet with a temperature (a new value every
fit, 200 rounds, depth 3, learning rate 0.05) beside LightGBM at those.
"""

from __future__ import annotations

import argparse
import functools
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"
LOSSES = ("lambdarank", "listnet", "ranknet", "sweep")


def serve(data: Path) -> None:
    """Answer ``loss [value]`` lines with ``wall cpu last_train_loss``."""
    import jax
    import jax.numpy as jnp
    import lightgbm as lgb
    import numpy as np
    from sklearn.datasets import load_svmlight_file

    import jaxboost as jb

    X, y = load_svmlight_file(str(data / "rank.train"), n_features=300, zero_based=False)
    X, y = np.ascontiguousarray(X.toarray(), np.float32), y.astype(np.float32)
    sizes = np.loadtxt(data / "rank.train.query", dtype=np.int64)

    def listnet(y, f, mask, t):
        target = jax.nn.softmax(jnp.where(mask, y, -jnp.inf))
        scores = jnp.where(mask, f / t, -jnp.inf)
        return -jnp.sum(jnp.where(mask, target * jax.nn.log_softmax(scores), 0.0))

    def fit(name: str, value: float) -> float:
        rounds, depth, rate = (200, 3, 0.05) if name.startswith("sweep") else (100, 6, 0.1)
        if name.startswith("lightgbm"):
            params = {
                "objective": "lambdarank",
                "max_depth": depth,
                "num_leaves": 2**depth,
                "learning_rate": rate,
                "max_bin": 255,
                "num_threads": 1,
                "lambda_l2": 1.0,
                "min_sum_hessian_in_leaf": 1e-3,
                "min_data_in_leaf": 1,
                "verbose": -1,
            }
            train = lgb.Dataset(X, label=y, group=sizes, params={"max_bin": 255, "verbose": -1})
            lgb.train(params, train, num_boost_round=rounds)
            return 0.0
        if name == "sweep":
            bound = functools.partial(listnet, t=value)
            loss = jb.losses.declare(bound, name="listnet", per="group")
            settings = {}
        else:
            loss = {
                "lambdarank": jb.losses.lambdarank(k=30),
                "listnet": jb.losses.listnet,
                "ranknet": jb.losses.ranknet(),
            }[name]
            settings = {"max_bins": 255, "reg_lambda": 1.0, "min_child_weight": 1e-3}
        model = jb.Booster(
            loss=loss, n_estimators=rounds, max_depth=depth, learning_rate=rate, **settings
        )
        return float(model.fit(X, y, group=sizes).train_loss_[-1])

    for line in sys.stdin:
        name, value = line.split()
        cpu, wall = time.process_time(), time.perf_counter()
        last = fit(name, float(value))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(f"{wall:.4f} {cpu:.4f} {last:.6f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", required=True, help="the old version's python")
    parser.add_argument("--new", default=sys.executable, help="the new version's python")
    parser.add_argument("--losses", nargs="+", default=list(LOSSES), choices=LOSSES)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--data", type=Path, default=DATA_DIR, help="folder of rank.train")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args.data)
    command = [__file__, "--serve", "--old", "-", "--data", str(args.data)]
    versions = {
        name: subprocess.Popen(
            [python, *command], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for name, python in (("old", args.old), ("new", args.new))
    }

    def ask(version: str, name: str, value: float) -> list[float]:
        versions[version].stdin.write(f"{name} {value}\n")
        versions[version].stdin.flush()
        return [float(part) for part in versions[version].stdout.readline().split()]

    draw = random.Random(time.time_ns())
    for name in args.losses:
        peer = "lightgbm_sweep" if name == "sweep" else "lightgbm"
        found: dict[str, list] = {"old": [], "new": [], peer: []}
        for repeat in range(args.repeat + 1):  # the first fits compile
            value = 0.5 + draw.random()  # a temperature new to the machine
            for version in ("old", "new") if repeat % 2 else ("new", "old"):
                found[version].append(ask(version, name, value))
            found[peer].append(ask("new", peer, value))
        for version, fits in found.items():
            wall = statistics.median(fit[0] for fit in fits[1:])
            cpu = statistics.median(fit[1] for fit in fits[1:])
            print(f"{name:10s} {version:14s} wall {wall:.3f} s  cpu {cpu:.3f} s", flush=True)
        pairs = list(zip(found["new"][1:], found["old"][1:]))
        ratio = [statistics.median(new[i] / old[i] for new, old in pairs) for i in (0, 1)]
        losses = found["old"][-1][2], found["new"][-1][2]
        print(f"{name:10s} new/old wall {ratio[0]:.3f}, cpu {ratio[1]:.3f}; last loss {losses}")
    for process in versions.values():
        process.stdin.close()
        process.wait()


if __name__ == "__main__":
    main()
