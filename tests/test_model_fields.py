"""One list of the fitted model's fields (jaxboost.frontends.fitted.model_fields)
serves fit, the model file, loading and docs/algorithm.md: a field one of
them forgets (``loss_dtype_`` was set by fit and missing from files) fails
here."""

import copy
import json
import pickle
import re
from pathlib import Path

import numpy as np
import pytest

import jaxboost as jb
from jaxboost.frontends.fitted.file_format import STATE_FIELDS
from jaxboost.frontends.fitted.model_fields import MODEL_FIELDS, saved_name
from jaxboost.frontends.refit import refit_leaves

ROOT = Path(__file__).resolve().parents[1]
NAMES = {field.name for field in MODEL_FIELDS}
SMALL = {"n_estimators": 3, "max_depth": 2, "max_bins": 16}


def _data(seed=0, n_rows=120):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 3)).astype(np.float32)
    return X, (X[:, 0] + 0.1 * rng.normal(size=n_rows)).astype(np.float32)


def _fitted(model) -> set[str]:
    """The fields ``model`` (a Booster) holds: its ``model_``'s, the only
    fitted attribute it keeps itself."""
    assert {name for name in vars(model) if name.endswith("_")} == {"model_"}
    return set(model.model_.fields())


@pytest.fixture(scope="module")
def model():
    X, y = _data()
    return jb.Booster(**SMALL).fit(X, y), X, y


def test_fit_sets_the_listed_fields_and_every_required_one(model):
    booster, _, _ = model
    assert _fitted(booster) <= NAMES
    assert {field.name for field in MODEL_FIELDS if field.required} <= _fitted(booster)
    assert booster.loss_dtype_ == "float32"


def test_the_file_holds_every_field_but_the_loss_and_load_gives_each_back(model, tmp_path):
    booster, _, _ = model
    saved = {saved_name(field) for field in MODEL_FIELDS if field.name != "loss_"}
    assert {name for name, _, _ in STATE_FIELDS} == saved
    booster.save(tmp_path / "model.json")
    loaded = jb.load(tmp_path / "model.json")
    assert _fitted(loaded) == _fitted(booster)
    for name in _fitted(booster) - {"forest_", "loss_", "evals_result_"}:
        np.testing.assert_array_equal(getattr(loaded, name), getattr(booster, name), err_msg=name)


def test_a_refit_model_keeps_its_refit_loss_in_its_file_and_a_new_fit_drops_it(model, tmp_path):
    booster, X, y = model
    refitted = refit_leaves(booster, X, y, steps=3)
    refitted.save(tmp_path / "refit.json")
    np.testing.assert_array_equal(
        jb.load(tmp_path / "refit.json").refit_loss_, refitted.refit_loss_
    )
    refitted.fit(X, y)  # (its refit_loss_ described the trees it no longer has)
    assert not hasattr(refitted, "refit_loss_")


def test_the_algorithm_page_lists_every_field():
    text = (ROOT / "docs" / "algorithm.md").read_text(encoding="utf-8")
    table = text.split("## After `fit`", 1)[1].split("\n\n", 2)[1]
    listed = set()
    for row in table.splitlines()[2:]:
        listed |= set(re.findall(r"`(\w+_)`", row.split("|")[1]))
    computed = {"feature_importances_", "trees_per_round_"}  # properties of the fields
    assert all(isinstance(getattr(jb.Booster, name), property) for name in computed)
    assert listed == NAMES | computed


def test_a_boosters_fields_read_through_to_its_model_and_a_change_makes_a_new_model(model):
    booster, X, _ = model
    assert all(isinstance(getattr(jb.Booster, name), property) for name in NAMES)
    for name, value in booster.model_.fields().items():
        assert getattr(booster, name) is value
    twin = copy.copy(booster)  # (shares the model until one of them changes it)
    twin.feature_names_in_ = ["a", "b", "c"]
    assert not hasattr(booster, "feature_names_in_") and booster.model_ is not twin.model_
    del twin.feature_names_in_
    assert not hasattr(twin, "feature_names_in_")
    with pytest.raises(AttributeError, match="use replace"):
        booster.model_.forest_ = None
    np.testing.assert_array_equal(booster.model_.predict(X), booster.predict(X))


def test_a_pickle_holding_the_fields_themselves_loads_into_a_model(model):
    booster, X, _ = model
    state = {**booster.__getstate__(), **booster.model_.fields()}
    del state["model_"]  # (as an older jaxboost pickled a Booster)
    restored = jb.Booster.__new__(jb.Booster)
    restored.__setstate__(state)
    assert set(restored.model_.fields()) == set(booster.model_.fields())
    np.testing.assert_array_equal(restored.predict(X), booster.predict(X))
    unpickled = pickle.loads(pickle.dumps(booster))
    np.testing.assert_array_equal(unpickled.predict(X), booster.predict(X))


def test_a_model_saves_the_file_its_booster_saves(model, tmp_path):
    booster, X, _ = model
    booster.model_.save(tmp_path / "model.json", booster)
    booster.save(tmp_path / "booster.json")
    assert (tmp_path / "model.json").read_bytes() == (tmp_path / "booster.json").read_bytes()
    np.testing.assert_array_equal(jb.load(tmp_path / "model.json").predict(X), booster.predict(X))


def test_settings_changed_after_fit_leave_the_file_describing_its_trees(tmp_path):
    """set_params after fit changes the next fit, not the fitted model: the
    file holds the settings the trees were grown with (a file of the new
    ones was refused at load: max_depth 4 differs from the trees' 2)."""
    X, y = _data()
    model = jb.Booster(n_estimators=3, max_depth=2, max_bins=255).fit(X, y)
    model.set_params(max_depth=4, n_estimators=2, max_bins=16, learning_rate=0.9)
    model.save(tmp_path / "model.json")
    loaded = jb.load(tmp_path / "model.json")
    assert loaded.max_depth == 2 and loaded.n_estimators == 3 and loaded.max_bins == 255
    assert loaded.learning_rate == 0.1
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    assert model.get_params()["max_depth"] == 4  # (the next fit's)


def test_the_former_name_init_score_reads_base_score_with_a_warning(model):
    booster, X, y = model
    for holder in (booster, booster.model_):
        with pytest.warns(FutureWarning, match="init_score_ is deprecated, use base_score_"):
            assert holder.init_score_ is holder.base_score_
    regressor = jb.Regressor(**SMALL).fit(X, y)
    with pytest.warns(FutureWarning, match="use base_score_"):
        np.testing.assert_array_equal(regressor.init_score_, booster.base_score_)
    np.testing.assert_array_equal(regressor.base_score_, booster.base_score_)


def test_pickles_of_an_older_jaxboost_holding_init_score_load(model):
    booster, X, y = model
    fields = {**booster.model_.fields()}
    fields["init_score_"] = fields.pop("base_score_")  # (as it was named before)
    model_ = type(booster.model_).__new__(type(booster.model_))
    model_.__setstate__(fields)
    np.testing.assert_array_equal(model_.base_score_, booster.base_score_)
    old = {k: v for k, v in booster.__getstate__().items() if k != "model_"}
    restored = jb.Booster.__new__(jb.Booster)
    restored.__setstate__({**old, **fields})
    np.testing.assert_array_equal(restored.base_score_, booster.base_score_)
    np.testing.assert_array_equal(restored.predict(X), booster.predict(X))
    regressor = jb.Regressor(**SMALL).fit(X, y)
    state = regressor.__getstate__()
    state["init_score_"] = state.pop("base_score_")
    unpickled = jb.Regressor.__new__(jb.Regressor)
    unpickled.__setstate__(state)
    np.testing.assert_array_equal(unpickled.base_score_, regressor.base_score_)


def test_a_file_keeps_the_start_under_its_former_key_and_loads_it(model, tmp_path):
    booster, X, _ = model
    booster.save(tmp_path / "model.json")
    state = json.loads((tmp_path / "model.json").read_text(encoding="utf-8"))["state"]
    assert "init_score_" in state and "base_score_" not in state  # (files read alike)
    loaded = jb.load(tmp_path / "model.json")
    np.testing.assert_array_equal(loaded.base_score_, booster.base_score_)
    np.testing.assert_array_equal(loaded.predict(X), booster.predict(X))
