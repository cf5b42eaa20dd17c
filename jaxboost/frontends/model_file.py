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
to the Booster's fitted state (`jaxboost.frontends.estimator_file`);
`jaxboost.load` gives back the estimator, and a Booster's file a Booster.

Every array is stored exactly, ``{"dtype": "float32", "shape": [2, 3], "data":
"<base64 of the little-endian bytes>"}``, so a loaded model predicts
bit-identically.  ``checksum`` covers the whole document, every field but
itself (``document_checksum``), so an edited loss, link, setting, feature
name or array is refused, however the JSON is laid out.  ``checksums`` holds,
for every array, keyed by its place in the file, the SHA-256 of its canonical
bytes (``array_checksum``): it names the array that changed.  A checksum
catches accidents and hand edits, not forgery (anyone can recompute it), so the
content checks below run on every file as well.

Older files still load, with a warning that no checksum covers their whole
document: version 2 files (array ``checksums`` only) with their arrays checked,
version 1 files (no checksums) with the content checks alone.  A file that
says version 3 or later without its ``checksum`` is refused.  Files before
version 5 hold no ``leaf_cover`` (the trees' hessian sums): they load and
predict, and ``predict_contributions`` on them says to fit again.  Version 6
adds leaf-wise trees grown without a depth bound, stored as node tables
(``left_child``, ``right_child``: `jaxboost.engine.bestfirst`); heap trees
omit them.  Loading is data only: no
pickle, no eval, no import of a name from the file; the whole file is validated
(checksums, types, shapes, value ranges, and the consistency of the fields with
one another) before anything is built, and every problem raises
``ModelFileError`` (a ``ValueError``) naming the file.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import inspect
import json
import math
import os
import re
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import losses as loss_catalogue
from ..engine.bestfirst import children_problems
from ..engine.categorical import BITSET_WORDS
from ..engine.training import LEAF_METHODS, SPLIT_CRITERIA
from ..engine.tree import Tree
from ..losses import DATA_OUTPUTS
from ..runtime.precision import LOSS_DTYPES
from .categories import categories_from_json, categories_to_json
from .model_fields import MODEL_FIELDS

FORMAT = "jaxboost-model"
FORMAT_VERSION = 6
CHECKSUMS_SINCE = 2  # the first format version whose files carry array ``checksums``
DOCUMENT_CHECKSUM_SINCE = 3  # ... and the whole document's ``checksum``
ESTIMATOR_SINCE = 4  # the first whose files may hold an ``estimator`` section
COVERS_SINCE = 5  # ... and trees' ``leaf_cover`` (an older jaxboost refuses them by version)
NODE_TABLES_SINCE = 6  # ... and node-table trees (``left_child``, ``right_child``)
DEFAULT_MAX_BYTES = 1 << 30
FITTED_LOSS_DTYPES = tuple(dtype for dtype in LOSS_DTYPES if dtype != "auto")

# Constructor arguments that are not saved: ``loss`` has its own section (a
# function cannot be stored as data), ``devices`` are objects of the running
# process (a loaded model runs on the devices of the process that loads it).
UNSAVED_PARAMS = ("loss", "devices")

DTYPES = {
    "float32": np.dtype("<f4"),
    "int32": np.dtype("<i4"),
    "bool": np.dtype("bool"),
    "uint8": np.dtype("u1"),
    "uint32": np.dtype("<u4"),
}

# Tree field -> (dtype, shape in named dimensions); see ``jaxboost.engine.tree.Tree``.
FOREST_FIELDS = {
    "feature": ("int32", ("trees", "nodes")),
    "threshold": ("float32", ("trees", "nodes")),
    "threshold_bin": ("int32", ("trees", "nodes")),
    "missing_left": ("bool", ("trees", "nodes")),
    "split_gain": ("float32", ("trees", "nodes")),
    "leaf_value": ("float32", ("trees", "leaves", "outputs")),
    "leaf_weight": ("float32", ("trees", "leaves")),
    # only in models with categorical columns
    "category_left": ("uint32", ("trees", "nodes", "words")),
    # only in models fitted by a jaxboost that records covers (format 5 on)
    "leaf_cover": ("float32", ("trees", "leaves")),
    # only in leaf-wise models of node tables (format 6 on): an internal node
    # (after its own) or ~leaf
    "left_child": ("int32", ("trees", "nodes")),
    "right_child": ("int32", ("trees", "nodes")),
}
_OPTIONAL_FOREST_FIELDS = ("category_left", "leaf_cover", "left_child", "right_child")

# Fitted attributes in a file's "state": (name, kind, required), of
# `jaxboost.frontends.model_fields`; a new kind needs an encoder and a
# decoder in ``_CODECS``.
STATE_FIELDS = tuple(
    (field.name, field.kind, field.required) for field in MODEL_FIELDS if field.kind is not None
)

_TOP_KEYS = ("format", "version", "params", "loss", "state")
_ARRAY_KINDS = ("forest", "float32_array")  # state kinds stored as encoded arrays
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
_OPTAX_NAME = re.compile(r"optax:[A-Za-z][A-Za-z0-9_]*")
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
_FLOAT32_MAX = float(np.finfo(np.float32).max)


class ModelFileError(ValueError):
    """A model file that cannot be read, or whose content is not a valid model."""


def _fail(where: str, problem: str) -> ModelFileError:
    # read_model puts the file's name in front
    return ModelFileError(f"{where}: {problem}")


# -- JSON values ---------------------------------------------------------------
def _plain(value: Any) -> Any:
    """``value`` as plain JSON data (numpy scalars unwrapped, tuples as lists)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, np.ndarray):  # (a boolean mask of categorical_features)
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {key: _plain(item) for key, item in value.items()}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    raise TypeError(f"{value!r} is not JSON data")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_keys(obj: Any, where: str, required: tuple, optional: tuple = ()) -> dict:
    """``obj``, after checking it is a JSON object with the ``required``
    keys and no others but ``optional``; else a `ModelFileError` at ``where``."""
    if not isinstance(obj, dict):
        raise _fail(where, f"expected a JSON object, got {type(obj).__name__}")
    missing = [key for key in required if key not in obj]
    extra = [key for key in obj if key not in required and key not in optional]
    if missing:
        raise _fail(where, f"missing keys {missing}")
    if extra:
        raise _fail(where, f"unexpected keys {extra}")
    return obj


# -- arrays --------------------------------------------------------------------
def encode_array(array: Any) -> dict:
    """``{"dtype", "shape", "data"}`` holding ``array`` exactly (little-endian bytes)."""
    array = np.asarray(array)
    if array.dtype.name not in DTYPES:
        raise ValueError(f"cannot save an array of dtype {array.dtype}: expected {list(DTYPES)}")
    data = np.ascontiguousarray(array, dtype=DTYPES[array.dtype.name]).tobytes()
    return {
        "dtype": array.dtype.name,
        "shape": list(array.shape),
        "data": base64.b64encode(data).decode("ascii"),
    }


def decode_array(obj: Any, where: str, dtype: str) -> np.ndarray:
    """The array stored in ``obj``, which must have dtype ``dtype``."""
    check_keys(obj, where, ("dtype", "shape", "data"))
    if not isinstance(obj["dtype"], str) or obj["dtype"] not in DTYPES:
        raise _fail(where, f"dtype {obj['dtype']!r} is not one of {list(DTYPES)}")
    if obj["dtype"] != dtype:
        raise _fail(where, f"expected dtype {dtype!r}, got {obj['dtype']!r}")
    shape = obj["shape"]
    if not isinstance(shape, list) or not all(_is_int(n) and n >= 0 for n in shape):
        raise _fail(where, f"shape: expected a list of non-negative integers, got {shape!r}")
    if not isinstance(obj["data"], str):
        raise _fail(where, "data: expected a base64 string")
    try:
        data = base64.b64decode(obj["data"].encode("ascii"), validate=True)
    except (binascii.Error, ValueError) as error:
        raise _fail(where, f"data is not valid base64 ({error})") from None
    expected = math.prod(shape) * DTYPES[dtype].itemsize
    if len(data) != expected:
        raise _fail(where, f"data holds {len(data)} bytes, shape {shape} needs {expected}")
    if dtype == "bool" and data and max(data) > 1:
        raise _fail(where, "bool data holds bytes other than 0 and 1")
    array = np.frombuffer(data, DTYPES[dtype]).reshape(shape)
    return array.astype(DTYPES[dtype].newbyteorder("="))


def array_checksum(array: Any) -> str:
    """SHA-256 (hex) of ``array``'s dtype, shape and little-endian bytes.

    The bytes are those `encode_array` stores, after the ASCII header
    ``"<dtype> <d0>,<d1>,...\\n"``, so the digest depends on the values
    only, never on how the JSON around them is written.
    """
    array = np.asarray(array)
    if array.dtype.name not in DTYPES:
        raise ValueError(
            f"cannot checksum an array of dtype {array.dtype}: expected {list(DTYPES)}"
        )
    header = f"{array.dtype.name} {','.join(str(n) for n in array.shape)}\n".encode("ascii")
    data = np.ascontiguousarray(array, dtype=DTYPES[array.dtype.name]).tobytes()
    return hashlib.sha256(header + data).hexdigest()


def document_checksum(document: dict) -> str:
    """SHA-256 (hex) of every field of a model file's ``document`` but ``checksum``.

    The bytes are the fields as JSON with sorted keys, no spaces and
    non-ASCII characters escaped (``json.dumps(..., sort_keys=True,
    separators=(",", ":"))``), so the digest depends on the data only, never
    on how the file lays it out.
    """
    body = {key: value for key, value in document.items() if key != "checksum"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


# -- state codecs ----------------------------------------------------------------
def _encode_forest(forest: Tree) -> dict:
    return {
        field: encode_array(getattr(forest, field))
        for field in Tree._fields
        if getattr(forest, field) is not None
    }


def _decode_forest(obj: Any, where: str) -> Tree:
    required = tuple(field for field in Tree._fields if field not in _OPTIONAL_FOREST_FIELDS)
    check_keys(obj, where, required, _OPTIONAL_FOREST_FIELDS)
    arrays = {}
    for field in Tree._fields:
        if field not in obj:  # an optional field the model has not
            continue
        if field not in FOREST_FIELDS:
            raise _fail(where, f"this jaxboost has no rule to check tree field {field!r}")
        dtype, dims = FOREST_FIELDS[field]
        arrays[field] = decode_array(obj[field], f"{where}.{field}", dtype)
        if arrays[field].ndim != len(dims):
            raise _fail(
                f"{where}.{field}",
                f"expected {len(dims)} dimensions {dims}, got shape {list(arrays[field].shape)}",
            )
    return Tree(**arrays)


def _encode_floats(values: Any) -> list:
    out = []
    for value in np.asarray(values, np.float64).reshape(-1).tolist():
        out.append(value if math.isfinite(value) else repr(value))
    return out


def _decode_floats(obj: Any, where: str) -> list[float]:
    if not isinstance(obj, list):
        raise _fail(where, f"expected a list of numbers, got {type(obj).__name__}")
    values = []
    for value in obj:
        if isinstance(value, str) and value in _NON_FINITE:
            value = _NON_FINITE[value]
        if not _is_number(value):
            raise _fail(where, f"expected numbers (or 'nan', 'inf', '-inf'), got {value!r}")
        values.append(float(value))
    return values


def _decode_int(obj: Any, where: str) -> int:
    if not _is_int(obj):
        raise _fail(where, f"expected an integer, got {obj!r}")
    return obj


def _decode_bool(obj: Any, where: str) -> bool:
    if not isinstance(obj, bool):
        raise _fail(where, f"expected true or false, got {obj!r}")
    return obj


def _decode_strings(obj: Any, where: str) -> list[str]:
    if not isinstance(obj, list) or not all(isinstance(name, str) for name in obj):
        raise _fail(where, "expected a list of strings")
    return list(obj)


def _choice_codec(allowed: tuple[str, ...]) -> tuple[Callable, Callable]:
    """Encoder and decoder of one name out of ``allowed``."""

    def decode(obj: Any, where: str) -> str:
        if obj not in allowed:
            raise _fail(where, f"expected one of {list(allowed)}, got {obj!r}")
        return obj

    return str, decode


def _encode_evals(evals: Any) -> dict:
    return {
        str(data_name): {str(metric): _encode_floats(values) for metric, values in per.items()}
        for data_name, per in evals.items()
    }


def _decode_evals(obj: Any, where: str) -> dict:
    if not isinstance(obj, dict) or not all(isinstance(per, dict) for per in obj.values()):
        raise _fail(where, "expected {data set: {metric: [numbers]}}")
    return {
        data_name: {
            metric: _decode_floats(values, f"{where}.{data_name}.{metric}")
            for metric, values in per.items()
        }
        for data_name, per in obj.items()
    }


def _decode_categories(obj: Any, where: str) -> list:
    try:
        return categories_from_json(obj)
    except (TypeError, ValueError, KeyError, AttributeError) as error:
        raise _fail(where, f"not a list of categorical columns ({error})") from None


_CODECS: dict[str, tuple[Callable, Callable]] = {
    "forest": (_encode_forest, _decode_forest),
    "float32_array": (
        lambda array: encode_array(np.asarray(array, np.float32)),
        lambda obj, where: decode_array(obj, where, "float32"),
    ),
    "int": (int, _decode_int),
    "bool": (bool, _decode_bool),
    "float": (
        lambda value: _encode_floats([value])[0],
        lambda obj, where: _decode_floats([obj], where)[0],
    ),
    "floats": (_encode_floats, lambda obj, where: np.asarray(_decode_floats(obj, where))),
    "strings": (lambda names: [str(name) for name in names], _decode_strings),
    "evals": (_encode_evals, _decode_evals),
    "categories": (categories_to_json, _decode_categories),
    "leaf_method": _choice_codec(LEAF_METHODS),
    "split_criterion": _choice_codec(SPLIT_CRITERIA),
    "loss_dtype": _choice_codec(FITTED_LOSS_DTYPES),
}


def _encode_state(model: Any) -> dict:
    state = {}
    for name, kind, required in STATE_FIELDS:
        if not hasattr(model, name):
            if required:
                raise ValueError(f"model: fitted attribute {name} is missing")
            continue
        value = getattr(model, name)
        encode = _CODECS[kind][0]
        if kind == "categories":  # (its errors name a frame's column by name)
            encode = functools.partial(
                categories_to_json, names=getattr(model, "feature_names_in_", None)
            )
        state[name] = None if value is None and not required else encode(value)
    return state


def _decode_state(obj: Any) -> dict:
    required = tuple(name for name, _, needed in STATE_FIELDS if needed)
    optional = tuple(name for name, _, needed in STATE_FIELDS if not needed)
    check_keys(obj, "state", required, optional)
    state = {}
    for name, kind, needed in STATE_FIELDS:
        if name in obj:
            value = obj[name]
            skip = value is None and not needed
            state[name] = None if skip else _CODECS[kind][1](value, f"state.{name}")
    return state


# -- checksums -------------------------------------------------------------------
def _state_arrays(state: dict) -> dict[str, np.ndarray]:
    """Every array of a decoded ``state``, keyed by its place in the file."""
    arrays = {}
    for name, kind, _ in STATE_FIELDS:
        value = state.get(name)
        if kind not in _ARRAY_KINDS or value is None:
            continue
        if kind == "forest":
            for field in Tree._fields:
                if getattr(value, field) is not None:
                    arrays[f"state.{name}.{field}"] = getattr(value, field)
        else:
            arrays[f"state.{name}"] = value
    return arrays


def _encode_checksums(state: dict) -> dict:
    """``{place: SHA-256}`` of the arrays of an encoded ``state``, as loading decodes them."""
    decoded = {
        name: _CODECS[kind][1](state[name], f"state.{name}")
        for name, kind, _ in STATE_FIELDS
        if kind in _ARRAY_KINDS and state.get(name) is not None
    }
    return {place: array_checksum(array) for place, array in _state_arrays(decoded).items()}


_RESAVE = (
    "the file was edited or damaged after saving; a model cannot be edited by hand: "
    "load the original file, change the model in Python and save it again with jaxboost "
    "(Booster.save)"
)


def _entry_at(document: dict, place: str) -> Any:
    """The value at ``place`` ("state.forest_.threshold") of a document, or None."""
    node: Any = document
    for key in place.split("."):
        node = node.get(key) if isinstance(node, dict) else None
    return node


def _arrays_off_their_checksums(document: dict) -> list[str]:
    """Places of the arrays whose data differs from their saved checksum (a hint
    for the error message: best effort, anything unreadable counts as changed)."""
    saved = document.get("checksums")
    changed = []
    for place, digest in saved.items() if isinstance(saved, dict) else ():
        entry = _entry_at(document, place)
        try:
            array = decode_array(
                entry, place, entry.get("dtype") if isinstance(entry, dict) else ""
            )
        except ModelFileError:
            changed.append(place)
            continue
        if array_checksum(array) != digest:
            changed.append(place)
    return changed


def _check_document_checksum(document: dict, version: int) -> None:
    """The document has a ``checksum`` and its fields still match it."""
    if "checksum" not in document:
        raise _fail(
            "checksum",
            f"missing, and every version {version} file carries one: {_RESAVE}",
        )
    saved = document["checksum"]
    if not isinstance(saved, str) or not _SHA256_HEX.fullmatch(saved):
        raise _fail("checksum", "expected 64 lowercase hex digits (SHA-256)")
    if document_checksum(document) != saved:
        changed = _arrays_off_their_checksums(document)
        hint = f" (these arrays changed: {', '.join(changed)})" if changed else ""
        raise _fail("checksum", f"the content does not match it{hint}: {_RESAVE}")


def _legacy_warning(version: int) -> str:
    checked = (
        "its arrays are checked against their checksums, its other fields (loss, link, "
        "settings, feature names) only for consistency"
        if version >= CHECKSUMS_SINCE
        else "it has no checksums: only consistency checks guard it against edits or damage"
    )
    return (
        f"was written by an older jaxboost (format version {version}) without a checksum "
        f"of the whole document: {checked}. Save it again with this jaxboost to add one."
    )


def _check_checksums(obj: Any, state: dict) -> None:
    """Every array of ``state`` has the checksum that ``obj`` holds for it."""
    arrays = _state_arrays(state)
    if not isinstance(obj, dict):
        raise _fail("checksums", f"expected a JSON object, got {type(obj).__name__}")
    extra = [place for place in obj if place not in arrays]
    if extra:
        raise _fail("checksums", f"unexpected keys {extra}: no such arrays in the file")
    for place, array in arrays.items():
        if place not in obj:
            raise _fail(place, f"its checksum is missing from 'checksums': {_RESAVE}")
        if not isinstance(obj[place], str) or not _SHA256_HEX.fullmatch(obj[place]):
            raise _fail(f"checksums.{place}", "expected 64 lowercase hex digits (SHA-256)")
        if array_checksum(array) != obj[place]:
            raise _fail(place, f"the data does not match its checksum: {_RESAVE}")


# -- constructor settings --------------------------------------------------------
def _saved_params(cls: type) -> dict[str, inspect.Parameter]:
    """The constructor arguments of ``cls`` that a file holds, by name."""
    return {
        name: parameter
        for name, parameter in inspect.signature(cls.__init__).parameters.items()
        if name != "self"
        and name not in UNSAVED_PARAMS
        and parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
    }


def encode_params(model: Any) -> dict:
    """``model``'s constructor settings as JSON data (not ``loss`` nor
    ``devices``), or a ValueError naming one a file cannot hold."""
    params = {}
    for name in _saved_params(type(model)):
        if not hasattr(model, name):
            raise ValueError(f"model: constructor argument {name} is not an attribute")
        value = getattr(model, name)
        try:
            params[name] = _plain(value)
        except TypeError:
            raise ValueError(
                f"cannot save {name}={value!r}: a model file holds numbers, strings, "
                "booleans, None and lists of them"
            ) from None
    return params


_SIMPLE_TYPES: dict[str, Callable[[Any], bool]] = {
    "int": _is_int,
    "float": _is_number,
    "str": lambda value: isinstance(value, str),
    "bool": lambda value: isinstance(value, bool),
    "None": lambda value: value is None,
}


def _annotation_checks(annotation: Any) -> list[Callable[[Any], bool]] | None:
    """Checks for the simple types an annotation names (``"int | None"``), or None
    when it names others.  The annotation is parsed, never evaluated."""
    if isinstance(annotation, type):
        annotation = annotation.__name__
    if not isinstance(annotation, str):
        return None
    names = [part.strip() for part in annotation.split("|")]
    if not all(name in _SIMPLE_TYPES for name in names):
        return None
    return [_SIMPLE_TYPES[name] for name in names]


def decode_params(obj: Any, model_class: type, where: str = "params") -> dict:
    """The constructor settings of ``model_class`` in a file's ``obj``
    (`encode_params`' output), their simple types checked."""
    return _decode_params(obj, _saved_params(model_class), where)


def _decode_params(obj: Any, signature: dict[str, inspect.Parameter], where: str) -> dict:
    # Settings added to Booster after a file was written take their defaults,
    # so older files keep loading; unknown settings are rejected.
    check_keys(obj, where, (), tuple(signature))
    for name, value in obj.items():
        parameter = signature[name]
        checks = _annotation_checks(parameter.annotation)
        if checks is not None and not any(check(value) for check in checks):
            raise _fail(f"{where}.{name}", f"expected {parameter.annotation}, got {value!r}")
    return dict(obj)


# -- the loss --------------------------------------------------------------------
class MissingLoss:
    """Stands in for a custom loss, which a model file cannot hold.

    It carries the saved ``link`` so ``predict`` works; training with it raises.
    """

    hessian_informative = True

    def __init__(self, link: str, n_outputs: int):
        self.link = link
        self.n_outputs = n_outputs

    def __call__(self, y: Any, f: Any) -> Any:
        raise RuntimeError(
            "this model was loaded from a file without its custom loss (a file holds only "
            "catalogue losses): load it with jaxboost.load(path, loss=your_loss) to train it"
        )

    def __repr__(self) -> str:
        return f"MissingLoss(link={self.link!r})"


def _encode_loss(loss: Any) -> dict:
    link = getattr(loss, "link", "identity")
    if link not in loss_catalogue.links.LINKS:
        raise ValueError(
            f"loss: unknown link {link!r}; expected one of {list(loss_catalogue.links.LINKS)}"
        )
    name, params = getattr(loss, "name", None), getattr(loss, "params", None)
    if isinstance(name, str) and isinstance(params, dict):
        try:
            rebuilt = loss_catalogue.get(name, **params)
            same = _plain(params) == params and rebuilt.link == link
            same = same and rebuilt.n_outputs == loss.n_outputs
        except Exception:  # noqa: BLE001  any failure means: not rebuildable by name
            same = False
        if same:
            n_outputs = loss.n_outputs
            return {"name": name, "params": _plain(params), "link": link, "n_outputs": n_outputs}
    return {"name": None, "link": link}


def _decode_loss(obj: Any) -> dict:
    if not isinstance(obj, dict) or "name" not in obj:
        raise _fail("loss", "expected an object with a 'name'")
    if obj["name"] is None:
        check_keys(obj, "loss", ("name", "link"))
    else:
        check_keys(obj, "loss", ("name", "params", "link", "n_outputs"))
        name = obj["name"]
        known = isinstance(name, str) and (
            name in loss_catalogue.CATALOGUE or _OPTAX_NAME.fullmatch(name)
        )
        if not known:
            raise _fail("loss.name", f"{name!r} is not a catalogue loss")
        if not isinstance(obj["params"], dict):
            raise _fail("loss.params", "expected an object")
        n_outputs = obj["n_outputs"]
        if n_outputs not in DATA_OUTPUTS and not (_is_int(n_outputs) and n_outputs >= 1):
            raise _fail(
                "loss.n_outputs",
                f"expected a positive integer or one of {list(DATA_OUTPUTS)}, got {n_outputs!r}",
            )
    if not isinstance(obj["link"], str) or obj["link"] not in loss_catalogue.links.LINKS:
        raise _fail(
            "loss.link", f"expected one of {list(loss_catalogue.links.LINKS)}, got {obj['link']!r}"
        )
    return dict(obj)


def _rebuild_loss(info: dict) -> Any:
    """The catalogue loss named in the file, with its saved metadata checked."""
    name, params = info["name"], info["params"]
    try:
        loss = loss_catalogue.get(name, **params)
    except Exception as error:  # noqa: BLE001  a factory may reject the file's values any way
        raise _fail("loss", f"cannot rebuild {name!r} with {params}: {error}") from None
    for key in ("params", "link", "n_outputs"):
        if getattr(loss, key, None) != info[key]:
            raise _fail(
                f"loss.{key}",
                f"{info[key]!r} differs from the catalogue's "
                f"{getattr(loss, key, None)!r} for {name!r}",
            )
    return loss


def _resolve_given_loss(loss: Any, info: dict) -> Any:
    """The loss passed to ``load_model``; its link must be the saved one."""
    if isinstance(loss, str):
        loss = loss_catalogue.get(loss)
    elif not callable(loss):
        raise TypeError(f"loss: expected a catalogue name or a callable loss(y, f), got {loss!r}")
    link = getattr(loss, "link", "identity")
    if link != info["link"]:
        raise ValueError(
            f"loss: its link {link!r} differs from the saved model's link {info['link']!r}, "
            "so predictions would change"
        )
    return loss


# -- consistency -----------------------------------------------------------------
def _check_shapes(state: dict, params: dict) -> None:
    """Every field's shape agrees with the others and with the settings."""
    forest, n_outputs, n_features = state["forest_"], state["n_outputs_"], state["n_features_in_"]
    if n_outputs < 1 or n_features < 1:
        raise _fail("state", f"n_outputs_={n_outputs}, n_features_in_={n_features}: expected >= 1")
    n_trees, n_nodes = forest.feature.shape
    depth = (n_nodes + 1).bit_length() - 1
    tables = forest.left_child is not None
    if tables != (forest.right_child is not None):
        raise _fail("state.forest_", "expected both left_child and right_child, or neither")
    if n_nodes < 1 or (not tables and 2**depth != n_nodes + 1):
        raise _fail("state.forest_.feature", f"{n_nodes} nodes per tree is not 2^depth - 1")
    dims = {"trees": n_trees, "nodes": n_nodes, "leaves": n_nodes + 1, "outputs": n_outputs}
    dims["words"] = BITSET_WORDS
    for field, (_, names) in FOREST_FIELDS.items():
        expected = tuple(dims[name] for name in names)
        if getattr(forest, field) is None:
            continue
        if getattr(forest, field).shape != expected:
            raise _fail(
                f"state.forest_.{field}",
                f"expected shape {list(expected)} "
                f"{names}, got {list(getattr(forest, field).shape)}",
            )
    if state["init_score_"].shape != (n_outputs,):
        raise _fail(
            "state.init_score_",
            f"expected shape [{n_outputs}] (n_outputs_), got {list(state['init_score_'].shape)}",
        )
    edges = state["bin_edges_"]
    if edges.ndim != 2 or edges.shape[0] != n_features or not 2 <= edges.shape[1] <= 255:
        raise _fail(
            "state.bin_edges_",
            f"expected shape [{n_features} (n_features_in_), "
            f"max_bins in [2, 255]], got {list(edges.shape)}",
        )
    if params.get("max_depth") is not None and not tables and params["max_depth"] != depth:
        raise _fail("params.max_depth", f"{params['max_depth']!r} differs from the trees' {depth}")
    # a fit keeps only the value bins its features use (binning.trim_unused_bins)
    if "max_bins" in params and not params["max_bins"] >= edges.shape[1]:
        raise _fail(
            "params.max_bins",
            f"{params['max_bins']!r} is less than the trees' {edges.shape[1]} value bins",
        )
    if params.get("n_outputs") is not None and params["n_outputs"] != n_outputs:
        raise _fail("params.n_outputs", f"{params['n_outputs']!r} differs from n_outputs_")


def _check_rounds(state: dict, params: dict) -> None:
    """Tree, round and record counts agree."""
    rounds, n_trees = state["n_estimators_"], state["forest_"].feature.shape[0]
    one_per_output = params.get("multi_strategy") == "one_output_per_tree"
    per_round = state["n_outputs_"] if one_per_output else 1
    if rounds < 1 or n_trees != rounds * per_round:
        raise _fail(
            "state",
            f"{n_trees} trees do not make n_estimators_={rounds} rounds of {per_round} tree(s)",
        )
    if len(state["train_loss_"]) != rounds + 1:
        raise _fail("state.train_loss_", f"expected {rounds + 1} values (n_estimators_ + 1)")
    names = state.get("feature_names_in_")
    if names is not None and len(names) != state["n_features_in_"]:
        raise _fail("state.feature_names_in_", "expected one name per feature")
    earlier = state.get("init_model_rounds_") or 0  # the rounds of the model continued
    if _is_int(params.get("n_estimators")) and rounds > params["n_estimators"] + earlier:
        raise _fail("state.n_estimators_", f"{rounds} is over params.n_estimators")
    best = state.get("best_iteration_")  # 1-based, as in XGBoost
    if best is not None and not 1 <= best <= rounds:
        raise _fail("state.best_iteration_", f"{best} is outside [1, {rounds}]")
    lengths = {
        len(values)
        for per in (state.get("evals_result_") or {}).values()
        for values in per.values()
    }
    if len(lengths) > 1 or min(lengths, default=rounds) < rounds:
        raise _fail("state.evals_result_", f"expected lists of one length >= {rounds} rounds")


def _check_values(state: dict) -> None:
    """Indices in range, thresholds equal to bin edges, finite leaves."""
    forest, edges, init = state["forest_"], state["bin_edges_"], state["init_score_"]
    if np.isnan(edges).any() or not np.all(edges[:, 1:] >= edges[:, :-1]):
        raise _fail("state.bin_edges_", "expected ascending edges without NaN")
    if not np.all(edges[:, -1] == np.inf):
        raise _fail("state.bin_edges_", "the last edge of every feature must be +inf")
    n_features, n_bins = edges.shape
    if forest.feature.min() < 0 or forest.feature.max() >= n_features:
        raise _fail("state.forest_.feature", f"feature index outside [0, {n_features})")
    if forest.threshold_bin.min() < 0 or forest.threshold_bin.max() >= n_bins:
        raise _fail("state.forest_.threshold_bin", f"bin outside [0, {n_bins})")
    for field, problem in children_problems(forest.left_child, forest.right_child):
        raise _fail(f"state.forest_.{field}", problem)
    if not np.array_equal(forest.threshold, edges[forest.feature, forest.threshold_bin]):
        raise _fail("state.forest_.threshold", "thresholds differ from the bin edges they split at")
    for name, values in (("leaf_value", forest.leaf_value), ("split_gain", forest.split_gain)):
        if not np.all(np.isfinite(values)):
            raise _fail(f"state.forest_.{name}", "not finite")
    if not (np.all(np.isfinite(forest.leaf_weight)) and np.all(forest.leaf_weight >= 0)):
        raise _fail("state.forest_.leaf_weight", "expected finite, non-negative weights")
    if forest.leaf_cover is not None and not np.all(np.isfinite(forest.leaf_cover)):
        raise _fail("state.forest_.leaf_cover", "not finite")
    if not np.all(np.isfinite(init)):
        raise _fail("state.init_score_", "not finite")
    largest = np.abs(forest.leaf_value.astype(np.float64)).max(axis=(1, 2)).sum()
    if largest + np.abs(init.astype(np.float64)).max() > _FLOAT32_MAX / 2:
        raise _fail("state.forest_.leaf_value", "so large that predictions overflow float32")


def _check_loss(info: dict, state: dict, params: dict) -> None:
    n_outputs = state["n_outputs_"]
    declared = info.get("n_outputs")
    if params.get("n_outputs") is None and _is_int(declared) and declared != n_outputs:
        raise _fail("loss.n_outputs", f"{declared} differs from n_outputs_={n_outputs}")
    if info["link"] == "mean_scale" and n_outputs != 2:
        raise _fail("loss.link", f"'mean_scale' needs 2 outputs, the model has {n_outputs}")


# -- files -----------------------------------------------------------------------
def _no_duplicate_keys(pairs: list) -> dict:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        duplicated = sorted({key for key in keys if keys.count(key) > 1})
        raise _fail("JSON", f"duplicated keys {duplicated}")
    return dict(pairs)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _fail("JSON", f"number {text} overflows")
    return value


def _reject_constant(text: str) -> None:
    raise _fail("JSON", f"{text} is not a JSON number")


def _read_json(path: str | os.PathLike, max_bytes: int) -> Any:
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size > max_bytes:
            raise _fail("file", f"{size} bytes is over the limit of {max_bytes} bytes (max_bytes)")
        raw = file.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise _fail("file", f"over the limit of {max_bytes} bytes (max_bytes)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _fail("file", f"not UTF-8 text ({error})") from None
    if not text.strip():
        raise _fail("file", "the file is empty (truncated?)")
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
            raise _fail("file", "the JSON ends early: the file is truncated") from None
        raise _fail("file", f"not valid JSON ({error})") from None
    except RecursionError:
        raise _fail("file", "JSON nested too deeply") from None
    except ModelFileError:
        raise
    except ValueError as error:  # e.g. an integer with too many digits
        raise _fail("file", f"not valid JSON ({error})") from None


def _check_version(document: Any) -> int:
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise _fail("format", f"not a jaxboost model file (expected format {FORMAT!r})")
    version = document.get("version")
    if not _is_int(version) or version < 1:
        raise _fail("version", f"expected a positive integer, got {version!r}")
    if version > FORMAT_VERSION:
        raise _fail(
            "version",
            f"format version {version} was written by a newer jaxboost "
            f"(this one reads up to {FORMAT_VERSION}): upgrade jaxboost",
        )
    return version


def _validate(document: Any, signature: dict) -> tuple[dict, dict, dict]:
    """``(params, loss info, state)`` of a parsed file, every part checked
    (but its ``estimator`` section: `jaxboost.frontends.estimator_file`)."""
    version = _check_version(document)
    # checksums first: an edited file is reported as edited, not as inconsistent
    if version >= DOCUMENT_CHECKSUM_SINCE:
        _check_document_checksum(document, version)
    top_keys = _TOP_KEYS + ("checksums",) * (version >= CHECKSUMS_SINCE)
    top_keys += ("checksum",) * (version >= DOCUMENT_CHECKSUM_SINCE)
    check_keys(document, "top level", top_keys, ("estimator",) * (version >= ESTIMATOR_SINCE))
    params = _decode_params(document["params"], signature, "params")
    info = _decode_loss(document["loss"])
    state = _decode_state(document["state"])
    if version >= CHECKSUMS_SINCE:
        _check_checksums(document["checksums"], state)
    _check_shapes(state, params)
    _check_rounds(state, params)
    _check_values(state)
    _check_loss(info, state, params)
    return params, info, state


def save_model(
    model: Any, path: str | os.PathLike, estimator: dict | None = None, *, settings: Any = None
) -> None:
    """Write a fitted ``model`` (a Booster, or a
    `jaxboost.frontends.model.Model` whose ``settings``, a holder of the
    Booster's settings, are the file's ``params``) to ``path`` as one UTF-8
    JSON file (see the module doc), with the ``estimator`` section of the
    estimator that holds it, if one does."""
    if not hasattr(model, "forest_"):
        raise RuntimeError("this Booster is not fitted yet: call fit(X, y) first")
    state = _encode_state(model)
    document = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "params": encode_params(model if settings is None else settings),
        "loss": _encode_loss(model.loss_),
        "state": state,
        "checksums": _encode_checksums(state),
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
    file; `jaxboost.frontends.estimator_file` checks it), see
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
        params, info, state = _validate(document, _saved_params(model_class))
        rebuilt = _rebuild_loss(info) if loss is None and info["name"] is not None else None
    except ModelFileError as error:
        raise ModelFileError(f"model file {os.fspath(path)!r}: {error}") from None
    if document["version"] < DOCUMENT_CHECKSUM_SINCE:
        warnings.warn(
            f"model file {os.fspath(path)!r} {_legacy_warning(document['version'])}",
            UserWarning,
            stacklevel=3,
        )
    if loss is not None:
        if adapt_loss is not None:
            loss = adapt_loss(loss, document.get("estimator"), state)
        loss = _resolve_given_loss(loss, info)
    elif rebuilt is not None:
        loss = rebuilt
    else:
        loss = MissingLoss(info["link"], state["n_outputs_"])
    return params, loss, state, document.get("estimator")
