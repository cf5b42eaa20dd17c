"""Which kernels the programs of a platform use: the one place that asks
what a platform is.

On CPU the native C++ kernels (built on first use) carry the hot loops:
histograms with subtraction, routing, leaf sums, binning and prediction; where
they do not build, the packed XLA histogram kernel and the XLA references.
Elsewhere (GPU) the XLA references, whose scatter-add is an atomic add.
"""

from __future__ import annotations

from typing import NamedTuple

from .native_library import native_available


class KernelChoice(NamedTuple):
    """The kernels of one platform's programs."""

    histogram: str  # a key of jaxboost.kernels.histogram_kernels.HISTOGRAM_KERNELS
    leaf: str  # a key of jaxboost.kernels.leaf_sums.LEAF_KERNELS
    native: bool  # binning and prediction by the native kernels


_ELSEWHERE = KernelChoice(histogram="reference", leaf="reference", native=False)
_CPU_NATIVE = KernelChoice(histogram="native", leaf="native", native=True)
_CPU_XLA = KernelChoice(histogram="packed", leaf="reference", native=False)


def kernels_for(platform: str) -> KernelChoice:
    """The kernels for devices of ``platform`` (``"cpu"``, ``"gpu"``, ...)."""
    if platform != "cpu":
        return _ELSEWHERE
    return _CPU_NATIVE if native_available() else _CPU_XLA
