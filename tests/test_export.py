"""Model files for other libraries (jaxboost.frontends.exports.export_xgboost,
export_onnx): XGBoost, Treelite, shap and ONNX Runtime read them and give
jaxboost's raw scores and SHAP values.  Each library's tests skip, with
the reason, where it is not installed (the ``explain`` extra)."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxboost as jb
from jaxboost.engine.node_table import node_table

N_FEATURES = 5


def _data(n=240, seed=0):
    """Rows with NaNs in the numeric columns; column 4 holds category codes 0..6."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, N_FEATURES)).astype(np.float32)
    X[:, 4] = rng.integers(0, 7, n)
    y = X[:, 0] * X[:, 1] + X[:, 2] + 1.5 * np.isin(X[:, 4], [1, 4, 5])
    X[:, :4][rng.random((n, 4)) < 0.15] = np.nan
    return X, y.astype(np.float32)


def _custom(y, f):  # a loss XGBoost does not know
    return jnp.log(jnp.cosh(f - y)) + 0.1 * (f - y) ** 2


# name -> (Booster settings, target of y); all fit on _data's X
CASES = {
    "squared_error": ({"loss": "squared_error"}, lambda y: y),
    "binary_logloss": ({"loss": "binary_logloss"}, lambda y: (y > 0.5).astype(np.float32)),
    "softmax": (
        {"loss": "softmax_cross_entropy"},
        lambda y: np.digitize(y, [0.0, 1.5]).astype(np.float32),
    ),
    "softmax_per_class": (
        {"loss": "softmax_cross_entropy", "multi_strategy": "one_output_per_tree"},
        lambda y: np.digitize(y, [0.0, 1.5]).astype(np.float32),
    ),
    "poisson": ({"loss": "poisson"}, lambda y: np.exp(y / 3).astype(np.float32)),
    "custom": ({"loss": _custom}, lambda y: y),
    "gaussian_nll": ({"loss": "gaussian_nll"}, lambda y: y),  # two raw outputs
    # zero curvature: every cover 0 (quantile), some children's 0 (Huber)
    "quantile": ({"loss": "quantile", "loss_params": {"alpha": 0.8}}, lambda y: y),
    "huber": ({"loss": "huber"}, lambda y: 3 * y),
    "categorical_lossguide": (
        {"categorical_features": [4], "grow_policy": "lossguide", "max_leaves": 5},
        lambda y: y,
    ),
}
KNOWN = {"squared_error", "binary_logloss", "softmax", "softmax_per_class", "poisson"}
_FITTED = {}


@pytest.fixture(params=sorted(CASES))
def case(request):
    """(name, fitted Booster, X) for each case, fitted once per module."""
    name = request.param
    if name not in _FITTED:
        settings, target = CASES[name]
        X, y = _data()
        model = jb.Booster(n_estimators=4, max_depth=3, learning_rate=0.3, **settings)
        _FITTED[name] = model.fit(X, target(y))
    return name, _FITTED[name], _test_rows()


def _test_rows():
    """Fresh rows: NaNs, and category codes unseen in fit (7, 300) or missing."""
    X, _ = _data(n=64, seed=1)
    X[:4, 4] = [7, 300, np.nan, 6]
    return X


def _xgboost_file(model, tmp_path):
    xgb = pytest.importorskip("xgboost", reason="xgboost is not installed (jaxboost[explain])")
    path = tmp_path / "model.json"
    model.save(path, format="xgboost")
    return xgb, xgb.Booster(model_file=str(path)), path


def _matrix(xgb, model, X):
    categorical = [t.column for t in getattr(model, "categories_", None) or []]
    types = ["c" if j in categorical else "q" for j in range(X.shape[1])]
    return xgb.DMatrix(X, feature_types=types, enable_categorical=bool(categorical))


def _table(model):
    return node_table(jax.tree.map(np.asarray, model.forest_))


def _close(actual, expected):
    """Equal to float32 rounding: 1e-5 relative to the values' scale."""
    expected = np.asarray(expected)
    scale = max(float(np.abs(expected).max()), 1.0)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5 * scale)


def test_xgboost_predicts_raw_scores_and_shap_values(case, tmp_path):
    name, model, X = case
    xgb, booster, _ = _xgboost_file(model, tmp_path)
    rows = _matrix(xgb, model, X)
    _close(booster.predict(rows, output_margin=True), model.predict_raw(X))
    if name in KNOWN:  # the loss's objective: the same response-scale predictions
        _close(booster.predict(rows), model.predict(X))
    _close(booster.predict(rows, pred_contribs=True), model.predict_contributions(X))
    _close(booster.predict(rows, pred_interactions=True), model.predict_interactions(X))


def test_xgboost_file_names_its_objective(case, tmp_path):
    name, model, _ = case
    _, booster, path = _xgboost_file(model, tmp_path)
    learner = json.loads(path.read_text())["learner"]
    objective = learner["objective"]["name"]
    expected = {"binary_logloss": "binary:logistic", "softmax": "multi:softprob"}
    expected.update(softmax_per_class="multi:softprob", poisson="count:poisson")
    assert objective == expected.get(name, "reg:squarederror")
    if name == "custom":  # a raw-margin export says so
        assert "raw scores" in booster.attr("jaxboost_objective")
    covers = np.asarray(learner["gradient_booster"]["model"]["trees"][0]["sum_hessian"])
    table = _table(model)
    root = table.root[0]  # (every cover 0: the root's sample weight)
    expected = table.cover[0, root] if table.cover[0, root] > 0 else table.weight[0, root]
    np.testing.assert_allclose(covers[0], expected, rtol=1e-6)


def _at_thresholds():
    """A model on 4 numeric columns, and rows holding every split's
    threshold and its float32 neighbours in every column (NaN in some)."""
    if "thresholds" not in _FITTED:
        X, y = _data()
        model = jb.Booster(n_estimators=4, max_depth=3).fit(X[:, :4], y)
        table = _table(model)
        thresholds = table.threshold[table.left >= 0]
        values = np.concatenate(
            [thresholds, np.nextafter(thresholds, np.inf), np.nextafter(thresholds, -np.inf)]
        )
        rows = np.repeat(values[:, None], 4, axis=1).astype(np.float32)
        rows[1::3, 1] = np.nan
        _FITTED["thresholds"] = model, rows
    return _FITTED["thresholds"]


def test_xgboost_sends_values_at_thresholds_as_jaxboost(tmp_path):
    """jaxboost sends x <= threshold left, XGBoost x < condition."""
    model, rows = _at_thresholds()
    xgb, booster, _ = _xgboost_file(model, tmp_path)
    _close(booster.predict(xgb.DMatrix(rows), output_margin=True), model.predict_raw(rows))


def test_onnxruntime_sends_values_at_thresholds_as_jaxboost(tmp_path):
    pytest.importorskip("onnx", reason="onnx is not installed")
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
    model, rows = _at_thresholds()
    model.save(tmp_path / "model.onnx", format="onnx")
    session = ort.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"])
    _close(session.run(None, {"X": rows})[0][:, 0], model.predict_raw(rows))


def test_a_split_on_missing_values_alone_is_exported(tmp_path):
    """A split ``x <= inf`` (missing values right) is XGBoost's ``x < inf``."""
    X, y = _data()
    X = X[:, :4]
    model = jb.Booster(n_estimators=4, max_depth=2).fit(X, y + 5.0 * np.isnan(X[:, 0]))
    table = _table(model)
    assert np.any(np.isposinf(table.threshold[table.left >= 0]))
    xgb, booster, _ = _xgboost_file(model, tmp_path)
    rows = _test_rows()[:, :4]
    _close(booster.predict(xgb.DMatrix(rows), output_margin=True), model.predict_raw(rows))
    _close(
        booster.predict(xgb.DMatrix(rows), pred_contribs=True), model.predict_contributions(rows)
    )


def test_treelite_predicts_raw_scores(case, tmp_path):
    _, model, X = case
    treelite = pytest.importorskip("treelite", reason="treelite is not installed")
    _, _, path = _xgboost_file(model, tmp_path)
    forest = treelite.frontend.load_xgboost_model(str(path))
    scores = treelite.gtil.predict(forest, X, pred_margin=True)
    _close(scores.reshape(model.predict_raw(X).shape), model.predict_raw(X))


def test_shap_tree_explainer_gives_contributions(case, tmp_path):
    _, model, X = case
    shap = pytest.importorskip("shap", reason="shap is not installed")
    xgb, booster, _ = _xgboost_file(model, tmp_path)
    explainer = shap.TreeExplainer(booster)
    values = np.asarray(explainer.shap_values(_matrix(xgb, model, X)))
    expected = model.predict_contributions(X)  # (n, [K,] F + 1), the expected value last
    if expected.ndim == 3:  # shap: (n, F, K)
        values = np.moveaxis(values, -1, 1)
    _close(values, expected[..., :-1])
    _close(np.broadcast_to(explainer.expected_value, expected.shape[1:-1]), expected[0, ..., -1])


def test_onnxruntime_predicts_raw_scores(case, tmp_path):
    _, model, X = case
    pytest.importorskip("onnx", reason="onnx is not installed")
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
    path = tmp_path / "model.onnx"
    model.save(path, format="onnx")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (scores,) = session.run(None, {"X": X})
    raw = model.predict_raw(X)
    _close(scores.reshape(raw.shape), raw)


def test_estimator_saves_the_formats(tmp_path):
    xgb = pytest.importorskip("xgboost", reason="xgboost is not installed")
    X, y = _data()
    model = jb.Classifier(n_estimators=3, max_depth=2).fit(X[:, :4], y > 0.5)
    model.save(tmp_path / "model.json", format="xgboost")
    booster = xgb.Booster(model_file=str(tmp_path / "model.json"))
    _close(booster.predict(xgb.DMatrix(X[:, :4])), model.predict_proba(X[:, :4])[:, 1])
    with pytest.raises(ValueError, match="format: expected 'jaxboost', 'xgboost' or 'onnx'"):
        model.save(tmp_path / "model.txt", format="lightgbm")


def test_a_model_without_covers_is_refused(tmp_path):
    X, y = _data()
    model = jb.Booster(n_estimators=2, max_depth=2).fit(X[:, :4], y)
    model.forest_ = model.forest_._replace(leaf_cover=None)  # as a format-4 file loads
    with pytest.raises(ValueError, match="older than model format 5"):
        model.save(tmp_path / "model.json", format="xgboost")


def test_a_frames_string_categories_are_read_by_label(tmp_path):
    """The file lists a label column's categories (XGBoost's ``cats``), so
    XGBoost maps a frame's codes by label: a dtype holding a category the
    fit never saw (codes shifted by one before) or in another order;
    integer categories as XGBoost's int64 list."""
    pd = pytest.importorskip("pandas")
    X, y = _data()
    labels = np.array(["b", "c", "d", "e", "f", "g", "h"])[X[:, 4].astype(int)]
    kinds = ["a", "b", "c", "d", "e", "f", "g", "h"]  # "a": in the dtype, never in fit
    numbers = np.array([5, 15, 25])[X[:, 4].astype(int) % 3]  # integer categories
    frame = pd.DataFrame(X[:, :4], columns=list("pqrs")).assign(
        t=pd.Categorical(labels, categories=kinds), u=pd.Categorical(numbers, [5, 15, 25])
    )
    y = y + numbers / 10
    model = jb.Booster(n_estimators=4, max_depth=3).fit(frame, y)
    xgb, booster, _ = _xgboost_file(model, tmp_path)
    rows = xgb.DMatrix(frame, enable_categorical=True)
    _close(booster.predict(rows, output_margin=True), model.predict_raw(frame))
    reordered = frame.assign(
        t=frame["t"].cat.reorder_categories(kinds[::-1]),
        u=frame["u"].cat.reorder_categories([25, 5, 15]),
    )
    rows = xgb.DMatrix(reordered, enable_categorical=True)
    _close(booster.predict(rows, output_margin=True), model.predict_raw(frame))
    _close(booster.predict(rows, pred_contribs=True), model.predict_contributions(frame))


def test_a_path_naming_another_kind_of_file_is_refused(tmp_path):
    """save("m.onnx") wrote jaxboost's JSON; a .ubj name XGBoost cannot parse."""
    model = _FITTED.get("squared_error") or jb.Booster(n_estimators=2, max_depth=2).fit(*_data())
    with pytest.raises(ValueError, match="format='onnx'"):
        model.save(tmp_path / "model.onnx")
    with pytest.raises(ValueError, match="give a .json path"):
        model.save(tmp_path / "model.ubj", format="xgboost")
    regressor = jb.Regressor(n_estimators=2, max_depth=2).fit(*_data())
    with pytest.raises(ValueError, match="format='onnx'"):
        regressor.save(tmp_path / "model.onnx")


def test_column_names_xgboost_refuses_are_named(tmp_path):
    """XGBoost rejects every DMatrix of a model whose names hold [, ] or <."""
    pd = pytest.importorskip("pandas")
    X, y = _data()
    frame = pd.DataFrame(X[:, :3], columns=["a", "b[1]", "c"])
    model = jb.Booster(n_estimators=2, max_depth=2).fit(frame, y)
    with pytest.raises(ValueError, match=r"column 'b\[1\]'\); rename the columns"):
        model.save(tmp_path / "model.json", format="xgboost")
    model.save(tmp_path / "model.onnx", format="onnx")  # ONNX reads columns by position
