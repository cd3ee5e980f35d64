"""Finite-difference stencil operators: ghost-cell padding, then interior stencils.

Every operator comes in two layers:

- `op(field, grid, ...)` pads `field` with the grid's boundary conditions (`pad`) and
  calls `op_interior`;
- `op_interior(padded, spacing, ...)` computes the stencil from an already padded array
  (`width` ghost cells on each side of each spatial axis; `stencil_width` says how many)
  and returns an array `2 * width` shorter along each spatial axis.

A domain-decomposed run fills the ghost cells by halo exchange with its neighbours instead
of `pad`, and reuses `op_interior` unchanged. The spatial axes are always the trailing
`len(spacing)` axes; leading axes are channels (or batch) and pass through. The `impl=`
switch lives in the interior layer, so a Pallas kernel serves both callers.
"""

from collections.abc import Sequence
from typing import Literal

import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, ArrayLike

from ..kernels import LAPLACIAN_WEIGHTS, axis_weights, laplacian_from_shifts, laplacian_reference
from ._boundary import Neumann, Periodic
from ._dispatch import Impl, chosen_kernel
from ._grid import SIDES, Grid, check_field_shape
from ._spectral import (
    check_periodic,
    spectral_divergence,
    spectral_gradient,
    spectral_laplacian,
)

LAPLACIAN_ORDERS = tuple(LAPLACIAN_WEIGHTS)
ADVECTION_SCHEMES = ("upwind", "central")


def stencil_width(operator: str, *, order: int = 2) -> int:
    """The number of ghost cells per side that `operator` needs (the Laplacian: `order // 2`)."""
    if operator == "laplacian":
        _check_order(order)
        return order // 2
    if operator in ("gradient", "divergence", "advection", "diffusion"):
        return 1
    raise ValueError(f"unknown operator {operator!r}.")


def pad(field: ArrayLike, grid: Grid, width: int) -> Array:
    """Adds `width` ghost cells on each side of each spatial axis, filled by the grid's
    boundary conditions.

    **Arguments:**

    - `field`: an array whose trailing axes are `grid.shape` (leading axes are channels).
    - `grid`: the [`simlab.Grid`][] with the boundary conditions.
    - `width`: ghost cells per side (at least 1, at most the grid's smallest axis).

    **Returns:** an array `2 * width` longer along each spatial axis. Corner ghost cells
    are filled too (axis by axis), though the operators here never read them.

    !!! example

        ```python
        grid = simlab.Grid((8,), boundary=simlab.Dirichlet(1.0))
        padded = simlab.grid.pad(jnp.zeros(8), grid, 1)  # [2., 0., ..., 0., 2.]
        ```
    """
    field = jnp.asarray(field)
    check_field_shape(field, grid)
    if not isinstance(width, int) or not 1 <= width <= min(grid.shape):
        raise ValueError(
            f"pad width must be an integer from 1 to the smallest grid axis {min(grid.shape)}; "
            f"got {width!r}."
        )
    for axis in range(grid.ndim):
        field = pad_axis(field, grid, axis, width)
    return field


def pad_axis(field: Array, grid: Grid, axis: int, width: int) -> Array:
    """Adds `width` ghost cells on both sides of spatial axis `axis` only (see `pad`)."""
    array_axis = field.ndim - grid.ndim + axis
    low, high = (
        grid.boundary(axis, side).ghost_cells(field, array_axis, side, width, grid.spacing[axis])
        for side in SIDES
    )
    return jnp.concatenate(
        [low.astype(field.dtype), field, high.astype(field.dtype)], axis=array_axis
    )


def pad_coefficient(coefficient: ArrayLike, grid: Grid, width: int) -> Array:
    """Pads a coefficient field (e.g. a diffusivity): wrapped on periodic axes, mirrored
    (zero normal derivative) on the others, whatever condition the solution obeys."""
    conditions = [Periodic() if periodic else Neumann() for periodic in grid.is_periodic]
    coefficient_grid = Grid(grid.shape, spacing=grid.spacing, boundary=conditions)
    return pad(coefficient, coefficient_grid, width)


def laplacian(field: ArrayLike, grid: Grid, *, order: int = 2, impl: Impl = "auto") -> Array:
    r"""The Laplacian $\nabla^2 u = \sum_i \partial^2 u / \partial x_i^2$ by central differences.

    Order 2 is the $(1, -2, 1)/h^2$ stencil per axis (5 points in 2-D); order 4 is
    $(-1, 16, -30, 16, -1)/(12 h^2)$. Boundary conditions enter through ghost cells.
    `impl="spectral"` multiplies the Fourier coefficients by $-|\mathbf k|^2$ instead
    (exact for band-limited fields; periodic grids only; `order` is then unused).

    **Arguments:**

    - `field`: an array whose trailing axes are `grid.shape`.
    - `grid`: the [`simlab.Grid`][].
    - `order`: 2 or 4, the order of accuracy of the stencil.
    - `impl`: `"xla"` (the jnp reference), `"pallas"` (a kernel from `simlab.kernels`),
      `"auto"` (Pallas where measured faster on the platform, else XLA; see
      [`simlab.grid.resolve_impl`][]) or `"spectral"` (Fourier).

    **Returns:** an array of the same shape as `field`.

    !!! example

        ```python
        grid = simlab.Grid((64,), extent=2 * jnp.pi)
        (x,) = grid.coordinates()
        simlab.grid.laplacian(jnp.sin(x), grid)  # ≈ -sin(x)
        ```
    """
    width = stencil_width("laplacian", order=order)
    if _is_spectral(impl, grid):
        return spectral_laplacian(field, grid)
    if chosen_kernel(impl, "laplacian") is not None:
        return laplacian_interior(pad(field, grid, width), grid.spacing, order=order, impl=impl)
    field = jnp.asarray(field)
    check_field_shape(field, grid)
    if field.ndim == grid.ndim:
        return slab_laplacian(field, grid, width, order)
    # A field with channels: on a TPU v5e the slabs took 1.5 to 2.7 times as long as one
    # padded copy (400 Euler steps at 1024², two and three channels); one channel, and
    # every CPU, are faster with the slabs.
    return lax.platform_dependent(
        field,
        tpu=lambda field: padded_laplacian(field, grid, width, order),
        default=lambda field: slab_laplacian(field, grid, width, order),
    )


def slab_laplacian(field: Array, grid: Grid, width: int, order: int) -> Array:
    """The same sums as `laplacian_interior`, computed axis by axis without a padded copy
    of the field (XLA:CPU materialises a concatenation along the minor axis; this way only
    the thin edge slabs are concatenated, and the whole operator fuses into one pass)."""
    return sum(_axis_laplacian(field, grid, axis, width, order) for axis in range(grid.ndim))


def padded_laplacian(field: Array, grid: Grid, width: int, order: int) -> Array:
    """The Laplacian of `field` from one copy padded with its ghost cells."""
    return laplacian_reference(pad(field, grid, width), grid.spacing, order=order)


def laplacian_interior(
    padded: Array, spacing: Sequence[float], *, order: int = 2, impl: Impl = "auto"
) -> Array:
    """[`simlab.grid.laplacian`][] from an array padded with `order // 2` ghost cells."""
    width = stencil_width("laplacian", order=order)
    spacing = _checked_spacing(padded, spacing, width)
    kernel = chosen_kernel(impl, "laplacian")
    if kernel is not None:
        return kernel(padded, spacing, order=order)
    return laplacian_reference(padded, spacing, order=order)


def gradient(field: ArrayLike, grid: Grid, *, impl: Impl = "auto") -> Array:
    r"""The gradient $\nabla u$ by second-order central differences $(u_{i+1} - u_{i-1})/2h$.

    **Arguments:**

    - `field`: an array whose trailing axes are `grid.shape`.
    - `grid`: the [`simlab.Grid`][].
    - `impl`: `"auto"`, `"xla"`, `"pallas"` or `"spectral"` (see
      [`simlab.grid.laplacian`][]).

    **Returns:** an array of shape `(grid.ndim, *field.shape)`: component `i` is
    $\partial u/\partial x_i$.

    !!! example

        ```python
        grid = simlab.Grid((32, 32), extent=1.0)
        x, y = grid.mesh()
        simlab.grid.gradient(jnp.sin(2 * jnp.pi * x), grid).shape  # (2, 32, 32)
        ```
    """
    if _is_spectral(impl, grid):
        return spectral_gradient(field, grid)
    return gradient_interior(pad(field, grid, 1), grid.spacing, impl=impl)


def gradient_interior(padded: Array, spacing: Sequence[float], *, impl: Impl = "auto") -> Array:
    """[`simlab.grid.gradient`][] from an array padded with one ghost cell per side."""
    spacing = _checked_spacing(padded, spacing, 1)
    kernel = chosen_kernel(impl, "gradient")
    if kernel is not None:
        return kernel(padded, spacing)
    return jnp.stack([_central_difference(padded, spacing, axis) for axis in range(len(spacing))])


def divergence(vector_field: ArrayLike, grid: Grid, *, impl: Impl = "auto") -> Array:
    r"""The divergence $\nabla \cdot \mathbf{F} = \sum_i \partial F_i / \partial x_i$ by
    second-order central differences.

    Each component is padded with the grid's boundary conditions.

    **Arguments:**

    - `vector_field`: an array of shape `(grid.ndim, *grid.shape)`.
    - `grid`: the [`simlab.Grid`][].
    - `impl`: `"auto"`, `"xla"`, `"pallas"` or `"spectral"` (see
      [`simlab.grid.laplacian`][]).

    **Returns:** an array of shape `grid.shape`.

    !!! example

        ```python
        grid = simlab.Grid((32, 32), extent=1.0)
        x, y = grid.mesh()
        simlab.grid.divergence(jnp.stack([x * 0, jnp.sin(2 * jnp.pi * y)]), grid)
        ```
    """
    vector_field = jnp.asarray(vector_field)
    if vector_field.shape != (grid.ndim, *grid.shape):
        raise ValueError(
            f"divergence takes a vector field of shape (grid.ndim, *grid.shape) = "
            f"{(grid.ndim, *grid.shape)}; got {vector_field.shape}."
        )
    if _is_spectral(impl, grid):
        return spectral_divergence(vector_field, grid)
    return divergence_interior(pad(vector_field, grid, 1), grid.spacing, impl=impl)


def divergence_interior(padded: Array, spacing: Sequence[float], *, impl: Impl = "auto") -> Array:
    """[`simlab.grid.divergence`][] from a vector field (components first) padded with one
    ghost cell per side."""
    spacing = _checked_spacing(padded, spacing, 1)
    if padded.shape[0] != len(spacing):
        raise ValueError(
            f"a vector field needs {len(spacing)} components on axis 0; got {padded.shape[0]}."
        )
    kernel = chosen_kernel(impl, "divergence")
    if kernel is not None:
        return kernel(padded, spacing)
    return sum(_central_difference(padded[axis], spacing, axis) for axis in range(len(spacing)))


def advection(
    field: ArrayLike,
    velocity: ArrayLike,
    grid: Grid,
    *,
    scheme: Literal["upwind", "central"] = "upwind",
    impl: Impl = "auto",
) -> Array:
    r"""The advective derivative $(\mathbf{v} \cdot \nabla) u$, the rate at which a flow with
    velocity $\mathbf{v}$ carries $u$ past a point (subtract it: $u_t = -\mathbf{v}\cdot\nabla u$).

    `scheme="upwind"` takes one-sided differences from the side the flow comes from
    (first order, monotone, diffusive); `"central"` takes $(u_{i+1} - u_{i-1})/2h$ (second
    order, not dissipative, unstable with forward Euler). `impl="spectral"` multiplies the
    Fourier gradient by $\mathbf v$ pointwise (pseudo-spectral, not dealiased; `scheme` is
    then unused).

    **Arguments:**

    - `field`: an array whose trailing axes are `grid.shape`.
    - `velocity`: a constant vector of shape `(grid.ndim,)` or a field of shape
      `(grid.ndim, *grid.shape)`.
    - `grid`: the [`simlab.Grid`][].
    - `scheme`: `"upwind"` or `"central"`.
    - `impl`: `"auto"`, `"xla"`, `"pallas"` or `"spectral"` (see
      [`simlab.grid.laplacian`][]).

    **Returns:** an array of the same shape as `field`.

    !!! example

        ```python
        grid = simlab.Grid((64,), extent=1.0)
        (x,) = grid.coordinates()
        simlab.grid.advection(jnp.sin(2 * jnp.pi * x), jnp.array([0.5]), grid)
        ```
    """
    velocity = jnp.asarray(velocity)
    if velocity.shape not in ((grid.ndim,), (grid.ndim, *grid.shape)):
        raise ValueError(
            f"velocity must have shape ({grid.ndim},) (constant) or {(grid.ndim, *grid.shape)} "
            f"(a field); got {velocity.shape}."
        )
    if scheme not in ADVECTION_SCHEMES:
        raise ValueError(f"scheme must be one of {list(ADVECTION_SCHEMES)}; got {scheme!r}.")
    if _is_spectral(impl, grid):
        derivatives = spectral_gradient(field, grid)
        # Leading ones make the velocity's rank the field's: it broadcasts over channel axes.
        speed_shape = (1,) * (derivatives.ndim - velocity.ndim) + velocity.shape[1:]
        return sum(
            velocity[axis].reshape(speed_shape) * derivatives[axis] for axis in range(grid.ndim)
        )
    padded = pad(field, grid, 1)
    return advection_interior(padded, velocity, grid.spacing, scheme=scheme, impl=impl)


def advection_interior(
    padded: Array,
    velocity: Array,
    spacing: Sequence[float],
    *,
    scheme: Literal["upwind", "central"] = "upwind",
    impl: Impl = "auto",
) -> Array:
    """[`simlab.grid.advection`][] from an array padded with one ghost cell per side;
    `velocity` is unpadded, `(ndim,)` or `(ndim, *interior_shape)`."""
    spacing = _checked_spacing(padded, spacing, 1)
    if scheme not in ADVECTION_SCHEMES:
        raise ValueError(f"scheme must be one of {list(ADVECTION_SCHEMES)}; got {scheme!r}.")
    kernel = chosen_kernel(impl, "advection")
    if kernel is not None:
        return kernel(padded, velocity, spacing, scheme=scheme)
    total = 0.0
    # Leading ones make the velocity's rank the field's: it broadcasts over channel axes.
    speed_shape = (1,) * (padded.ndim - velocity.ndim + 1) + velocity.shape[1:]
    for axis, h in enumerate(spacing):
        speed = velocity[axis].reshape(speed_shape)
        if scheme == "central":
            total = total + speed * _central_difference(padded, spacing, axis)
            continue
        centre = _shifted(padded, spacing, 1, axis, 0)
        backward = (centre - _shifted(padded, spacing, 1, axis, -1)) / h
        forward = (_shifted(padded, spacing, 1, axis, 1) - centre) / h
        total = total + jnp.maximum(speed, 0) * backward + jnp.minimum(speed, 0) * forward
    return total


def diffusion(
    field: ArrayLike, diffusivity: ArrayLike, grid: Grid, *, impl: Impl = "auto"
) -> Array:
    r"""The diffusion term $\nabla \cdot (D \nabla u)$ for a scalar or spatially varying $D$.

    A scalar $D$ gives $D \nabla^2 u$ (second order). A field $D$ is averaged onto the cell
    faces, $D_{i+1/2} = (D_i + D_{i+1})/2$, and the fluxes are differenced, so the total
    $\int u$ is conserved exactly with periodic or zero-flux boundaries.

    **Arguments:**

    - `field`: an array whose trailing axes are `grid.shape`.
    - `diffusivity`: a scalar, or a non-negative field of shape `grid.shape`.
    - `grid`: the [`simlab.Grid`][].
    - `impl`: `"auto"`, `"xla"`, `"pallas"` or `"spectral"` (see
      [`simlab.grid.laplacian`][]; spectral with a field is
      $\nabla\cdot(D\nabla u)$ pseudo-spectrally, not dealiased).

    **Returns:** an array of the same shape as `field`.

    !!! example

        ```python
        grid = simlab.Grid((64,), extent=1.0, boundary="neumann")
        (x,) = grid.coordinates()
        simlab.grid.diffusion(jnp.exp(-((x - 0.5) ** 2) / 0.01), 0.1 + x, grid)
        ```
    """
    diffusivity = jnp.asarray(diffusivity)
    if diffusivity.ndim == 0:
        return diffusivity * laplacian(field, grid, impl=impl)
    if diffusivity.shape != grid.shape:
        raise ValueError(
            f"diffusivity must be a scalar or a field of the grid's shape {grid.shape}; got "
            f"shape {diffusivity.shape}."
        )
    if _is_spectral(impl, grid):
        derivatives = spectral_gradient(field, grid)
        shape = (1,) * (derivatives.ndim - grid.ndim) + grid.shape
        return spectral_divergence(diffusivity.reshape(shape) * derivatives, grid)
    return diffusion_interior(
        pad(field, grid, 1), pad_coefficient(diffusivity, grid, 1), grid.spacing, impl=impl
    )


def diffusion_interior(
    padded: Array, padded_diffusivity: Array, spacing: Sequence[float], *, impl: Impl = "auto"
) -> Array:
    """[`simlab.grid.diffusion`][] for a diffusivity field, from the solution and the
    diffusivity each padded with one ghost cell per side."""
    spacing = _checked_spacing(padded, spacing, 1)
    kernel = chosen_kernel(impl, "diffusion")
    if kernel is not None:
        return kernel(padded, padded_diffusivity, spacing)
    total = 0.0
    for axis, h in enumerate(spacing):

        def at(array, offset, axis=axis):
            return _shifted(array, spacing, 1, axis, offset)

        face_high = 0.5 * (at(padded_diffusivity, 0) + at(padded_diffusivity, 1))
        face_low = 0.5 * (at(padded_diffusivity, 0) + at(padded_diffusivity, -1))
        flux_high = face_high * (at(padded, 1) - at(padded, 0))
        flux_low = face_low * (at(padded, 0) - at(padded, -1))
        total = total + (flux_high - flux_low) / h**2
    return total


def _is_spectral(impl: Impl, grid: Grid) -> bool:
    """Whether `impl` asks for Fourier derivatives (refused, clearly, off periodic grids)."""
    if impl != "spectral":
        return False
    check_periodic(grid, "impl='spectral'")
    return True


def _check_order(order: int) -> None:
    if order not in LAPLACIAN_ORDERS:
        raise ValueError(f"Laplacian order must be one of {LAPLACIAN_ORDERS}; got {order!r}.")


def _checked_spacing(padded: Array, spacing: Sequence[float], width: int) -> tuple[float, ...]:
    spacing = tuple(float(h) for h in spacing)
    if not 1 <= len(spacing) <= padded.ndim or not all(h > 0 for h in spacing):
        raise ValueError(
            f"spacing must be positive, one value per spatial axis (the trailing axes of an "
            f"array of shape {padded.shape}); got {spacing}."
        )
    spatial = padded.shape[padded.ndim - len(spacing) :]
    if any(n <= 2 * width for n in spatial):
        raise ValueError(
            f"a padded array needs more than {2 * width} cells along each spatial axis "
            f"({width} ghost cells per side); got spatial shape {spatial}."
        )
    return spacing


def _shifted(padded: Array, spacing: tuple[float, ...], width: int, axis: int, offset: int):
    """The interior block shifted by `offset` cells along spatial `axis`."""
    first_spatial = padded.ndim - len(spacing)
    index = [slice(None)] * padded.ndim
    for spatial_axis in range(len(spacing)):
        size = padded.shape[first_spatial + spatial_axis]
        shift = offset if spatial_axis == axis else 0
        index[first_spatial + spatial_axis] = slice(width + shift, size - width + shift)
    return padded[tuple(index)]


def _axis_laplacian(field: Array, grid: Grid, axis: int, width: int, order: int):
    r"""The Laplacian's term $\partial^2 u / \partial x_a^2$ along spatial `axis` of an unpadded
    field: the interior from the field itself, the `width` cells at each edge from thin
    padded slabs."""
    array_axis = field.ndim - grid.ndim + axis
    size = field.shape[array_axis]
    if size <= 4 * width:  # too short to split into edges and interior
        return _second_difference(pad_axis(field, grid, axis, width), grid, axis, width, order)
    low, high = (
        grid.boundary(axis, side)
        .ghost_cells(field, array_axis, side, width, grid.spacing[axis])
        .astype(field.dtype)
        for side in SIDES
    )
    low_slab = jnp.concatenate(
        [low, lax.slice_in_dim(field, 0, 2 * width, axis=array_axis)], axis=array_axis
    )
    high_slab = jnp.concatenate(
        [lax.slice_in_dim(field, size - 2 * width, size, axis=array_axis), high],
        axis=array_axis,
    )
    parts = [
        _second_difference(part, grid, axis, width, order) for part in (low_slab, field, high_slab)
    ]
    return jnp.concatenate(parts, axis=array_axis)


def _second_difference(padded: Array, grid: Grid, axis: int, width: int, order: int) -> Array:
    """The Laplacian stencil along spatial `axis` alone, of an array padded along it."""
    array_axis = padded.ndim - grid.ndim + axis
    size = padded.shape[array_axis] - 2 * width

    def shifted(offsets):
        start = width + offsets[0]
        return lax.slice_in_dim(padded, start, start + size, axis=array_axis)

    return laplacian_from_shifts(shifted, axis_weights(order, (grid.spacing[axis],)), width)


def _central_difference(padded: Array, spacing: tuple[float, ...], axis: int) -> Array:
    forward = _shifted(padded, spacing, 1, axis, 1)
    backward = _shifted(padded, spacing, 1, axis, -1)
    return (forward - backward) / (2 * spacing[axis])
