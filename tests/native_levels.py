"""The native histogram kernel's root and children levels in one call, as
the tests of its routing use them."""

import functools

import jax.numpy as jnp

from jaxboost.kernels.histogram_kernels import HISTOGRAM_KERNELS


def native_children(tiled, parents, stats, split, n_parents: int, n_bins: int, quantised: bool):
    """The native kernel's children level of ``n_parents`` parents, after
    their root-style level (its sums the children's ``parent``): ``(hist,
    exact sums, node_of_row)``.  ``stats`` ``(n_rows, 2)`` int32, summed as
    float32 or, ``quantised``, as integers of unit scale."""
    kernel = HISTOGRAM_KERNELS["native"]
    if quantised:
        level = functools.partial(kernel.level_quantised, scale=jnp.ones(2, jnp.float32))
        level = functools.partial(level, tiled, parents, stats)
    else:
        level = functools.partial(kernel.level, tiled, parents, stats.astype(jnp.float32))
    parent = level(n_nodes=n_parents, n_bins=n_bins, parent=None, split=None)[1]
    return level(n_nodes=2 * n_parents, n_bins=n_bins, parent=parent, split=split)
