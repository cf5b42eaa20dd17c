"""The fitted model's fields, listed once: the attributes of a
`jaxboost.frontends.model.Model` (what `jaxboost.frontends.trainer.train`
gives, and a Booster's fitted attributes read through to), what a
model file's ``state`` holds (`jaxboost.frontends.model_file`), what
`jaxboost.load` gives back and what docs/algorithm.md's "After ``fit``"
table lists (tests/test_model_fields.py compares them).  A field added to
the model is one line here."""

from __future__ import annotations

from typing import NamedTuple


class ModelField(NamedTuple):
    """A fitted attribute: its ``name``, its ``kind`` in a model file's
    ``state`` (the codec of `jaxboost.frontends.file_format`; None: not in
    ``state``) and whether every model holds it (``required``; an optional
    field is absent or None where it does not apply, and in older files)."""

    name: str
    kind: str | None
    required: bool


MODEL_FIELDS = (
    ModelField("forest_", "forest", True),
    ModelField("init_score_", "float32_array", True),
    ModelField("bin_edges_", "float32_array", True),
    ModelField("n_outputs_", "int", True),
    ModelField("n_features_in_", "int", True),
    ModelField("n_estimators_", "int", True),
    ModelField("train_loss_", "floats", True),
    ModelField("feature_names_in_", "strings", False),
    ModelField("best_iteration_", "int", False),
    ModelField("best_score_", "float", False),
    ModelField("evals_result_", "evals", False),
    # what "auto" (and armijo=None) resolved to
    ModelField("leaf_method_", "leaf_method", False),
    ModelField("split_criterion_", "split_criterion", False),
    ModelField("armijo_", "bool", False),
    ModelField("loss_dtype_", "loss_dtype", False),
    ModelField("init_model_rounds_", "int", False),  # a continued fit's (frontends/continued.py)
    ModelField("categories_", "categories", False),  # categorical columns' codes (categories.py)
    ModelField("refit_loss_", "floats", False),  # refit_leaves' objective (frontends/refit.py)
    # the file's own "loss" section: a catalogue loss by name, else its link
    ModelField("loss_", None, True),
)
