"""Functions that compute the same thing: one key for the compiled programs.

jaxboost's compiled programs are cached on the loss (and metric) object they
call, and JAX's traces on the function.  A key by object identity would
recompile everything for a lambda written again (a notebook cell run again),
and, worse, would reuse stale programs for the *same* object after anything
it reads has changed: a global, a class or module attribute, a captured
array changed in place, its ``__code__`` replaced (IPython's autoreload).

`same_computation` keys a function on what it computes when traced: the
jaxpr of its value and directional derivative at the shapes of every call
the programs make (a group loss: at each padded group length of the fit;
every literal printed exactly, ``-0.0`` apart from ``0.0``; custom JVP
rules expanded), the values of the jaxpr's constants (captured arrays, by
their bytes), the catalogue metadata it declares, and the declared
functions the programs call beside it (a distribution's ``fisher``,
``sampler`` and ``init``: `Part`), traced alike at their calls' shapes.
A function lifted for programs that take its numbers as inputs
(``lifted=True``: `jaxboost.runtime.lifted_values`) is keyed by that
structure and those numbers instead (its value's jaxprs at every call, in
float32 and float64, its declared parts', every number at full precision):
they say what the traces above would, and a group loss is then traced
once per width and precision rather than twice.
`same_parts` keys any other object the programs call into (an optax
optimizer of `jaxboost.refit_leaves`) by the traces of its methods alike.
`same_computation` returns one `SameComputation` per key, whose calls go to the newest
function that was traced to that key: the caches' programs are then reused
by every function that computes the same thing, and by no other.  Each fit
traces its loss and metrics again (a few milliseconds), so a change
between fits is a new key.  A function that cannot be traced with a
directional derivative is keyed by its value and gradient; one that cannot
be traced at all, or that calls Python through a callback
(``jax.pure_callback``: what that Python reads is not in the jaxpr, whose
text hides the function), gets a key of its own (its programs are compiled
for that fit alone); a callback to the library's own functions is keyed by
the function.

The trace is taken with JAX's 64-bit mode on and float64 arguments where the
function allows, so that Python numbers it reads are compared at their full
precision (a float64 loss, ``loss_dtype="float64"``, sees them so).  Limits:
a custom JVP rule's own second derivatives are keyed by the name of any
custom JVP function the rule calls; a global read by a branch on the
arguments' dtype (float32 or float64) is keyed as the float64 trace reads it.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import weakref
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.extend.core as jax_core
import jax.numpy as jnp
import numpy as np

from .lifted_values import LossStructure, lift

# key -> the one SameComputation with it (weakly: a dropped loss frees its entry)
_BY_KEY: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
# keys of functions that could not be traced: never equal to another's
_UNTRACEABLE = itertools.count()
# the catalogue metadata (losses._declare) a key includes
_DECLARED = (
    "name",
    "params",
    "link",
    "n_outputs",
    "hessian_informative",
    "convex",
    "target_domain",
    "smooth",
    "per",
)
# declared metadata only reported (model files, messages), never read by a program
_REPORTED = ("name", "params")
# a distribution's parts: whether the loss declares them (those the
# programs call are traced: `Part`)
_PARTS = ("init", "fisher", "sampler")
# primitives that call Python, which a jaxpr does not show
_CALLBACKS = ("pure_callback", "io_callback")
# the module prefix of the library's own functions
_LIBRARY = "jaxboost."


def is_library_function(fn: Any) -> bool:
    """Whether ``fn`` is one of jaxboost's own functions (which read no
    mutable state: a function object computes one thing)."""
    return getattr(fn, "__module__", None) is not None and fn.__module__.startswith(_LIBRARY)


class Part(NamedTuple):
    """A function a loss declares that the programs call (a distribution's
    ``fisher``; an optimizer's ``init`` and ``update``), keyed by its value
    traced at ``arguments`` (pytrees of the shapes and dtypes of the
    programs' call)."""

    name: str
    fn: Callable
    arguments: tuple
    # the trailing arguments the programs' calls add, which ``fn`` binds
    static: tuple = ()


class SameComputation:
    """A function compared and hashed by what it computes (see the module
    docstring); calls and attributes go to the newest function traced to its
    key.  Pickles as that function."""

    def __init__(self, fn: Callable, key: tuple):
        self.fn = fn
        self.key = key
        # the newest function's structure and lifted values, where lifted
        # (`jaxboost.runtime.lifted_values`: programs that take the values)
        self.structure: LossStructure | None = None
        self.values: tuple = ()

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args)

    def __getattr__(self, name: str) -> Any:
        # not set yet (copying, unpickling): no recursion
        if name in ("fn", "key", "structure", "values"):
            raise AttributeError(name)
        return getattr(self.fn, name)

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.signature(self.fn)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SameComputation) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __reduce__(self):
        return (_identity, (self.fn,))

    def __repr__(self) -> str:
        return f"SameComputation({self.fn!r})"


def _identity(value: Any) -> Any:
    return value


def plain(fn: Any) -> Any:
    """The user's function behind ``fn`` (``fn`` itself if not keyed)."""
    return fn.fn if isinstance(fn, SameComputation) else fn


def same_computation(
    fn: Callable, calls: Sequence[tuple], parts: Sequence[Part] = (), lifted: bool = False
) -> SameComputation:
    """``fn`` keyed on what it computes at the shapes of ``calls``.

    Args:
      fn: ``fn(y, f, *rest) -> scalar``, differentiated in ``f``: a per-sample
        loss or metric (``y`` one row's target, ``f`` ``()`` or ``(K,)``), or
        a group loss (``y (m, ...)``, ``f (m,)``, ``mask (m,)``).
      calls: the shapes and dtypes of ``(y, f, *rest)`` (`jax.ShapeDtypeStruct`)
        of every call the programs make: one for a per-sample function, one
        per padded group length for a group loss.
      parts: the declared functions the programs call beside ``fn``.
      lifted: give it its `LossStructure` and values too, its declared
        parts' included (`jaxboost.runtime.lifted_values.lift`), for the
        programs that take the values as an argument.
    Returns:
      the one `SameComputation` of that key, now calling ``fn``.
    """
    fn = plain(fn)
    declared = _declared(fn)
    found = lift(fn, calls, _structural(declared), parts) if lifted else None
    if found is not None:
        # the structure (every jaxpr's text, at every call, float32 and
        # float64, the declared parts' too) and the lifted numbers say all
        # the traces below would: no second trace
        key = (declared, "lifted", found[0].key, _values_digest(found[1]))
    else:
        key = (
            declared,
            tuple(_traced(fn, arguments) for arguments in calls),
            tuple(_row_derivatives(fn, arguments) for arguments in calls),
            tuple((part.name, _part_digest(part)) for part in parts),
        )
    keyed = _BY_KEY.get(key)
    if keyed is None:
        keyed = SameComputation(fn, key)
        _BY_KEY[key] = keyed
    keyed.fn = fn  # the newest function of this computation: programs traced later trace it
    keyed.structure, keyed.values = found if found is not None else (None, ())
    return keyed


def _values_digest(values: tuple) -> tuple:
    """A digest of lifted values (per traced signature, a tuple of numpy
    arrays): their types, shapes and bytes (``-0.0`` apart from ``0.0``)."""
    digest = hashlib.sha256()
    for signature in values:
        for value in signature:
            array = np.ascontiguousarray(np.asarray(value))
            digest.update(f"{array.dtype.str}{array.shape}".encode())
            digest.update(array.tobytes())
    return (len(values), digest.hexdigest())


def same_parts(obj: Any, parts: Sequence[Part]) -> SameComputation:
    """``obj`` (an object whose methods the programs call, such as an optax
    optimizer) keyed on what ``parts`` compute: each part's value traced
    at its call's shapes, as a loss's declared functions are.

    Returns the one `SameComputation` of that key, whose attributes are
    now ``obj``'s.
    """
    obj = plain(obj)
    kind = type(obj)
    key = (
        ("parts", kind.__module__, kind.__qualname__),
        tuple((part.name, _part_digest(part)) for part in parts),
    )
    keyed = _BY_KEY.get(key)
    if keyed is None:
        keyed = SameComputation(obj, key)
        _BY_KEY[key] = keyed
    keyed.fn = obj
    return keyed


def _declared(fn: Callable) -> tuple:
    """The function's kind and declared catalogue metadata."""
    kind = type(fn)
    return (
        (kind.__module__, kind.__qualname__)
        + tuple((name, repr(getattr(fn, name, None))) for name in _DECLARED)
        + tuple((name, getattr(fn, name, None) is not None) for name in _PARTS)
    )


def _structural(declared: tuple) -> tuple:
    """The declared metadata a structure's key holds: what the programs read
    (not the function's type, its name, nor the ``params`` it reports)."""
    return tuple(item for item in declared[2:] if item[0] not in _REPORTED)


def _part_digest(part: Part) -> tuple:
    """A digest of a declared part's value at its call's shapes."""
    for wide in (True, False):
        digest = _digest_or_none(part.fn, part.arguments, wide)
        if digest is not None:
            return digest
    return ("untraceable", next(_UNTRACEABLE))


def _row_derivatives(fn: Callable, arguments: tuple) -> tuple | None:
    """A group loss's declared closed-form derivatives, traced as the loss."""
    closed_form = getattr(fn, "row_derivatives", None)
    if not callable(closed_form):
        return None
    try:
        return _digest(_jaxpr(closed_form, arguments))
    except Exception:  # noqa: BLE001 - a function the key cannot read
        return ("untraceable", next(_UNTRACEABLE))


def _traced(fn: Callable, arguments: tuple) -> tuple:
    """A digest of ``fn``'s value and derivative in ``f`` at ``arguments``."""
    for with_derivative in (_value_and_slope, _value_and_gradient):
        for wide in (True, False):
            digest = _digest_or_none(with_derivative(fn), arguments, wide)
            if digest is not None:
                return digest
    return ("untraceable", next(_UNTRACEABLE))


def _digest_or_none(fn: Callable, arguments: tuple, wide: bool) -> tuple | None:
    """`_digest` of ``fn``'s trace, or None where it does not trace so."""
    try:
        return _digest(_jaxpr(fn, arguments, wide))
    except Exception:  # noqa: BLE001 - the caller tries a narrower trace
        return None


def _value_and_slope(fn: Callable) -> Callable:
    def traced(y, f, *rest):
        value, slope = jax.jvp(lambda f: fn(y, f, *rest), (f,), (jnp.ones_like(f),))
        return fn(y, f, *rest), value, slope

    return traced


def _value_and_gradient(fn: Callable) -> Callable:
    def traced(y, f, *rest):
        return fn(y, f, *rest), jax.grad(lambda f: jnp.sum(fn(y, f, *rest)))(f)

    return traced


def _jaxpr(fn: Callable, arguments: tuple, wide: bool = False) -> jax.extend.core.ClosedJaxpr:
    """``fn``'s closed jaxpr at ``arguments`` (``wide``: in 64-bit mode, its
    float32 arguments made float64), traced anew: JAX caches the trace of a
    function object, with the globals it read then; so does a ``jax.jit``
    inside ``fn``, whose body is traced here as plain code."""

    def fresh(*args):
        with jax.disable_jit():
            return fn(*args)

    if not wide:
        with jax.enable_x64(False):
            return jax.make_jaxpr(fresh)(*arguments)
    widened = jax.tree.map(
        lambda a: jax.ShapeDtypeStruct(a.shape, jnp.float64 if a.dtype == jnp.float32 else a.dtype),
        arguments,
    )
    with jax.enable_x64(True):
        return jax.make_jaxpr(fresh)(*widened)


def _digest(closed: Any) -> tuple:
    """The jaxpr's text and its constants' values, hashed, and the library
    functions its callbacks call; a key of its own where a callback calls
    any other Python function (what it reads is not in the jaxpr, whose text
    hides the function's address)."""
    called = _callbacks(closed.jaxpr)
    if not all(is_library_function(fn) for fn in called):
        return ("untraceable", next(_UNTRACEABLE))
    text = hashlib.sha256(str(closed.jaxpr).encode()).hexdigest()
    constants = []
    for constant in closed.consts:
        array = np.asarray(constant)
        digest = hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()
        constants.append((array.dtype.str, array.shape, digest))
    # (the function objects themselves: equal only to themselves)
    return (text, tuple(constants), called)


def _callbacks(jaxpr: Any) -> tuple:
    """The Python functions ``jaxpr``'s callbacks call, nested jaxprs included."""
    called = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in _CALLBACKS:
            callback = eqn.params.get("callback")
            called.append(getattr(callback, "callback_func", callback))
    for inner in jax_core.subjaxprs(jaxpr):
        called.extend(_callbacks(inner))
    return tuple(called)
