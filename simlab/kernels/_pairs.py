r"""All-pairs forces, tiled: for $N$ particles at $x_i$ with weights $w_j$,

$$
F_i = \sum_{j \ne i,\ r_{ij} < r_c} w_j\, s(r_{ij}^2;\ \theta)\, (x_i - x_j),
$$

with $x_i - x_j$ taken to the nearest periodic image in a box. The pair law is a static
callable `pair_scale(r2, parameters)`: $s = -G (r^2 + \epsilon^2)^{-3/2}$ with masses as
weights gives gravitational accelerations ([`simlab.kernels.gravity_scale`][]),
$s = 24\varepsilon (2\sigma^{12} r^{-14} - \sigma^6 r^{-8})$ Lennard-Jones forces
([`simlab.kernels.lennard_jones_scale`][]).

Each program owns a block of targets and sweeps every block of sources, so the $N^2$
pair terms never exist in memory at once. With Triton, targets sit along lanes
(`(dims, N)`), sources along sublanes (`(N, dims)`), so each pair block is a
`(sources, targets)` tile whose sum over sources is a row of the result; the spatial axis is
padded to a power of two. On a TPU (and in the interpreter) a program holds its targets in
registers instead, as columns of 8 along sublanes, and sweeps the sources 128 at a time
along lanes: each step is one vector register of pairs per group of 8 targets, summed into
register accumulators, and a row of 128 sources is read once for every target group — no
pair tile is ever written to memory, no source is broadcast across lanes, and the lane sums
are taken once at the end (1.01–1.03 times XLA's speed at 8192 bodies on a TPU v5e, where
pair tiles of 512 by 512 reached 0.81–0.84). The tangent (a `jax.custom_jvp`) is that of
the `jax.numpy` reference; reverse mode is JAX's transpose of it.
"""

import dataclasses
import functools as ft
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jaxtyping import Array, ArrayLike

from ._pallas import Launch, launch_options
from ._primitive import KernelLaunch, launch_primitive

# Triton's tiles of targets by sources, powers of two held in registers.
TRITON_TARGET_BLOCK = TRITON_SOURCE_BLOCK = 64
# In registers: groups of 8 targets per program, and rows of 128 sources per loop step. A
# TPU v5e at 8192 bodies measured 8 by 8 fastest (0.96 ms, XLA 0.99 ms; 4 by 4 1.01 ms,
# 2 by 8 1.06 ms); the interpreter takes fewer, smaller steps.
TARGET_GROUPS = {"interpret": 4, "tpu": 8}
SOURCE_ROWS = {"interpret": 2, "tpu": 8}
SUBLANES, LANES = 8, 128


def gravity_scale(r2: Array, parameters) -> Array:
    """Newtonian gravity with Plummer softening: $-G (r^2 + \\epsilon^2)^{-3/2}$; parameters
    `(G, epsilon)`. With masses as weights, `pair_forces` gives accelerations."""
    constant, softening = parameters
    return -constant * jax.lax.rsqrt(r2 + softening**2) ** 3


def lennard_jones_scale(r2: Array, parameters) -> Array:
    """Lennard-Jones, $V = 4\\varepsilon((\\sigma/r)^{12} - (\\sigma/r)^6)$, as
    $-V'(r)/r = 24\\varepsilon(2\\sigma^{12} r^{-14} - \\sigma^6 r^{-8})$; parameters
    `(epsilon, sigma)`. With unit weights, `pair_forces` gives forces."""
    epsilon, sigma = parameters
    inverse6 = (sigma**2 / r2) ** 3
    return 24.0 * epsilon * (2.0 * inverse6**2 - inverse6) / r2


def _separation(delta: Array, box: ArrayLike | None) -> Array:
    """`delta` to the nearest periodic image (unchanged without a box)."""
    # floor(x + 1/2), not round: Triton has no rounding primitive (the two differ only at
    # exactly half a box, where both images are equally near).
    return delta if box is None else delta - box * jnp.floor(delta / box + 0.5)


@dataclasses.dataclass(frozen=True)
class PairLaw:
    """What a pair sum computes, apart from where it runs (hashable: a static argument)."""

    pair_scale: Callable
    cutoff: float | None
    box: float | None
    exclude_self: bool


def _pair_sum(targets, sources, weights, mask, parameters, pair_scale, cutoff, box):
    """$\\sum_j$ over one `(sources, targets)` tile: `targets` are `dims` rows `(1, T)`,
    `sources` `dims` columns `(S, 1)`, `weights` `(S, 1)`, `mask` `(S, T)` excludes
    self-pairs and padding (`None`: the tile has neither). Returns `dims` rows `(1, T)`."""
    terms = _pair_terms(targets, sources, weights, mask, parameters, pair_scale, cutoff, box)
    return [jnp.sum(term, axis=0, keepdims=True) for term in terms]


def _pair_terms(targets, sources, weights, mask, parameters, pair_scale, cutoff, box):
    """Each pair's $w_j\\, s(r^2)\\,(x_i - x_j)$, one array per dimension, for targets and
    sources that broadcast against each other. Shared by the kernels and the reference, so
    all evaluate the same expression."""
    deltas = [_separation(xt - xs, box) for xt, xs in zip(targets, sources, strict=True)]
    r2 = sum(delta * delta for delta in deltas)
    if cutoff is not None:
        within = r2 < cutoff**2
        mask = within if mask is None else mask & within
    if mask is None:
        scale = pair_scale(r2, parameters)
    else:
        # Masked pairs get r² = 1: their scale is finite and then zeroed, so no
        # 0·inf = NaN, in the values or in their derivatives.
        scale = jnp.where(mask, pair_scale(jnp.where(mask, r2, 1.0), parameters), 0.0)
    weighted = scale * weights
    return [weighted * delta for delta in deltas]


def _triton_kernel(parameters_ref, targets_ref, sources_ref, weights_ref, out_ref, **static):
    """Tiles of sources by targets (Triton)."""
    dims, count, block = static["dims"], static["num_sources"], static["source_block"]
    num_parameters = static["num_parameters"]
    parameters = tuple(parameters_ref[k] for k in range(num_parameters))
    target_block = targets_ref.shape[-1]
    first_target = pl.program_id(0) * target_block
    targets = [targets_ref[pl.ds(a, 1), :] for a in range(dims)]
    target_ids = first_target + jax.lax.broadcasted_iota(jnp.int32, (1, target_block), 1)

    def accumulate(j, sums):
        start = pl.multiple_of(j * block, block)
        sources = [sources_ref[pl.ds(start, block), pl.ds(a, 1)] for a in range(dims)]
        weights = weights_ref[pl.ds(start, block), :]

        def terms(masked: bool):
            mask = None
            if masked:
                source_ids = start + jax.lax.broadcasted_iota(jnp.int32, (block, 1), 0)
                mask = source_ids < count
                if static["exclude_self"]:
                    mask = mask & (source_ids != target_ids)
            return _pair_sum(targets, sources, weights, mask, parameters, *static["law"])

        # Only the tiles that hold padding or self-pairs pay for the mask's compares and
        # selects.
        holds_padding = start + block > count
        holds_self = (start < first_target + target_block) & (first_target < start + block)
        masked = holds_padding | holds_self if static["exclude_self"] else holds_padding
        tile = jax.lax.cond(masked, lambda: terms(True), lambda: terms(False))
        return tuple(s + t for s, t in zip(sums, tile, strict=True))

    zero = jnp.zeros((1, target_block), out_ref.dtype)
    # int32 bounds: with 64-bit types enabled, Mosaic TPU refuses an int64 loop index.
    first, last = jnp.int32(0), jnp.int32(sources_ref.shape[0] // block)
    sums = jax.lax.fori_loop(first, last, accumulate, (zero,) * dims)
    out_ref[...] = jnp.zeros(out_ref.shape, out_ref.dtype)
    for a in range(dims):
        out_ref[pl.ds(a, 1), :] = sums[a]


def _register_kernel(parameters_ref, targets_ref, sources_ref, weights_ref, out_ref, **static):
    """Targets in registers along sublanes, sources streamed along lanes (TPU, interpreter)."""
    dims, count, rows = static["dims"], static["num_sources"], static["source_rows"]
    parameters = tuple(parameters_ref[k] for k in range(static["num_parameters"]))
    groups = targets_ref.shape[0] // SUBLANES
    first_target = pl.program_id(0) * targets_ref.shape[0]
    shape = (SUBLANES, LANES)
    targets = [
        [jnp.broadcast_to(targets_ref[pl.ds(g * SUBLANES, SUBLANES), pl.ds(a, 1)], shape)
         for a in range(dims)]
        for g in range(groups)
    ]  # fmt: skip
    target_ids = [
        first_target + g * SUBLANES + jax.lax.broadcasted_iota(jnp.int32, shape, 0)
        for g in range(groups)
    ]

    def sweep(masked: bool):
        def step(j, sums):
            for k in range(rows):  # unrolled: one loop step reads `rows` rows of sources
                start = pl.multiple_of((j * rows + k) * LANES, LANES)
                row = lambda ref, a, start=start: jnp.broadcast_to(  # noqa: E731
                    ref[pl.ds(a, 1), pl.ds(start, LANES)], shape
                )
                sources = [row(sources_ref, a) for a in range(dims)]
                weights = row(weights_ref, 0)
                source_ids = start + jax.lax.broadcasted_iota(jnp.int32, shape, 1)
                new = []
                for g in range(groups):
                    mask = None
                    if masked:
                        mask = source_ids < count
                        if static["exclude_self"]:
                            mask = mask & (source_ids != target_ids[g])
                    terms = _pair_terms(
                        targets[g], sources, weights, mask, parameters, *static["law"]
                    )
                    new.append(tuple(s + t for s, t in zip(sums[g], terms, strict=True)))
                sums = tuple(new)
            return sums

        return step

    # Only the sources that can be the targets themselves, and those of the last, padded
    # steps, pay for the mask's compares and selects.
    chunk = rows * LANES
    # lax.div, not //: floor division lowers through `sign`, which Mosaic TPU lowers only
    # on a TPU (cross-lowering fails); the operands are non-negative.
    own_first = jax.lax.div(first_target, jnp.int32(chunk))
    own_last = jax.lax.div(first_target + targets_ref.shape[0] + chunk - 1, jnp.int32(chunk))
    if not static["exclude_self"]:
        own_first = own_last = jnp.int32(0)
    unpadded = jnp.int32(count // chunk)
    own_first, own_last = jnp.minimum(own_first, unpadded), jnp.minimum(own_last, unpadded)
    zero = jnp.zeros(shape, out_ref.dtype)
    sums = ((zero,) * dims,) * groups
    for lower, upper, masked in (
        (jnp.int32(0), own_first, False),
        (own_first, own_last, True),
        (own_last, unpadded, False),
        (unpadded, jnp.int32(sources_ref.shape[1] // chunk), True),
    ):
        sums = jax.lax.fori_loop(lower, upper, sweep(masked), sums)
    out_ref[...] = jnp.zeros(out_ref.shape, out_ref.dtype)
    for g in range(groups):
        for a in range(dims):
            out_ref[pl.ds(g * SUBLANES, SUBLANES), pl.ds(a, 1)] = jnp.sum(
                sums[g][a], axis=1, keepdims=True
            )


def _target(launch: Launch, platform: str) -> str:
    target = launch.target(platform)
    if target == "mosaic_gpu":
        raise ValueError("pair_forces compiles with Triton on NVIDIA GPUs: pass backend='triton'.")
    return target


def _zero_padded(array: Array, shape: tuple[int, ...]) -> Array:
    return jnp.zeros(shape, array.dtype).at[tuple(slice(0, n) for n in array.shape)].set(array)


def _padded_length(count: int, block: int) -> int:
    return block * -(-count // block)


@dataclasses.dataclass(frozen=True)
class PairLaunch(KernelLaunch):
    """`launch(targets, sources, weights, parameters)` for targets `(N, dims)` and sources
    `(M, dims)` with weights `(M,)`: the forces on the targets, `(N, dims)`, laid out for
    the platform it is lowered for. With `law.exclude_self`, targets and sources are the same
    particles and pairs of one with itself are left out."""

    law: PairLaw
    launch: Launch

    width = 0
    num_spatial = 2

    def run(self, platform: str, positions: Array, *coefficients: Array) -> Array:
        sources, weights, parameters = coefficients
        if positions.ndim > 2:  # a batch of targets (the primitive's batching rule)
            return jax.vmap(lambda p: self.run(platform, p, *coefficients))(positions)
        target = _target(self.launch, platform)
        static = dict(
            dims=positions.shape[1],
            num_sources=sources.shape[0],
            num_parameters=parameters.shape[0],
            exclude_self=self.law.exclude_self,
            law=(self.law.pair_scale, self.law.cutoff, self.law.box),
        )
        layout = _triton_layout if target == "triton" else _register_layout
        kernel, operands, specs, out_block, grid = layout(
            target, positions, sources, weights, static
        )
        scalars = _power_of_two_length(parameters)
        out = pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct(operands[0].shape, positions.dtype),
            grid=grid,
            in_specs=[_scalar_spec(target, scalars.shape), *specs],
            out_specs=out_block,
            interpret=target == "interpret",
            compiler_params=_compiler_params(target),
            name="pair_forces",
        )(scalars, *operands)
        count, dims = positions.shape
        return out[:dims, :count].T if target == "triton" else out[:count, :dims]


def _triton_layout(target, positions, sources, weights, static):
    """Targets `(dims, N)` along lanes, sources `(M, dims)` along sublanes, in tiles; the
    spatial axis padded to a power of two (Triton's loads)."""
    (count, dims), num_sources = positions.shape, sources.shape[0]
    padded_dims = 1 << (dims - 1).bit_length()
    num_targets = _padded_length(count, TRITON_TARGET_BLOCK)
    targets = _zero_padded(positions, (num_targets, padded_dims)).T
    rows = _padded_length(num_sources, TRITON_SOURCE_BLOCK)
    sources = _zero_padded(sources, (rows, padded_dims))
    column = _zero_padded(weights[:, None], (rows, 1))
    kernel = ft.partial(_triton_kernel, source_block=TRITON_SOURCE_BLOCK, **static)
    specs = [
        pl.BlockSpec((padded_dims, TRITON_TARGET_BLOCK), lambda i: (0, i)),
        pl.BlockSpec(sources.shape, lambda i: (0, 0)),
        pl.BlockSpec(column.shape, lambda i: (0, 0)),
    ]
    out_block = pl.BlockSpec((padded_dims, TRITON_TARGET_BLOCK), lambda i: (0, i))
    return (
        kernel,
        (targets, sources, column),
        specs,
        out_block,
        (num_targets // TRITON_TARGET_BLOCK,),
    )


def _register_layout(target, positions, sources, weights, static):
    """Targets `(N, width)` in groups of 8 along sublanes, sources `(width, M)` and weights
    `(1, M)` along lanes, whole in VMEM (8192 sources take half a MiB); `width` is `dims`
    rounded up to whole sublanes."""
    (count, dims), num_sources = positions.shape, sources.shape[0]
    width = SUBLANES * -(-dims // SUBLANES)
    block = TARGET_GROUPS[target] * SUBLANES
    chunk = SOURCE_ROWS[target] * LANES
    targets = _zero_padded(positions, (_padded_length(count, block), width))
    columns = _padded_length(num_sources, chunk)
    rows = _zero_padded(sources.T, (width, columns))
    row = _zero_padded(weights[None, :], (1, columns))
    kernel = ft.partial(_register_kernel, source_rows=SOURCE_ROWS[target], **static)
    specs = [
        pl.BlockSpec((block, width), lambda i: (i, 0)),
        pl.BlockSpec(rows.shape, lambda i: (0, 0)),
        pl.BlockSpec(row.shape, lambda i: (0, 0)),
    ]
    out_block = pl.BlockSpec((block, width), lambda i: (i, 0))
    return kernel, (targets, rows, row), specs, out_block, (targets.shape[0] // block,)


def _scalar_spec(target: str, shape: tuple[int, ...]):
    if target == "tpu":
        from jax.experimental.pallas import tpu as pltpu

        return pl.BlockSpec(memory_space=pltpu.SMEM)
    return pl.BlockSpec(shape, lambda i: (0,))


def _compiler_params(target: str):
    if target == "tpu":
        from jax.experimental.pallas import tpu as pltpu

        return pltpu.CompilerParams(dimension_semantics=("parallel",))
    if target == "triton":
        from jax.experimental.pallas import triton as pltriton

        return pltriton.CompilerParams(num_warps=4, num_stages=1)
    return None


PairLaunch.primitive = launch_primitive("simlab_pair_launch")


def pair_forces_reference(
    positions: Array,
    weights: Array,
    parameters=(),
    *,
    pair_scale: Callable,
    cutoff: float | None = None,
    box: float | None = None,
    sources: Array | None = None,
) -> Array:
    """[`simlab.kernels.pair_forces`][] in plain `jax.numpy`: all pairs at once."""
    positions = jnp.asarray(positions)
    exclude_self = sources is None
    sources = positions if exclude_self else jnp.asarray(sources, positions.dtype)
    weights = jnp.broadcast_to(jnp.asarray(weights, positions.dtype), sources.shape[:1])
    parameters = _packed(parameters, positions.dtype)
    law = PairLaw(pair_scale, cutoff, box, exclude_self)
    return _reference(positions, sources, weights, parameters, law)


def _reference(targets, sources, weights, parameters, law: PairLaw):
    dims = targets.shape[1]
    rows = [targets[None, :, a] for a in range(dims)]
    columns = [sources[:, a, None] for a in range(dims)]
    mask = jnp.ones((sources.shape[0], targets.shape[0]), bool)
    if law.exclude_self:
        mask = ~jnp.eye(sources.shape[0], targets.shape[0], dtype=bool)
    sums = _pair_sum(
        rows,
        columns,
        weights[:, None],
        mask,
        tuple(parameters),
        law.pair_scale,
        law.cutoff,
        law.box,
    )
    return jnp.concatenate(sums, axis=0).T


@ft.partial(jax.custom_jvp, nondiff_argnums=(4,))
def _pair_forces(targets, sources, weights, parameters, launch: PairLaunch):
    return launch(targets, sources, weights, parameters)


@_pair_forces.defjvp
def _pair_forces_jvp(launch, primals, tangents):
    # The tangent of the jax.numpy reference (all pairs in memory); reverse mode is its
    # transpose.
    _, tangent = jax.jvp(ft.partial(_reference, law=launch.law), primals, tangents)
    return _pair_forces(*primals, launch), tangent


def _packed(parameters, dtype) -> Array:
    values = [jnp.asarray(value, dtype) for value in parameters]
    if any(value.ndim for value in values):
        raise ValueError("pair_forces: parameters must be scalars.")
    return jnp.stack(values) if values else jnp.zeros((0,), dtype)


def _power_of_two_length(vector: Array) -> Array:
    """`vector` zero padded to a power-of-two length, at least 1 (Triton's loads are)."""
    length = 1 << max(0, vector.shape[0] - 1).bit_length()
    return jnp.zeros((length,), vector.dtype).at[: vector.shape[0]].set(vector)


def pair_forces(
    positions: Array,
    weights: ArrayLike,
    parameters=(),
    *,
    pair_scale: Callable,
    cutoff: float | None = None,
    box: float | None = None,
    sources: Array | None = None,
    interpret: bool | None = None,
    backend: str | None = None,
) -> Array:
    r"""All-pairs forces $F_i = \sum_{j \ne i} w_j\, s(r_{ij}^2; \theta)\,(x_i - x_j)$ by a
    tiled Pallas kernel, never holding all pairs at once.

    Differentiable in forward and reverse mode with respect to the positions, the weights
    and the parameters (the derivatives are those of the `jax.numpy` reference, which
    holds every pair in memory).

    **Arguments:**

    - `positions`: shape `(N, dims)`, or `(..., N, dims)` for a batch of systems.
    - `weights`: $w_j$ of the sources, shape `(N,)` (masses for gravity) or a scalar.
    - `parameters`: the pair law's scalar parameters $\theta$.
    - `pair_scale`: `pair_scale(r2, parameters) -> s`, elementwise; static (pass a
      module-level function such as [`simlab.kernels.gravity_scale`][] or
      [`simlab.kernels.lennard_jones_scale`][]).
    - `cutoff`: pairs at $r \ge r_c$ contribute nothing; `None` for none.
    - `box`: the side of a periodic cube: separations go to the nearest image (the
      minimum-image convention, exact for `cutoff <= box / 2`); `None` for open space.
    - `sources`: other particles, `(M, dims)`, that act on `positions` (every pair
      counts: none is the same particle); `None`: the particles act on each other.
    - `interpret`, `backend`: as for [`simlab.kernels.laplacian2d`][]; on an NVIDIA GPU
      the kernel compiles with Triton.

    **Returns:** the forces, shaped like `positions`.

    !!! example

        ```python
        positions = jnp.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
        masses = jnp.array([1.0, 2.0, 3.0])
        simlab.kernels.pair_forces(
            positions, masses, (1.0, 0.0), pair_scale=simlab.kernels.gravity_scale
        )  # the first row is (2, 0.75, 0): pulled towards both others
        ```
    """
    positions = jnp.asarray(positions)
    exclude_self = sources is None
    sources = positions if exclude_self else jnp.asarray(sources, positions.dtype)
    for name, array in (("positions", positions), ("sources", sources)):
        if array.ndim < 2 or array.shape[-2] < 1 or array.shape[-1] != positions.shape[-1]:
            raise ValueError(
                f"pair_forces: {name} must have shape (N, dims) or (..., N, dims) with the "
                f"dims of positions; got {array.shape}."
            )
    weights = jnp.broadcast_to(jnp.asarray(weights, positions.dtype), sources.shape[-2:-1])
    if cutoff is not None and box is not None and cutoff > box / 2:
        raise ValueError(
            f"pair_forces: a cutoff of {cutoff} is longer than half the box ({box / 2}): "
            "a particle would meet two images of another. Use a larger box or a shorter "
            "cutoff."
        )
    law = PairLaw(pair_scale, cutoff, box, exclude_self)
    launch = PairLaunch(law, launch_options(1, None, interpret, backend))

    def forces(positions, sources, weights, parameters):
        return _pair_forces(positions, sources, weights, parameters, launch)

    for _ in range(positions.ndim - 2):  # a batch of systems
        forces = jax.vmap(forces, in_axes=(0, 0 if sources.ndim > 2 else None, None, None))
    return forces(positions, sources, weights, _packed(parameters, positions.dtype))
