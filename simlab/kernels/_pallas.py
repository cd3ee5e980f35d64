"""Pieces shared by the kernel files: launch settings, batching of leading axes, padding
to whole tiles, and the tiled launch itself."""

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any, Literal

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jaxtyping import Array

Backend = Literal["triton", "mosaic_gpu"]
BACKENDS = ("triton", "mosaic_gpu")


@dataclasses.dataclass(frozen=True)
class Launch:
    """Static settings of one kernel launch (hashable, so it can be a `nondiff_argnum`).

    - `block_shape`: the output tile each program computes, one entry per spatial axis.
    - `interpret`: run the kernel through the Pallas interpreter (any backend, CPU included).
    - `backend`: the GPU lowering, `"triton"` or `"mosaic_gpu"` (ignored elsewhere).
    """

    block_shape: tuple[int, ...]
    interpret: bool
    backend: Backend = "triton"


def resolve_launch(
    spatial_shape: Sequence[int],
    block_shape: Sequence[int] | None,
    interpret: bool | None,
    backend: str | None,
    *,
    kernel: str,
) -> Launch:
    """Checks the launch options and fills in defaults: the per-backend block table, and
    interpret mode exactly when the default device is a CPU (Pallas compiles only for GPU
    and TPU)."""
    from ._tiling import default_block_shape

    on_cpu = jax.default_backend() == "cpu"
    if interpret is None:
        interpret = on_cpu
    if not isinstance(interpret, bool):
        raise TypeError(f"interpret must be True, False or None; got {interpret!r}.")
    if on_cpu and not interpret:
        raise ValueError(
            "Pallas kernels compile only for GPU and TPU; on a CPU pass interpret=True "
            "(or interpret=None), or use the XLA path (impl='xla')."
        )
    if backend is None:
        backend = "triton"
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {list(BACKENDS)}; got {backend!r}.")
    if block_shape is None:
        block_shape = default_block_shape(kernel, spatial_shape)
    block_shape = tuple(block_shape)
    if len(block_shape) != len(spatial_shape) or not all(
        isinstance(b, int) and b >= 1 for b in block_shape
    ):
        raise ValueError(
            f"block_shape must be {len(spatial_shape)} positive integers (one per spatial "
            f"axis); got {block_shape!r}."
        )
    return Launch(block_shape, interpret, backend)


def compiler_params(launch: Launch) -> Any:
    """The compiler parameters that select the GPU lowering: `None` in interpret mode and
    on a TPU; otherwise the launch compiles for a GPU (Triton, or Mosaic GPU when asked
    for, imported only then since CPU-only jaxlibs may lack it)."""
    if launch.interpret or jax.default_backend() == "tpu":
        return None
    if launch.backend == "mosaic_gpu":
        from jax.experimental.pallas import mosaic_gpu as plgpu

        # Two tiles in flight: the next window's copy overlaps this tile's arithmetic.
        return plgpu.CompilerParams(max_concurrent_steps=2)
    from jax.experimental.pallas import triton as pltriton

    num_warps = 8 if math.prod(launch.block_shape) >= 4096 else 4
    return pltriton.CompilerParams(num_warps=num_warps, num_stages=1)


def check_padded(padded: Array, num_spatial: int, width: int, *, kernel: str) -> None:
    if padded.ndim < num_spatial:
        raise ValueError(
            f"{kernel} takes an array with at least {num_spatial} axes (the trailing ones "
            f"spatial); got shape {padded.shape}."
        )
    spatial = padded.shape[padded.ndim - num_spatial :]
    if any(n <= 2 * width for n in spatial):
        raise ValueError(
            f"{kernel}: a padded array needs more than {2 * width} cells along each spatial "
            f"axis ({width} ghost cells per side); got spatial shape {spatial}."
        )
    if not jnp.issubdtype(padded.dtype, jnp.floating):
        raise TypeError(f"{kernel} takes a floating-point array; got dtype {padded.dtype}.")


def checked_spacing(spacing: Sequence[float], num_spatial: int, *, kernel: str):
    spacing = tuple(float(h) for h in spacing)
    if len(spacing) != num_spatial or not all(math.isfinite(h) and h > 0 for h in spacing):
        raise ValueError(
            f"{kernel}: spacing must be {num_spatial} positive finite numbers; got {spacing}."
        )
    return spacing


def split_leading(array: Array, num_trailing: int) -> tuple[Array, tuple[int, ...]]:
    """Collapses the leading (channel/batch) axes into one, so every kernel sees
    `(batch, *trailing)`."""
    leading = array.shape[: array.ndim - num_trailing]
    return array.reshape((math.prod(leading), *array.shape[array.ndim - num_trailing :])), leading


def pad_to_tiles(padded: Array, interior: Sequence[int], block_shape):
    """Extends the trailing `len(interior)` axes with zeros at the high end so the interior
    is a whole number of tiles. Nothing is copied when it already is."""
    extra = [(-n) % b for n, b in zip(interior, block_shape, strict=True)]
    if not any(extra):
        return padded
    widths = [(0, 0)] * (padded.ndim - len(interior)) + [(0, e) for e in extra]
    return jnp.pad(padded, widths)


def window_spec(block_shape, width: int, leading_blocks: Sequence[int | None]) -> pl.BlockSpec:
    """Overlapping input windows: tile `(i, j, ...)` reads `block + 2 * width` cells from
    element `block * (i, j, ...)` of the padded array (tiles of a `BlockSpec` do not
    overlap, so the halo is addressed by element offsets). `leading_blocks` lists the
    leading axes: `None` squeezes an axis indexed by program id 0, an integer keeps it
    whole."""
    spatial = tuple(pl.Element(b + 2 * width) for b in block_shape)
    leading = tuple(pl.squeezed if n is None else n for n in leading_blocks)

    def index_map(batch, *tile):
        first = tuple(batch if n is None else 0 for n in leading_blocks)
        return first + tuple(t * b for t, b in zip(tile, block_shape, strict=True))

    return pl.BlockSpec(leading + spatial, index_map)


def tile_spec(block_shape, leading_blocks: Sequence[int | None]) -> pl.BlockSpec:
    """Output tiles, one per program, with the same leading-axis layout as `window_spec`."""
    leading = tuple(pl.squeezed if n is None else n for n in leading_blocks)

    def index_map(batch, *tile):
        return tuple(batch if n is None else 0 for n in leading_blocks) + tuple(tile)

    return pl.BlockSpec(leading + tuple(block_shape), index_map)


def tile_grid(batch: int, interior: Sequence[int], block_shape) -> tuple[int, ...]:
    return (batch, *(pl.cdiv(n, b) for n, b in zip(interior, block_shape, strict=True)))


def launch_tiles(
    kernel: Callable,
    padded: Array,
    *,
    width: int,
    launch: Launch,
    name: str,
    num_channels: int | None = None,
    params: Array | None = None,
) -> Array:
    """Runs `kernel` once per output tile of a padded array.

    `padded` is `(..., [channels,] *spatial)`, the spatial axes `2 * width` longer than
    the result. The leading axes become the first grid axis; a channel axis (if
    `num_channels`) stays whole in every window and tile; `params`, a small vector, is
    passed whole to every program. The kernel receives `(window_ref, [params_ref,]
    out_ref)`.
    """
    block_shape = launch.block_shape
    num_spatial = len(block_shape)
    channel_axes = () if num_channels is None else (num_channels,)
    batched, leading = split_leading(padded, num_spatial + len(channel_axes))
    interior = tuple(n - 2 * width for n in batched.shape[batched.ndim - num_spatial :])
    grid = tile_grid(batched.shape[0], interior, block_shape)
    rounded = tuple(g * b for g, b in zip(grid[1:], block_shape, strict=True))
    leading_blocks = [None, *channel_axes]
    in_specs = [window_spec(block_shape, width, leading_blocks)]
    inputs = [pad_to_tiles(batched, interior, block_shape)]
    if params is not None:
        in_specs.append(pl.BlockSpec(params.shape, lambda *_: (0,)))
        inputs.append(params)
    out = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((batched.shape[0], *channel_axes, *rounded), padded.dtype),
        grid=grid,
        in_specs=in_specs,
        out_specs=tile_spec(block_shape, leading_blocks),
        interpret=launch.interpret,
        compiler_params=compiler_params(launch),
        name=name,
    )(*inputs)
    # Cut off the tiles' overhang (a no-op when the interior is a whole number of tiles).
    out = out[(slice(None),) * (1 + len(channel_axes)) + tuple(slice(0, n) for n in interior)]
    return out.reshape(*leading, *channel_axes, *interior)


def zero_pad(array: Array, width: int, num_trailing: int) -> Array:
    widths = [(0, 0)] * (array.ndim - num_trailing) + [(width, width)] * num_trailing
    return jnp.pad(array, widths)
