"""The check that a group loss ignores its padding rows.

Every group is padded to a power of two (``mask`` False on the padding), and
what padding rows hold is arbitrary (the shard's first row), so a group
loss's value and its real rows' gradients must not depend on them.  A loss
that reads them trains on rows that are not there; it is refused before
training, once per loss and targets.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from ...losses.catalogue import is_catalogue_loss
from ...losses.metadata import metadata_of
from ...runtime.lifted_values import bound
from ...runtime.program_cache import without_values

# the probe group of check_mask_respected: real rows, padded to a power of two
_PROBE_ROWS, PROBE_WIDTH = 5, 8


def check_mask_respected(loss, y: np.ndarray, skip_catalogue: bool = True) -> None:
    """Raises a ValueError when a group loss's value, or its gradient on the
    real rows, changes with what its padding rows (``mask`` False) hold.

    One group of up to five rows of ``y`` (``(n_rows,)`` or ``(n_rows, k)``,
    spread over the targets' range) with scores in ``[-0.5, 0.5]`` is padded
    to eight rows twice: with copies of its first row and score 0 (as the
    engine pads), and with another row of ``y`` and scores far apart.  The
    value, the gradient and any declared ``row_derivatives`` on the real rows
    must agree (to float32 rounding).  Cached per loss and rows: a loss that
    passed is not evaluated again on the same targets; the catalogue's losses
    are not probed unless ``skip_catalogue`` is False (its tests do)."""
    if skip_catalogue and is_catalogue_loss(loss):  # tested to ignore padding
        return
    key = np.asarray(y if y.ndim == 1 else y[:, 0])
    spread = np.argsort(key, kind="stable")[
        np.linspace(0, y.shape[0] - 1, min(_PROBE_ROWS, y.shape[0])).astype(int)
    ]
    rows = np.ascontiguousarray(y[spread])
    far = np.ascontiguousarray(y[spread[-1] if key[spread[-1]] != key[spread[0]] else -1])
    probe = (rows.tobytes(), rows.shape, str(rows.dtype), far.tobytes())
    try:
        hash(loss)
    except TypeError:  # an unhashable callable: probed every time
        _probe_mask.__wrapped__(loss, *probe)
        return
    _probe_mask(loss, *probe)


@functools.lru_cache(maxsize=64)
def _probe_mask(loss, rows: bytes, shape: tuple, dtype: str, far: bytes) -> None:
    """`check_mask_respected` on the probe rows (bytes of a numpy array
    of ``shape`` and ``dtype``) and the far row (cached on success)."""
    real = np.frombuffer(rows, dtype).reshape(shape)
    n_real, pad = shape[0], PROBE_WIDTH - shape[0]
    far_row = np.frombuffer(far, dtype).reshape(shape[1:])
    y_pairs = np.stack(
        [
            np.concatenate([real, np.repeat(real[:1], pad, axis=0)]),
            np.concatenate([real, np.repeat(far_row[None], pad, axis=0)]),
        ]
    )
    f_real = np.linspace(-0.5, 0.5, n_real, dtype=np.float32)
    f_pairs = np.stack(
        [
            np.concatenate([f_real, np.zeros(pad, np.float32)]),
            np.concatenate([f_real, np.linspace(5.0, -3.0, pad, dtype=np.float32)]),
        ]
    )
    # a traced jax array, as training passes it (a loss may index it with jnp)
    masks = jnp.broadcast_to(jnp.arange(PROBE_WIDTH) < n_real, (2, PROBE_WIDTH))

    one_group = functools.partial(_one_group, loss, n_real)
    values, derivatives = _padded_pairs(loss, n_real, y_pairs, f_pairs, masks)
    values, derivatives = np.asarray(values, np.float64), np.asarray(derivatives, np.float64)
    name = metadata_of(loss).name
    if not (np.all(np.isfinite(values)) and np.all(np.isfinite(derivatives))):
        # NaN on both paddings passes the comparison below: is it the padding's?
        unpadded = jax.jit(one_group)(real, f_real, jnp.ones(n_real, bool))
        if all(np.all(np.isfinite(np.asarray(part))) for part in unpadded):
            _refuse_non_finite_padding(name, n_real, values, derivatives)
    scale = max(1.0, float(np.nanmax(np.abs(values), initial=0.0)))
    same_value = np.allclose(values[0], values[1], rtol=1e-4, atol=1e-6 * scale, equal_nan=True)
    gap = np.abs(derivatives[0] - derivatives[1])
    derivative_scale = max(1.0, float(np.nanmax(np.abs(derivatives), initial=0.0)))
    same_derivatives = not np.any(gap > 1e-4 * derivative_scale)
    if same_value and same_derivatives:
        return
    changed = [] if same_value else [f"the value went from {values[0]:.6g} to {values[1]:.6g}"]
    if not same_derivatives:
        changed.append(f"the real rows' gradients moved by up to {np.nanmax(gap):.3g}")
    raise ValueError(
        f"loss {name!r}: loss(y, f, mask) reads its padding rows: on one group of {n_real} "
        f"rows padded to {PROBE_WIDTH}, {' and '.join(changed)} when only the rows where "
        "mask is False changed. Groups are padded to a power of two, so the loss must ignore "
        "rows where mask is False: sum with jnp.where(mask, terms, 0.0), and mask scores "
        "before exp, log or a softmax (jnp.where(mask, f, -jnp.inf))"
    )


def _one_group(loss, n_real: int, y_group, f_group, mask) -> tuple[jax.Array, jax.Array]:
    """The loss on one padded group and its real rows' derivatives, concatenated."""
    value, grad = jax.value_and_grad(loss, argnums=1)(y_group, f_group, mask)
    parts = [grad[:n_real]]
    row_derivatives = metadata_of(loss).row_derivatives
    if row_derivatives is not None:
        parts += [part[:n_real] for part in row_derivatives(y_group, f_group, mask)]
    return value, jnp.concatenate(parts)


def _padded_pairs(loss, n_real: int, y_pairs, f_pairs, masks) -> tuple[jax.Array, jax.Array]:
    """`_one_group` on each of the two paddings: by the program of the
    loss's structure, handed its values, where the loss has one traced at
    the probe group's shapes (a new value then compiles nothing), else by a
    program of its own."""
    structure, values = without_values(loss)
    if values is not None and structure.traced_at(y_pairs[0], f_pairs[0], masks[0]):
        return _structure_pairs(structure, n_real, values, y_pairs, f_pairs, masks)
    one_group = functools.partial(_one_group, loss, n_real)
    return jax.jit(jax.vmap(one_group))(y_pairs, f_pairs, masks)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _structure_pairs(structure, n_real: int, values, y_pairs, f_pairs, masks):
    with bound(structure, values):
        one_group = functools.partial(_one_group, structure, n_real)
        return jax.vmap(one_group)(y_pairs, f_pairs, masks)


def _refuse_non_finite_padding(
    name: str, n_real: int, values: np.ndarray, derivatives: np.ndarray
) -> None:
    """The ValueError of a group loss finite on a group's real rows alone
    and not finite (``values``, real rows' ``derivatives``) once padded."""
    broken = [] if np.all(np.isfinite(values)) else ["its value"]
    if not np.all(np.isfinite(derivatives)):
        broken.append("the real rows' gradients")
    verb = "is" if broken == ["its value"] else "are"
    raise ValueError(
        f"loss {name!r}: loss(y, f, mask) is finite on one group of {n_real} rows, but "
        f"{' and '.join(broken)} {verb} NaN or infinite once the group is padded to "
        f"{PROBE_WIDTH} rows (rows {n_real} to {PROBE_WIDTH - 1}, where mask is False): a "
        "term of the padding rows is inf or NaN, and multiplying it by mask leaves NaN "
        "(0 * inf). Groups are padded to a power of two: sum with jnp.where(mask, terms, 0.0) "
        "rather than multiplying by mask, and mask scores before exp, log or a softmax "
        "(jnp.where(mask, f, -jnp.inf))"
    )
