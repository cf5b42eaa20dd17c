"""The Python functions behind a custom JVP rule, and the files they are in.

A jaxpr's ``custom_jvp_call`` names its rule (``jvp_jaxpr_fun``) without
showing what it computes: a rule written in JAX or jaxboost reads no user
state, one written elsewhere may read a global or a closure that the
jaxpr does not show.  ``custom_jvp.defjvps`` hands JAX a rule of its own
(``jvp`` in ``jax/_src/custom_derivatives.py``) that calls the functions
given to it: those are the rule's functions, found in that wrapper's
closure.  `rule_sources` gives the files of a rule's functions ("" where
unknown: never a library's).
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
from typing import Any

# the file of the rule `custom_jvp.defjvps` defines around the given functions
_DEFJVPS_FILE = os.path.join("jax", "_src", "custom_derivatives.py")
# how many objects the search for that rule's functions looks through
_SEARCHED = 200


def rule_sources(eqn: Any) -> tuple[str, ...]:
    """The files of the functions a ``custom_jvp_call`` equation's rule runs:
    the rule's own, or where it is `custom_jvp.defjvps`'s wrapper, the
    functions given to it (a ``functools.partial`` binding arguments
    counts as unknown: its numbers are not in any file)."""
    rule = eqn.params.get("jvp_jaxpr_fun")
    info = getattr(rule, "debug_info", None)
    # "name at /path/file.py:line"
    source = (getattr(info, "func_src_info", None) or "").rpartition(" at ")[2]
    if not source.rpartition(":")[0].endswith(_DEFJVPS_FILE):
        return (source,)
    given = _defjvps_functions(rule)
    if given is None:
        return ("",)
    return tuple(_file(function) for function in given if function is not None)


def _defjvps_functions(rule: Any) -> tuple | None:
    """The functions given to ``defjvps`` (its wrapper's ``jvps``), found
    through the closures and wrappers around ``rule``; None if not found."""
    pending, seen = [rule], set()
    while pending and len(seen) < _SEARCHED:
        obj = pending.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        code = getattr(obj, "__code__", None)
        wrapper = code is not None and code.co_filename.endswith(_DEFJVPS_FILE)
        if wrapper and "jvps" in code.co_freevars and obj.__closure__:
            return obj.__closure__[code.co_freevars.index("jvps")].cell_contents
        if inspect.isfunction(obj):
            pending.extend(cell.cell_contents for cell in obj.__closure__ or () if _filled(cell))
        elif isinstance(obj, functools.partial):
            pending.append(obj.func)
        elif hasattr(obj, "transforms") and hasattr(obj, "f"):  # JAX's wrapped function
            pending.append(obj.f)
    return None


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def _file(function: Any) -> str:
    """The file ``function`` is written in ("" where it binds arguments or
    has no known file)."""
    if isinstance(function, functools.partial):
        return ""
    function = inspect.unwrap(function)
    code = getattr(function, "__code__", None)
    if code is not None:
        return code.co_filename
    module = sys.modules.get(getattr(function, "__module__", None) or "")
    return getattr(module, "__file__", None) or ""
