"""Model files: a fitted ``Booster`` as one JSON document, and back.

The file is UTF-8 JSON::

    {"format": "jaxboost-model", "version": 6,
     "params": {...constructor settings...},
     "loss":   {"name": "quantile", "params": {"alpha": 0.3}, "link": "identity",
                "n_outputs": 1}            # a catalogue loss, rebuilt by name
            or {"name": null, "link": "sigmoid"},   # a custom loss: pass it again
     "state":  {"forest_": {"feature": ARRAY, ...}, "init_score_": ARRAY, ...},
     "checksums": {"state.forest_.feature": "<SHA-256 hex>", ...,
                   "state.init_score_": ..., "state.bin_edges_": ...},
     "checksum": "<SHA-256 hex of the whole document>",
     "estimator": {...}}   # only in a scikit-learn estimator's file (version 4 on)

An estimator's file (``Regressor.save``) is its Booster's file with an
``estimator`` section: the estimator's class and settings and what it adds
to the Booster's fitted state (`jaxboost.frontends.scikit_learn.estimator_file`);
`jaxboost.load` gives back the estimator, and a Booster's file a Booster.

Every array is stored exactly, ``{"dtype": "float32", "shape": [2, 3], "data":
"<base64 of the little-endian bytes>"}``, so a loaded model predicts
bit-identically (`jaxboost.frontends.fitted.file_format`).  ``checksum`` covers
the whole document, every field but itself (``document_checksum``), so an edited loss, link, setting, feature
name or array is refused, however the JSON is laid out.  ``checksums`` holds,
for every array, keyed by its place in the file, the SHA-256 of its canonical
bytes (``array_checksum``): it names the array that changed.  A checksum
catches accidents and hand edits, not forgery (anyone can recompute it), so the
content checks (`jaxboost.frontends.fitted.file_checks`) run on every file as well.

Older files still load, with a warning that no checksum covers their whole
document: version 2 files (array ``checksums`` only) with their arrays checked,
version 1 files (no checksums) with the content checks alone.  A file that
says version 3 or later without its ``checksum`` is refused.  Files before
version 5 hold no ``leaf_cover`` (the trees' hessian sums): they load and
predict, and ``predict_contributions`` on them says to fit again.  Version 6
adds leaf-wise trees grown best-first (without constraints), stored as node tables
(``left_child``, ``right_child``: `jaxboost.engine.bestfirst`); heap trees
omit them.  Loading is data only: no
pickle, no eval, no import of a name from the file; the whole file is validated
(checksums, types, shapes, value ranges, and the consistency of the fields with
one another) before anything is built, and every problem raises
``ModelFileError`` (a ``ValueError``) naming the file.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Callable
from typing import Any

from .file_checks import legacy_warning, validate_document
from .file_format import (
    ATTRIBUTE_OF,
    DEFAULT_MAX_BYTES,
    DOCUMENT_CHECKSUM_SINCE,
    FORMAT,
    FORMAT_VERSION,
    ModelFileError,
    document_checksum,
    encode_checksums,
    encode_params,
    encode_state,
    file_error,
)
from .file_loss import MissingLoss, encode_loss, given_loss, rebuild_loss


# -- files -----------------------------------------------------------------------
def _no_duplicate_keys(pairs: list) -> dict:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        duplicated = sorted({key for key in keys if keys.count(key) > 1})
        raise file_error("JSON", f"duplicated keys {duplicated}")
    return dict(pairs)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise file_error("JSON", f"number {text} overflows")
    return value


def _reject_constant(text: str) -> None:
    raise file_error("JSON", f"{text} is not a JSON number")


def _read_json(path: str | os.PathLike, max_bytes: int) -> Any:
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size > max_bytes:
            raise file_error(
                "file", f"{size} bytes is over the limit of {max_bytes} bytes (max_bytes)"
            )
        raw = file.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise file_error("file", f"over the limit of {max_bytes} bytes (max_bytes)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise file_error("file", f"not UTF-8 text ({error})") from None
    if not text.strip():
        raise file_error("file", "the file is empty (truncated?)")
    try:
        return json.loads(
            text,
            object_pairs_hook=_no_duplicate_keys,
            parse_float=_finite_float,
            parse_constant=_reject_constant,
        )
    except json.JSONDecodeError as error:
        # the text ends inside a value, or inside a string that never closes
        if error.pos >= len(text.rstrip()) or error.msg.startswith("Unterminated string"):
            raise file_error("file", "the JSON ends early: the file is truncated") from None
        raise file_error("file", f"not valid JSON ({error})") from None
    except RecursionError:
        raise file_error("file", "JSON nested too deeply") from None
    except ModelFileError:
        raise
    except ValueError as error:  # e.g. an integer with too many digits
        raise file_error("file", f"not valid JSON ({error})") from None


def save_model(
    model: Any, path: str | os.PathLike, estimator: dict | None = None, *, settings: Any = None
) -> None:
    """Write a fitted ``model`` (a Booster, or a
    `jaxboost.frontends.fitted.model.Model` whose ``settings``, a holder of the
    Booster's settings, are the file's ``params``) to ``path`` as one UTF-8
    JSON file (see the module doc), with the ``estimator`` section of the
    estimator that holds it, if one does."""
    if not hasattr(model, "forest_"):
        raise RuntimeError("this Booster is not fitted yet: call fit(X, y) first")
    state = encode_state(model)
    document = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "params": encode_params(model if settings is None else settings),
        "loss": encode_loss(model.loss_),
        "state": state,
        "checksums": encode_checksums(state),
    }
    if estimator is not None:
        document["estimator"] = estimator
    document["checksum"] = document_checksum(document)
    text = json.dumps(document, indent=1, ensure_ascii=False, allow_nan=False)
    with open(path, "wb") as file:
        file.write(text.encode("utf-8"))


def read_model(
    path: str | os.PathLike,
    model_class: type,
    loss: Any = None,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    adapt_loss: Callable[[Any, Any, dict], Any] | None = None,
) -> tuple[dict, Any, dict, Any]:
    """The parts of a model file written by `save_model`, validated:
    ``(params, loss, state, estimator)``, ``params`` the arguments of
    ``model_class``'s constructor, ``state`` the fitted attributes by name,
    ``estimator`` the file's estimator section as read (None in a Booster's
    file; `jaxboost.frontends.scikit_learn.estimator_file` checks it), see
    `jaxboost.frontends.loading.load_model`, which builds the model.

    Args:
      path: the model file.
      model_class: the class the file's ``params`` are checked against.
      loss: the loss to train with (see ``load_model``); None: the catalogue
        loss named in the file, else a stand-in that predicts through the
        saved link and raises if trained.
      max_bytes: files larger than this are refused before reading.
      adapt_loss: ``adapt_loss(loss, estimator section, state)``: the given
        ``loss`` as the file's model trains with it (a Classifier's link),
        before its link is compared with the saved one.
    Raises:
      ModelFileError: (a ``ValueError``, naming the file) the file is not a
        valid model file, or does not match its checksums (it was edited or
        damaged after saving).
    Warns:
      UserWarning: the file was written by an older jaxboost, without a
        checksum of its whole document (see the module doc).
    """
    try:
        document = _read_json(path, max_bytes)
        params, info, state = validate_document(document, model_class)
        rebuilt = rebuild_loss(info) if loss is None and info["name"] is not None else None
    except ModelFileError as error:
        raise ModelFileError(f"model file {os.fspath(path)!r}: {error}") from None
    if document["version"] < DOCUMENT_CHECKSUM_SINCE:
        warnings.warn(
            f"model file {os.fspath(path)!r} {legacy_warning(document['version'])}",
            UserWarning,
            stacklevel=3,
        )
    if loss is not None:
        if adapt_loss is not None:
            loss = adapt_loss(loss, document.get("estimator"), state)
        loss = given_loss(loss, info)
    elif rebuilt is not None:
        loss = rebuilt
    else:
        loss = MissingLoss(info["link"], state["n_outputs_"])
    fields = {ATTRIBUTE_OF[key]: value for key, value in state.items()}
    return params, loss, fields, document.get("estimator")
