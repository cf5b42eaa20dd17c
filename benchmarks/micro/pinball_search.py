"""Iterations of the line search for one pinball leaf, simulated in numpy.

The search of ``jaxboost.engine.line_search.minimise_scalar`` for a loss with no
curvature (two points per iteration cutting the bracket threefold, until it
is below float32 resolution of its ends or 1e-7 of its first width) against a
regula-falsi variant (two points at the secant estimate of the slope's root
plus and minus a tenth of the bracket, widened when both land on one side).
The leaf's rows are Student-t(2) or normal residuals; the answer must be the
exact weighted quantile (a data point), as scikit-learn's.

    python benchmarks/micro/pinball_search.py
"""

import numpy as np

EPS = float(np.finfo(np.float32).eps)
ALPHA = 0.9


def slope_of(residuals):
    """The leaf loss's slope at step t: rows at or below t count 1 - alpha,
    rows above -alpha, i.e. (rows <= t) - alpha * n (exact)."""
    ordered = np.sort(residuals)
    return lambda t: np.searchsorted(ordered, t, side="right") - ALPHA * len(ordered)


def bracket(slope, scale):
    lower, upper, iterations = -scale, scale, 1
    while slope(lower) >= 0 or slope(upper) < 0:
        width = upper - lower
        if slope(lower) >= 0:
            lower, upper = lower - 2 * width, lower
        else:
            lower, upper = upper, upper + 2 * width
        iterations += 1
    return lower, upper, iterations


def search(slope, scale, secant):
    lower, upper, iterations = bracket(slope, scale)
    first_width = upper - lower
    slope_lower, slope_upper, spread = slope(lower), slope(upper), 0.1
    while upper - lower > max(1e-7 * first_width, EPS * max(abs(lower), abs(upper))):
        width = upper - lower
        if secant:
            guess = lower + width * -slope_lower / (slope_upper - slope_lower)
            points = [max(guess - spread * width, lower + width / 1e3)]
            points.append(min(guess + spread * width, upper - width / 1e3))
        else:
            points = [lower + width / 3, lower + 2 * width / 3]
        points = np.float32(points)
        values = [slope(p) for p in points]
        for point, value in zip(points, values):
            if value >= 0 and point < upper:
                upper, slope_upper = point, value
        for point, value in zip(points, values):
            if value < 0 and lower < point < upper:
                lower, slope_lower = point, value
        spread = 0.1 if values[0] < 0 <= values[1] else min(3 * spread, 1 / 3)
        iterations += 1
    return lower, upper, iterations


def main():
    rng = np.random.default_rng(0)
    for n_rows in (200, 3000, 12000):
        for name, draw in (
            ("student-t", lambda n: rng.standard_t(2, n)),
            ("normal", lambda n: rng.normal(size=n)),
        ):
            counts = {False: [], True: []}
            for _ in range(30):
                residuals = (draw(n_rows) * 0.5 + rng.normal() * 0.3).astype(np.float32)
                exact = np.sort(residuals)[int(np.ceil(ALPHA * n_rows)) - 1]
                scale = np.float32(np.mean(np.abs(residuals)) + 0.1)
                for secant in (False, True):
                    lower, upper, iterations = search(slope_of(residuals), scale, secant)
                    assert lower <= exact <= upper or abs(lower - exact) <= 4 * EPS * abs(exact)
                    counts[secant].append(iterations)
            print(
                f"{n_rows:6d} rows, {name:9s}: mean passes over the rows, threefold cuts "
                f"{np.mean(counts[False]):.1f}, regula falsi {np.mean(counts[True]):.1f}"
            )


if __name__ == "__main__":
    main()
