"""A model file's ``loss`` section: a catalogue loss by its name,
parameters, link and outputs (rebuilt by name when the file is read), a
loss of the user's own by its link alone (`MissingLoss` stands in for it
until it is passed again: ``jaxboost.load(path, loss=...)``).
"""

from __future__ import annotations

import re
from typing import Any

from ... import losses as loss_catalogue
from ...losses import DATA_OUTPUTS
from ...losses.metadata import LossMetadata, metadata_of
from .file_format import check_keys, file_error, is_int, plain_json

_OPTAX_NAME = re.compile(r"optax:[A-Za-z][A-Za-z0-9_]*")


class MissingLoss:
    """Stands in for a custom loss, which a model file cannot hold.

    It carries the saved ``link`` so ``predict`` works; training with it raises.
    """

    hessian_informative = True

    def __init__(self, link: str, n_outputs: int):
        self.link = link
        self.n_outputs = n_outputs

    @property
    def loss_metadata(self) -> LossMetadata:
        """What the file declares of the loss: its link and outputs."""
        return LossMetadata(
            name="MissingLoss",
            link=self.link,
            n_outputs=self.n_outputs,
            hessian_informative=True,
            declared=True,
        )

    def __call__(self, y: Any, f: Any) -> Any:
        raise RuntimeError(
            "this model was loaded from a file without its custom loss (a file holds only "
            "catalogue losses): load it with jaxboost.load(path, loss=your_loss) to train it"
        )

    def __repr__(self) -> str:
        return f"MissingLoss(link={self.link!r})"


def encode_loss(loss: Any) -> dict:
    stated = metadata_of(loss)
    link = stated.link
    if link not in loss_catalogue.links.LINKS:
        raise ValueError(
            f"loss: unknown link {link!r}; expected one of {list(loss_catalogue.links.LINKS)}"
        )
    name, params = stated.name, stated.params
    if stated.declared and isinstance(name, str) and isinstance(params, dict):
        try:
            rebuilt = loss_catalogue.get(name, **params)
            same = plain_json(params) == params and rebuilt.link == link
            same = same and rebuilt.n_outputs == stated.n_outputs
        except Exception:  # noqa: BLE001  any failure means: not rebuildable by name
            same = False
        if same:
            n_outputs = stated.n_outputs
            return {
                "name": name,
                "params": plain_json(params),
                "link": link,
                "n_outputs": n_outputs,
            }
    return {"name": None, "link": link}


def decode_loss(obj: Any) -> dict:
    if not isinstance(obj, dict) or "name" not in obj:
        raise file_error("loss", "expected an object with a 'name'")
    if obj["name"] is None:
        check_keys(obj, "loss", ("name", "link"))
    else:
        check_keys(obj, "loss", ("name", "params", "link", "n_outputs"))
        name = obj["name"]
        known = isinstance(name, str) and (
            name in loss_catalogue.CATALOGUE or _OPTAX_NAME.fullmatch(name)
        )
        if not known:
            raise file_error("loss.name", f"{name!r} is not a catalogue loss")
        if not isinstance(obj["params"], dict):
            raise file_error("loss.params", "expected an object")
        n_outputs = obj["n_outputs"]
        if n_outputs not in DATA_OUTPUTS and not (is_int(n_outputs) and n_outputs >= 1):
            raise file_error(
                "loss.n_outputs",
                f"expected a positive integer or one of {list(DATA_OUTPUTS)}, got {n_outputs!r}",
            )
    if not isinstance(obj["link"], str) or obj["link"] not in loss_catalogue.links.LINKS:
        raise file_error(
            "loss.link", f"expected one of {list(loss_catalogue.links.LINKS)}, got {obj['link']!r}"
        )
    return dict(obj)


def rebuild_loss(info: dict) -> Any:
    """The catalogue loss named in the file, with its saved metadata checked."""
    name, params = info["name"], info["params"]
    try:
        loss = loss_catalogue.get(name, **params)
    except Exception as error:  # noqa: BLE001  a factory may reject the file's values any way
        raise file_error("loss", f"cannot rebuild {name!r} with {params}: {error}") from None
    stated = metadata_of(loss)
    for key in ("params", "link", "n_outputs"):
        if getattr(stated, key) != info[key]:
            raise file_error(
                f"loss.{key}",
                f"{info[key]!r} differs from the catalogue's {getattr(stated, key)!r} for {name!r}",
            )
    return loss


def given_loss(loss: Any, info: dict) -> Any:
    """The loss passed to ``load_model``; its link must be the saved one."""
    if isinstance(loss, str):
        loss = loss_catalogue.get(loss)
    elif not callable(loss):
        raise TypeError(f"loss: expected a catalogue name or a callable loss(y, f), got {loss!r}")
    link = metadata_of(loss).link
    if link != info["link"]:
        raise ValueError(
            f"loss: its link {link!r} differs from the saved model's link {info['link']!r}, "
            "so predictions would change"
        )
    return loss
