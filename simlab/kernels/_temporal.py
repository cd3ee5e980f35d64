r"""Temporal blocking: several explicit time steps per kernel launch.

A single-step kernel reads and writes the whole field once per step, so a
bandwidth-bound run costs a full memory round trip per step. A temporally blocked launch
pads the field with $s$ ghost cells, gives each program its tile plus an $s$-cell halo,
and applies $s$ forward-Euler steps to that window in fast memory; each step invalidates
one more ring of the halo, and after $s$ steps exactly the tile is left, which is written
back. Memory traffic per step falls by about $s$, at the price of recomputing the halo
cells ($(b + 2s)^2 / b^2$ times the work for a $b \times b$ tile).

The result equals $s$ single steps (each re-padding the field) whenever the padding
commutes with a step: periodic sides always; mirrored (Neumann) and odd-reflected
(Dirichlet) ghost cells for the linear heat equation; for Gray–Scott, whose reaction is
nonlinear, periodic and zero-flux Neumann sides only.

The kernel slices the window in fast memory: it runs in interpret mode, but in JAX 0.10
neither GPU lowering takes it (Triton wants power-of-two loads and has no value slicing;
Mosaic GPU has no overlapping windows). See the kernels page of the docs.
"""

import functools as ft
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike

from ..grid import Grid, Neumann, Periodic, pad
from ._gray_scott import gray_scott_tendency_reference, reaction_tendencies
from ._laplacian import laplacian2d_reference
from ._pallas import (
    Launch,
    axis_weights,
    laplacian_from_shifts,
    launch_tiles,
    resolve_launch,
)

NUM_SPATIAL = 2


def _tile_laplacian(tile: Array, weights) -> tuple[Array, Array]:
    """The centre of a `(channels, X, Y)` tile (one ring smaller) and its Laplacian."""
    size_x, size_y = tile.shape[-2:]

    def shifted(offsets):
        dx, dy = offsets
        return tile[:, 1 + dx : size_x - 1 + dx, 1 + dy : size_y - 1 + dy]

    centre = shifted((0, 0))
    return centre, laplacian_from_shifts(shifted, weights, 1, centre=centre)


def heat_tile_step(tile: Array, params: Sequence, weights) -> Array:
    r"""Forward Euler for $u_t = D \nabla^2 u$: $u + (D\,\Delta t) \nabla^2 u$ (`params[0]`
    is $D\,\Delta t$)."""
    centre, laplacian = _tile_laplacian(tile, weights)
    return centre + params[0] * laplacian


def gray_scott_tile_step(tile: Array, params: Sequence, weights) -> Array:
    r"""Forward Euler for Gray–Scott; `params` is $(F, k, D_u, D_v, \Delta t)$."""
    centre, laplacian = _tile_laplacian(tile, weights)
    du, dv = reaction_tendencies(
        centre[0], centre[1], laplacian[0], laplacian[1], *(params[i] for i in range(4))
    )
    return centre + params[4] * jnp.stack([du, dv])


def temporal2d_kernel(window_ref, params_ref, out_ref, *, num_steps, tile_step, weights):
    """`num_steps` steps of `tile_step` on a window with `num_steps` halo cells per side."""
    tile = window_ref[...]
    params = [params_ref[i] for i in range(params_ref.shape[0])]
    for _ in range(num_steps):
        tile = tile_step(tile, params, weights)
    out_ref[...] = tile.astype(out_ref.dtype)


# Jitted so that each tile layout is traced and compiled once, however often it runs.
@ft.partial(jax.jit, static_argnames=("spacing", "num_steps", "tile_step", "launch"))
def _launch(padded, params, spacing, num_steps: int, tile_step: Callable, launch: Launch):
    """One launch over a `(..., channels, X + 2s, Y + 2s)` array padded with `s =
    num_steps` ghost cells; returns `(..., channels, X, Y)`."""
    kernel = ft.partial(
        temporal2d_kernel,
        num_steps=num_steps,
        tile_step=tile_step,
        weights=axis_weights(2, spacing),
    )
    return launch_tiles(
        kernel,
        padded,
        width=num_steps,
        launch=launch,
        name=f"temporal2d_{num_steps}",
        num_channels=padded.shape[-3],
        params=params,
    )


def _advance(state, grid, params, *, num_steps, steps_per_launch, tile_step, launch):
    """`num_steps` steps in launches of `steps_per_launch` (and one shorter launch for the
    remainder); `state` has its channel axis at -3."""

    def run(state, steps):
        padded = pad(state, grid, steps)
        return _launch(padded, params, grid.spacing, steps, tile_step, launch)

    full_launches, remainder = divmod(num_steps, steps_per_launch)
    state = jax.lax.fori_loop(0, full_launches, lambda _, s: run(s, steps_per_launch), state)
    return run(state, remainder) if remainder else state


def _check_settings(grid, num_steps, steps_per_launch, *, name):
    if not isinstance(grid, Grid) or grid.ndim != NUM_SPATIAL:
        raise ValueError(f"{name} needs a 2-D simlab.Grid; got {grid!r}.")
    if not isinstance(num_steps, int) or num_steps < 0:
        raise ValueError(f"{name}: num_steps must be a non-negative integer; got {num_steps!r}.")
    if not isinstance(steps_per_launch, int) or not 1 <= steps_per_launch <= min(grid.shape):
        raise ValueError(
            f"{name}: steps_per_launch must be an integer from 1 to the smallest grid axis "
            f"{min(grid.shape)} (it is the halo width); got {steps_per_launch!r}."
        )


def _checked_field(field, grid, channels: int, *, name) -> Array:
    field = jnp.asarray(field)
    expected = (channels, *grid.shape) if channels > 1 else grid.shape
    if field.shape[field.ndim - len(expected) :] != expected or field.ndim < len(expected):
        raise ValueError(
            f"{name}: the field's trailing axes must be {expected}; got shape {field.shape}."
        )
    if not jnp.issubdtype(field.dtype, jnp.floating):
        raise TypeError(f"{name} takes a floating-point field; got dtype {field.dtype}.")
    return field


def heat_steps(
    field: ArrayLike,
    grid: Grid,
    *,
    diffusivity: ArrayLike,
    dt: ArrayLike,
    num_steps: int,
    steps_per_launch: int = 4,
    block_shape: Sequence[int] | None = None,
    interpret: bool | None = None,
    backend: str | None = None,
) -> Array:
    r"""`num_steps` forward-Euler steps of the heat equation, $u \leftarrow u + \Delta t\, D
    \nabla^2 u$ (5-point Laplacian), `steps_per_launch` steps per kernel launch.

    Equal to repeated single steps (each padding the field with the grid's boundary
    conditions) for every boundary condition. Forward Euler is stable for
    $D\,\Delta t \sum_a h_a^{-2} \le 1/2$. The launches have no custom VJP: use
    `simlab.simulate` for gradients.

    **Arguments:**

    - `field`: shape `(..., nx, ny)` on the 2-D `grid` (leading axes are a batch).
    - `grid`: the [`simlab.Grid`][] with its boundary conditions.
    - `diffusivity`, `dt`: $D$ and $\Delta t$ (scalars).
    - `num_steps`: the number of steps.
    - `steps_per_launch`: steps fused per launch (the halo width); 1 is the single-step
      kernel.
    - `block_shape`, `interpret`, `backend`: as for [`simlab.kernels.laplacian2d`][].

    **Returns:** the field after `num_steps` steps, the shape of `field`.

    !!! example

        ```python
        grid = simlab.Grid((256, 256), extent=1.0, boundary="neumann")
        u = simlab.kernels.heat_steps(u0, grid, diffusivity=0.1, dt=1e-6, num_steps=64,
                                      steps_per_launch=8)
        ```
    """
    _check_settings(grid, num_steps, steps_per_launch, name="heat_steps")
    field = _checked_field(field, grid, 1, name="heat_steps")
    params = jnp.stack([jnp.asarray(diffusivity, field.dtype) * jnp.asarray(dt, field.dtype)])
    launch = resolve_launch(grid.shape, block_shape, interpret, backend, kernel="temporal2d")
    state = _advance(
        field[..., None, :, :],
        grid,
        params,
        num_steps=num_steps,
        steps_per_launch=steps_per_launch,
        tile_step=heat_tile_step,
        launch=launch,
    )
    return state[..., 0, :, :]


def gray_scott_steps(
    state: ArrayLike,
    grid: Grid,
    *,
    feed_rate: ArrayLike,
    kill_rate: ArrayLike,
    diffusivity_u: ArrayLike,
    diffusivity_v: ArrayLike,
    dt: ArrayLike,
    num_steps: int,
    steps_per_launch: int = 4,
    block_shape: Sequence[int] | None = None,
    interpret: bool | None = None,
    backend: str | None = None,
) -> Array:
    r"""`num_steps` forward-Euler steps of Gray–Scott (see
    [`simlab.kernels.gray_scott_tendency`][]), `steps_per_launch` steps per launch.

    With more than one step per launch the grid's sides must be periodic or zero-flux
    (`Neumann(0.0)`): other ghost cells do not evolve like the cells they mirror under the
    nonlinear reaction.

    **Arguments:**

    - `state`: shape `(..., 2, nx, ny)` ($u$ then $v$) on the 2-D `grid`.
    - `grid`: the [`simlab.Grid`][].
    - `feed_rate`, `kill_rate`, `diffusivity_u`, `diffusivity_v`: $F$, $k$, $D_u$, $D_v$
      (scalars).
    - `dt`: the step $\Delta t$.
    - `num_steps`, `steps_per_launch`, `block_shape`, `interpret`, `backend`: as for
      [`simlab.kernels.heat_steps`][].

    **Returns:** the state after `num_steps` steps.

    !!! example

        ```python
        grid = simlab.Grid((256, 256), extent=256.0)
        state = simlab.kernels.gray_scott_steps(
            state, grid, feed_rate=0.035, kill_rate=0.065, diffusivity_u=0.2,
            diffusivity_v=0.1, dt=1.0, num_steps=100, steps_per_launch=5,
        )
        ```
    """
    _check_settings(grid, num_steps, steps_per_launch, name="gray_scott_steps")
    state = _checked_field(state, grid, 2, name="gray_scott_steps")
    if steps_per_launch > 1 and not all(
        isinstance(side, Periodic) or side == Neumann(0.0)
        for sides in grid.boundaries
        for side in sides
    ):
        raise ValueError(
            "gray_scott_steps: more than one step per launch needs periodic or Neumann(0.0) "
            f"sides; got {grid.boundaries}. Use steps_per_launch=1 for other conditions."
        )
    values = (feed_rate, kill_rate, diffusivity_u, diffusivity_v, dt)
    params = jnp.stack([jnp.asarray(value, state.dtype) for value in values])
    launch = resolve_launch(grid.shape, block_shape, interpret, backend, kernel="temporal2d")
    return _advance(
        state,
        grid,
        params,
        num_steps=num_steps,
        steps_per_launch=steps_per_launch,
        tile_step=gray_scott_tile_step,
        launch=launch,
    )


def heat_steps_reference(field, grid, *, diffusivity, dt, num_steps):
    """[`simlab.kernels.heat_steps`][] as repeated single steps in plain `jax.numpy`."""

    def step(_, u):
        return u + diffusivity * dt * laplacian2d_reference(pad(u, grid, 1), grid.spacing)

    return jax.lax.fori_loop(0, num_steps, step, jnp.asarray(field))


def gray_scott_steps_reference(
    state, grid, *, feed_rate, kill_rate, diffusivity_u, diffusivity_v, dt, num_steps
):
    """[`simlab.kernels.gray_scott_steps`][] as repeated single steps in plain `jax.numpy`."""

    def step(_, y):
        tendency = gray_scott_tendency_reference(
            pad(y, grid, 1), grid.spacing, feed_rate, kill_rate, diffusivity_u, diffusivity_v
        )
        return y + dt * tendency

    return jax.lax.fori_loop(0, num_steps, step, jnp.asarray(state))
