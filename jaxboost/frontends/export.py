"""Writing a fitted model for other libraries: the formats of ``save(path,
format=...)`` besides jaxboost's own (docs/explain.md, "Serve")."""

from __future__ import annotations

import os
from typing import Any


def export_model(model: Any, path: str | os.PathLike, format: str) -> None:
    """Write the fitted Booster ``model`` to ``path`` in ``format``: XGBoost's
    JSON model (`export_xgboost`) or an ONNX model (`export_onnx`)."""
    if format == "xgboost":
        from .export_xgboost import save_xgboost

        return save_xgboost(model, path)
    if format == "onnx":
        from .export_onnx import save_onnx  # (the onnx package is optional)

        return save_onnx(model, path)
    raise ValueError(f"format: expected 'jaxboost', 'xgboost' or 'onnx', got {format!r}")
