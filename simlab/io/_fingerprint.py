"""Stable digests of what determines a result: arrays, tree structures and functions.

A store or checkpoint records these so that it is reused only by the computation that
wrote it. Digests are the same in every process (no memory addresses, no `id`s).
"""

import hashlib
import re
import types
from typing import Any

import jax.tree_util as jtu
import numpy as np

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def array_digest(array: Any) -> str:
    """SHA-256 of an array's shape, dtype and bytes."""
    array = np.ascontiguousarray(np.asarray(array))
    header = str((array.shape, array.dtype.str)).encode()
    return hashlib.sha256(header + array.tobytes()).hexdigest()


def tree_digest(tree: Any) -> str:
    """SHA-256 of a pytree: its structure (static fields included) and every leaf.

    Array leaves are hashed by value, function leaves by their code (see
    `callable_digest`), anything else by its `repr` with memory addresses removed.
    """
    return _tree_digest(tree, depth=0)


def _tree_digest(tree: Any, depth: int) -> str:
    leaves, treedef = jtu.tree_flatten(tree)
    digest = hashlib.sha256(_ADDRESS.sub("", str(treedef)).encode())
    for leaf in leaves:
        digest.update(_value_digest(leaf, depth + 1).encode())
    return digest.hexdigest()


def callable_digest(function: Any) -> str:
    """SHA-256 of what a function computes: its bytecode, constants, names and closure.

    Two lambdas with the same qualified name but different bodies get different digests;
    the same function gets the same digest in every process. Closed-over values and
    defaults are included (arrays by value, functions recursively).
    """
    return _value_digest(function, depth=0)


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
