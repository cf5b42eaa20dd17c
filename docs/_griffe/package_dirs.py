"""A griffe extension for the API reference: public names that griffe, which
reads the source tree without importing it, would not find.

- Subpackages installed from another directory: setuptools'
  ``[tool.setuptools.package-dir]`` can install a directory of the repository
  as a subpackage (``"jaxboost.losses" = "losses"``). Python finds it there;
  griffe looks for subpackages inside their parent's directory only. Each
  such directory is loaded and attached to its parent package, so
  ``::: jaxboost.losses`` documents it under its public name. A subpackage
  that lies inside its parent is left as griffe found it.
- Names in a package's ``__all__`` that a module ``__getattr__`` provides on
  first use (``jaxboost.Regressor``, which needs scikit-learn): each is
  attached as an alias of the one class or function of that name defined in
  the package's modules.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import griffe

ROOT = Path(__file__).resolve().parents[2]
# a line of the [tool.setuptools.package-dir] table: "parent.child" = "directory"
_ENTRY = re.compile(r'^\s*"([\w.]+)"\s*=\s*"([^"]+)"')


def package_dirs() -> dict[str, str]:
    """``{"parent.child": "directory"}`` from pyproject.toml's
    ``[tool.setuptools.package-dir]`` (subpackages only; empty if none)."""
    mapping, in_table = {}, False
    for line in (ROOT / "pyproject.toml").read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("["):
            in_table = line.strip() == "[tool.setuptools.package-dir]"
        elif in_table and (entry := _ENTRY.match(line)) and "." in entry.group(1):
            mapping[entry.group(1)] = entry.group(2)
    return mapping


def definitions(module: griffe.Module) -> Iterator[griffe.Object]:
    """Every class and function defined (not imported) in ``module`` and its submodules."""
    for member in module.members.values():
        if member.is_alias:
            continue
        if member.is_module:
            yield from definitions(member)
        elif member.is_class or member.is_function:
            yield member


class PackageDirs(griffe.Extension):
    """Attach relocated subpackages and lazily exported names to their package."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        for name, directory in package_dirs().items():
            parent, _, child = name.rpartition(".")
            if parent != pkg.path:
                continue
            found = pkg.members.get(child)
            if found is not None and not found.is_alias:
                continue  # the subpackage lies inside its parent
            pkg.set_member(child, loader.load(directory, submodules=True))
        for export in pkg.exports or ():
            name = str(export)
            if name in pkg.members:
                continue
            matches = [obj for obj in definitions(pkg) if obj.name == name]
            if len(matches) == 1:
                pkg.set_member(name, griffe.Alias(name, matches[0], parent=pkg))
