"""jaxboost: gradient-boosted trees for any per-sample JAX loss.

Importing jaxboost exposes the CPU cores as JAX devices (see
:mod:`jaxboost.devices`), so import it before running any JAX operation.
"""

from ._workarounds import apply_gpu_scatter_workaround
from .devices import configure_cpu_devices

apply_gpu_scatter_workaround()
configure_cpu_devices()

from .booster import Booster
from .tree import Tree

__all__ = ["Booster", "Tree"]
__version__ = "0.1.0"
