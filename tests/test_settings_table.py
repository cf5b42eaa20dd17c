"""The settings of Booster, Regressor, Classifier and Ranker are one table
(jaxboost.frontends.settings.settings_table): their signatures, docstrings,
get_params/set_params and checks come from it."""

import inspect

import pytest
from sklearn.base import clone

import jaxboost as jb
from jaxboost.frontends.settings import settings_table
from jaxboost.frontends.settings.settings_table import (
    ALL,
    SETTINGS,
    Setting,
    settings_of,
    takes_settings,
)
from jaxboost.frontends.training.program_settings import check_all_settings

FRONT_ENDS = {"Booster": jb.Booster, "Regressor": jb.Regressor, "Classifier": jb.Classifier}
FRONT_ENDS["Ranker"] = jb.Ranker


@pytest.mark.parametrize("front_end", list(FRONT_ENDS))
def test_the_signature_and_args_are_the_tables(front_end):
    cls = FRONT_ENDS[front_end]
    settings = settings_of(front_end)
    parameters = list(inspect.signature(cls).parameters.values())
    assert [(p.name, p.default) for p in parameters] == [(s.name, s.default) for s in settings]
    doc = inspect.getdoc(cls)
    for setting in settings:
        first, *rest = setting.doc.splitlines()
        assert f"\n  {setting.name}: {first}\n" in doc
        assert all(line in doc for line in rest)
    model = cls()
    assert all(getattr(model, s.name) is s.default for s in settings)


def test_each_front_end_takes_what_the_table_says():
    names = {front_end: {s.name for s in settings_of(front_end)} for front_end in FRONT_ENDS}
    assert names["Regressor"] - names["Booster"] == {"warm_start", "n_jobs", "verbose", "verbosity"}
    assert names["Regressor"] - names["Classifier"] == {"n_outputs"}
    assert names["Ranker"] < names["Regressor"]
    assert "reg_lambda" in names["Ranker"] and jb.Ranker().reg_lambda is None
    # one entry per setting and front end
    for front_end in FRONT_ENDS:
        assert len(names[front_end]) == len(settings_of(front_end))


def test_a_setting_added_to_the_table_reaches_all_four(monkeypatch):
    extra = Setting(
        "extra_setting", 7, "int", front_ends=ALL, doc="a setting of the test,\nin two lines."
    )
    monkeypatch.setattr(settings_table, "SETTINGS", (*SETTINGS, extra))
    for front_end, cls in FRONT_ENDS.items():
        made = takes_settings(front_end)(type(cls.__name__, (cls,), {"__doc__": cls.__doc__}))
        parameter = inspect.signature(made).parameters["extra_setting"]
        assert parameter.default == 7
        assert "  extra_setting: a setting of the test,\n    in two lines." in made.__doc__
        assert made().extra_setting == 7 and made(extra_setting=3).extra_setting == 3
        assert made().get_params()["extra_setting"] == 7
        assert made().set_params(extra_setting=5).extra_setting == 5
        assert clone(made(extra_setting=4)).extra_setting == 4


def test_positional_settings_keep_their_places_and_unknown_ones_are_named():
    model = jb.Booster("huber", 5, 0.2, 3)
    assert (model.loss, model.n_estimators, model.learning_rate, model.max_depth) == (
        "huber",
        5,
        0.2,
        3,
    )
    with pytest.raises(TypeError, match=r"Booster\(\): .*'max_dept'"):
        jb.Booster(max_dept=3)
    with pytest.raises(ValueError, match="^max_dept: not a setting of Booster"):
        jb.Booster().set_params(max_dept=3)


CHECKED = [s for s in SETTINGS if s.check is not None and "Booster" in s.front_ends]


@pytest.mark.parametrize("setting", CHECKED, ids=lambda s: s.name)
def test_every_checked_setting_is_refused_out_of_range_by_name(setting):
    model = jb.Booster(**{setting.name: "not a setting"})
    with pytest.raises((ValueError, TypeError), match=f"^{setting.name}"):
        check_all_settings(model)
    check_all_settings(jb.Booster(**{setting.name: setting.default}))
