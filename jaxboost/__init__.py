"""jaxboost: gradient-boosted trees for any per-sample JAX loss.

Importing jaxboost exposes the CPU cores as JAX devices (see
`jaxboost.runtime.devices`), so import it before running any JAX operation.
"""

from .runtime.compilation_cache import enable_by_default, enable_compilation_cache
from .runtime.devices import configure_cpu_devices
from .runtime.workarounds import apply_gpu_scatter_workaround

apply_gpu_scatter_workaround()
configure_cpu_devices()
enable_by_default()

from . import losses
from .engine.metrics import metric
from .engine.tree import Tree
from .frontends.booster import Booster
from .frontends.fitted.file_format import ModelFileError
from .frontends.loading import load_model as load
from .frontends.refit import refit_leaves
from .frontends.training.loss_derivatives import derivatives
from .frontends.training.monitor import CallbackEnv
from .runtime import distributed

__all__ = [
    "Booster",
    "CallbackEnv",
    "Classifier",
    "ModelFileError",
    "Ranker",
    "Regressor",
    "Tree",
    "derivatives",
    "distributed",
    "enable_compilation_cache",
    "load",
    "losses",
    "metric",
    "plotting",
    "ranking_metrics",
    "refit_leaves",
]
__version__ = "0.1.0"


def __getattr__(name: str):
    # The scikit-learn estimators need scikit-learn (the `sklearn` extra), which
    # the engine itself never imports: they load on first use.
    if name in ("Regressor", "Classifier"):
        from .frontends.scikit_learn import estimators

        return getattr(estimators, name)
    if name == "Ranker":
        from .frontends.scikit_learn.ranker import Ranker

        return Ranker
    if name in ("plotting", "ranking_metrics"):  # (plots need matplotlib: the `plot` extra)
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'jaxboost' has no attribute {name!r}")
