"""4 rounds and then 6 more give the trees of one 10-round fit, with XLA's
CPU code optimised as users' is (the test suite compiles at -O0, where no
multiply and add are contracted into one FMA); exit 1 if they differ.

Run in its own process: ``python tests/scripts/continued_optimised.py``.
"""

import sys

import numpy as np

import jaxboost as jb


def main() -> int:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 4)).astype(np.float32)
    y = (X[:, 0] + np.sin(X[:, 1]) + 0.3 * rng.normal(size=1500)).astype(np.float32)
    longer = jb.Booster(n_estimators=10, max_depth=3).fit(X, y)
    first = jb.Booster(n_estimators=4, max_depth=3).fit(X, y)
    continued = jb.Booster(n_estimators=6, max_depth=3).fit(X, y, init_model=first)
    same = all(np.array_equal(a, b) for a, b in zip(longer.forest_, continued.forest_))
    print(f"same trees: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
