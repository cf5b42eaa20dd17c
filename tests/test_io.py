"""Tests of ``jaxboost.frontends.fitted.model_file``: exact round trips, clear errors on bad files, checksums
that refuse edited arrays, a fuzz of mutated files, and loading that executes nothing
from the file."""

from __future__ import annotations

import base64
import builtins
import copy
import hashlib
import importlib
import json
import marshal
import pickle
import re

import jax.numpy as jnp
import numpy as np
import pytest

import jaxboost  # noqa: F401  (configures the CPU devices before JAX starts)
from jaxboost import Booster, losses
from jaxboost.engine.tree import Tree
from jaxboost.frontends.fitted.file_format import (
    FOREST_FIELDS,
    FORMAT_VERSION,
    ModelFileError,
    array_checksum,
    decode_array,
    document_checksum,
    encode_array,
)
from jaxboost.frontends.fitted.model_file import save_model
from jaxboost.frontends.loading import load_model

N_ROWS, N_FEATURES = 120, 4
SMALL = {"n_estimators": 4, "max_depth": 2, "max_bins": 16, "learning_rate": 0.3}


def _features(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N_ROWS, N_FEATURES)).astype(np.float32)
    X[rng.random(X.shape) < 0.15] = np.nan
    return X


def _quartic(y, f):
    return (y - f) ** 4


def _with_link(loss, link):
    loss.link = link
    return loss


def _targets(kind: str, X: np.ndarray) -> np.ndarray:
    signal = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1])
    if kind == "binary":
        return (signal > 0).astype(np.float32)
    if kind == "classes":
        return np.digitize(signal, [-0.5, 0.5]).astype(np.float32)
    return signal.astype(np.float32)


MODELS = {
    # heavy enough children that some nodes cannot split: their thresholds are +inf
    "squared_error": ({"loss": "squared_error", "min_child_weight": 35}, "real"),
    "binary_logloss": ({"loss": losses.binary_logloss}, "binary"),
    "softmax_3_per_tree": (
        {"loss": losses.softmax_cross_entropy, "multi_strategy": "one_output_per_tree"},
        "classes",
    ),
    "quantile_0.3": ({"loss": losses.quantile(0.3)}, "real"),
    "custom_lambda": (
        {"loss": _with_link(lambda y, f: jnp.logaddexp(0.0, f) - y * f, "sigmoid")},
        "binary",
    ),
}


@pytest.fixture(scope="module")
def data():
    return _features(0), _features(1)


@pytest.fixture(scope="module")
def fitted(data):
    X, _ = data
    return {
        name: Booster(**(SMALL | kwargs)).fit(X, _targets(kind, X))
        for name, (kwargs, kind) in MODELS.items()
    }


@pytest.fixture(scope="module")
def model_file(fitted, tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "squared_error.json"
    save_model(fitted["squared_error"], path)
    return path


def _document(path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _write(tmp_path, document, name="edited.json"):
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def _stamped(document):
    """``document`` with its whole-document checksum recomputed, as a buggy
    writer or a forger could: the content checks must still refuse it."""
    document["checksum"] = document_checksum(document)
    return document


# -- round trips ---------------------------------------------------------------------
@pytest.mark.parametrize("name", list(MODELS))
def test_a_loaded_model_predicts_bit_identically(name, fitted, data, tmp_path):
    model, path = fitted[name], tmp_path / f"{name}.json"
    save_model(model, path)
    loaded = load_model(path)
    for X in data:
        np.testing.assert_array_equal(loaded.predict_raw(X), model.predict_raw(X))
        np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    for field in Tree._fields:
        saved, back = getattr(model.forest_, field), getattr(loaded.forest_, field)
        if saved is None:  # (category_left: only with categorical columns)
            assert back is None
            continue
        assert back.dtype == saved.dtype
        np.testing.assert_array_equal(back, saved)
    np.testing.assert_array_equal(loaded.train_loss_, model.train_loss_)
    np.testing.assert_array_equal(loaded.bin_edges_, model.bin_edges_)
    assert (loaded.n_outputs_, loaded.n_features_in_, loaded.n_estimators_) == (
        model.n_outputs_,
        model.n_features_in_,
        model.n_estimators_,
    )
    assert loaded.multi_strategy == model.multi_strategy
    assert loaded.max_depth == model.max_depth


def test_the_file_is_utf8_json_with_exact_arrays(model_file, fitted):
    document = _document(model_file)
    assert document["format"] == "jaxboost-model"
    assert document["version"] == FORMAT_VERSION
    assert set(document) == {
        "format",
        "version",
        "params",
        "loss",
        "state",
        "checksums",
        "checksum",
    }
    assert "loss" not in document["params"] and "devices" not in document["params"]
    assert document["loss"] == {
        "name": "squared_error",
        "params": {},
        "link": "identity",
        "n_outputs": 1,
    }
    threshold = document["state"]["forest_"]["threshold"]
    assert threshold["dtype"] == "float32"
    raw = base64.b64decode(threshold["data"])
    stored = np.frombuffer(raw, "<f4").reshape(threshold["shape"])
    np.testing.assert_array_equal(stored, fitted["squared_error"].forest_.threshold)
    assert np.isinf(stored).any()  # the +inf thresholds of nodes that do not split


def test_a_parametrised_catalogue_loss_is_rebuilt_with_its_parameters(fitted, tmp_path):
    save_model(fitted["quantile_0.3"], tmp_path / "q.json")
    assert _document(tmp_path / "q.json")["loss"]["params"] == {"alpha": 0.3}
    loaded = load_model(tmp_path / "q.json")
    assert (loaded.loss_.name, loaded.loss_.params) == ("quantile", {"alpha": 0.3})
    assert loaded.loss_.hessian_informative is False


def test_a_custom_loss_predicts_through_its_link_but_needs_the_loss_to_train(
    fitted, data, tmp_path
):
    X, y = data[0], _targets("binary", data[0])
    model = fitted["custom_lambda"]
    path = _saved(model, tmp_path, "custom.json")
    assert _document(path)["loss"] == {"name": None, "link": "sigmoid"}
    loaded = load_model(path)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    with pytest.raises(RuntimeError, match="without its custom loss.*loss="):
        loaded.fit(X, y)


def test_a_custom_loss_given_at_load_time_can_be_refitted(fitted, data, tmp_path):
    X, y = data[0], _targets("binary", data[0])
    model = fitted["custom_lambda"]
    loaded = load_model(_saved(model, tmp_path, "custom.json"), loss=model.loss)
    assert loaded.loss is model.loss
    loaded.fit(X, y)  # the same settings and data grow the same trees
    np.testing.assert_allclose(loaded.predict_raw(X), model.predict_raw(X), rtol=1e-6)


def test_a_given_loss_with_another_link_is_refused(fitted, tmp_path):
    save_model(fitted["binary_logloss"], tmp_path / "binary.json")
    with pytest.raises(ValueError, match="link 'identity' differs.*'sigmoid'"):
        load_model(tmp_path / "binary.json", loss=_quartic)


def test_optional_attributes_round_trip_and_absent_ones_stay_absent(fitted, tmp_path):
    model = copy.copy(fitted["squared_error"])
    model.feature_names_in_ = ["a", "b", "ç", "x 4"]
    model.best_iteration_, model.best_score_ = 2, 0.25
    model.evals_result_ = {"valid_0": {"loss": [1.5, 0.25, float("nan"), float("inf")]}}
    loaded = load_model(_saved(model, tmp_path, "extra.json"))
    assert loaded.feature_names_in_ == ["a", "b", "ç", "x 4"]
    assert (loaded.best_iteration_, loaded.best_score_) == (2, 0.25)
    assert (loaded.leaf_method_, loaded.split_criterion_) == ("newton", "second_order")
    assert loaded.armijo_ is False
    np.testing.assert_array_equal(
        loaded.evals_result_["valid_0"]["loss"], [1.5, 0.25, np.nan, np.inf]
    )
    model.best_iteration_ = model.best_score_ = None
    loaded = load_model(_saved(model, tmp_path, "none.json"))
    assert loaded.best_iteration_ is None and loaded.best_score_ is None
    for name in ("feature_names_in_", "best_iteration_", "best_score_", "evals_result_"):
        delattr(model, name)
    bare = load_model(_saved(model, tmp_path, "bare.json"))
    assert not any(hasattr(bare, name) for name in ("best_iteration_", "evals_result_"))


def test_an_early_stopped_model_on_a_data_frame_round_trips(data, tmp_path):
    pd = pytest.importorskip("pandas")
    X, X_valid = data
    frame = pd.DataFrame(X, columns=["alpha", "beta", "gamma", "delta"])
    valid = pd.DataFrame(X_valid, columns=frame.columns)
    model = Booster(loss="squared_error", n_estimators=40, max_depth=2, max_bins=16)
    model.fit(
        frame,
        _targets("real", X),
        eval_set=[(valid, _targets("real", X_valid))],
        early_stopping_rounds=2,
    )
    loaded = load_model(_saved(model, tmp_path))
    assert loaded.feature_names_in_ == ["alpha", "beta", "gamma", "delta"]
    assert loaded.best_iteration_ == model.best_iteration_ == loaded.n_estimators_
    assert loaded.best_score_ == model.best_score_
    assert loaded.evals_result_ == model.evals_result_
    np.testing.assert_array_equal(loaded.predict(valid), model.predict(valid))
    np.testing.assert_array_equal(
        loaded.predict_raw(valid, iteration_range=(1, 2)),
        model.predict_raw(valid, iteration_range=(1, 2)),
    )


def _saved(model, tmp_path, name="model.json"):
    save_model(model, tmp_path / name)
    return tmp_path / name


def test_saving_refuses_unfitted_models_and_settings_that_are_not_data(fitted, tmp_path):
    with pytest.raises(RuntimeError, match="not fitted"):
        save_model(Booster(), tmp_path / "unfitted.json")
    model = copy.copy(fitted["squared_error"])
    model.random_state = np.random.default_rng(0)
    with pytest.raises(ValueError, match="random_state"):
        save_model(model, tmp_path / "rng.json")


def test_every_tree_field_has_a_rule():
    assert set(FOREST_FIELDS) == set(Tree._fields)


# -- errors --------------------------------------------------------------------------
def _set_array(document, field, array):
    """Replace a tree array and its own checksum, as a buggy writer or a forger could."""
    document["state"]["forest_"][field] = encode_array(array)
    document["checksums"][f"state.forest_.{field}"] = array_checksum(array)


def _get_array(document, field):
    return decode_array(document["state"]["forest_"][field], field, FOREST_FIELDS[field][0])


def _edit_forest(field, edit):
    def mutate(document):
        _set_array(document, field, edit(_get_array(document, field)))

    return mutate


def _drop_last_tree(fields):
    def mutate(document):
        for field in fields:
            _set_array(document, field, _get_array(document, field)[:-1])

    return mutate


def _set(path, value):
    def mutate(document):
        *parents, last = path
        node = document
        for key in parents:
            node = node[key]
        node[last] = value

    return mutate


def _delete(path):
    def mutate(document):
        *parents, last = path
        node = document
        for key in parents:
            node = node[key]
        del node[last]

    return mutate


def _first_set(array, value):
    array = array.copy()
    array.reshape(-1)[0] = value
    return array


ALL_NODES = ("feature", "threshold", "threshold_bin", "missing_left", "split_gain")


def _trim_nodes(document):
    for field in ALL_NODES:
        _set_array(document, field, _get_array(document, field)[:, :2])


def _bool_byte_2(document):
    entry = document["state"]["forest_"]["missing_left"]
    data = bytearray(base64.b64decode(entry["data"]))
    data[0] = 2
    entry["data"] = base64.b64encode(bytes(data)).decode()


FOREST = ("state", "forest_")
DOCUMENT_ERRORS = {
    "wrong format": (_set(("format",), "xgboost"), "not a jaxboost model file"),
    "newer version": (_set(("version",), FORMAT_VERSION + 1), "newer jaxboost.*upgrade"),
    "version as text": (_set(("version",), "1"), "version: expected a positive integer"),
    "missing top key": (_delete(("state",)), r"missing keys \['state'\]"),
    "extra top key": (_set(("comment",), "hi"), r"unexpected keys \['comment'\]"),
    "missing state key": (_delete(("state", "init_score_")), r"missing keys \['init_score_'\]"),
    "extra forest key": (_set(FOREST + ("depth",), 2), r"unexpected keys \['depth'\]"),
    "extra param": (_set(("params", "colour"), "red"), r"params: unexpected.*colour"),
    "param of wrong type": (_set(("params", "max_depth"), "2"), "params.max_depth: expected int"),
    "integer as float": (_set(("state", "n_outputs_"), 1.0), "n_outputs_: expected an integer"),
    "integer as bool": (_set(("state", "n_estimators_"), True), "expected an integer"),
    "floats as text": (_set(("state", "train_loss_"), "0.5"), "expected a list of numbers"),
    "array not an object": (_set(FOREST + ("feature",), [0, 1]), "feature: expected a JSON obj"),
    "dtype not allowed": (
        _set(FOREST + ("leaf_value", "dtype"), "float64"),
        "dtype 'float64' is not one of",
    ),
    "dtype swapped": (_set(FOREST + ("feature", "dtype"), "float32"), "expected dtype 'int32'"),
    "bad base64": (_set(FOREST + ("threshold", "data"), "@@not base64@@"), "not valid base64"),
    "byte length": (_set(FOREST + ("threshold", "shape"), [4, 4]), "bytes, shape .* needs"),
    "negative shape": (_set(FOREST + ("threshold", "shape"), [-4, -3]), "non-negative"),
    "tree counts differ": (_drop_last_tree(["leaf_value"]), "leaf_value: expected shape"),
    "node count not 2^D - 1": (
        _trim_nodes,
        r"2 nodes per tree is not 2\^depth - 1",
    ),
    "leaf count not 2^D": (
        _edit_forest("leaf_weight", lambda a: np.concatenate([a, a], axis=1)),
        "leaf_weight: expected shape",
    ),
    "features vs bin edges": (_set(("state", "n_features_in_"), 3), "bin_edges_: expected"),
    "n_outputs vs leaf_value": (_set(("state", "n_outputs_"), 2), "leaf_value: expected shape"),
    "rounds vs trees": (_set(("state", "n_estimators_"), 3), "trees do not make"),
    "max_depth vs trees": (_set(("params", "max_depth"), 5), "params.max_depth: 5 differs"),
    "max_bins vs edges": (_set(("params", "max_bins"), 8), "params.max_bins: 8 is less than"),
    "train_loss length": (_set(("state", "train_loss_"), [1.0]), "expected 5 values"),
    "feature out of range": (
        _edit_forest("feature", lambda a: _first_set(a, N_FEATURES)),
        r"feature index outside \[0, 4\)",
    ),
    "negative feature": (_edit_forest("feature", lambda a: _first_set(a, -1)), "outside"),
    "threshold_bin out of range": (
        _edit_forest("threshold_bin", lambda a: _first_set(a, 16)),
        r"bin outside \[0, 16\)",
    ),
    "threshold edited": (
        _edit_forest("threshold", lambda a: _first_set(a, 0.123)),
        "thresholds differ from the bin edges",
    ),
    "leaf value not finite": (
        _edit_forest("leaf_value", lambda a: _first_set(a, np.inf)),
        "leaf_value: not finite",
    ),
    "leaf values overflow": (
        _edit_forest("leaf_value", lambda a: np.full_like(a, 3e38)),
        "overflow float32",
    ),
    "negative leaf weight": (
        _edit_forest("leaf_weight", lambda a: _first_set(a, -1.0)),
        "non-negative weights",
    ),
    "bool bytes": (
        _bool_byte_2,
        "bytes other than 0 and 1",
    ),
    "unknown loss": (_set(("loss", "name"), "os.system"), "not a catalogue loss"),
    "unknown link": (_set(("loss", "link"), "tanh"), "loss.link: expected one of"),
    "link vs catalogue": (_set(("loss", "link"), "sigmoid"), "loss.link: 'sigmoid' differs"),
    "bad loss params": (_set(("loss", "params"), {"beta": 1}), "cannot rebuild 'squared_error'"),
    "custom loss with params": (_set(("loss", "name"), None), r"loss: unexpected keys"),
    "best_iteration out of range": (
        _set(("state", "best_iteration_"), 9),
        r"best_iteration_: 9 is outside \[1, 4\]",
    ),
    "feature names count": (
        _set(("state", "feature_names_in_"), ["a"]),
        "one name per feature",
    ),
    "feature names not text": (_set(("state", "feature_names_in_"), [1, 2, 3, 4]), "strings"),
    "more rounds than n_estimators": (_set(("params", "n_estimators"), 3), "over params"),
    "eval lists too short": (
        _set(("state", "evals_result_"), {"valid": {"rmse": [1.0]}}),
        "evals_result_: expected lists",
    ),
    "best score as text": (_set(("state", "best_score_"), "0.1"), "best_score_: expected numbers"),
    "armijo as a number": (_set(("state", "armijo_"), 1), "armijo_: expected true or false"),
    "checksums missing": (_delete(("checksums",)), r"top level: missing keys \['checksums'\]"),
    "one checksum missing": (
        _delete(("checksums", "state.bin_edges_")),
        r"state\.bin_edges_: its checksum is missing.*edited or damaged",
    ),
    "checksums not an object": (_set(("checksums",), []), "checksums: expected a JSON object"),
    "checksum not hex": (
        _set(("checksums", "state.init_score_"), "ABC"),
        r"checksums\.state\.init_score_: expected 64 lowercase hex digits",
    ),
    "checksum of no array": (
        _set(("checksums", "state.forest_.depth"), "0" * 64),
        r"checksums: unexpected keys \['state\.forest_\.depth'\]",
    ),
}


@pytest.mark.parametrize("case", list(DOCUMENT_ERRORS))
def test_a_bad_document_raises_a_clear_error(case, model_file, tmp_path):
    mutate, message = DOCUMENT_ERRORS[case]
    document = _document(model_file)
    mutate(document)
    path = _write(tmp_path, _stamped(document))
    with pytest.raises(
        ModelFileError, match=re.escape(f"model file {str(path)!r}: ") + ".*" + message
    ):
        load_model(path)


VERSION = f'"version": {FORMAT_VERSION}'.encode()
BYTES_ERRORS = {
    "not JSON": (lambda raw: b"hello world", "not valid JSON"),
    "not UTF-8": (lambda raw: raw[:10] + b"\xff\xfe" + raw[12:], "not UTF-8"),
    "truncated": (lambda raw: raw[: len(raw) // 2], "truncated"),
    "empty": (lambda raw: b"", "empty"),
    "junk appended": (lambda raw: raw + b"\x00junk", "not valid JSON"),
    "NaN literal": (lambda raw: raw.replace(VERSION, b'"version": NaN'), "not a JSON"),
    "number overflows": (lambda raw: raw.replace(VERSION, b'"version": 1e999'), "overflow"),
    "huge integer": (lambda raw: raw.replace(VERSION, b'"version": ' + b"9" * 5000), "JSON"),
    "duplicated key": (
        lambda raw: raw.replace(VERSION, VERSION + b", " + VERSION),
        r"duplicated keys \['version'\]",
    ),
    "nested too deeply": (lambda raw: b"[" * 200_000 + b"]" * 200_000, "JSON"),
    "a JSON list": (lambda raw: b"[1, 2]", "not a jaxboost model file"),
}


@pytest.mark.parametrize("case", list(BYTES_ERRORS))
def test_bad_bytes_raise_a_clear_error(case, model_file, tmp_path):
    mutate, message = BYTES_ERRORS[case]
    path = tmp_path / "bytes.json"
    raw = model_file.read_bytes()
    assert mutate(raw) != raw
    path.write_bytes(mutate(raw))
    with pytest.raises(ModelFileError, match=message):
        load_model(path)


def test_oversized_files_are_refused_before_reading(model_file, tmp_path):
    with pytest.raises(ModelFileError, match="over the limit of 1000 bytes"):
        load_model(model_file, max_bytes=1000)
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as file:
        file.truncate((1 << 30) + 1)  # sparse: no disk used, and never read
    with pytest.raises(ModelFileError, match="over the limit"):
        load_model(huge)


def test_errors_are_value_errors():
    assert issubclass(ModelFileError, ValueError)


# -- checksums -----------------------------------------------------------------------
EDITED = "edited or damaged after saving.*save it again with jaxboost"


def _changed(*places):
    """The error's pattern for arrays edited at ``places``, checksums left as saved."""
    changed = ", ".join(places)
    return re.escape(f"checksum: the content does not match it (these arrays changed: {changed})")


# (category_left: only in models with categorical columns, tests/test_categorical.py;
# the children: only in leaf-wise models of node tables, tests/test_node_tables.py)
_ONLY_IN_SOME = ("category_left", "left_child", "right_child")
ARRAY_PLACES = [f"state.forest_.{f}" for f in Tree._fields if f not in _ONLY_IN_SOME] + [
    "state.init_score_",
    "state.bin_edges_",
]


def _entry(document, place):
    """The encoded array at ``place`` ("state.forest_.threshold") of a document."""
    node = document
    for key in place.split("."):
        node = node[key]
    return node


def _hand_edit(document, field, edit):
    """Rewrite a tree array, leaving its saved checksum as it was (an edit by hand)."""
    document["state"]["forest_"][field] = encode_array(edit(_get_array(document, field)))


def test_every_array_has_the_sha256_of_its_dtype_shape_and_bytes(model_file):
    document = _document(model_file)
    assert set(document["checksums"]) == set(ARRAY_PLACES)
    for place in ARRAY_PLACES:
        entry = _entry(document, place)
        header = f"{entry['dtype']} {','.join(str(n) for n in entry['shape'])}\n".encode()
        expected = hashlib.sha256(header + base64.b64decode(entry["data"])).hexdigest()
        assert document["checksums"][place] == expected, place


def test_a_checksum_follows_values_dtype_and_shape_not_byte_order():
    values = np.arange(-3, 3, dtype="<f4").reshape(2, 3)
    assert array_checksum(values) == array_checksum(values.astype(">f4"))
    assert array_checksum(values) != array_checksum(values.reshape(3, 2))
    assert array_checksum(values) != array_checksum(values.astype(np.int32))
    assert array_checksum(np.zeros(1, "f4")) != array_checksum(-np.zeros(1, "f4"))


def test_every_single_bit_flip_in_the_leaf_values_is_refused(model_file, tmp_path):
    document = _document(model_file)
    entry = document["state"]["forest_"]["leaf_value"]
    data = base64.b64decode(entry["data"])
    bits = np.random.default_rng(20240611).choice(8 * len(data), size=200, replace=False)
    path, loaded = tmp_path / "flipped.json", []
    for bit in bits.tolist():
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)  # one bit of one little-endian float32
        entry["data"] = base64.b64encode(bytes(flipped)).decode()
        path.write_text(json.dumps(document), encoding="utf-8")
        try:
            load_model(path)
        except ModelFileError as error:
            assert re.search(_changed("state.forest_.leaf_value") + ".*" + EDITED, str(error))
        else:
            loaded.append(bit)
    assert not loaded, f"{len(loaded)} of {len(bits)} bit flips loaded: bits {loaded}"


def test_negated_leaf_values_are_refused(model_file, tmp_path):
    document = _document(model_file)
    _hand_edit(document, "leaf_value", np.negative)
    with pytest.raises(ModelFileError, match=_changed("state.forest_.leaf_value") + ".*" + EDITED):
        load_model(_write(tmp_path, document))


def test_an_edited_threshold_is_refused_even_with_its_bin_edges_edited_alike(model_file, tmp_path):
    document = _document(model_file)
    _hand_edit(document, "threshold", lambda a: _first_set(a, 0.123))
    with pytest.raises(ModelFileError, match=_changed("state.forest_.threshold") + ".*" + EDITED):
        load_model(_write(tmp_path, document))
    # doubled thresholds and edges pass every content check: only the checksum tells
    document = _document(model_file)
    _hand_edit(document, "threshold", lambda a: 2 * a)
    edges = decode_array(document["state"]["bin_edges_"], "bin_edges_", "float32")
    document["state"]["bin_edges_"] = encode_array(2 * edges)
    both = _changed("state.forest_.threshold", "state.bin_edges_")
    with pytest.raises(ModelFileError, match=both + ".*" + EDITED):
        load_model(_write(tmp_path, document))


@pytest.mark.parametrize("place", ARRAY_PLACES)
def test_a_flipped_bit_in_any_array_is_refused_naming_it(place, model_file, tmp_path):
    document = _document(model_file)
    entry = _entry(document, place)
    data = bytearray(base64.b64decode(entry["data"]))
    data[0] ^= 1  # the lowest bit: a bool stays 0 or 1
    entry["data"] = base64.b64encode(bytes(data)).decode()
    with pytest.raises(ModelFileError, match=_changed(place) + ".*" + EDITED):
        load_model(_write(tmp_path, document))


@pytest.mark.parametrize("name", list(MODELS))
def test_a_file_rewritten_with_other_json_layout_loads_identically(name, fitted, data, tmp_path):
    model = fitted[name]
    document = _document(_saved(model, tmp_path))
    assert set(document["checksums"]) == set(ARRAY_PLACES)
    path = tmp_path / "compact.json"
    path.write_text(json.dumps(document, separators=(",", ":"), sort_keys=True))
    loaded = load_model(path)
    for X in data:
        np.testing.assert_array_equal(loaded.predict_raw(X), model.predict_raw(X))
        np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def _older(document, version):
    """``document`` as an older jaxboost wrote it: version 2 without the whole
    document's checksum, version 1 without any."""
    document = copy.deepcopy(document)
    document["version"] = version
    for key in ("checksum", "checksums")[: 3 - version]:
        del document[key]
    return document


OLDER = "written by an older jaxboost \\(format version {}\\).*Save it again with this jaxboost"


@pytest.mark.parametrize("version", [1, 2])
def test_an_older_file_loads_with_a_warning(version, model_file, fitted, data, tmp_path):
    path = _write(tmp_path, _older(_document(model_file), version))
    with pytest.warns(UserWarning, match=re.escape(str(path)) + ".* " + OLDER.format(version)):
        loaded = load_model(path)
    for X in data:
        np.testing.assert_array_equal(loaded.predict(X), fitted["squared_error"].predict(X))


def test_a_version_2_file_has_its_arrays_checked_and_the_rest_for_consistency(model_file, tmp_path):
    document = _older(_document(model_file), 2)
    _hand_edit(document, "leaf_value", np.negative)
    with pytest.raises(ModelFileError, match=r"state\.forest_\.leaf_value: .*" + EDITED):
        load_model(_write(tmp_path, document))
    # documented: its other fields have no checksum, an edit consistent with the rest loads
    document = _older(_document(model_file), 2)
    document["params"]["learning_rate"] = 0.5
    with pytest.warns(UserWarning, match="arrays are checked"):
        assert load_model(_write(tmp_path, document)).learning_rate == 0.5


def test_a_version_1_file_has_the_content_checks_alone(model_file, tmp_path):
    document = _older(_document(model_file), 1)
    with pytest.warns(UserWarning, match="no checksums"):
        loaded = load_model(_write(tmp_path, document))
    _hand_edit(document, "leaf_value", np.negative)
    with pytest.warns(UserWarning, match="no checksums"):
        edited = load_model(_write(tmp_path, document))
    np.testing.assert_array_equal(edited.forest_.leaf_value, -loaded.forest_.leaf_value)
    document["checksums"] = {}
    with pytest.raises(ModelFileError, match=r"unexpected keys \['checksums'\]"):
        load_model(_write(tmp_path, document))


# -- fuzz ----------------------------------------------------------------------------
def _containers(node, path=()):
    """``(path, container)`` of every dict and list in a JSON document."""
    found = [(path, node)] if isinstance(node, (dict, list)) else []
    children = (
        node.items()
        if isinstance(node, dict)
        else enumerate(node)
        if isinstance(node, list)
        else ()
    )
    for key, child in children:
        found += _containers(child, path + (key,))
    return found


def _arrays(document):
    return [node for _, node in _containers(document) if isinstance(node, dict) and "data" in node]


def _dump_with_duplicate(node, duplicate) -> str:
    """JSON text of ``node`` where the dict ``duplicate`` repeats its first key."""
    if isinstance(node, dict):
        pairs = list(node.items())
        if node is duplicate and pairs:
            pairs.append(pairs[0])
        body = ", ".join(f"{json.dumps(k)}: {_dump_with_duplicate(v, duplicate)}" for k, v in pairs)
        return "{" + body + "}"
    if isinstance(node, list):
        return "[" + ", ".join(_dump_with_duplicate(v, duplicate) for v in node) + "]"
    return json.dumps(node)


def _mutant(raw: bytes, document: dict, rng: np.random.Generator) -> bytes:
    """One randomly damaged copy of a model file."""
    kind = int(rng.integers(10))
    if kind == 0:  # flip bytes
        edited = bytearray(raw)
        for at in rng.integers(len(raw), size=int(rng.integers(1, 4))):
            edited[at] = int(rng.integers(256))
        return bytes(edited)
    if kind == 1:  # truncate
        return raw[: int(rng.integers(len(raw)))]
    if kind == 2:  # append junk
        return raw + bytes(rng.integers(256, size=int(rng.integers(1, 20))).tolist())
    document = copy.deepcopy(document)
    containers = [c for _, c in _containers(document) if c]
    container = containers[int(rng.integers(len(containers)))]
    keys = list(container) if isinstance(container, dict) else list(range(len(container)))
    key = keys[int(rng.integers(len(keys)))]
    arrays = _arrays(document)
    array = arrays[int(rng.integers(len(arrays)))]
    if kind == 3:  # delete a key or item
        del container[key]
    elif kind == 4:  # duplicate a key
        dicts = [c for _, c in _containers(document) if isinstance(c, dict) and c]
        duplicated = dicts[int(rng.integers(len(dicts)))]
        return _dump_with_duplicate(_stamped(document), duplicated).encode()
    elif kind == 5:  # change a value
        choices = [0, -1, 1, 2, 3, 7, 16, 2**31, 1e30, -0.5, 0.5, True, None, "1", [], {}]
        container[key] = choices[int(rng.integers(len(choices)))]
    elif kind == 6:  # swap a dtype
        array["dtype"] = ["float32", "int32", "bool", "uint8", "float64", "<f4"][
            int(rng.integers(6))
        ]
    elif kind == 7:  # alter a shape
        shape = list(array["shape"])
        at = int(rng.integers(len(shape))) if shape else 0
        if shape and rng.random() < 0.7:
            shape[at] = [0, shape[at] - 1, shape[at] + 1, 2 * shape[at]][int(rng.integers(4))]
        else:
            shape.insert(at, int(rng.integers(1, 3)))
        array["shape"] = shape
    else:  # overwrite array bytes with random bytes of the same length
        data = bytearray(base64.b64decode(array["data"]))
        if data:
            start = int(rng.integers(len(data)))
            width = int(rng.integers(1, 9))
            end = min(len(data), start + width)
            data[start:end] = bytes(rng.integers(256, size=end - start).tolist())
        array["data"] = base64.b64encode(bytes(data)).decode()
    # stamped: a forged checksum, so the content checks meet every edit
    return json.dumps(_stamped(document)).encode()


def test_mutated_files_load_correctly_or_raise_a_clear_error(model_file, data, tmp_path):
    raw, document = model_file.read_bytes(), _document(model_file)
    X, _ = data
    rng = np.random.default_rng(20240607)
    outcomes = {"rejected": 0, "loaded": 0}
    path = tmp_path / "mutant.json"
    for _ in range(300):
        path.write_bytes(_mutant(raw, document, rng))
        try:
            model = load_model(path)
        except ValueError:
            outcomes["rejected"] += 1
            continue
        outcomes["loaded"] += 1
        for predictions in (model.predict_raw(X), model.predict(X)):
            assert predictions.shape == (N_ROWS,)
            assert np.all(np.isfinite(predictions))
    assert outcomes["rejected"] > 150 and outcomes["loaded"] > 5, outcomes


# -- loading executes nothing --------------------------------------------------------
class _Payload:
    def __reduce__(self):
        return (builtins.exec, ("raise SystemExit('pickle payload ran')",))


def _forbid_code_execution(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("loading a model file ran code")

    for module, name in [
        (builtins, "eval"),
        (builtins, "exec"),
        (builtins, "compile"),
        (pickle, "loads"),
        (pickle, "load"),
        (marshal, "loads"),
        (importlib, "import_module"),
    ]:
        monkeypatch.setattr(module, name, forbidden)


def test_loading_executes_no_code_from_the_file(fitted, data, tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    code = f"__import__('pathlib').Path({str(marker)!r}).touch()"
    pickled = base64.b64encode(pickle.dumps(_Payload())).decode()
    document = _document(_saved(fitted["squared_error"], tmp_path))
    document["state"]["feature_names_in_"] = [code, "exec('1')", pickled, "{{x}}"]
    document["params"]["leaf_method"] = code
    loads_as_data = _write(tmp_path, _stamped(document), "data.json")
    rejected = {
        "loss.name": _set(("loss", "name"), code),
        "optax": _set(("loss", "name"), "optax:__import__"),
        "pickle as array": _set(FOREST + ("leaf_value", "data"), pickled),
        "pickle as dtype": _set(FOREST + ("leaf_value", "dtype"), "object"),
    }
    paths = []
    for name, mutate in rejected.items():
        edited = copy.deepcopy(document)
        mutate(edited)
        paths.append(_write(tmp_path, _stamped(edited), f"{name}.json"))
    pickle_file = tmp_path / "pickle.json"
    pickle_file.write_bytes(pickle.dumps(_Payload()))

    with monkeypatch.context() as patch:
        _forbid_code_execution(patch)
        model = load_model(loads_as_data)
        for path in paths + [pickle_file]:
            with pytest.raises(ModelFileError):
                load_model(path)
    assert list(model.feature_names_in_) == document["state"]["feature_names_in_"]
    assert model.leaf_method == code
    assert not marker.exists()
    X, _ = data
    with pytest.warns(UserWarning, match="X does not have feature names"):  # (an array)
        np.testing.assert_array_equal(model.predict(X), fitted["squared_error"].predict(X))


def test_a_setting_missing_from_an_older_file_takes_its_default(tmp_path, model_file):
    """Files written before a Booster setting existed keep loading."""
    document = _document(model_file)
    del document["params"]["colsample_bytree"]
    model = load_model(_write(tmp_path, _stamped(document)))
    assert model.colsample_bytree == 1.0


# -- the whole document's checksum ---------------------------------------------------
def _with_names(model):
    named = copy.copy(model)
    named.feature_names_in_ = np.array([f"x{i}" for i in range(N_FEATURES)], dtype=object)
    return named


def _negate_leaves_and_their_checksum(document):
    leaves = -_get_array(document, "leaf_value")
    _set_array(document, "leaf_value", leaves)


WHOLE_DOCUMENT_EDITS = {
    # each of these loaded before whole-document checksums (with other
    # predictions, another loss to refit with, or other settings)
    "loss name": ("squared_error", _set(("loss", "name"), "absolute_error")),
    "link of a custom loss": ("custom_lambda", _set(("loss", "link"), "identity")),
    "a setting": ("squared_error", _set(("params", "learning_rate"), 0.5)),
    "a feature name": ("squared_error", _set(("state", "feature_names_in_", 2), "income")),
    "an array and its own checksum": ("squared_error", _negate_leaves_and_their_checksum),
    "a loss parameter": ("quantile_0.3", _set(("loss", "params", "alpha"), 0.7)),
}


@pytest.mark.parametrize("case", list(WHOLE_DOCUMENT_EDITS))
def test_an_edit_anywhere_in_the_file_is_refused_naming_the_file(case, fitted, tmp_path):
    name, mutate = WHOLE_DOCUMENT_EDITS[case]
    document = _document(_saved(_with_names(fitted[name]), tmp_path))
    mutate(document)
    path = _write(tmp_path, document)
    message = re.escape(f"model file {str(path)!r}: checksum: the content does not match it")
    with pytest.raises(ModelFileError, match=message + ".*edited or damaged after saving"):
        load_model(path)


def test_an_edited_array_is_named_in_the_error(model_file, tmp_path):
    document = _document(model_file)
    _hand_edit(document, "leaf_value", np.negative)
    hint = re.escape("(these arrays changed: state.forest_.leaf_value)")
    with pytest.raises(ModelFileError, match=hint):
        load_model(_write(tmp_path, document))


@pytest.mark.parametrize("removed", [("checksum",), ("checksum", "checksums")])
def test_a_current_version_file_without_its_checksum_is_refused(removed, model_file, tmp_path):
    document = _document(model_file)
    for key in removed:
        del document[key]
    path = _write(tmp_path, document)
    message = (
        f"model file {str(path)!r}: checksum: missing, and every version {FORMAT_VERSION} file "
        "carries one"
    )
    with pytest.raises(ModelFileError, match=re.escape(message)):
        load_model(path)


def test_the_checksum_is_the_sha256_of_the_sorted_compact_json_of_the_rest(model_file):
    document = _document(model_file)
    rest = {key: value for key, value in document.items() if key != "checksum"}
    text = json.dumps(rest, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    assert document["checksum"] == hashlib.sha256(text.encode()).hexdigest()
