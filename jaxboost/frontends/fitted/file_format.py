"""The model file's values as JSON data and back: every array stored
exactly (``{"dtype", "shape", "data"}``, base64 of its little-endian
bytes) with its SHA-256, the fitted state by `STATE_FIELDS` (each field's
kind has an encoder and a decoder in ``_CODECS``), and the constructor
settings.  Decoding checks each value's type and raises `ModelFileError`
naming its place in the file; the checks across fields are
`jaxboost.frontends.fitted.file_checks`', the file itself
`jaxboost.frontends.fitted.model_file`'s (the format is described there).
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import inspect
import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ...engine.training import LEAF_METHODS, SPLIT_CRITERIA
from ...engine.tree import Tree
from ...runtime.precision import LOSS_DTYPES
from ..data.categories import categories_from_json, categories_to_json
from .model_fields import MODEL_FIELDS, saved_name

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

# Fitted attributes in a file's "state": (key, kind, required), of
# `jaxboost.frontends.fitted.model_fields` (the key a field is saved under); a
# new kind needs an encoder and a decoder in ``_CODECS``.
STATE_FIELDS = tuple(
    (saved_name(field), field.kind, field.required)
    for field in MODEL_FIELDS
    if field.kind is not None
)
# a state key -> the model's attribute it holds
ATTRIBUTE_OF = {saved_name(field): field.name for field in MODEL_FIELDS}

_ARRAY_KINDS = ("forest", "float32_array")  # state kinds stored as encoded arrays
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


class ModelFileError(ValueError):
    """A model file that cannot be read, or whose content is not a valid model."""


def file_error(where: str, problem: str) -> ModelFileError:
    """The error of ``problem`` at ``where`` (a place in the file; `read_model`
    puts the file's name in front)."""
    return ModelFileError(f"{where}: {problem}")


# -- JSON values ---------------------------------------------------------------
def plain_json(value: Any) -> Any:
    """``value`` as plain JSON data (numpy scalars unwrapped, tuples as lists)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, np.ndarray):  # (a boolean mask of categorical_features)
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [plain_json(item) for item in value]
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {key: plain_json(item) for key, item in value.items()}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    raise TypeError(f"{value!r} is not JSON data")


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_keys(obj: Any, where: str, required: tuple, optional: tuple = ()) -> dict:
    """``obj``, after checking it is a JSON object with the ``required``
    keys and no others but ``optional``; else a `ModelFileError` at ``where``."""
    if not isinstance(obj, dict):
        raise file_error(where, f"expected a JSON object, got {type(obj).__name__}")
    missing = [key for key in required if key not in obj]
    extra = [key for key in obj if key not in required and key not in optional]
    if missing:
        raise file_error(where, f"missing keys {missing}")
    if extra:
        raise file_error(where, f"unexpected keys {extra}")
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
        raise file_error(where, f"dtype {obj['dtype']!r} is not one of {list(DTYPES)}")
    if obj["dtype"] != dtype:
        raise file_error(where, f"expected dtype {dtype!r}, got {obj['dtype']!r}")
    shape = obj["shape"]
    if not isinstance(shape, list) or not all(is_int(n) and n >= 0 for n in shape):
        raise file_error(where, f"shape: expected a list of non-negative integers, got {shape!r}")
    if not isinstance(obj["data"], str):
        raise file_error(where, "data: expected a base64 string")
    try:
        data = base64.b64decode(obj["data"].encode("ascii"), validate=True)
    except (binascii.Error, ValueError) as error:
        raise file_error(where, f"data is not valid base64 ({error})") from None
    expected = math.prod(shape) * DTYPES[dtype].itemsize
    if len(data) != expected:
        raise file_error(where, f"data holds {len(data)} bytes, shape {shape} needs {expected}")
    if dtype == "bool" and data and max(data) > 1:
        raise file_error(where, "bool data holds bytes other than 0 and 1")
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
            raise file_error(where, f"this jaxboost has no rule to check tree field {field!r}")
        dtype, dims = FOREST_FIELDS[field]
        arrays[field] = decode_array(obj[field], f"{where}.{field}", dtype)
        if arrays[field].ndim != len(dims):
            raise file_error(
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
        raise file_error(where, f"expected a list of numbers, got {type(obj).__name__}")
    values = []
    for value in obj:
        if isinstance(value, str) and value in _NON_FINITE:
            value = _NON_FINITE[value]
        if not is_number(value):
            raise file_error(where, f"expected numbers (or 'nan', 'inf', '-inf'), got {value!r}")
        values.append(float(value))
    return values


def _decode_int(obj: Any, where: str) -> int:
    if not is_int(obj):
        raise file_error(where, f"expected an integer, got {obj!r}")
    return obj


def _decode_bool(obj: Any, where: str) -> bool:
    if not isinstance(obj, bool):
        raise file_error(where, f"expected true or false, got {obj!r}")
    return obj


def _decode_strings(obj: Any, where: str) -> list[str]:
    if not isinstance(obj, list) or not all(isinstance(name, str) for name in obj):
        raise file_error(where, "expected a list of strings")
    return list(obj)


def _choice_codec(allowed: tuple[str, ...]) -> tuple[Callable, Callable]:
    """Encoder and decoder of one name out of ``allowed``."""

    def decode(obj: Any, where: str) -> str:
        if obj not in allowed:
            raise file_error(where, f"expected one of {list(allowed)}, got {obj!r}")
        return obj

    return str, decode


def _encode_evals(evals: Any) -> dict:
    return {
        str(data_name): {str(metric): _encode_floats(values) for metric, values in per.items()}
        for data_name, per in evals.items()
    }


def _decode_evals(obj: Any, where: str) -> dict:
    if not isinstance(obj, dict) or not all(isinstance(per, dict) for per in obj.values()):
        raise file_error(where, "expected {data set: {metric: [numbers]}}")
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
        raise file_error(where, f"not a list of categorical columns ({error})") from None


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


def encode_state(model: Any) -> dict:
    state = {}
    for name, kind, required in STATE_FIELDS:
        attribute = ATTRIBUTE_OF[name]
        if not hasattr(model, attribute):
            if required:
                raise ValueError(f"model: fitted attribute {attribute} is missing")
            continue
        value = getattr(model, attribute)
        encode = _CODECS[kind][0]
        if kind == "categories":  # (its errors name a frame's column by name)
            encode = functools.partial(
                categories_to_json, names=getattr(model, "feature_names_in_", None)
            )
        state[name] = None if value is None and not required else encode(value)
    return state


def decode_state(obj: Any) -> dict:
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
def state_arrays(state: dict) -> dict[str, np.ndarray]:
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


def encode_checksums(state: dict) -> dict:
    """``{place: SHA-256}`` of the arrays of an encoded ``state``, as loading decodes them."""
    decoded = {
        name: _CODECS[kind][1](state[name], f"state.{name}")
        for name, kind, _ in STATE_FIELDS
        if kind in _ARRAY_KINDS and state.get(name) is not None
    }
    return {place: array_checksum(array) for place, array in state_arrays(decoded).items()}


# -- constructor settings --------------------------------------------------------
def saved_params(cls: type) -> dict[str, inspect.Parameter]:
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
    for name in saved_params(type(model)):
        if not hasattr(model, name):
            raise ValueError(f"model: constructor argument {name} is not an attribute")
        value = getattr(model, name)
        try:
            params[name] = plain_json(value)
        except TypeError:
            raise ValueError(
                f"cannot save {name}={value!r}: a model file holds numbers, strings, "
                "booleans, None and lists of them"
            ) from None
    return params


_SIMPLE_TYPES: dict[str, Callable[[Any], bool]] = {
    "int": is_int,
    "float": is_number,
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
    return _decode_params(obj, saved_params(model_class), where)


def _decode_params(obj: Any, signature: dict[str, inspect.Parameter], where: str) -> dict:
    # Settings added to Booster after a file was written take their defaults,
    # so older files keep loading; unknown settings are rejected.
    check_keys(obj, where, (), tuple(signature))
    for name, value in obj.items():
        parameter = signature[name]
        checks = _annotation_checks(parameter.annotation)
        if checks is not None and not any(check(value) for check in checks):
            raise file_error(f"{where}.{name}", f"expected {parameter.annotation}, got {value!r}")
    return dict(obj)
