"""``jaxboost.load``: a fitted ``Booster`` from a model file (the file's
format and checks are `jaxboost.frontends.model_file`'s)."""

from __future__ import annotations

import os
from typing import Any

from .booster import Booster
from .model_file import DEFAULT_MAX_BYTES, read_model


def load_model(
    path: str | os.PathLike, loss: Any = None, *, max_bytes: int = DEFAULT_MAX_BYTES
) -> Booster:
    """A fitted ``Booster`` read from a file written by ``Booster.save``.

    Args:
      path: the model file.
      loss: the loss to train with; needed to train again a model whose loss is
        custom (not from the catalogue).  Its link must be the saved one.
        Default: the catalogue loss named in the file, else a stand-in that
        predicts through the saved link and raises if trained.
      max_bytes: files larger than this are refused before reading.
    Returns:
      the model, predicting exactly as the saved one did.
    Raises:
      ModelFileError: (a ``ValueError``) the file is not a valid model file,
        or does not match its checksums (it was edited or damaged after
        saving).
    """
    params, loss, state = read_model(path, Booster, loss, max_bytes=max_bytes)
    model = Booster(loss=loss, **params)
    for name, value in state.items():
        setattr(model, name, value)
    model.loss_ = loss
    return model
