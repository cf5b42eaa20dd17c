"""The checks of a model file's document once parsed: its version, its
checksums (the whole document's, and each array's: an edited file is
reported as edited), each part decoded
(`jaxboost.frontends.fitted.file_format`, `jaxboost.frontends.fitted.file_loss`), and
the fields' consistency with one another (shapes, round counts, value
ranges, the loss's outputs), so that a file that passes builds a model
that predicts.  Every problem is a `ModelFileError` naming its place.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ...engine.bestfirst import children_problems
from ...engine.categorical import BITSET_WORDS
from .file_format import (
    CHECKSUMS_SINCE,
    DOCUMENT_CHECKSUM_SINCE,
    ESTIMATOR_SINCE,
    FOREST_FIELDS,
    FORMAT,
    FORMAT_VERSION,
    ModelFileError,
    array_checksum,
    check_keys,
    decode_array,
    decode_params,
    decode_state,
    document_checksum,
    file_error,
    is_int,
    state_arrays,
)
from .file_loss import decode_loss

_TOP_KEYS = ("format", "version", "params", "loss", "state")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
_FLOAT32_MAX = float(np.finfo(np.float32).max)


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
        raise file_error(
            "checksum",
            f"missing, and every version {version} file carries one: {_RESAVE}",
        )
    saved = document["checksum"]
    if not isinstance(saved, str) or not _SHA256_HEX.fullmatch(saved):
        raise file_error("checksum", "expected 64 lowercase hex digits (SHA-256)")
    if document_checksum(document) != saved:
        changed = _arrays_off_their_checksums(document)
        hint = f" (these arrays changed: {', '.join(changed)})" if changed else ""
        raise file_error("checksum", f"the content does not match it{hint}: {_RESAVE}")


def legacy_warning(version: int) -> str:
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
    arrays = state_arrays(state)
    if not isinstance(obj, dict):
        raise file_error("checksums", f"expected a JSON object, got {type(obj).__name__}")
    extra = [place for place in obj if place not in arrays]
    if extra:
        raise file_error("checksums", f"unexpected keys {extra}: no such arrays in the file")
    for place, array in arrays.items():
        if place not in obj:
            raise file_error(place, f"its checksum is missing from 'checksums': {_RESAVE}")
        if not isinstance(obj[place], str) or not _SHA256_HEX.fullmatch(obj[place]):
            raise file_error(f"checksums.{place}", "expected 64 lowercase hex digits (SHA-256)")
        if array_checksum(array) != obj[place]:
            raise file_error(place, f"the data does not match its checksum: {_RESAVE}")


# -- consistency -----------------------------------------------------------------
def _check_shapes(state: dict, params: dict) -> None:
    """Every field's shape agrees with the others and with the settings."""
    forest, n_outputs, n_features = state["forest_"], state["n_outputs_"], state["n_features_in_"]
    if n_outputs < 1 or n_features < 1:
        raise file_error(
            "state", f"n_outputs_={n_outputs}, n_features_in_={n_features}: expected >= 1"
        )
    n_trees, n_nodes = forest.feature.shape
    depth = (n_nodes + 1).bit_length() - 1
    tables = forest.left_child is not None
    if tables != (forest.right_child is not None):
        raise file_error("state.forest_", "expected both left_child and right_child, or neither")
    if n_nodes < 1 or (not tables and 2**depth != n_nodes + 1):
        raise file_error("state.forest_.feature", f"{n_nodes} nodes per tree is not 2^depth - 1")
    dims = {"trees": n_trees, "nodes": n_nodes, "leaves": n_nodes + 1, "outputs": n_outputs}
    dims["words"] = BITSET_WORDS
    for field, (_, names) in FOREST_FIELDS.items():
        expected = tuple(dims[name] for name in names)
        if getattr(forest, field) is None:
            continue
        if getattr(forest, field).shape != expected:
            raise file_error(
                f"state.forest_.{field}",
                f"expected shape {list(expected)} "
                f"{names}, got {list(getattr(forest, field).shape)}",
            )
    if state["init_score_"].shape != (n_outputs,):
        raise file_error(
            "state.init_score_",
            f"expected shape [{n_outputs}] (n_outputs_), got {list(state['init_score_'].shape)}",
        )
    edges = state["bin_edges_"]
    if edges.ndim != 2 or edges.shape[0] != n_features or not 2 <= edges.shape[1] <= 255:
        raise file_error(
            "state.bin_edges_",
            f"expected shape [{n_features} (n_features_in_), "
            f"max_bins in [2, 255]], got {list(edges.shape)}",
        )
    if params.get("max_depth") is not None and not tables and params["max_depth"] != depth:
        raise file_error(
            "params.max_depth", f"{params['max_depth']!r} differs from the trees' {depth}"
        )
    # a fit keeps only the value bins its features use (binning.trim_unused_bins)
    if "max_bins" in params and not params["max_bins"] >= edges.shape[1]:
        raise file_error(
            "params.max_bins",
            f"{params['max_bins']!r} is less than the trees' {edges.shape[1]} value bins",
        )
    if params.get("n_outputs") is not None and params["n_outputs"] != n_outputs:
        raise file_error("params.n_outputs", f"{params['n_outputs']!r} differs from n_outputs_")


def _check_rounds(state: dict, params: dict) -> None:
    """Tree, round and record counts agree."""
    rounds, n_trees = state["n_estimators_"], state["forest_"].feature.shape[0]
    one_per_output = params.get("multi_strategy") == "one_output_per_tree"
    per_round = state["n_outputs_"] if one_per_output else 1
    if rounds < 1 or n_trees != rounds * per_round:
        raise file_error(
            "state",
            f"{n_trees} trees do not make n_estimators_={rounds} rounds of {per_round} tree(s)",
        )
    if len(state["train_loss_"]) != rounds + 1:
        raise file_error("state.train_loss_", f"expected {rounds + 1} values (n_estimators_ + 1)")
    names = state.get("feature_names_in_")
    if names is not None and len(names) != state["n_features_in_"]:
        raise file_error("state.feature_names_in_", "expected one name per feature")
    earlier = state.get("init_model_rounds_") or 0  # the rounds of the model continued
    if is_int(params.get("n_estimators")) and rounds > params["n_estimators"] + earlier:
        raise file_error("state.n_estimators_", f"{rounds} is over params.n_estimators")
    best = state.get("best_iteration_")  # 1-based, as in XGBoost
    if best is not None and not 1 <= best <= rounds:
        raise file_error("state.best_iteration_", f"{best} is outside [1, {rounds}]")
    lengths = {
        len(values)
        for per in (state.get("evals_result_") or {}).values()
        for values in per.values()
    }
    if len(lengths) > 1 or min(lengths, default=rounds) < rounds:
        raise file_error("state.evals_result_", f"expected lists of one length >= {rounds} rounds")


def _check_values(state: dict) -> None:
    """Indices in range, thresholds equal to bin edges, finite leaves."""
    forest, edges, init = state["forest_"], state["bin_edges_"], state["init_score_"]
    if np.isnan(edges).any() or not np.all(edges[:, 1:] >= edges[:, :-1]):
        raise file_error("state.bin_edges_", "expected ascending edges without NaN")
    if not np.all(edges[:, -1] == np.inf):
        raise file_error("state.bin_edges_", "the last edge of every feature must be +inf")
    n_features, n_bins = edges.shape
    if forest.feature.min() < 0 or forest.feature.max() >= n_features:
        raise file_error("state.forest_.feature", f"feature index outside [0, {n_features})")
    if forest.threshold_bin.min() < 0 or forest.threshold_bin.max() >= n_bins:
        raise file_error("state.forest_.threshold_bin", f"bin outside [0, {n_bins})")
    for field, problem in children_problems(forest.left_child, forest.right_child):
        raise file_error(f"state.forest_.{field}", problem)
    if not np.array_equal(forest.threshold, edges[forest.feature, forest.threshold_bin]):
        raise file_error(
            "state.forest_.threshold", "thresholds differ from the bin edges they split at"
        )
    for name, values in (("leaf_value", forest.leaf_value), ("split_gain", forest.split_gain)):
        if not np.all(np.isfinite(values)):
            raise file_error(f"state.forest_.{name}", "not finite")
    if not (np.all(np.isfinite(forest.leaf_weight)) and np.all(forest.leaf_weight >= 0)):
        raise file_error("state.forest_.leaf_weight", "expected finite, non-negative weights")
    if forest.leaf_cover is not None and not np.all(np.isfinite(forest.leaf_cover)):
        raise file_error("state.forest_.leaf_cover", "not finite")
    if not np.all(np.isfinite(init)):
        raise file_error("state.init_score_", "not finite")
    largest = np.abs(forest.leaf_value.astype(np.float64)).max(axis=(1, 2)).sum()
    if largest + np.abs(init.astype(np.float64)).max() > _FLOAT32_MAX / 2:
        raise file_error("state.forest_.leaf_value", "so large that predictions overflow float32")


def _check_loss(info: dict, state: dict, params: dict) -> None:
    n_outputs = state["n_outputs_"]
    declared = info.get("n_outputs")
    if params.get("n_outputs") is None and is_int(declared) and declared != n_outputs:
        raise file_error("loss.n_outputs", f"{declared} differs from n_outputs_={n_outputs}")
    if info["link"] == "mean_scale" and n_outputs != 2:
        raise file_error("loss.link", f"'mean_scale' needs 2 outputs, the model has {n_outputs}")


def _check_version(document: Any) -> int:
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise file_error("format", f"not a jaxboost model file (expected format {FORMAT!r})")
    version = document.get("version")
    if not is_int(version) or version < 1:
        raise file_error("version", f"expected a positive integer, got {version!r}")
    if version > FORMAT_VERSION:
        raise file_error(
            "version",
            f"format version {version} was written by a newer jaxboost "
            f"(this one reads up to {FORMAT_VERSION}): upgrade jaxboost",
        )
    return version


def validate_document(document: Any, model_class: type) -> tuple[dict, dict, dict]:
    """``(params, loss info, state)`` of a parsed file, every part checked
    (but its ``estimator`` section: `jaxboost.frontends.scikit_learn.estimator_file`)."""
    version = _check_version(document)
    # checksums first: an edited file is reported as edited, not as inconsistent
    if version >= DOCUMENT_CHECKSUM_SINCE:
        _check_document_checksum(document, version)
    top_keys = _TOP_KEYS + ("checksums",) * (version >= CHECKSUMS_SINCE)
    top_keys += ("checksum",) * (version >= DOCUMENT_CHECKSUM_SINCE)
    check_keys(document, "top level", top_keys, ("estimator",) * (version >= ESTIMATOR_SINCE))
    params = decode_params(document["params"], model_class)
    info = decode_loss(document["loss"])
    state = decode_state(document["state"])
    if version >= CHECKSUMS_SINCE:
        _check_checksums(document["checksums"], state)
    _check_shapes(state, params)
    _check_rounds(state, params)
    _check_values(state)
    _check_loss(info, state, params)
    return params, info, state
