"""A member's program run on tiles of members, one tile per element of its arrays.

Inside the kernel integrator's kernel (`simlab.integrate._kernel`) every element of a
member's arrays (a state component, a parameter, a normal) is a `(sublanes, 128)` tile of
that element across the block's members. `on_tiles` runs the member's program (its jaxpr)
with each of its arrays held as a NumPy object array of such tiles: elementwise
primitives act tile by tile, and the ones that only move, pick, combine or sum elements
(broadcasts, reshapes, slices, concatenations, reductions, matrix products, cumulative
sums) act on the object arrays, so they cost no more than the arithmetic they do and never
move data between lanes. A field written on its whole state (`theta * (mu - y)`, `A @ y`)
thus compiles as its components would, with no array whose lane axis is a state axis.
Constants become tiles where they meet one: a kernel captures no arrays.
"""

import functools as ft
import math
from typing import Any

import jax
import jax.lax as lax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Literal
from jax.extend.core.primitives import select_n_p

# Primitives applied tile by tile (their operands broadcast as NumPy does).
ELEMENTWISE = frozenset(
    "abs acos acosh add add_any and asin asinh atan atan2 atanh cbrt ceil clamp "
    "convert_element_type copy copy_p cos cosh div erf erf_inv erfc exp exp2 expm1 floor "
    "ge gt integer_pow "
    "is_finite le log log1p logistic lt max min mul ne neg nextafter not or pow rem round "
    "rsqrt select_n shift_left shift_right_arithmetic shift_right_logical sign sin sinh "
    "sqrt square sub tan tanh xor eq".split()
)
# Primitives that move, pick, combine or sum elements: object-array operations.
STRUCTURAL = frozenset(
    "broadcast_in_dim concatenate cumsum cumprod cummax cummin dot_general iota reduce_and "
    "reduce_max reduce_min reduce_or reduce_prod reduce_sum reshape rev slice split stack "
    "squeeze transpose".split()
)
# Calls whose bodies run in turn.
CALLS = frozenset({"jit", "pjit", "cond", "custom_jvp_call", "custom_vjp_call"})


def on_tiles(member: Any, *example: Any) -> Any:
    """`member`, a function of one member's arrays, as a function of arrays like `example`:
    each with the member's shape followed by a tile's two axes, the tile's members along
    them. The member is traced once, at its own shapes."""
    flat, tree = jax.tree.flatten(example)
    tile = flat[0].shape[-2:]
    shapes = [jax.ShapeDtypeStruct(x.shape[:-2], x.dtype) for x in flat]
    traced = jax.make_jaxpr(lambda *xs: member(*jax.tree.unflatten(tree, xs)))(*shapes)
    (out_shape,) = [v.aval for v in traced.jaxpr.outvars]

    def run(*args):
        elements = [_elements(x) for x in jax.tree.leaves(args)]
        consts = [_constant(c) for c in traced.consts]
        (out,) = _evaluate(traced.jaxpr, consts, elements, tile)
        return _joined(out, out_shape.dtype, tile)

    return run


def primitives(jaxpr: Any) -> set[str]:
    """The names of the primitives `jaxpr` runs, inside its calls too."""
    names = set()
    for eqn in jaxpr.eqns:
        names.add(eqn.primitive.name)
        for sub in _called(eqn) if eqn.primitive.name in CALLS else ():
            names |= primitives(sub.jaxpr)
    return names


def _called(eqn) -> list:
    """The closed jaxprs a call equation runs."""
    params = eqn.params
    if eqn.primitive.name == "cond":
        return list(params["branches"])
    for name in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        if name in params:
            return [params[name]]
    return []


def _objects(shape: tuple[int, ...], values: Any) -> np.ndarray:
    """An object array of `shape` holding `values` (a flat sequence), taken as they are."""
    array = np.empty(math.prod(shape), object)
    for i, value in enumerate(values):
        array[i] = value
    return array.reshape(shape)


def _elements(x: Any) -> np.ndarray:
    """A member's array (with the tile's axes last) as an object array of tiles."""
    shape = x.shape[:-2]
    flat = x.reshape(-1, *x.shape[-2:])
    return _objects(shape, [flat[i] for i in range(math.prod(shape))])


def _constant(value: Any) -> np.ndarray:
    """A constant as an object array of NumPy scalars (tiles only where it meets one)."""
    array = np.asarray(value)
    return _objects(array.shape, list(array.reshape(-1)))


def _is_tile(x: Any) -> bool:
    return isinstance(x, jax.Array) and x.ndim == 2


def _as_tile(x: Any, dtype: Any, tile: tuple[int, int]) -> Any:
    return x if _is_tile(x) else jnp.full(tile, x, dtype)


def _joined(elements: np.ndarray, dtype: Any, tile: tuple[int, int]) -> Any:
    """An object array of tiles as one array, the tile's axes last."""
    tiles = [_as_tile(x, dtype, tile) for x in elements.reshape(-1)]
    if elements.ndim == 0:
        return tiles[0]
    return jnp.stack(tiles).reshape(*elements.shape, *tile)


def _elementwise(
    primitive: Any, params: dict, dtypes: list, operands: list[np.ndarray], tile: tuple[int, int]
) -> np.ndarray:
    """`primitive` element by element (operands of types `dtypes`): on tiles where one is a
    tile, at once on constants otherwise."""

    def one(*xs):
        if not any(map(_is_tile, xs)):
            with jax.ensure_compile_time_eval():
                return np.asarray(primitive.bind(*map(np.asarray, xs), **params))[()]
        tiles = [_as_tile(x, dtype, tile) for x, dtype in zip(xs, dtypes, strict=True)]
        return primitive.bind(*tiles, **params)

    shape = np.broadcast_shapes(*(x.shape for x in operands))
    broadcast = [np.broadcast_to(x, shape).reshape(-1) for x in operands]
    return _objects(shape, [one(*xs) for xs in zip(*broadcast, strict=True)])


def _reduce(x: np.ndarray, axes: tuple[int, ...], combine: Any) -> np.ndarray:
    """`x` combined over `axes` by the binary `combine`."""
    kept = [axis for axis in range(x.ndim) if axis not in axes]
    moved = np.transpose(x, kept + list(axes))
    shape = moved.shape[: len(kept)]
    rows = moved.reshape(math.prod(shape), -1)
    return _objects(shape, [ft.reduce(combine, row) for row in rows])


def _scan(x: np.ndarray, axis: int, reverse: bool, combine: Any) -> np.ndarray:
    """The running `combine` of `x` along `axis`."""
    moved = np.moveaxis(x, axis, -1)
    rows = moved.reshape(-1, moved.shape[-1])
    scanned = []
    for row in rows:
        row = list(row[::-1] if reverse else row)
        running = [row[0]]
        for value in row[1:]:
            running.append(combine(running[-1], value))
        scanned += running[::-1] if reverse else running
    return np.moveaxis(_objects(moved.shape, scanned), -1, axis)


def _dot_general(lhs: np.ndarray, rhs: np.ndarray, dimension_numbers) -> np.ndarray:
    """`lax.dot_general` on object arrays: batch axes, then the free axes of each side."""
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dimension_numbers
    lhs_free = [a for a in range(lhs.ndim) if a not in (*lhs_contract, *lhs_batch)]
    rhs_free = [a for a in range(rhs.ndim) if a not in (*rhs_contract, *rhs_batch)]

    def size(x, axes):
        return math.prod(x.shape[a] for a in axes)

    left = np.transpose(lhs, [*lhs_batch, *lhs_free, *lhs_contract]).reshape(
        size(lhs, lhs_batch), size(lhs, lhs_free), size(lhs, lhs_contract)
    )
    right = np.transpose(rhs, [*rhs_batch, *rhs_contract, *rhs_free]).reshape(
        size(rhs, rhs_batch), size(rhs, rhs_contract), size(rhs, rhs_free)
    )
    shape = [lhs.shape[a] for a in (*lhs_batch, *lhs_free)] + [rhs.shape[a] for a in rhs_free]
    return np.matmul(left, right).reshape(shape)


_COMBINE = {
    "reduce_sum": lax.add,
    "reduce_max": lax.max,
    "reduce_min": lax.min,
    "reduce_prod": lax.mul,
    "reduce_and": lax.bitwise_and,
    "reduce_or": lax.bitwise_or,
    "cumsum": lax.add,
    "cumprod": lax.mul,
    "cummax": lax.max,
    "cummin": lax.min,
}


def _structural(eqn, operands: list[np.ndarray]) -> Any:
    name, params = eqn.primitive.name, eqn.params
    x = operands[0] if operands else None
    if name == "broadcast_in_dim":
        shape = params["shape"]
        expanded = [1] * len(shape)
        for axis, dim in zip(params["broadcast_dimensions"], x.shape, strict=True):
            expanded[axis] = dim
        return np.broadcast_to(x.reshape(expanded), shape)
    if name == "reshape":
        return x.reshape(params["new_sizes"])
    if name == "squeeze":
        return np.squeeze(x, axis=tuple(params["dimensions"]))
    if name == "transpose":
        return np.transpose(x, params["permutation"])
    if name == "rev":
        return np.flip(x, axis=tuple(params["dimensions"]))
    if name == "slice":
        strides = params["strides"] or (1,) * x.ndim
        limits = zip(params["start_indices"], params["limit_indices"], strides, strict=True)
        return x[tuple(slice(*limit) for limit in limits)]
    if name == "concatenate":
        return np.concatenate(operands, axis=params["dimension"])
    if name == "stack":
        return np.stack(operands, axis=params["axis"])
    if name == "split":
        edges = np.cumsum(params["sizes"])[:-1]
        return np.split(x, edges, axis=params["axis"])
    if name == "iota":
        values = lax.broadcasted_iota(params["dtype"], params["shape"], params["dimension"])
        return _constant(np.asarray(values))
    if name == "dot_general":
        return _dot_general(*operands, params["dimension_numbers"])
    if name.startswith("cum"):
        return _scan(x, params["axis"], params["reverse"], _COMBINE[name])
    return _reduce(x, tuple(params["axes"]), _COMBINE[name])


def _evaluate(jaxpr, consts: list, args: list, tile: tuple[int, int]) -> list:
    """`jaxpr` on object arrays of tiles (and of constants)."""
    env = dict(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))

    def read(var):
        return _constant(var.val) if isinstance(var, Literal) else env[var]

    for eqn in jaxpr.eqns:
        operands = [read(v) for v in eqn.invars]
        name = eqn.primitive.name
        if name in ELEMENTWISE:
            dtypes = [v.aval.dtype for v in eqn.invars]
            outs = [_elementwise(eqn.primitive, eqn.params, dtypes, operands, tile)]
        elif name in STRUCTURAL:
            out = _structural(eqn, operands)
            outs = list(out) if eqn.primitive.multiple_results else [out]
        elif name == "cond":
            outs = _cond(eqn, operands, tile)
        elif name in CALLS:
            (called,) = _called(eqn)
            consts = [_constant(c) for c in called.consts]
            outs = _evaluate(called.jaxpr, consts, operands[-len(called.jaxpr.invars) :], tile)
        else:
            raise NotImplementedError(
                f"simlab's kernel integrator cannot run the primitive {name!r} of the "
                "vector field; pass integrator='lean' (or 'sde' for a stochastic model)."
            )
        env.update(zip(eqn.outvars, outs, strict=True))
    return [read(v) for v in jaxpr.outvars]


def _cond(eqn, operands: list[np.ndarray], tile: tuple[int, int]) -> list:
    """`lax.cond`/`lax.switch` per member: every branch, then each member's pick."""
    index, *args = operands
    branches = [
        _evaluate(b.jaxpr, [_constant(c) for c in b.consts], args, tile)
        for b in eqn.params["branches"]
    ]
    picks = []
    for outvar, results in zip(eqn.outvars, zip(*branches, strict=True), strict=True):
        dtypes = [eqn.invars[0].aval.dtype, *[outvar.aval.dtype] * len(results)]
        picks.append(_elementwise(select_n_p, {}, dtypes, [index, *results], tile))
    return picks
