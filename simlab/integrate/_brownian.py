"""Brownian increments drawn from JAX keys inside the step loop, and the path they make.

Every normal of a path is hashed from the path's two key words (`path_words`) and a
counter: Threefry-2x32 of the words on `(step, pair)` gives the random bits of two normals
in float32 (noise components `pair` and `pair + P`, of the `P = pairs(size, dtype)` hashes
a step takes), of one in float64, at step number `step`, counted across the save
intervals; the Lévy area `H` takes the hashes after the increments' (`hashed_bits`,
`block_draws`). A normal thus depends only on the key, its step and its component, never
on how members are batched, chunked or spread over devices, nor on how many steps are
drawn at once: the lean loop draws blocks of `steps_per_block` steps (step `n` takes row
`n % steps_per_block`), the kernel integrator one step at a time, and they draw the same
bits. A whole block is turned into normals in one operation: a conversion step by step,
fused into each step's arithmetic, rounds differently alone and under `vmap`, and a path
must not depend on its batch in its last bits. No path is stored unless asked for
(`brownian_path`). Adaptive steps draw from a virtual Brownian tree built from the key
instead (`brownian_tree`).
"""

import functools
import math
from typing import Any, NamedTuple

import diffrax as dfx
import jax
import jax.lax as lax
import jax.numpy as jnp
import numpy as np
from jax.extend.random import threefry2x32_p
from jaxtyping import Array

from ._loops import fixed_steps_per_interval

VALUES_PER_BLOCK = 32  # normals the lean loop draws at once per kind: more gain little
LANES = 128  # the width of an accelerator's vector registers and memory tiles
# The virtual Brownian tree of adaptive steps resolves the path down to this fraction of
# the span (about 1e-6: 20 levels of bridges an evaluation), far below any step taken.
TREE_RESOLUTION = 2.0**-20


class Increment(NamedTuple):
    """The Brownian increment over one step of length `h`, `dW ~ N(0, h)` per noise
    component, and its space-time Lévy area `H = (1/h) ∫ (W_s - s W_h / h) ds ~ N(0, h/12)`,
    independent of `dW` (used by the order-1.5 method for additive noise)."""

    dW: Array
    H: Array | None  # None where the solver does not use it (`AbstractSDESolver.uses_area`)


class BlockDraws(NamedTuple):
    """The standard normals of one block of steps, a row per step, for `dW` and, where
    drawn, for `H` (from separate keys, so `dW` is the same whether `H` is drawn or not),
    held as their bits (`lax.bitcast_convert_type`, exact both ways): integers carry no
    derivative, so reverse mode neither stores nor propagates cotangents for the block."""

    dW: Array
    H: Array | None


def checked_key(key: Any) -> Array:
    """`key` as a typed JAX key (a legacy `uint32[2]` key is wrapped), or a clear error."""
    if isinstance(key, int | np.integer) and not isinstance(key, bool):
        raise TypeError(
            f"key must be a JAX key such as jax.random.key({key}); got the integer {key}."
        )
    key = jnp.asarray(key) if not isinstance(key, jax.Array) else key
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        if key.shape != ():
            raise ValueError(
                f"key must be one JAX key (shape ()), got keys of shape {key.shape}; for a "
                "batch of paths use jax.vmap over jax.random.split(key, n)."
            )
        return key
    if key.dtype == jnp.uint32 and key.shape == (2,):
        return jax.random.wrap_key_data(key)
    raise ValueError(
        f"key must be a JAX key such as jax.random.key(0); got an array of shape {key.shape} "
        f"and dtype {key.dtype}."
    )


def steps_per_block(noise_shape: tuple[int, ...]) -> int:
    """How many steps' normals the lean loop draws at once: `VALUES_PER_BLOCK` values'
    worth, at least one step (a large noise needs no blocking: its own size spreads a
    block's cost)."""
    return max(1, VALUES_PER_BLOCK // math.prod(noise_shape))


def bits_dtype(dtype: Any) -> Any:
    """The unsigned integer type as wide as the float type `dtype`."""
    return jnp.dtype(f"uint{jnp.finfo(dtype).bits}")


def path_words(key: Array) -> Array:
    """The two 32-bit words a path's normals are hashed from: bits of `key` (of any key
    implementation), drawn once per solve."""
    return jax.random.bits(key, (2,), jnp.uint32)


def threefry(*operands: Array) -> tuple[Array, Array]:
    """Threefry-2x32 of key words and counters (`uint32` arrays of one shape, or scalar key
    words, which the primitive's lowering needs; a TPU kernel lowers it too)."""
    return tuple(threefry2x32_p.bind(*operands))


@jax.custom_batching.custom_vmap
def batchable_threefry(*operands: Array) -> tuple[Array, Array]:
    """`threefry` under `jax.vmap` too: the primitive's own batching leaves its operands
    of different shapes, which its lowering does not take."""
    return threefry(*operands)


@batchable_threefry.def_vmap
def _threefry_batched(axis_size, in_batched, *operands):
    # Every operand to one shape, the batch's axis first, but for unbatched scalar key words.
    shapes = [
        x.shape[1:] if batched else x.shape for x, batched in zip(operands, in_batched, strict=True)
    ]
    shape = (axis_size, *jnp.broadcast_shapes(*shapes))

    def widened(x, batched):
        if not batched and x.ndim == 0:
            return x
        if batched:
            x = x.reshape(axis_size, *(1,) * (len(shape) - x.ndim), *x.shape[1:])
        return jnp.broadcast_to(x, shape)

    return batchable_threefry(*map(widened, operands, in_batched)), (True, True)


def normals_per_hash(dtype: Any) -> int:
    """How many normals of float type `dtype` one hash's 64 bits make: two in float32 (or
    narrower), one in float64."""
    return 1 if jnp.finfo(dtype).bits == 64 else 2


def pairs(size: int, dtype: Any) -> int:
    """How many hashes a step's `size` normals of `dtype` take."""
    return -(-size // normals_per_hash(dtype))


def hashed_bits(
    words: Any, step: Any, pair: Any, dtype: Any, *, hash: Any = batchable_threefry
) -> list[Array]:
    """The random bits, as wide as `dtype`, of the normals that hash number `pair` of step
    number `step` makes: Threefry-2x32 of the path's `words` (a pair) on the counter
    `(step, pair)`, all broadcast together; both words (components `pair` and `pair + P`
    of `P = pairs(size, dtype)`) in float32, one 64-bit value (component `pair`) in
    float64. Elementwise, so it runs on a kernel's tiles of members (with `hash=threefry`)
    as on the lean loop's blocks."""
    operands = [jnp.asarray(x).astype(jnp.uint32) for x in (*words, step, pair)]
    shape = jnp.broadcast_shapes(*(x.shape for x in operands))
    # Scalar key words stay scalars: the hash's key schedule is then computed once.
    first, second = hash(
        *(
            x if i < 2 and x.ndim == 0 else jnp.broadcast_to(x, shape)
            for i, x in enumerate(operands)
        )
    )
    width = jnp.finfo(dtype).bits
    if width == 64:
        return [(first.astype(jnp.uint64) << np.uint64(32)) | second.astype(jnp.uint64)]
    return [(bits >> np.uint32(32 - width)).astype(bits_dtype(dtype)) for bits in (first, second)]


def block_draws(
    words: Array, block: Any, noise_shape: tuple[int, ...], dtype: Any, *, area: bool
) -> BlockDraws:
    """The standard normals of block number `block` (traced or not) of a path with key
    `words` (`path_words`), of float type `dtype`, as their bits; `H`'s only if `area`,
    from the hashes after the increments' (`pairs`)."""
    per_block, size = steps_per_block(noise_shape), math.prod(noise_shape)
    count = pairs(size, dtype)
    # The hashes of a step as rows of 128 where they fill them: an accelerator lays out the
    # last two axes in tiles of (8, 128), so a step's hashes in one row of `count` would
    # fill one eighth of every tile (the bits are the same either way). A step of fewer
    # hashes keeps its one row: a vmapped path's (steps, count, 1) would pad every hash to a
    # tile of its own (10**6 Ornstein-Uhlenbeck paths took 1.5 times as long on a TPU v5e).
    counters = (per_block, count // LANES, LANES) if count % LANES == 0 else (per_block, count)
    first_step = jnp.asarray(block).astype(jnp.uint32) * np.uint32(per_block)
    step = first_step + lax.broadcasted_iota(
        jnp.uint32, (per_block,) + (1,) * (len(counters) - 1), 0
    )

    def normals_bits(first_pair):
        pair = first_pair + index_within_step(counters)
        bits = jnp.concatenate(hashed_bits((words[0], words[1]), step, pair, dtype), axis=1)
        bits = bits.reshape(per_block, -1)[:, :size].reshape(per_block, *noise_shape)
        return lax.bitcast_convert_type(standard_normal(bits, dtype), bits_dtype(dtype))

    return BlockDraws(normals_bits(0), normals_bits(count) if area else None)


def index_within_step(counters: tuple[int, ...]) -> Array:
    """Each counter's row-major index within its step (every axis of `counters` but the
    first, the steps), as `uint32`."""
    index, stride = np.uint32(0), 1
    for axis in reversed(range(1, len(counters))):
        index = index + np.uint32(stride) * lax.broadcasted_iota(jnp.uint32, counters, axis)
        stride *= counters[axis]
    return index


def standard_normal(bits: Array, dtype: Any) -> Array:
    r"""Standard normals of float type `dtype` from as wide random bits, as
    `jax.random.normal` makes them: $\sqrt 2\,\mathrm{erf}^{-1}(u)$ with $u$ uniform in
    $(-1, 1)$, from the bits' top mantissa-many bits."""
    finfo = jnp.finfo(dtype)
    one = np.asarray(1, dtype).view(bits.dtype)
    mantissa = bits >> np.asarray(finfo.bits - finfo.nmant, bits.dtype)
    unit = lax.bitcast_convert_type(mantissa | one, dtype) - np.asarray(1, dtype)  # [0, 1)
    lowest = np.nextafter(np.asarray(-1, dtype), np.asarray(0, dtype))
    return np.sqrt(np.asarray(2, dtype)) * lax.erf_inv(jnp.maximum(2 * unit - 1, lowest))


def draws_for_step(
    draws: BlockDraws,
    words: Array,
    step: Any,
    noise_shape: tuple[int, ...],
    dtype: Any,
    *,
    area: bool,
) -> BlockDraws:
    """The block holding step `step`, given the block of the step before: a block is drawn
    at its first step and carried through the others (a `lax.cond` on the step number,
    which stays a branch under `vmap` over members)."""
    per_block = steps_per_block(noise_shape)
    return lax.cond(
        step % per_block == 0,
        lambda: block_draws(words, step // per_block, noise_shape, dtype, area=area),
        lambda: draws,
    )


def increment(draws: BlockDraws, step: Any, h: Array) -> Increment:
    """The increments of step number `step` (an integer, traced or not), of length `h`, from
    the block that holds it."""
    row = step % draws.dW.shape[0]

    def normals(bits):
        return lax.bitcast_convert_type(bits[row], h.dtype)

    H = None if draws.H is None else jnp.sqrt(h / 12) * normals(draws.H)
    return Increment(jnp.sqrt(h) * normals(draws.dW), H)


def brownian_path(key: Any, ts: Any, dt0: Any = None, noise_shape: tuple[int, ...] = ()) -> Array:
    """The Brownian motion $W$ at the save times `ts` that a stochastic solve with the same
    `key` and `ts` drew (`W(ts[0]) = 0`), of shape `(len(ts), *noise_shape)`: with fixed
    steps of `dt0`, the sum of the steps' increments; with `dt0=None`, the values of the
    virtual Brownian tree that adaptive steps (`solver="spark"`) ran on (`brownian_tree`).

    Tests build exact solutions from it: geometric Brownian motion with `y0`, drift `mu`
    and volatility `sigma` is `y0 * exp((mu - sigma**2 / 2) * t + sigma * W(t))` on the
    very path the solver saw.

    !!! example

        ```python
        import jax
        import jax.numpy as jnp
        import simlab

        ts = jnp.linspace(0.0, 1.0, 5)
        W = simlab.integrate.brownian_path(jax.random.key(0), ts, 0.01, (2,))
        W.shape  # (5, 2)
        adaptive_W = simlab.integrate.brownian_path(jax.random.key(0), ts, None, (2,))
        ```
    """
    ts = jnp.asarray(ts)
    if dt0 is None:
        return _tree_at_save_times(checked_key(key), ts, tuple(noise_shape))
    counts = np.broadcast_to(fixed_steps_per_interval(ts, dt0), (ts.shape[0] - 1,))
    return _path_at_save_times(checked_key(key), ts, tuple(counts.tolist()), tuple(noise_shape))


def brownian_tree(key: Array, ts: Array, noise_shape: tuple[int, ...]) -> dfx.VirtualBrownianTree:
    """The virtual Brownian tree that adaptive stochastic steps from `ts[0]` to `ts[-1]` run
    on: it depends only on the key and the span, resolved to `TREE_RESOLUTION` of it, with
    the space-time Lévy area SPaRK uses. `tree.evaluate(ts[0], t)` is $W(t)$."""
    return dfx.VirtualBrownianTree(
        ts[0],
        ts[-1],
        tol=TREE_RESOLUTION * (ts[-1] - ts[0]),
        shape=jax.ShapeDtypeStruct(noise_shape, ts.dtype),
        key=key,
        levy_area=dfx.SpaceTimeLevyArea,
    )


@functools.partial(jax.jit, static_argnames=("noise_shape",))
def _tree_at_save_times(key: Array, ts: Array, noise_shape: tuple[int, ...]) -> Array:
    """`brownian_path` of adaptive steps: the tree evaluated at every save time."""
    tree = brownian_tree(key, ts, noise_shape)
    # A map, not a vmap: the tree's descent compiles in a fraction of the time.
    return lax.map(lambda t: tree.evaluate(ts[0], t), ts)


@functools.partial(jax.jit, static_argnames=("counts", "noise_shape"))
def _path_at_save_times(
    key: Array, ts: Array, counts: tuple[int, ...], noise_shape: tuple[int, ...]
) -> Array:
    """`brownian_path` for `counts` steps per save interval, compiled (the blocks are many
    small operations)."""
    total = sum(counts)
    # Every block at once: step n of the solve (numbered across intervals) takes row n of
    # the blocks' draws, scaled by its interval's step; W at each save time sums the steps
    # up to it.
    h = jnp.repeat(
        jnp.diff(ts) / jnp.asarray(counts, ts.dtype), np.asarray(counts), total_repeat_length=total
    )
    blocks = -(-total // steps_per_block(noise_shape))
    words = path_words(key)
    bits = jax.vmap(lambda b: block_draws(words, b, noise_shape, ts.dtype, area=False).dW)(
        jnp.arange(blocks)
    )
    steps = lax.bitcast_convert_type(bits.reshape(-1, *noise_shape)[:total], ts.dtype)
    dW = jnp.sqrt(h).reshape(-1, *(1,) * len(noise_shape)) * steps
    W = jnp.cumsum(dW, axis=0)[np.cumsum(counts) - 1]
    return jnp.concatenate([jnp.zeros((1, *noise_shape), ts.dtype), W])
