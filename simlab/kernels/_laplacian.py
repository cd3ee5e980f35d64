r"""The 2-D and 3-D Laplacians as one tiled Pallas kernel: 5 or 9 points in 2-D (order 2
or 4), 7 or 13 points in 3-D.

$$
(\nabla^2 u)_{i} = \sum_{a} \frac{u_{i - e_a} - 2u_{i} + u_{i + e_a}}{h_a^2}
\quad\text{(order 2; the sum runs over the spatial axes)}.
$$

Each program computes one output tile from a window of the padded input that is the
tile plus `width` halo cells per side; the shifted copies of the tile are loads at
constant offsets within the window, so every value is read from memory once per tile.
The kernel, its launch and its derivatives (a `LinearStencil`: the tangent is the same
kernel on the tangent, the transpose the same kernel on the zero-padded cotangent) are
written once for any number of spatial axes; `laplacian2d` and `laplacian3d` are its
checked public entry points, and `laplacian` picks one of them by the number of spatial
axes.
"""

import dataclasses
import functools as ft
from collections.abc import Sequence

import jax
import jax.numpy as jnp
from jaxtyping import Array

from ._layouts import Program, launch_tiles
from ._linear import LinearStencil
from ._pallas import (
    Launch,
    Plan,
    check_padded,
    checked_spacing,
    launch_options,
    plan_launch,
)
from ._stencils import axis_weights, laplacian_from_shifts, laplacian_reference


def laplacian_kernel(program: Program, params, *, width, weights):
    """One output tile from the program's window (the tile plus `width` halo cells per
    side), with `weights` the per-axis second-difference weights over $h^2$."""
    block = program.tiles.block

    def shifted(offsets):
        return program.read((), tuple(width + d for d in offsets), block)

    program.store((), laplacian_from_shifts(shifted, weights, width))


# Jitted so that each tile layout is traced once, however often it runs.
@ft.partial(jax.jit, static_argnames=("spacing", "order", "plan"))
def _launch(padded: Array, spacing, order: int, plan: Plan) -> Array:
    """The kernel over every tile of every leading index of `padded`."""
    kernel = ft.partial(laplacian_kernel, width=order // 2, weights=axis_weights(order, spacing))
    name = f"laplacian{len(spacing)}d"
    return launch_tiles(kernel, padded, width=order // 2, plan=plan, name=name)


@dataclasses.dataclass(frozen=True)
class LaplacianStencil(LinearStencil):
    """The Laplacian launch as a linear stencil: `LaplacianStencil(spacing, order,
    launch)(padded)` is the kernel, differentiable in both modes (the tangent is the same
    kernel on the tangent; the transpose, the same kernel on the cotangent zero-padded
    with `2 * width` cells per side, see `simlab.kernels._linear`)."""

    spacing: tuple[float, ...]
    order: int
    launch: Launch

    @property
    def width(self) -> int:
        return self.order // 2

    @property
    def num_spatial(self) -> int:
        return len(self.spacing)

    def run(self, platform: str, padded: Array, *coefficients: Array) -> Array:
        interior = tuple(n - 2 * self.width for n in padded.shape[-self.num_spatial :])
        plan = plan_launch(
            self.launch,
            platform,
            f"laplacian{self.num_spatial}d",
            interior,
            width=self.width,
            num_channels=1,
            dtype=padded.dtype,
        )
        return _launch(padded, self.spacing, self.order, plan)


def _checked_laplacian(padded, spacing, order, block_shape, interpret, backend, *, num_spatial):
    kernel = f"laplacian{num_spatial}d"
    padded = jnp.asarray(padded)
    width = order // 2 if isinstance(order, int) else 1
    spacing = checked_spacing(spacing, num_spatial, kernel=kernel)
    axis_weights(order, spacing)  # checks the order
    check_padded(padded, num_spatial, width, kernel=kernel)
    launch = launch_options(num_spatial, block_shape, interpret, backend)
    return LaplacianStencil(spacing, order, launch)(padded)


def _checked_reference(padded, spacing, order, *, num_spatial):
    if len(spacing) != num_spatial:
        raise ValueError(
            f"laplacian{num_spatial}d_reference: spacing needs {num_spatial} entries; "
            f"got {spacing}."
        )
    return laplacian_reference(padded, spacing, order=order)


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

    Differentiable in forward mode (`jax.jvp`, `jax.jacfwd`: the tangent is the same
    kernel on the tangent) and in reverse mode (`jax.grad`: the transpose is the same
    kernel on the cotangent padded with `2 * w` zeros per side).

    **Arguments:**

    - `padded`: shape `(..., nx + 2w, ny + 2w)` with `w = order // 2` ghost cells per side
      (e.g. from `simlab.grid.pad`); leading axes are a batch.
    - `spacing`: `(h_x, h_y)`.
    - `order`: 2 (5 points) or 4 (9 points).
    - `block_shape`: the output tile per program; default from the per-target table in
      `simlab.kernels.BLOCK_SHAPES`. Each target fits it to what its compiler takes
      when the kernel is lowered (powers of two for Triton, shared memory for Mosaic GPU,
      the (8, 128) tiling and VMEM for TPUs; see the kernels page). Grids that are not a
      whole number of tiles are handled (the last tiles are computed on zeros and cut
      off).
    - `interpret`: run in the Pallas interpreter; `None` means exactly when the program
      is lowered for a CPU (and compiled when it is lowered for a GPU or TPU).
    - `backend`: the lowering on an NVIDIA GPU, `"triton"` (default) or `"mosaic_gpu"`.

    **Returns:** the Laplacian on the interior, shape `(..., nx, ny)`.

    !!! example

        ```python
        grid = simlab.Grid((64, 48), extent=1.0)
        padded = simlab.grid.pad(field, grid, 1)
        simlab.kernels.laplacian2d(padded, grid.spacing)  # == simlab.grid.laplacian(field, grid)
        ```
    """
    return _checked_laplacian(
        padded, spacing, order, block_shape, interpret, backend, num_spatial=2
    )


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

    Differentiable in forward and reverse mode, by the same kernel (see
    [`simlab.kernels.laplacian2d`][]).

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
    return _checked_laplacian(
        padded, spacing, order, block_shape, interpret, backend, num_spatial=3
    )


def laplacian2d_reference(padded: Array, spacing: Sequence[float], *, order: int = 2) -> Array:
    """[`simlab.kernels.laplacian2d`][] in plain `jax.numpy` (the XLA path)."""
    return _checked_reference(padded, spacing, order, num_spatial=2)


def laplacian3d_reference(padded: Array, spacing: Sequence[float], *, order: int = 2) -> Array:
    """[`simlab.kernels.laplacian3d`][] in plain `jax.numpy` (the XLA path)."""
    return _checked_reference(padded, spacing, order, num_spatial=3)


_LAPLACIANS = {2: laplacian2d, 3: laplacian3d}


def laplacian(padded: Array, spacing: Sequence[float], *, order: int = 2) -> Array:
    """The Laplacian of an already padded field with 1, 2 or 3 spatial axes: the tiled
    kernel in 2-D and 3-D, the jnp reference in 1-D (a line has no tile to reuse).

    This is the `impl="pallas"` path of `simlab.grid.laplacian_interior`, and so of every
    operator and model built on it; call it directly to run the Pallas Laplacian on a
    padded array whatever its number of axes. Differentiable in forward and reverse mode,
    as [`simlab.kernels.laplacian2d`][].

    **Arguments:**

    - `padded`: the field with `order // 2` ghost cells per side of each spatial axis.
    - `spacing`: one cell size per spatial axis (the trailing axes of `padded`).
    - `order`: 2 or 4.

    **Returns:** the Laplacian on the interior.

    !!! example

        ```python
        grid = simlab.Grid((32, 32), extent=1.0, boundary="neumann")
        simlab.kernels.laplacian(simlab.grid.pad(field, grid, 1), grid.spacing)
        ```
    """
    kernel = _LAPLACIANS.get(len(spacing))
    if kernel is None:
        return laplacian_reference(padded, spacing, order=order)
    return kernel(padded, spacing, order=order)
