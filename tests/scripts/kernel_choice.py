"""Fit a small model twice on the CPU, one with line-search leaves and one with
quantised statistics; print the
histogram kernel a fit picks, the warnings raised, and the predictions (one
line, for the test to parse).  ``KERNEL_CHOICE_INSTALLED`` names the folder
that stands for the package's installed libraries."""

import json
import os
import warnings
from pathlib import Path

import numpy as np

import jaxboost as jb
from jaxboost import losses
from jaxboost.kernels import native_library
from jaxboost.kernels.registry import kernels_for

native_library.INSTALLED_DIRECTORY = Path(os.environ["KERNEL_CHOICE_INSTALLED"])

rng = np.random.default_rng(0)
X = rng.normal(size=(600, 5)).astype(np.float32)
y = (X[:, 0] + 0.5 * X[:, 1] ** 2 + 0.1 * rng.normal(size=600) > 0.3).astype(np.float32)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    model = jb.Booster(loss="binary_logloss", n_estimators=10, max_depth=4).fit(X, y)
    model.fit(X, y)  # a second fit decides again, from the first outcome
    # line-search leaves (with Armijo) use the leaf kernels
    searched = jb.Booster(
        loss=losses.quantile(0.7), n_estimators=10, max_depth=4, leaf_method="line_search"
    ).fit(X, X[:, 0] + rng.standard_t(3, 600).astype(np.float32))
    # quantised statistics: the native integer kernel or the XLA fallback's
    quantised = jb.Booster(
        loss="binary_logloss", n_estimators=10, max_depth=4, use_quantized_grad=True
    ).fit(X, y)
    kernel = kernels_for("cpu").histogram
print(
    json.dumps(
        {
            "kernel": kernel,
            "warnings": [str(w.message) for w in caught if w.category is RuntimeWarning],
            "predictions": model.predict_raw(X).ravel().tolist(),
            "line_search_predictions": searched.predict_raw(X).ravel().tolist(),
            "quantised_predictions": quantised.predict_raw(X).ravel().tolist(),
        }
    )
)
