"""Front ends: what users call, over the engine.

The folders say what a reader looks for:

- `booster`, `refit`, `loading`: ``jaxboost.Booster``, ``refit_leaves``
  and ``jaxboost.load``; `scikit_learn`: the estimators around a Booster
  (``Regressor``, ``Classifier``, ``Ranker``) and their part of a file;
- `settings`: every setting defined once, its checks and defaults;
- `data`: the user's data checked and coded (features, targets, weights,
  categorical columns, query groups, per-row offsets);
- `training`: one fit, from ``fit``'s arguments to a model (the checked
  inputs, placement and binning, the initial score, the rounds loop and
  its monitor, the holdout's two fits);
- `fitted`: the fitted model, everything prediction needs (its fields,
  prediction, distributions, SHAP values, inspection, plots) and its file;
- `exports`: a fitted model for other libraries (XGBoost, ONNX).

Everything here is Python orchestration; the programs it runs come from
`jaxboost.engine`.  Imports flow one way: front ends -> engine -> kernels
-> runtime.
"""

import importlib
import importlib.abc
import importlib.util
import sys

# where the modules of the flat front floor (jaxboost before the grouped
# layout) live now: pickles of fitted models and estimators name their
# classes' modules (jaxboost.frontends.model.Model), so the old names import
# the moved modules (modules new with the layout have no old name)
MOVED = {
    # (settings.py is settings/checks.py: its old name is the package's now)
    **{name: f"settings.{name}" for name in ("settings_table", "loss_params", "constraints")},
    "distribution_defaults": "settings.regularisation_defaults",
    **{
        name: f"data.{name}"
        for name in ("validation", "categories", "category_union", "grouping", "offsets")
    },
    **{
        name: f"training.{name}"
        for name in (
            "fit_inputs",
            "eval_sets",
            "continued",
            "loss_checks",
            "padding_check",
            "computation_keys",
            "trainer",
            "holdout",
            "placement",
            "program_settings",
            "hessian_probe",
            "compile_ahead",
            "rounds_loop",
            "round_by_round",
            "monitor",
            "loss_derivatives",
        )
    },
    **{
        name: f"fitted.{name}"
        for name in (
            "model",
            "model_fields",
            "distribution_predict",
            "inspection",
            "explain",
            "model_file",
            "tree_dump",
            "plotting",
            "explain_plots",
        )
    },
    **{
        name: f"exports.{name}"
        for name in ("export", "export_trees", "export_xgboost", "export_onnx")
    },
    **{
        name: f"scikit_learn.{name}"
        for name in (
            "estimators",
            "ranker",
            "estimator_inputs",
            "estimator_losses",
            "estimator_file",
        )
    },
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``jaxboost.frontends.<old name>`` as the module it moved to
    (`MOVED`).  Last on ``sys.meta_path``: a module that exists under its
    name is found first."""

    def find_spec(self, fullname, path=None, target=None):
        prefix, _, name = fullname.rpartition(".")
        if prefix != __name__ or name not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return importlib.import_module(f"{__name__}.{MOVED[spec.name.rpartition('.')[2]]}")

    def exec_module(self, module) -> None:
        pass  # (the moved module ran when it was imported)


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModules())
