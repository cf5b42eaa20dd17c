"""Tests of ``jaxboost.frontends.fitted.explain_plots``: the SHAP plots draw a
point per row and feature at its SHAP value (`predict_contributions`),
coloured or placed by the feature's value; the tree plot draws a box per
node of `trees_to_dataframe`, named by column names and category labels."""

from __future__ import annotations

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
pd = pytest.importorskip("pandas")

import matplotlib.pyplot as plt

import jaxboost as jb
from jaxboost import losses
from jaxboost.plotting import (
    plot_shap_dependence,
    plot_shap_summary,
    plot_tree,
    trees_to_dataframe,
)

LABELS = ["north", "south", "east", "west"]


def _frame(n=200, seed=0):
    """As tests/test_tree_dump.py's: ``a``, ``b`` (15% NaN), a category
    column ``region`` and a constant column."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "b": rng.normal(size=n),
            "region": pd.Categorical(rng.choice(LABELS, n), categories=LABELS),
            "constant": np.ones(n),
        }
    )
    y = frame.a - 0.7 * frame.b.clip(-1, 1) + 1.5 * frame.region.isin(["south", "west"])
    y = y + 0.1 * rng.normal(size=n)
    frame.loc[rng.random(n) < 0.15, "b"] = np.nan
    return frame, y.to_numpy(np.float32)


@pytest.fixture(scope="module", params=["depthwise", "lossguide"])
def fitted(request):
    frame, y = _frame()
    leaves = {"max_leaves": 5} if request.param == "lossguide" else {}
    model = jb.Booster(
        loss=losses.squared_error, n_estimators=4, max_depth=3, grow_policy=request.param, **leaves
    ).fit(frame, y)
    return model, frame


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def _points(ax) -> tuple[np.ndarray, np.ndarray]:
    """Every scatter point's ``(x, y)`` and whether it is drawn grey (missing)."""
    offsets = [collection.get_offsets() for collection in ax.collections]
    grey = [
        np.full(len(o), collection.get_label() == "missing")
        for o, collection in zip(offsets, ax.collections)
    ]
    return np.concatenate(offsets), np.concatenate(grey)


def _top_down(ax) -> list[str]:
    """The y tick labels, top down."""
    ticks = zip(ax.get_yticks(), (tick.get_text() for tick in ax.get_yticklabels()))
    return [name for _, name in sorted(ticks, reverse=True)]


def test_the_summary_draws_every_row_of_every_feature_at_its_shap_value(fitted, tmp_path):
    model, frame = fitted
    phi = model.predict_contributions(frame)[:, :-1]
    order = np.argsort(-np.abs(phi).mean(axis=0), kind="stable")
    ax = plot_shap_summary(model, frame, max_display=3)
    assert _top_down(ax) == [frame.columns[i] for i in order[:3]]  # the largest on top
    xy, grey = _points(ax)
    assert len(xy) == 3 * len(frame)
    # each feature's points sit on its line (+-0.4) at exactly its SHAP values
    for line, index in enumerate(order[:3][::-1]):
        on_line = np.abs(xy[:, 1] - line) <= 0.4
        np.testing.assert_array_equal(np.sort(xy[on_line, 0]), np.sort(phi[:, index]))
    assert grey.sum() == sum(frame.iloc[:, i].isna().sum() for i in order[:3])
    # coloured by the feature's value between its 5th and 95th percentiles (rows in order)
    coloured = ax.collections[0]
    line_of_a = 2 - list(order[:3]).index(0)
    colours = coloured.get_array()[np.abs(coloured.get_offsets()[:, 1] - line_of_a) <= 0.4]
    a = frame.a.to_numpy(np.float32).astype(np.float64)
    low, high = np.percentile(a, [5, 95])
    np.testing.assert_allclose(colours, np.clip((a - low) / (high - low), 0, 1), atol=1e-12)
    ax.figure.savefig(tmp_path / "summary.png")
    assert (tmp_path / "summary.png").stat().st_size > 0


def test_the_dependence_plot_places_rows_by_value_and_categories_by_label(fitted):
    model, frame = fitted
    phi = model.predict_contributions(frame)[:, :-1]
    ax = plot_shap_dependence(model, frame, "b")
    xy, grey = _points(ax)
    present = frame.b.notna().to_numpy()
    assert grey.sum() == (~present).sum() and len(xy) == len(frame)
    np.testing.assert_allclose(xy[~grey, 0], frame.b[present].to_numpy(np.float32))
    np.testing.assert_array_equal(xy[~grey, 1], phi[present, 1])
    assert (xy[grey, 0] < frame.b.min()).all()
    assert ax.get_xlabel() == "b" and ax.get_ylabel() == "SHAP value of b"

    ax = plot_shap_dependence(model, frame, 2)  # the category column: its labels
    ticks = [tick.get_text() for tick in ax.get_xticklabels()]
    assert ticks == ["missing/unseen", *LABELS]
    xy, _ = _points(ax)
    codes = frame.region.cat.codes.to_numpy()  # (the labels' order is the fitted codes')
    np.testing.assert_array_equal(xy[:, 0], codes)
    np.testing.assert_array_equal(xy[:, 1], phi[:, 2])
    with pytest.raises(ValueError, match="feature: no column named 'c'"):
        plot_shap_dependence(model, frame, "c")
    with pytest.raises(ValueError, match=r"feature: expected an index in \[0, 4\)"):
        plot_shap_dependence(model, frame, 4)


def test_the_tree_plot_draws_a_box_per_node_and_labelled_edges(fitted):
    model, _ = fitted
    table = trees_to_dataframe(model)
    tree = table[table.tree_index == 0]
    ax = plot_tree(model, 0)
    boxes = [text for text in ax.texts if text.get_bbox_patch() is not None]
    edges = [text for text in ax.texts if text.get_bbox_patch() is None]
    splits = tree[tree.decision_type.notna()]
    assert len(boxes) == len(tree) and len(edges) == 2 * len(splits)
    (lines,) = ax.collections
    assert len(lines.get_segments()) == len(tree) - 1
    missing_marks = [text.get_text() for text in edges if text.get_text().endswith("missing")]
    assert len(missing_marks) == len(splits)
    box_text = "\n".join(text.get_text() for text in boxes)
    for _, node in splits.iterrows():
        assert node.split_feature in box_text
    categorical = splits[splits.decision_type == "=="]
    assert len(categorical)  # region's set is named by its labels
    for labels in categorical.threshold:
        assert "region in\n{" + ", ".join(labels) + "}" in box_text
    assert ax.get_title() == "tree 0 (round 0)"


def test_a_tree_without_a_split_is_one_box():
    frame, y = _frame()
    stump = jb.Booster(
        loss=losses.squared_error, n_estimators=2, max_depth=3, min_split_gain=1e9
    ).fit(frame, y)
    ax = plot_tree(stump, 1)
    assert len(ax.texts) == 1 and not ax.collections[0].get_segments()
    assert ax.texts[0].get_text().startswith("L0\n")


def test_an_estimator_of_several_outputs_shows_one_or_every_output(tmp_path):
    pytest.importorskip("sklearn")
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 3)).astype(np.float32)
    labels = (X[:, 0] > 0).astype(np.float32) + (X[:, 1] > 0.5)
    classifier = jb.Classifier(n_estimators=3, max_depth=2).fit(X, labels)
    phi = classifier.predict(X, pred_contrib=True)
    ax = plot_shap_summary(classifier, X, output=2)
    assert ax.get_title() == "SHAP values (output 2 of 3)"
    xy, _ = _points(ax)
    order = np.argsort(-np.abs(phi[:, 2, :-1]).mean(axis=0), kind="stable")
    assert _top_down(ax) == [f"f{i}" for i in order]
    np.testing.assert_allclose(np.sort(xy[:, 0]), np.sort(phi[:, 2, :-1].reshape(-1)), rtol=1e-6)
    assert plot_shap_dependence(classifier, X, 0).get_title() == "SHAP dependence (output 0 of 3)"
    with pytest.raises(ValueError, match=r"output: expected an index in \[0, 3\)"):
        plot_shap_summary(classifier, X, output=3)
    # vector leaves: every output's value, or output's
    ax = plot_tree(classifier, 2)
    assert ax.get_title() == "tree 2 (round 2)"
    leaves = [t.get_text() for t in ax.texts if t.get_text().startswith("L")]
    assert leaves and all(leaf.count(",") == 2 for leaf in leaves)
    table = trees_to_dataframe(classifier, output=1)
    values = table[(table.tree_index == 2) & table.decision_type.isna()].value
    one = [t.get_text() for t in plot_tree(classifier, 2, output=1).texts if t.get_text()[0] == "L"]
    assert [float(text.split("\n")[1]) for text in one] == pytest.approx(list(values), rel=1e-3)
    classifier.save(tmp_path / "classifier.json")
    loaded = plot_tree(jb.load(tmp_path / "classifier.json"), 2)
    assert [t.get_text() for t in loaded.texts] == [t.get_text() for t in ax.texts]
