"""The front floor's grouped layout (jaxboost/frontends/__init__.py): the
modules of the flat layout before it keep their names, so pickles of fitted
models and estimators, which name their classes' modules, still load."""

import importlib
import pickle
import re
from pathlib import Path

import numpy as np
import pandas as pd

import jaxboost as jb
from jaxboost.frontends import MOVED


def test_every_old_module_name_imports_the_moved_module():
    for old, new in MOVED.items():
        moved = importlib.import_module(f"jaxboost.frontends.{new}")
        assert importlib.import_module(f"jaxboost.frontends.{old}") is moved


# the modules of the flat layout (jaxboost/frontends/*.py before the grouping)
FLAT = [
    "booster",
    "categories",
    "category_union",
    "compile_ahead",
    "computation_keys",
    "constraints",
    "continued",
    "distribution_defaults",
    "distribution_predict",
    "estimator_file",
    "estimator_inputs",
    "estimator_losses",
    "estimators",
    "eval_sets",
    "explain",
    "explain_plots",
    "export",
    "export_onnx",
    "export_trees",
    "export_xgboost",
    "fit_inputs",
    "grouping",
    "hessian_probe",
    "holdout",
    "inspection",
    "loading",
    "loss_checks",
    "loss_derivatives",
    "loss_params",
    "model",
    "model_fields",
    "model_file",
    "monitor",
    "offsets",
    "padding_check",
    "placement",
    "plotting",
    "program_settings",
    "ranker",
    "refit",
    "round_by_round",
    "rounds_loop",
    "settings_table",
    "trainer",
    "tree_dump",
    "validation",
]


def test_every_module_of_the_flat_layout_imports():
    for name in FLAT:
        importlib.import_module(f"jaxboost.frontends.{name}")


def _flat(pickled: bytes) -> bytes:
    """``pickled`` (protocol 2: module names as text) naming every class by
    its module's name in the flat layout, as an older jaxboost wrote it."""
    flat = {new: old for old, new in MOVED.items()}
    pattern = re.compile(rb"jaxboost\.frontends\.(\w+\.\w+)\n")
    moved = pattern.sub(
        lambda m: b"jaxboost.frontends." + flat[m[1].decode()].encode() + b"\n", pickled
    )
    assert moved != pickled
    return moved


def test_pickles_naming_the_flat_modules_load():
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=60), "cut": np.array(["x", "y", "z"] * 20)})
    y = (X["a"] + (X["cut"] == "y")).to_numpy(np.float32)
    settings = {"n_estimators": 3, "max_depth": 2}
    for fitted in (jb.Booster(**settings).fit(X, y), jb.Regressor(**settings).fit(X, y)):
        old = pickle.loads(_flat(pickle.dumps(fitted, protocol=2)))
        assert type(old) is type(fitted)
        np.testing.assert_array_equal(old.predict(X), fitted.predict(X))


def test_the_layout_table_of_docs_algorithm_names_every_module_in_its_folder():
    """docs/algorithm.md's table of the front floor names each module of
    jaxboost/frontends in the row of its folder, and no module that is not there."""
    root = Path(jb.__file__).parent / "frontends"
    text = (root.parents[1] / "docs" / "algorithm.md").read_text()
    rows = re.findall(r"^\| (\(top\)|`\w+/`) \| (.*) \|$", text, flags=re.MULTILINE)
    documented = {
        ("" if folder == "(top)" else folder.strip("`")) + name
        for folder, modules in rows
        for name in re.findall(r"`(\w+\.py)`", modules)
    }
    on_disk = {
        str(path.relative_to(root)) for path in root.rglob("*.py") if path.name != "__init__.py"
    }
    assert documented == on_disk
