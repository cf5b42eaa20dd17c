"""Gradients and hessians quantised to a few integer levels (LightGBM 4's
quantised training), for faster histograms.

Each round, every column of the split statistics ``[gradients, hessians]`` is
divided by a scale that maps its largest magnitude (over all shards: a
``pmax``) to ``n_levels / 2`` for gradients and ``n_levels`` for hessians,
and rounded stochastically: ``floor(x / scale + u)`` with ``u`` uniform in
``[0, 1)``, so every quantised value is an unbiased estimate of ``x / scale``.
``u`` is a hash of the global row number, the column, the round and the seed
(`jaxboost.engine.sampling.hash_bits`), so the quantised values, and the
model, do not depend on how the rows are sharded.

Only the split search sees them: histograms sum the integers exactly (the
native kernel packs a row's gradient and hessian into one int64 and adds
once), and the split gains use the sums times the scale.  Leaf values are
computed from the exact float gradients and hessians.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from .sampling import hash_bits
from .split import unit_for_peak

# the stream of uniform_hash that quantisation draws from (1: rows, 2: features)
_STREAM = 3
# integer sums per shard must stay below this (int32 halves of a packed word)
_SUM_LIMIT = 2**31


def check_quantisation(n_levels: int, rows_per_shard: int) -> int:
    """``n_levels`` as an int, after checking it is at least 2 and that a
    shard's integer sums cannot overflow; raises ``ValueError`` otherwise."""
    if isinstance(n_levels, bool) or int(n_levels) != n_levels or int(n_levels) < 2:
        raise ValueError(f"num_grad_quant_bins: expected an integer >= 2, got {n_levels!r}")
    n_levels = int(n_levels)
    if n_levels * rows_per_shard >= _SUM_LIMIT:
        raise ValueError(
            f"num_grad_quant_bins={n_levels} with {rows_per_shard} rows per device: the "
            f"integer histogram sums could overflow int32; use fewer bins or more devices"
        )
    return n_levels


def quantise_split_stats(
    grad: jax.Array,
    second: jax.Array,
    row_id: jax.Array,
    round_index: jax.Array,
    seed: jax.Array,
    n_levels: int,
    axis_name: str | None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The gradient unit and the stochastically rounded split statistics.

    One reduction per column and one ``pmax`` give both the unit
    (`jaxboost.engine.split.gradient_unit` of ``grad``) and the scales: as a
    power of two, the unit scales the gradients' peak exactly.  Each column is
    rounded on its own, with no ``(n_rows, 2K)`` float array in between, so
    XLA fuses the derivatives, the noise and the rounding into one pass.

    Args:
      grad: ``(n_rows, K)`` float32 weighted gradients of one shard.
      second: ``(n_rows, K)`` float32 weighted hessians (may be negative), or
        sample weights.
      row_id: ``(n_rows,)`` uint32 global row numbers.
      round_index, seed: int32 scalars.
      n_levels: gradients take integer values in ``[-n_levels / 2,
        n_levels / 2]``, the second statistics in ``[-n_levels, n_levels]``.
      axis_name: the mesh axis the rows are sharded over, or None.
    Returns:
      ``(unit, quantised, scale)``: the float32 unit, ``(n_rows, 2K)`` int32
      ``[gradients times unit, second]`` rounded, and ``(2K,)`` float32 what
      one integer of each column is worth (of the gradients times unit), the
      same on every shard.
    """
    n_outputs = grad.shape[1]
    # max |x| as max(x) and -min(x): the same value (NaN too), and XLA's CPU
    # backend runs these two reductions ten times faster than max(abs(x));
    # the transposes make its reductions contiguous (a bitcast when K is 1)
    peak = jnp.concatenate(
        [jnp.maximum(jnp.max(x.T, axis=1), -jnp.min(x.T, axis=1)) for x in (grad, second)]
    )
    if axis_name is not None:
        peak = lax.pmax(peak, axis_name)
    unit = unit_for_peak(jnp.max(peak[:n_outputs]))
    peak = peak * jnp.concatenate([jnp.full(n_outputs, unit), jnp.ones(n_outputs)])
    top = jnp.concatenate(
        [
            jnp.full(n_outputs, max(n_levels // 2, 1), jnp.float32),
            jnp.full(n_outputs, n_levels, jnp.float32),
        ]
    )
    scale = jnp.where(peak > 0, peak / top, 1.0)
    inverse = 1.0 / scale
    columns = [grad[:, k] * unit for k in range(n_outputs)]
    columns += [second[:, k] for k in range(n_outputs)]
    quantised = [
        jnp.clip(
            jnp.floor(column * inverse[c] + _uniform_half(row_id, c, n_outputs, round_index, seed)),
            -top[c],
            top[c],
        ).astype(jnp.int32)
        for c, column in enumerate(columns)
    ]
    return unit, jnp.stack(quantised, axis=1), scale


def _uniform_half(row_id: jax.Array, column: int, n_outputs: int, round_index, seed) -> jax.Array:
    """``(n_rows,)`` float32 uniforms in ``[0, 1)`` with 16-bit resolution
    (plenty for rounding: a bias below 2^-16 of a unit) for ``column`` of the
    ``2 * n_outputs`` statistics.  One 32-bit hash serves two columns (its
    high half the even one, its low half the odd one), so a row of ``[grad,
    hess]`` costs one hash."""
    index = row_id.astype(jnp.uint32) * jnp.uint32(n_outputs) + jnp.uint32(column // 2)
    bits = hash_bits(index, round_index, seed, _STREAM)
    half = bits >> 16 if column % 2 == 0 else bits & jnp.uint32(0xFFFF)
    return half.astype(jnp.float32) * jnp.float32(1.0 / (1 << 16))
