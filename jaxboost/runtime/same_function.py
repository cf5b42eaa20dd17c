"""Functions that are the same function: a lambda written again.

jaxboost's compiled programs are cached on the loss object, and JAX's traces
on the function.  Re-running a notebook cell makes a new function object from
the same text, which would trace and compile everything again.
:func:`canonical` returns the first function seen with the same code and the
same captured values, so its programs are reused.  Two functions are the
same when their bytecode, constants, names, defaults, attributes, closure
cells' values and the values of the globals their code names (modules and
functions by identity, numbers, strings and arrays by value) all agree; a
function capturing anything else (an object whose value cannot be read
safely) is returned as it is.
"""

from __future__ import annotations

import hashlib
import types
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

# fingerprint -> the first function with it (weakly: a dropped loss frees its entry)
_FIRST_SEEN: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_PLAIN = (bool, int, float, complex, str, bytes, type(None))
_MAX_ARRAY_BYTES = 1 << 20  # arrays larger than this are hashed by identity, not value


class _Unreadable(Exception):
    """A captured value whose sameness cannot be told safely."""


def canonical(fn: Callable) -> Callable:
    """The first function seen that is the same as ``fn`` (see the module
    docstring), or ``fn`` itself (not a plain Python function, or capturing
    something unreadable)."""
    if not isinstance(fn, types.FunctionType):
        return fn
    try:
        key = _fingerprint(fn, depth=0)
    except (_Unreadable, RecursionError):
        return fn
    first = _FIRST_SEEN.get(key)
    if first is None:
        _FIRST_SEEN[key] = fn
        return fn
    return first


def _fingerprint(fn: types.FunctionType, depth: int) -> tuple:
    if depth > 4:
        raise _Unreadable
    code = fn.__code__
    globals_named = tuple(
        (name, _value(fn.__globals__[name], depth))
        for name in _names(code)
        if name in fn.__globals__
    )
    cells = tuple(_value(cell.cell_contents, depth) for cell in fn.__closure__ or ())
    defaults = tuple(_value(value, depth) for value in fn.__defaults__ or ())
    keyword_defaults = tuple(
        sorted((k, _value(v, depth)) for k, v in (fn.__kwdefaults__ or {}).items())
    )
    attributes = tuple(sorted((k, _value(v, depth)) for k, v in fn.__dict__.items()))
    return (
        fn.__module__,
        _code_key(code),
        globals_named,
        cells,
        defaults,
        keyword_defaults,
        attributes,
    )


def _names(code: types.CodeType) -> set[str]:
    """The global names ``code`` and its nested code objects use."""
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names |= _names(constant)
    return names


def _code_key(code: types.CodeType) -> tuple:
    constants = tuple(
        _code_key(c) if isinstance(c, types.CodeType) else (type(c).__name__, repr(c))
        for c in code.co_consts
    )
    return (code.co_code, constants, code.co_names, code.co_varnames, code.co_freevars)


def _value(value: Any, depth: int) -> Any:
    """A hashable stand-in for a captured value, equal for equal values."""
    if isinstance(value, _PLAIN):
        return (type(value).__name__, value)
    if isinstance(value, (types.ModuleType, types.BuiltinFunctionType, type)):
        return ("object", value)  # held, so that its id cannot be reused
    if isinstance(value, types.FunctionType):
        # a function defined at a module's top stays the same object
        if value.__closure__ is None and value.__qualname__ == value.__name__:
            return ("object", value)
        return ("function", _fingerprint(value, depth + 1))
    if isinstance(value, (tuple, list)) and len(value) <= 64:
        return (type(value).__name__, tuple(_value(item, depth) for item in value))
    if isinstance(value, (np.ndarray, np.generic)) and value.nbytes <= _MAX_ARRAY_BYTES:
        array = np.asarray(value)
        digest = hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()
        return ("array", array.dtype.str, array.shape, digest)
    if callable(value) and type(value).__hash__ is object.__hash__:
        # a declared loss, a jitted or numpy function: the same object only
        return ("object", value)
    raise _Unreadable
