"""Writing a fitted model for other libraries: the formats of ``save(path,
format=...)`` besides jaxboost's own (docs/explain.md, "Serve")."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def check_path(path: str | os.PathLike, format: str) -> None:
    """A ValueError where ``path``'s suffix names a file other than what
    ``format`` writes (an ONNX name for jaxboost's JSON; a ``.ubj`` name,
    which XGBoost reads as UBJSON, for XGBoost's JSON)."""
    suffix = Path(path).suffix.lower()
    if suffix == ".onnx" and format != "onnx":
        raise ValueError(
            f"format: {format!r} writes a JSON file, and path {str(path)!r} names an ONNX one: "
            "pass format='onnx' (or a .json path)"
        )
    if suffix == ".ubj" and format == "xgboost":
        raise ValueError(
            f"path: {str(path)!r}: XGBoost reads a .ubj file as UBJSON, and "
            "format='xgboost' writes JSON: give a .json path"
        )


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
