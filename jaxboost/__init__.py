"""jaxboost: gradient-boosted trees for any per-sample JAX loss.

Importing jaxboost exposes the CPU cores as JAX devices (see
:mod:`jaxboost.devices`), so import it before running any JAX operation.
"""

from ._workarounds import apply_gpu_scatter_workaround
from .compilation_cache import enable_compilation_cache, enable_from_environment
from .devices import configure_cpu_devices

apply_gpu_scatter_workaround()
configure_cpu_devices()
enable_from_environment()

from . import distributed, losses
from .booster import Booster
from .io import load_model as load
from .metrics import metric
from .monitor import CallbackEnv
from .refit import refit_leaves
from .tree import Tree

__all__ = [
    "Booster",
    "CallbackEnv",
    "Classifier",
    "Regressor",
    "Tree",
    "distributed",
    "enable_compilation_cache",
    "load",
    "losses",
    "metric",
    "refit_leaves",
]
__version__ = "0.1.0"


def __getattr__(name: str):
    # The scikit-learn estimators need scikit-learn (the `sklearn` extra), which
    # the engine itself never imports: they load on first use.
    if name in ("Regressor", "Classifier"):
        from . import estimators

        return getattr(estimators, name)
    raise AttributeError(f"module 'jaxboost' has no attribute {name!r}")
