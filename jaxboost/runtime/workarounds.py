"""Version-specific JAX/XLA workarounds, kept in one place.

Each workaround names the JAX versions it applies to and why, so it can be
removed when those versions are no longer supported.
"""

from __future__ import annotations

import os

# jaxlib 0.10.2 to 0.11.0 compile a float32 scatter-add on NVIDIA GPUs to a
# compare-and-swap loop, hundreds of times slower under contention (JAX issue
# 38806).  Allowing flush-to-zero atomics restores the native atomic add.  The
# flag must be in XLA_FLAGS before the GPU backend starts; it is harmless on
# CPU, where the option is ignored.
_FTZ_ATOMICS_FLAG = "--xla_backend_extra_options=-nvptx-allow-ftz-atomics"
_FTZ_ATOMICS_VERSIONS = ((0, 10, 2), (0, 11, 0))


def _installed_jaxlib_version() -> tuple[int, ...] | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        text = version("jaxlib")
    except PackageNotFoundError:
        return None
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def apply_gpu_scatter_workaround() -> bool:
    """Add the float32 scatter-add flag to ``XLA_FLAGS`` on affected jaxlibs.

    Returns True when the flag was added.  Must run before the GPU backend is
    initialised (jaxboost calls it at import).
    """
    jaxlib_version = _installed_jaxlib_version()
    low, high = _FTZ_ATOMICS_VERSIONS
    if jaxlib_version is None or not (low <= jaxlib_version <= high):
        return False
    flags = os.environ.get("XLA_FLAGS", "")
    if "nvptx-allow-ftz-atomics" in flags or "xla_backend_extra_options" in flags:
        return False
    os.environ["XLA_FLAGS"] = f"{flags} {_FTZ_ATOMICS_FLAG}".strip()
    return True


# jaxlib 0.10 runs reductions on CPU as YNNPACK fusions, which over a short
# minor axis (a vector-output loss summing its K outputs) run about 20x
# slower than XLA's own loop (bench_multiclass.py).  Programs of vector
# outputs compile with YNNPACK kept to dot products: the initial score and
# the metrics always, the training rounds on many rows per device (their
# split search runs faster with the default; jaxboost.frontends.booster's
# _VECTOR_OPTIONS_ROWS).  Single-output programs keep the default: their
# reductions run over rows, at full speed.
_YNN_OPTION = "xla_cpu_experimental_ynn_fusion_type"
_YNN_VERSIONS = ((0, 10, 0), (0, 10, 99))


def vector_output_compiler_options(platform: str) -> dict[str, str]:
    """``compiler_options`` for `jax.jit` of programs for devices of
    ``platform`` whose rows hold vector outputs: on CPU, YNNPACK fusions
    limited to dot products on the jaxlibs named above; none elsewhere (the
    option may not exist there)."""
    jaxlib_version = _installed_jaxlib_version()
    low, high = _YNN_VERSIONS
    if platform != "cpu" or jaxlib_version is None or not (low <= jaxlib_version <= high):
        return {}
    return {_YNN_OPTION: "LIBRARY_FUSION_TYPE_DOT"}


# jaxlib 0.10's CPU backend emits fusions with its MLIR fusion emitters, which
# compile a training program about twice as slowly as the older LLVM IR
# emitters and run it no faster, on small fits and on 1M rows alike (the
# kernels that touch every row are native).  So every program uses the
# older ones.  An unknown option is fatal, so only on the jaxlibs it was
# tried on.
_FUSION_EMITTERS_OPTION = "xla_cpu_use_fusion_emitters"
_FUSION_EMITTERS_VERSIONS = ((0, 10, 0), (0, 10, 99))
# fits of at most this many rows (all shards) run round by round, a small
# program per loss beside a loss-free tree program
# (jaxboost.frontends.training.round_by_round); larger ones run the fused program,
# whose one dispatch per chunk pays on many rows
FAST_COMPILE_ROWS = 2**18


def fast_compile_options(platform: str) -> dict[str, bool]:
    """``compiler_options`` for `jax.jit` of every program of a fit on
    devices of ``platform``: XLA's older, faster-compiling CPU fusion
    emitters on the jaxlibs named above; none elsewhere."""
    jaxlib_version = _installed_jaxlib_version()
    low, high = _FUSION_EMITTERS_VERSIONS
    if platform != "cpu" or jaxlib_version is None or not (low <= jaxlib_version <= high):
        return {}
    return {_FUSION_EMITTERS_OPTION: False}
