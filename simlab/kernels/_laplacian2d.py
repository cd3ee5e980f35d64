r"""The 2-D Laplacian, 5 points (order 2) or 9 points (order 4), as a tiled Pallas kernel.

$$
(\nabla^2 u)_{ij} = \frac{u_{i-1,j} - 2u_{ij} + u_{i+1,j}}{h_x^2}
                  + \frac{u_{i,j-1} - 2u_{ij} + u_{i,j+1}}{h_y^2}.
$$

Each program computes one output tile from a window of the padded input that is the
tile plus `width` halo cells per side; the shifted copies of the tile are loads at
constant offsets within the window, so every value is read from memory once per tile.
"""

import functools as ft
from collections.abc import Sequence

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jaxtyping import Array

from ._pallas import (
    Launch,
    axis_weights,
    check_padded,
    checked_spacing,
    laplacian_from_shifts,
    laplacian_reference,
    launch_tiles,
    resolve_launch,
    zero_pad,
)

NUM_SPATIAL = 2


def laplacian2d_kernel(window_ref, out_ref, *, block_shape, width, weights):
    """One output tile: `window_ref` holds the tile plus `width` halo cells per side,
    `weights` the per-axis second-difference weights over $h^2$."""
    bx, by = block_shape

    def shifted(offsets):
        dx, dy = offsets
        return window_ref[pl.ds(width + dx, bx), pl.ds(width + dy, by)]

    out_ref[...] = laplacian_from_shifts(shifted, weights, width).astype(out_ref.dtype)


# Jitted so that each tile layout is traced and compiled once, however often it runs.
@ft.partial(jax.jit, static_argnames=("spacing", "order", "launch"))
def _launch(padded: Array, spacing, order: int, launch: Launch) -> Array:
    """The kernel over every tile of every leading index of `padded`."""
    kernel = ft.partial(
        laplacian2d_kernel,
        block_shape=launch.block_shape,
        width=order // 2,
        weights=axis_weights(order, spacing),
    )
    return launch_tiles(kernel, padded, width=order // 2, launch=launch, name="laplacian2d")


@ft.partial(jax.custom_vjp, nondiff_argnums=(1, 2, 3))
def _laplacian2d(padded, spacing, order, launch):
    return _launch(padded, spacing, order, launch)


def _laplacian2d_fwd(padded, spacing, order, launch):
    return _launch(padded, spacing, order, launch), None


def _laplacian2d_bwd(spacing, order, launch, _, cotangent):
    # The stencil is symmetric, so its transpose is the same stencil: applied to the
    # cotangent padded with 2 * width zeros it yields a padded-shaped cotangent, which
    # scatters into the ghost cells; the padding's own derivative then carries those back
    # to the cells they were copied from (the boundary condition's adjoint).
    width = order // 2
    return (_launch(zero_pad(cotangent, 2 * width, NUM_SPATIAL), spacing, order, launch),)


_laplacian2d.defvjp(_laplacian2d_fwd, _laplacian2d_bwd)


def laplacian2d(
    padded: Array,
    spacing: Sequence[float],
    *,
    order: int = 2,
    block_shape: Sequence[int] | None = None,
    interpret: bool | None = None,
    backend: str | None = None,
) -> Array:
    r"""The 2-D Laplacian of an already padded field, by a tiled Pallas kernel.

    Differentiable in reverse mode (`jax.grad`): the backward pass is the same stencil on
    the zero-padded cotangent. Not usable in forward mode (`jax.jvp`); the operators in
    `simlab.grid` route forward-mode calls to their XLA path.

    **Arguments:**

    - `padded`: shape `(..., nx + 2w, ny + 2w)` with `w = order // 2` ghost cells per side
      (e.g. from `simlab.grid.pad`); leading axes are a batch.
    - `spacing`: `(h_x, h_y)`.
    - `order`: 2 (5 points) or 4 (9 points).
    - `block_shape`: the output tile per program; default from the per-backend table in
      `simlab.kernels.BLOCK_SHAPES`. Grids that are not a whole number of tiles are
      handled (the last tiles are computed on zeros and cut off).
    - `interpret`: run in the Pallas interpreter; `None` means exactly when on a CPU.
    - `backend`: the GPU lowering, `"triton"` (default) or `"mosaic_gpu"`.

    **Returns:** the Laplacian on the interior, shape `(..., nx, ny)`.

    !!! example

        ```python
        grid = simlab.Grid((64, 48), extent=1.0)
        padded = simlab.grid.pad(field, grid, 1)
        simlab.kernels.laplacian2d(padded, grid.spacing)  # == simlab.grid.laplacian(field, grid)
        ```
    """
    padded = jnp.asarray(padded)
    width = order // 2 if isinstance(order, int) else 1
    spacing = checked_spacing(spacing, NUM_SPATIAL, kernel="laplacian2d")
    axis_weights(order, spacing)  # checks the order
    check_padded(padded, NUM_SPATIAL, width, kernel="laplacian2d")
    interior = tuple(n - 2 * width for n in padded.shape[-NUM_SPATIAL:])
    launch = resolve_launch(interior, block_shape, interpret, backend, kernel="laplacian2d")
    return _laplacian2d(padded, spacing, order, launch)


def laplacian2d_reference(padded: Array, spacing: Sequence[float], *, order: int = 2) -> Array:
    """[`simlab.kernels.laplacian2d`][] in plain `jax.numpy` (the XLA path)."""
    if len(spacing) != NUM_SPATIAL:
        raise ValueError(f"laplacian2d_reference: spacing needs 2 entries; got {spacing}.")
    return laplacian_reference(padded, spacing, order=order)
