"""A scikit-learn grid search of a catalogue loss's parameter, first in its process.

A 3-fold ``GridSearchCV`` over four ``loss__alpha`` values of
``Regressor(loss="quantile", n_estimators=200, max_depth=3,
learning_rate=0.05)`` on scikit-learn's diabetes: 13 fits (12 folds and
the refit).  ``--lib lightgbm`` runs LightGBM's same search (``alpha``,
one thread).  Prints the search's wall and CPU (process) seconds, and for
jaxboost the programs compiled and their trace, lower and compile seconds.
Run it with ``JAXBOOST_COMPILATION_CACHE=off`` for the cold figure, one
process per run:

    JAXBOOST_COMPILATION_CACHE=off python benchmarks/bench_grid_search.py
    python benchmarks/bench_grid_search.py --lib lightgbm
"""

import argparse
import collections
import time

from sklearn.datasets import load_diabetes
from sklearn.model_selection import GridSearchCV

ALPHAS = [0.1, 0.3, 0.5, 0.9]
SETTINGS = {"n_estimators": 200, "max_depth": 3, "learning_rate": 0.05}
_EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    "/jax/core/compile/backend_compile_duration": "compile",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", choices=["jaxboost", "lightgbm"], default="jaxboost")
    lib = parser.parse_args().lib
    X, y = load_diabetes(return_X_y=True)
    seconds = collections.Counter()
    if lib == "jaxboost":
        import jax

        import jaxboost as jb

        def on_event(event, duration, **_):
            if event in _EVENTS:
                seconds[_EVENTS[event]] += duration
                seconds["n_" + _EVENTS[event]] += 1

        jax.monitoring.register_event_duration_secs_listener(on_event)
        search = GridSearchCV(
            jb.Regressor(loss="quantile", **SETTINGS), {"loss__alpha": ALPHAS}, cv=3
        )
    else:
        import lightgbm as lgb

        model = lgb.LGBMRegressor(objective="quantile", verbose=-1, n_jobs=1, **SETTINGS)
        search = GridSearchCV(model, {"alpha": ALPHAS}, cv=3)
    wall, cpu = time.perf_counter(), time.process_time()
    search.fit(X, y)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    programs = ""
    if seconds:
        programs = (
            f"; {seconds['n_compile']} programs compiled: trace {seconds['trace']:.2f} s, "
            f"lower {seconds['lower']:.2f} s, compile {seconds['compile']:.2f} s"
        )
    print(f"{lib} search: {wall:.2f} s wall, {cpu:.2f} s CPU{programs}")


if __name__ == "__main__":
    main()
