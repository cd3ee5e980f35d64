r"""The 3-D Laplacian, 7 points (order 2) or 13 points (order 4), as a tiled Pallas kernel.

$$
(\nabla^2 u)_{ijk} = \sum_{a \in \{x, y, z\}} \frac{u_{\cdot - e_a} - 2u + u_{\cdot + e_a}}{h_a^2}.
$$

As in 2-D, each program reads one window (its tile plus the halo) and writes one tile.
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

NUM_SPATIAL = 3


def laplacian3d_kernel(window_ref, out_ref, *, block_shape, width, weights):
    """One output tile from its window (tile plus `width` halo cells per side)."""
    bx, by, bz = block_shape

    def shifted(offsets):
        dx, dy, dz = offsets
        return window_ref[pl.ds(width + dx, bx), pl.ds(width + dy, by), pl.ds(width + dz, bz)]

    out_ref[...] = laplacian_from_shifts(shifted, weights, width).astype(out_ref.dtype)


# Jitted so that each tile layout is traced and compiled once, however often it runs.
@ft.partial(jax.jit, static_argnames=("spacing", "order", "launch"))
def _launch(padded: Array, spacing, order: int, launch: Launch) -> Array:
    kernel = ft.partial(
        laplacian3d_kernel,
        block_shape=launch.block_shape,
        width=order // 2,
        weights=axis_weights(order, spacing),
    )
    return launch_tiles(kernel, padded, width=order // 2, launch=launch, name="laplacian3d")


@ft.partial(jax.custom_vjp, nondiff_argnums=(1, 2, 3))
def _laplacian3d(padded, spacing, order, launch):
    return _launch(padded, spacing, order, launch)


def _laplacian3d_fwd(padded, spacing, order, launch):
    return _launch(padded, spacing, order, launch), None


def _laplacian3d_bwd(spacing, order, launch, _, cotangent):
    # Symmetric stencil: the transpose is the same stencil on the zero-padded cotangent,
    # giving the cotangent of every padded cell, ghost cells included.
    width = order // 2
    return (_launch(zero_pad(cotangent, 2 * width, NUM_SPATIAL), spacing, order, launch),)


_laplacian3d.defvjp(_laplacian3d_fwd, _laplacian3d_bwd)


def laplacian3d(
    padded: Array,
    spacing: Sequence[float],
    *,
    order: int = 2,
    block_shape: Sequence[int] | None = None,
    interpret: bool | None = None,
    backend: str | None = None,
) -> Array:
    r"""The 3-D Laplacian of an already padded field, by a tiled Pallas kernel.

    Differentiable in reverse mode, with the same stencil as backward pass; not in
    forward mode (see [`simlab.kernels.laplacian2d`][]).

    **Arguments:**

    - `padded`: shape `(..., nx + 2w, ny + 2w, nz + 2w)`, `w = order // 2`.
    - `spacing`: `(h_x, h_y, h_z)`.
    - `order`: 2 (7 points) or 4 (13 points).
    - `block_shape`, `interpret`, `backend`: as for [`simlab.kernels.laplacian2d`][].

    **Returns:** the Laplacian on the interior, shape `(..., nx, ny, nz)`.

    !!! example

        ```python
        grid = simlab.Grid((32, 32, 32), extent=1.0)
        simlab.kernels.laplacian3d(simlab.grid.pad(field, grid, 1), grid.spacing)
        ```
    """
    padded = jnp.asarray(padded)
    width = order // 2 if isinstance(order, int) else 1
    spacing = checked_spacing(spacing, NUM_SPATIAL, kernel="laplacian3d")
    axis_weights(order, spacing)  # checks the order
    check_padded(padded, NUM_SPATIAL, width, kernel="laplacian3d")
    interior = tuple(n - 2 * width for n in padded.shape[-NUM_SPATIAL:])
    launch = resolve_launch(interior, block_shape, interpret, backend, kernel="laplacian3d")
    return _laplacian3d(padded, spacing, order, launch)


def laplacian3d_reference(padded: Array, spacing: Sequence[float], *, order: int = 2) -> Array:
    """[`simlab.kernels.laplacian3d`][] in plain `jax.numpy` (the XLA path)."""
    if len(spacing) != NUM_SPATIAL:
        raise ValueError(f"laplacian3d_reference: spacing needs 3 entries; got {spacing}.")
    return laplacian_reference(padded, spacing, order=order)
