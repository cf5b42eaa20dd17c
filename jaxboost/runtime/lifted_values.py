"""A loss's numbers as its programs' inputs: one compiled program per structure.

`lift` traces a loss (per sample, or per group at each padded group length)
at the shapes of the programs' calls (in float32, and in float64 for
`jaxboost.runtime.precision.Float64Loss`) and
takes out of each jaxpr the numbers it reads: its constants (captured
arrays) and the floating-point literal operands of its equations (Python
floats it reads from a closure, ``functools.partial``, a global or a class
attribute).  What is left is the loss's *structure*: its primitives, their
static parameters (``integer_pow``'s exponent stays in it), its integer and
boolean literals, the jaxprs nested in its calls, loops and custom
derivatives with everything they hold, and the shapes and dtypes of the
lifted numbers.  `LossStructure` is compared and hashed by that structure
alone, so that the programs cached on it serve every value: they take the
values as an argument (`bound`) and evaluate the jaxpr with them.  A new
value is then a call of the same program; a new structure is a new program.

A `LossStructure` computes nothing by itself: called anywhere but inside a
program that was handed its values, it raises (a program that baked one
fit's numbers into a structure's cache entry would fit the next value's
model with the old numbers).  The functions a loss declares that the programs call beside it (a
distribution's ``fisher``, ``sampler`` and ``init``, a group loss's
``row_derivatives``) are lifted alike, each at the shapes of its calls:
their structures join the key, their numbers the values, and the
structure's attribute of that name evaluates the lifted jaxpr (on the host,
outside any program, it is the declared function itself).  Losses whose
jaxpr (or a declared function's) calls back into Python or holds a custom
derivative rule written outside JAX and jaxboost (a rule may read numbers
the jaxpr does not show; a rule given to ``custom_jvp.defjvps`` is judged by
the functions given: `jaxboost.runtime.custom_rules`) get no structure: their programs stay keyed by
their values (`jaxboost.runtime.same_function`).  Every fit traces its loss
anew (it may read a global changed since), except a catalogue loss without
declared parts: library code of fixed parameters, traced once per shape.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import hashlib
import importlib
import os
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.extend.core as jax_core
import jax.numpy as jnp
import numpy as np

from .custom_rules import rule_sources

# structure key -> the values a program being traced was handed
_BOUND: contextvars.ContextVar[dict | None] = contextvars.ContextVar(
    "jaxboost_bound_values", default=None
)
# primitives whose rules are Python functions the jaxpr names but does not show
_CUSTOM_JVP = "custom_jvp_call"
_OPAQUE = ("custom_vjp_call", "pure_callback", "io_callback", "debug_callback")
# the functions a loss may declare that the programs call beside it
DECLARED_PARTS = ("init", "fisher", "sampler", "row_derivatives")
# the packages whose custom derivative rules read no user state
_LIBRARIES = ("jax", "jaxboost", "jaxboost.losses")


class LossStructure:
    """A loss's structure (see the module docstring), with its
    jaxprs taking the lifted values first; attributes are the loss's
    (its declared metadata, part of the key)."""

    def __init__(
        self,
        fn: Callable,
        key: tuple,
        signatures: tuple,
        jaxprs: tuple,
        parts: dict | None = None,
    ):
        self.fn = fn
        self.key = key
        self.signatures = signatures
        self.jaxprs = jaxprs
        # declared function name -> its `_LiftedPart` (where lifted)
        self.parts = parts or {}

    def __call__(self, *args: Any) -> Any:
        values = (_BOUND.get() or {}).get(self.key)
        if values is None:
            raise RuntimeError(
                f"the structure of {self.fn!r} was called outside a program handed its "
                "values: an internal error of jaxboost (wrap the program's factory in "
                "jaxboost.runtime.program_cache.values_as_input and trace it under bound)"
            )
        signature = _signature(args)
        if signature not in self.signatures:
            raise RuntimeError(
                f"the structure of {self.fn!r} was traced at {self.signatures}, called at "
                f"{signature}: an internal error of jaxboost (the loss must be lifted at "
                "the shapes its programs call it with)"
            )
        index = self.signatures.index(signature)
        return _evaluated(self.jaxprs[index], values[index], args)[0]

    def traced_at(self, *args: Any) -> bool:
        """Whether the structure was traced at ``args``' shapes and dtypes."""
        return _signature(args) in self.signatures

    @property
    def loss_metadata(self) -> Any:
        """The loss's record (`jaxboost.losses.metadata_of`) with its
        declared functions read through the structure (their lifted jaxprs
        inside a program), never the functions holding the first fit's
        numbers."""
        from ..losses.metadata import metadata_of  # (the catalogue imports the runtime)

        found = metadata_of(self.fn)
        parts = {
            name: getattr(self, name)
            for name in DECLARED_PARTS
            if callable(getattr(found, name, None))
        }
        return dataclasses.replace(found, **parts)

    def __getattr__(self, name: str) -> Any:
        if name in ("fn", "key", "signatures", "jaxprs", "parts"):  # not set yet: no recursion
            raise AttributeError(name)
        declared = getattr(self.fn, name)
        if name in DECLARED_PARTS and callable(declared):
            return functools.partial(self._call_part, name, declared)
        return declared

    def _call_part(self, name: str, declared: Callable, *args: Any) -> Any:
        """The declared function ``name`` called by a program (its lifted
        jaxpr, with the values the program was handed) or on the host (the
        function itself)."""
        values = (_BOUND.get() or {}).get(self.key)
        if values is None:
            if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(args)):
                raise RuntimeError(
                    f"{name} of {self.fn!r} was called inside a program not handed the "
                    "loss's values: an internal error of jaxboost"
                )
            return declared(*args)
        part = self.parts.get(name)
        traced_args, static = args[: part.n_args] if part else args, ()
        if part is not None:
            static = args[part.n_args :]
        signature = _signature(jax.tree.leaves(traced_args))
        if part is None or static != part.static or signature not in part.signatures:
            raise RuntimeError(
                f"{name} of {self.fn!r} was called at {signature} {static}, lifted at "
                f"{part and part.signatures}: an internal error of jaxboost (a declared "
                "function must be lifted at the shapes its programs call it with)"
            )
        index = part.signatures.index(signature)
        closed, out_tree = part.jaxprs[index], part.out_trees[index]
        own = values[part.first_value + index]
        outputs = _evaluated(closed, own, jax.tree.leaves(traced_args))
        return jax.tree.unflatten(out_tree, outputs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LossStructure) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"LossStructure({self.fn!r})"


class _LiftedPart(NamedTuple):
    """A declared function's lifted jaxprs, one per traced signature, and
    where its values start in the loss's values."""

    signatures: tuple
    jaxprs: tuple
    out_trees: tuple
    first_value: int
    n_args: int  # the traced arguments; the calls' trailing ones are `static`
    static: tuple


def lift(
    fn: Callable, calls: Sequence[tuple], declared: tuple, parts: Sequence[Any] = ()
) -> tuple | None:
    """``(structure, values)`` of ``fn`` at the shapes of ``calls``
    (`jax.ShapeDtypeStruct` of ``(y, f)``), each traced in float32 and in
    float64, and of the declared functions ``parts``
    (`jaxboost.runtime.same_function.Part`: a name, the function, its
    call's arguments and the trailing arguments the programs pass as
    constants) at theirs, in float32; a group loss's ``row_derivatives`` at
    the loss's calls.  ``values``, one tuple of numpy arrays per traced
    signature, is what its programs are handed (`bound`).  None where
    ``fn`` cannot be lifted (see the module docstring), or declares a
    function the programs call that ``parts`` does not list.  ``declared``:
    the metadata the key holds beside the jaxprs."""
    cache_key = _catalogue_key(fn, calls, declared, parts)
    if cache_key is not None and cache_key in _CATALOGUE_LIFTS:
        return _CATALOGUE_LIFTS[cache_key]
    found = _lift(fn, calls, declared, parts)
    if cache_key is not None and found is not None:
        _CATALOGUE_LIFTS[cache_key] = found
    return found


# (catalogue loss, its calls' signatures, declared) -> `lift`'s answer: a
# catalogue loss is library code of fixed parameters that reads no user
# state, so its traces never change; tracing a group loss at every width in
# float32 and float64 took LambdaRank 0.3 s of every fit (benchmarks/README.md)
_CATALOGUE_LIFTS: dict[tuple, tuple] = {}


def _catalogue_key(fn: Callable, calls: Sequence[tuple], declared: tuple, parts) -> tuple | None:
    """The key of ``fn``'s lift in `_CATALOGUE_LIFTS`, or None where it is
    traced anew every time: any loss but the catalogue's own, or one with
    declared parts beside its ``row_derivatives``."""
    from ..losses.catalogue import is_catalogue_loss  # (the catalogue imports the runtime)

    if parts or not is_catalogue_loss(fn):
        return None
    signatures = tuple(_signature(jax.tree.leaves(arguments)) for arguments in calls)
    return (id(fn), fn, signatures, declared)


def _lift(fn: Callable, calls: Sequence[tuple], declared: tuple, parts: Sequence[Any]):
    """`lift`, traced anew."""
    parts = list(parts)
    row_derivatives = getattr(fn, "row_derivatives", None)
    if callable(row_derivatives):  # a group loss's: called as the loss is
        parts.append(_RowDerivatives(row_derivatives, calls))
    signatures, jaxprs, texts, values = [], [], [], []
    lifted_parts = {}
    try:
        for arguments in calls:
            for wide in (False, True):
                closed = _traced(fn, arguments, wide)
                if len(closed.jaxpr.outvars) != 1 or not _liftable(closed.jaxpr):
                    return None
                opened, lifted = _opened(closed)
                signatures.append(_signature(_widened(arguments) if wide else arguments))
                jaxprs.append(jax_core.ClosedJaxpr(opened, []))
                texts.append((str(opened), _nested_constants(closed.jaxpr)))
                values.append(tuple(_passed(value, wide) for value in lifted))
        for part in parts:
            found = _lifted_part(part, len(values))
            if found is None:
                return None
            lifted_parts[part.name], part_texts, part_values = found
            texts.append((part.name, part_texts))
            jaxprs.extend(lifted_parts[part.name].jaxprs)
            values.extend(part_values)
    except Exception:  # noqa: BLE001 - a loss that does not trace so: keyed by its values
        return None
    key = (declared, tuple(texts), _rules(jaxprs))
    structure = LossStructure(fn, key, tuple(signatures), tuple(jaxprs[: len(signatures)]))
    structure.parts = lifted_parts
    return structure, tuple(values)


class _RowDerivatives(NamedTuple):
    """A group loss's ``row_derivatives`` as a part: traced at every call
    of the loss, in float32 and float64."""

    fn: Callable
    calls: Sequence[tuple]
    name: str = "row_derivatives"
    static: tuple = ()


def _lifted_part(part: Any, first_value: int) -> tuple | None:
    """``(_LiftedPart, texts, values)`` of a declared function, or None
    where it cannot be lifted."""
    if isinstance(part, _RowDerivatives):
        traces = [(arguments, wide) for arguments in part.calls for wide in (False, True)]
    else:
        traces = [(part.arguments, False)]
    signatures, jaxprs, out_trees, texts, values = [], [], [], [], []
    for arguments, wide in traces:
        closed, out_tree = _traced_tree(part.fn, arguments, wide)
        if not _liftable(closed.jaxpr):
            return None
        opened, lifted = _opened(closed)
        leaves = jax.tree.leaves(_widened(arguments) if wide else arguments)
        signatures.append(_signature(leaves))
        jaxprs.append(jax_core.ClosedJaxpr(opened, []))
        out_trees.append(out_tree)
        texts.append((str(opened), _nested_constants(closed.jaxpr), str(out_tree)))
        values.append(tuple(_passed(value, wide) for value in lifted))
    n_args = len(traces[0][0])
    found = _LiftedPart(
        tuple(signatures), tuple(jaxprs), tuple(out_trees), first_value, n_args, part.static
    )
    return found, tuple(texts), values


@contextlib.contextmanager
def bound(loss: Any, values: tuple):
    """Inside a program's traced function: ``loss``'s structure (itself, or
    the one a `jaxboost.runtime.precision.Float64Loss` or a settings object
    holds as ``.loss``) evaluates with ``values``, the program's argument."""
    structure = structure_in(loss)
    if structure is None:
        yield
        return
    token = _BOUND.set({**(_BOUND.get() or {}), structure.key: values})
    try:
        yield
    finally:
        _BOUND.reset(token)


def structure_in(setting: Any) -> LossStructure | None:
    """The `LossStructure` ``setting`` is or holds as ``.loss`` (a
    precision wrapper, a program's settings), or None."""
    for _ in range(3):
        if isinstance(setting, LossStructure):
            return setting
        setting = vars(setting).get("loss") if hasattr(setting, "__dict__") else None
        if setting is None:
            return None
    return None


def _traced(fn: Callable, arguments: tuple, wide: bool) -> Any:
    """``fn``'s closed jaxpr at ``arguments``, traced anew (JAX caches the
    trace of a function object, with the globals it read then: so does a
    ``jax.jit`` inside ``fn``, whose body is traced here as plain code)."""

    def fresh(*args):
        with jax.disable_jit():
            return fn(*args)

    if wide:
        with jax.enable_x64(True):
            return jax.make_jaxpr(fresh)(*_widened(arguments))
    with jax.enable_x64(False):
        return jax.make_jaxpr(fresh)(*arguments)


def _traced_tree(fn: Callable, arguments: tuple, wide: bool) -> tuple:
    """``fn``'s closed jaxpr at ``arguments`` (pytrees) with its flat
    arguments as inputs, and its outputs' tree structure."""

    def fresh(*args):
        with jax.disable_jit():
            return fn(*args)

    with jax.enable_x64(wide):
        closed, shapes = jax.make_jaxpr(fresh, return_shape=True)(
            *(_widened(arguments) if wide else arguments)
        )
    return closed, jax.tree.structure(shapes)


def _widened(arguments: tuple) -> tuple:
    return jax.tree.map(
        lambda a: jax.ShapeDtypeStruct(a.shape, jnp.float64 if a.dtype == jnp.float32 else a.dtype),
        arguments,
    )


def _signature(args: Sequence[Any]) -> tuple:
    """The shapes and dtypes of one call's arguments (per row under ``vmap``)."""
    signature = []
    for arg in args:
        aval = jax.typeof(arg) if not isinstance(arg, jax.ShapeDtypeStruct) else arg
        extended = jax.dtypes.issubdtype(aval.dtype, jax.dtypes.extended)  # a PRNG key's
        signature.append((tuple(aval.shape), str(aval.dtype) if extended else np.dtype(aval.dtype)))
    return tuple(signature)


def _opened(closed: Any) -> tuple[Any, list[np.ndarray]]:
    """``closed``'s jaxpr with its constants and floating-point literal
    operands made its first inputs, and their values."""
    jaxpr = closed.jaxpr
    lifted_vars = list(jaxpr.constvars)
    lifted = [np.asarray(constant) for constant in closed.consts]
    eqns = []
    for eqn in jaxpr.eqns:
        operands = []
        for atom in eqn.invars:
            if isinstance(atom, jax_core.Literal) and _is_float(atom.aval):
                var = jax_core.Var(atom.aval)
                lifted_vars.append(var)
                lifted.append(np.asarray(atom.val, atom.aval.dtype))
                atom = var
            operands.append(atom)
        eqns.append(eqn.replace(invars=operands))
    opened = jax_core.Jaxpr(
        constvars=(),
        invars=[*lifted_vars, *jaxpr.invars],
        outvars=jaxpr.outvars,
        eqns=eqns,
        effects=jaxpr.effects,
        debug_info=jaxpr.debug_info,
    )
    return opened, lifted


def _is_float(aval: Any) -> bool:
    return aval.shape == () and jnp.issubdtype(aval.dtype, jnp.floating)


def _liftable(jaxpr: Any) -> bool:
    """Whether every rule ``jaxpr`` calls is in its text or JAX's and
    jaxboost's own: no callback, no custom VJP, custom JVP rules of the
    libraries only."""
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name in _OPAQUE:
            return False
        if name == _CUSTOM_JVP and not all(
            source.startswith(_library_dirs()) for source in rule_sources(eqn)
        ):
            return False
    return all(_liftable(inner) for inner in jax_core.subjaxprs(jaxpr))


@functools.cache
def _library_dirs() -> tuple[str, ...]:
    """The folders of `_LIBRARIES` (the loss catalogue has one of its own)."""
    folders = []
    for name in _LIBRARIES:
        module = importlib.import_module(name)
        if getattr(module, "__file__", None):
            folders.append(os.path.dirname(module.__file__) + os.sep)
    return tuple(folders)


def _rules(jaxprs: Sequence[Any]) -> tuple:
    """The sources of the custom JVP rules ``jaxprs`` call (their text names
    the rule only)."""
    sources = []

    def visit(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == _CUSTOM_JVP:
                sources.append(rule_sources(eqn))
        for inner in jax_core.subjaxprs(jaxpr):
            visit(inner)

    for closed in jaxprs:
        visit(closed.jaxpr)
    return tuple(sources)


def _nested_constants(jaxpr: Any) -> tuple:
    """Digests of the constants of the closed jaxprs nested in ``jaxpr``'s
    equations (their text shows their names, not their values)."""
    digests = []
    for eqn in jaxpr.eqns:
        for param in eqn.params.values():
            for inner in param if isinstance(param, (tuple, list)) else (param,):
                if isinstance(inner, jax_core.ClosedJaxpr):
                    for constant in inner.consts:
                        array = np.ascontiguousarray(np.asarray(constant))
                        digest = hashlib.sha256(array.tobytes()).hexdigest()
                        digests.append((array.dtype.str, array.shape, digest))
                    digests.extend(_nested_constants(inner.jaxpr))
    return tuple(digests)


def _evaluated(closed: Any, values: tuple, args: Sequence[Any]) -> list:
    """The outputs of a lifted jaxpr ``closed`` on its ``values`` and
    ``args``; with 64-bit mode on while it runs where it holds 8-byte
    numbers (a float64 trace, or a float32 one whose function computes a
    part in float64 under ``jax.enable_x64``, as Cox's derivatives do)."""
    lifted = closed.jaxpr.invars[: len(values)]
    with jax.enable_x64(True) if _holds_wide(closed.jaxpr) else contextlib.nullcontext():
        inputs = [_restored(value, var.aval.dtype) for value, var in zip(values, lifted)]
        return jax_core.jaxpr_as_fun(closed)(*inputs, *args)


def _holds_wide(jaxpr: Any) -> bool:
    """Whether an input or an equation's output of ``jaxpr`` (or of a jaxpr
    nested in it) is of an 8-byte type."""
    variables = [*jaxpr.invars, *(var for eqn in jaxpr.eqns for var in eqn.outvars)]
    if any(_is_wide(getattr(var.aval, "dtype", None)) for var in variables):
        return True
    return any(_holds_wide(inner) for inner in jax_core.subjaxprs(jaxpr))


def _is_wide(dtype: Any) -> bool:
    """Whether ``dtype`` is a plain 8-byte numpy type (not a PRNG key's)."""
    if dtype is None or jax.dtypes.issubdtype(dtype, jax.dtypes.extended):
        return False
    return np.dtype(dtype).itemsize == 8


def _passed(value: np.ndarray, wide: bool) -> np.ndarray:
    """A lifted value as a program's argument: 8-byte values as pairs of
    uint32 (programs are traced with 64-bit mode off, which would round
    them), restored by `_restored` inside the loss.  (``wide``: the value
    comes from a float64 trace; a float32 trace may hold 8-byte values too,
    where its function turns 64-bit mode on for a part.)"""
    value = np.asarray(value)
    if value.dtype.itemsize == 8:
        flat = np.ascontiguousarray(value).reshape(-1).view(np.uint32)
        return flat.reshape(*value.shape, 2)
    if value.dtype.itemsize > 8:
        raise ValueError(f"a value of dtype {value.dtype} is not lifted")
    return value


def _restored(value: Any, dtype: Any) -> Any:
    """`_passed`'s value back at ``dtype``, its lifted variable's (an
    8-byte one inside 64-bit mode: `jaxboost.runtime.precision.Float64Loss`)."""
    if np.dtype(dtype).itemsize == 8:
        return jax.lax.bitcast_convert_type(value, dtype)
    return value
