"""Stable digests of what determines a result: arrays, tree structures and computations.

A store or checkpoint records these so that it is reused only by the computation that
wrote it. Digests are the same in every process (no memory addresses, no `id`s).
"""

import functools as ft
import hashlib
import re
import types
from collections.abc import Callable, Iterator
from typing import Any

import equinox as eqx
import jax
import jax.extend.core as jex
import jax.tree_util as jtu
import numpy as np

from ..kernels._primitive import KernelLaunch

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def array_digest(array: Any) -> str:
    """SHA-256 of an array's shape, dtype and bytes (a typed PRNG key's: of its key data)."""
    if jax.dtypes.issubdtype(getattr(array, "dtype", None), jax.dtypes.prng_key):
        key_data = array_digest(jax.random.key_data(array))
        return hashlib.sha256(f"{array.dtype} {key_data}".encode()).hexdigest()
    array = np.ascontiguousarray(np.asarray(array))
    header = str((array.shape, array.dtype.str)).encode()
    return hashlib.sha256(header + array.tobytes()).hexdigest()


def tree_digest(tree: Any) -> str:
    """SHA-256 of a pytree: its structure (static fields included) and every leaf.

    Array leaves are hashed by value, function leaves by their bytecode, constants, names
    and closure, anything else by its `repr` with memory addresses removed.
    """
    return _tree_digest(tree, depth=0)


def _tree_digest(tree: Any, depth: int) -> str:
    leaves, treedef = jtu.tree_flatten(tree)
    digest = hashlib.sha256(_ADDRESS.sub("", str(treedef)).encode())
    for leaf in leaves:
        digest.update(_value_digest(leaf, depth + 1).encode())
    return digest.hexdigest()


def computation_digest(function: Callable[..., Any], *args: Any) -> str:
    """SHA-256 of what `function` computes when called on arguments shaped like `args`.

    The call is traced once into a jaxpr (nothing is compiled or run); the digest covers
    that jaxpr, every literal and captured constant in it by value, and the structure of
    the result. A change to the function's code, to a value it closes over, or to a global
    it reads changes the digest; array arguments enter only by shape and dtype, other
    arguments as the constants they become. The jaxpr, hence the digest, depends on the
    JAX version.
    """
    closed, out_shapes, static_out = eqx.filter_make_jaxpr(function)(*args)
    text = closed.jaxpr.pretty_print(use_color=False)  # nested jaxprs included
    digest = hashlib.sha256(_ADDRESS.sub("", text).encode())
    for value in _captured_values(closed):
        digest.update(array_digest(value).encode())
    for kernel in _kernel_digests(closed):
        digest.update(kernel.encode())
    digest.update(_ADDRESS.sub("", str(jtu.tree_structure(out_shapes))).encode())
    digest.update(tree_digest(static_out).encode())
    return digest.hexdigest()


def _captured_values(closed: jex.ClosedJaxpr) -> Iterator[Any]:
    """The constants and literals of a jaxpr and of every jaxpr nested in it, with any
    arrays among its equations' parameters, in order.

    A printed jaxpr abbreviates large arrays, so these are hashed by value instead."""
    for part in _jaxprs(closed):
        if isinstance(part, jex.ClosedJaxpr):
            yield from part.consts
            continue
        for eqn in part.eqns:
            yield from (var.val for var in eqn.invars if isinstance(var, jex.Literal))
            yield from (
                p for p in _flat(eqn.params.values()) if isinstance(p, np.ndarray | jax.Array)
            )
        yield from (var.val for var in part.outvars if isinstance(var, jex.Literal))


def _kernel_digests(closed: jex.ClosedJaxpr) -> Iterator[str]:
    """The digest of what each Pallas kernel launch in a jaxpr computes.

    A launch is a primitive whose parameter prints the functions it runs (a reaction) by
    name only, so each is traced as it runs on a CPU, at the shapes of its arguments."""
    for part in _jaxprs(closed):
        for eqn in part.eqns if isinstance(part, jex.Jaxpr) else ():
            for launch in _flat(eqn.params.values()):
                if isinstance(launch, KernelLaunch):
                    avals = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in eqn.invars]
                    yield computation_digest(ft.partial(launch.run, "cpu"), *avals)


def _jaxprs(part: Any) -> Iterator[jex.Jaxpr | jex.ClosedJaxpr]:
    """`part` where it is a jaxpr, and every jaxpr nested in its equations' parameters."""
    if isinstance(part, jex.ClosedJaxpr):
        yield part
        yield from _jaxprs(part.jaxpr)
    elif isinstance(part, jex.Jaxpr):
        yield part
        for eqn in part.eqns:
            for param in _flat(eqn.params.values()):
                yield from _jaxprs(param)


def _flat(values: Any) -> Iterator[Any]:
    """The items of nested tuples and lists (equation parameters hold jaxprs in tuples)."""
    for value in values:
        if isinstance(value, tuple | list):
            yield from _flat(value)
        else:
            yield value


def _value_digest(value: Any, depth: int) -> str:
    digest = hashlib.sha256()
    if isinstance(value, np.ndarray | np.generic) or hasattr(value, "__array__"):
        digest.update(array_digest(value).encode())
    elif depth > 8:  # deep chains of closures: the name is enough past this point
        digest.update(_ADDRESS.sub("", repr(value)).encode())
    elif isinstance(value, types.FunctionType):
        digest.update(f"{value.__module__}.{value.__qualname__}".encode())
        digest.update(_code_digest(value.__code__).encode())
        for cell in value.__closure__ or ():
            try:
                content = cell.cell_contents
            except ValueError:  # an empty cell
                content = None
            digest.update(_value_digest(content, depth + 1).encode())
        for default in value.__defaults__ or ():
            digest.update(_value_digest(default, depth + 1).encode())
    elif isinstance(value, types.MethodType):
        digest.update(_value_digest(value.__func__, depth + 1).encode())
        digest.update(_tree_digest(value.__self__, depth + 1).encode())
    elif isinstance(value, list | tuple | dict) or not _is_leaf(value):
        digest.update(_tree_digest(value, depth + 1).encode())
    elif hasattr(value, "__wrapped__"):  # jax.jit and functools.wraps wrappers
        digest.update(_value_digest(value.__wrapped__, depth + 1).encode())
    else:
        digest.update(_ADDRESS.sub("", repr(value)).encode())
    return digest.hexdigest()


def _is_leaf(value: Any) -> bool:
    leaves = jtu.tree_leaves(value)
    return len(leaves) == 1 and leaves[0] is value


def _code_digest(code: types.CodeType) -> str:
    digest = hashlib.sha256(code.co_code)
    digest.update(repr(code.co_names).encode())
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            digest.update(_code_digest(constant).encode())
        else:
            digest.update(repr(constant).encode())
    return digest.hexdigest()
