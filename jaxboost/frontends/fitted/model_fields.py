"""The fitted model's fields, listed once: the attributes of a
`jaxboost.frontends.fitted.model.Model` (what `jaxboost.frontends.training.trainer.train`
gives, and a Booster's fitted attributes read through to), what a
model file's ``state`` holds (`jaxboost.frontends.fitted.model_file`), what
`jaxboost.load` gives back and what docs/algorithm.md's "After ``fit``"
table lists (tests/test_model_fields.py compares them).  A field added to
the model is one line here."""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple


class ModelField(NamedTuple):
    """A fitted attribute: its ``name``, its ``kind`` in a model file's
    ``state`` (the codec of `jaxboost.frontends.fitted.file_format`; None: not
    in ``state``), whether every model holds it (``required``; an optional
    field is absent or None where it does not apply, and in older files)
    and the key a file's ``state`` holds it under (``saved_as``; None: its
    name), which stays when a field is renamed so that files read alike."""

    name: str
    kind: str | None
    required: bool
    saved_as: str | None = None


MODEL_FIELDS = (
    ModelField("forest_", "forest", True),
    # the model's constant start F0 on the raw scale (not fit's per-row init_score)
    ModelField("base_score_", "float32_array", True, saved_as="init_score_"),
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

# former names of fields -> their names now: the old name still reads the
# field, with a FutureWarning (`renamed_field`), and old pickles load
RENAMED_FIELDS = {"init_score_": "base_score_"}


def saved_name(field: ModelField) -> str:
    """The key a model file's ``state`` holds ``field`` under."""
    return field.saved_as or field.name


def with_current_names(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` (a pickle's or a file's, by name) with former names renamed."""
    return {RENAMED_FIELDS.get(name, name): value for name, value in fields.items()}


def renamed_field(old: str) -> property:
    """A property ``old`` that reads (and sets) the field now called
    ``RENAMED_FIELDS[old]``, warning that the name is deprecated."""
    new = RENAMED_FIELDS[old]

    def warn() -> None:
        warnings.warn(
            f"{old} is deprecated, use {new} (the model's constant start on the raw "
            "scale; fit's init_score are per-row offsets)",
            FutureWarning,
            stacklevel=3,
        )

    def get(self: Any) -> Any:
        warn()
        return getattr(self, new)

    def put(self: Any, value: Any) -> None:
        warn()
        setattr(self, new, value)

    return property(get, put, doc=f"Deprecated: `{new}`.")
