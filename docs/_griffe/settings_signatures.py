"""A griffe extension for the API reference: the signatures and Args
sections that `jaxboost.frontends.settings.settings_table` makes.

``Booster``, ``Regressor``, ``Classifier`` and ``Ranker`` take their
``__init__`` and the Args section of their docstring from one table when
the module is imported (``@takes_settings``); griffe reads the source
without importing it, and would find neither.  For each class that a
``@takes_settings(...)`` decorator marks, this imports the class and puts
its ``__init__`` signature and its docstring as Python holds them in
griffe's place.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import griffe


def _decorated(cls: griffe.Class) -> bool:
    return any("takes_settings" in str(decorator.value) for decorator in cls.decorators)


def _parameter(parameter: inspect.Parameter) -> griffe.Parameter:
    default = None if parameter.default is parameter.empty else repr(parameter.default)
    annotation = None if parameter.annotation is parameter.empty else str(parameter.annotation)
    return griffe.Parameter(
        parameter.name,
        annotation=annotation,
        kind=griffe.ParameterKind.positional_or_keyword,
        default=default,
    )


class SettingsSignatures(griffe.Extension):
    """Fill in the signature and Args of the classes ``@takes_settings`` makes."""

    def on_class_members(self, *, cls: griffe.Class, **kwargs: Any) -> None:
        if not _decorated(cls):
            return
        runtime = getattr(importlib.import_module(cls.module.path), cls.name)
        init = griffe.Function(
            "__init__",
            lineno=cls.lineno,
            endlineno=cls.lineno,
            parameters=griffe.Parameters(
                *(_parameter(p) for p in inspect.signature(runtime.__init__).parameters.values())
            ),
        )
        cls.set_member("__init__", init)
        # (the Docstring griffe made keeps its parser: only its text changes)
        cls.docstring.value = inspect.getdoc(runtime)
