"""Explain a custom-loss model: SHAP values, a summary plot, a tree.

Fits scikit-learn's bundled diabetes data in its original units (442
patients: age in years, BMI, blood pressure in mm Hg, six blood serum
measurements; sex as a category column) with a pseudo-Huber loss written
inline, then prints the features ranked by mean |SHAP value| on held-out
rows, checks that each row's values sum to its raw prediction, prints the
first tree that splits on sex as text, saves a SHAP summary (beeswarm)
and a plot of that tree to ``examples/output/``, and exports the model to
XGBoost's JSON and ONNX, which XGBoost and ONNX Runtime read with the
same raw scores.  Run: ``python examples/explain.py``.
"""

from pathlib import Path

import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")  # (files only: no window)
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split

import jaxboost as jb  # import before any JAX operation: exposes the CPU cores
from jaxboost import plotting

OUTPUT = Path(__file__).parent / "output"
DELTA = 30.0  # pseudo-Huber: quadratic within about 30 points of disease progression


def pseudo_huber(y, f):
    """``delta^2 (sqrt(1 + ((f - y) / delta)^2) - 1)``: squared error near
    the target, absolute error far from it."""
    return DELTA**2 * (jnp.sqrt(1.0 + ((f - y) / DELTA) ** 2) - 1.0)


def main() -> None:
    data = load_diabetes(as_frame=True, scaled=False)
    X = data.data.astype({"sex": int}).astype({"sex": "category"})  # the 1 / 2 codes as categories
    X_train, X_test, y_train, y_test = train_test_split(
        X, data.target.to_numpy(), test_size=0.25, random_state=0
    )
    model = jb.Booster(loss=pseudo_huber, n_estimators=200, learning_rate=0.05, max_depth=3)
    model.fit(X_train, y_train)
    print(f"held-out MAE: {np.mean(np.abs(model.predict(X_test) - y_test)):.1f}")

    contributions = model.predict_contributions(X_test)  # (n_rows, n_features + 1)
    gap = np.abs(contributions.sum(axis=1) - model.predict_raw(X_test)).max()
    print(f"rows' SHAP values sum to predict_raw: largest gap {gap:.2g}")
    importance = np.abs(contributions[:, :-1]).mean(axis=0)
    print("features by mean |SHAP value| on held-out rows (disease progression points):")
    for index in np.argsort(-importance)[:5]:
        print(f"  {X.columns[index]:>4}  {importance[index]:6.2f}")

    # every node of every tree as a row (LightGBM's trees_to_dataframe columns)
    nodes = plotting.trees_to_dataframe(model)
    first = int(nodes[nodes.split_feature == "sex"].tree_index.min())
    print(
        f"{len(nodes)} nodes in {model.forest_.feature.shape[0]} trees; tree {first}, the "
        "first to split on sex, as prediction applies it:"
    )
    print(plotting.dump_tree(model, first))

    OUTPUT.mkdir(exist_ok=True)
    ax = plotting.plot_shap_summary(model, X_test)
    ax.figure.tight_layout()
    ax.figure.savefig(OUTPUT / "shap_summary.png", dpi=120)
    _, ax = plt.subplots(figsize=(11, 5))
    plotting.plot_tree(model, first, ax=ax)
    ax.figure.savefig(OUTPUT / "tree.png", dpi=120)
    print(f"plots saved to {OUTPUT / 'shap_summary.png'} and {OUTPUT / 'tree.png'}")

    export(model, X_test)


def export(model: jb.Booster, X_test) -> None:
    """Save the model as XGBoost's JSON and as ONNX, and show that XGBoost
    and ONNX Runtime (where installed: ``pip install jaxboost[explain]``)
    give its raw scores and SHAP values."""
    model.save(OUTPUT / "model.json", format="xgboost")
    model.save(OUTPUT / "model.onnx", format="onnx")
    print(f"exported to {OUTPUT / 'model.json'} (XGBoost) and {OUTPUT / 'model.onnx'} (ONNX)")
    raw = model.predict_raw(X_test)
    try:
        import onnxruntime
        import xgboost
    except ImportError as missing:
        print(f"  ({missing.name} is not installed: pip install jaxboost[explain] to compare)")
        return
    rows = xgboost.DMatrix(X_test, enable_categorical=True)
    read = xgboost.Booster(model_file=OUTPUT / "model.json")
    by_xgboost = read.predict(rows, output_margin=True)
    contributions = read.predict(rows, pred_contribs=True)
    # the ONNX graph reads float32 values; a category column's code is its
    # label's position among the fitted labels (docs/explain.md, "Serve")
    values = X_test.assign(sex=X_test["sex"].cat.codes).to_numpy(np.float32)
    session = onnxruntime.InferenceSession(OUTPUT / "model.onnx")
    by_onnx = session.run(None, {"X": values})[0][:, 0]
    scale = np.abs(raw).max()
    print(f"  XGBoost's raw scores: largest gap {np.abs(by_xgboost - raw).max() / scale:.1g} of the scale")
    print(
        "  XGBoost's pred_contribs: largest gap "
        f"{np.abs(contributions - model.predict_contributions(X_test)).max() / scale:.1g}"
    )
    print(f"  ONNX Runtime's raw scores: largest gap {np.abs(by_onnx - raw).max() / scale:.1g}")


if __name__ == "__main__":
    main()
