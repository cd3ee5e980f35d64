r"""The momentum tendency of incompressible flow on a staggered (MAC) grid, fused: centred
conservative advection, viscosity and a body force of both face velocities in one pass,

$$
F_u = \nu \nabla^2 u - \partial_x(u u) - \partial_y(u v) + G, \qquad
F_v = \nu \nabla^2 v - \partial_x(u v) - \partial_y(v v),
$$

with $u$ on the faces normal to $x$ (`[0]`) and $v$ on the faces normal to $y$ (`[1]`),
the advective fluxes those of Harlow and Welch: $(u u)$ at the cell centres from the mean
of the two faces around each, $(u v)$ at the cell corners from the means of the two $u$
and the two $v$ faces next to each. Every value is read within one cell of its face, so
the kernel is an interior stencil of width 1 on a padded field, and the boundary
conditions live in the padding (`simlab.models.WalledNavierStokes2D` fills the ghosts of
walls and periodic axes).

Unfused, XLA reads the velocity for each shifted copy of advection and viscosity; the
kernel reads the window of both components once per tile and writes both tendencies once.
Its tangent (a `jax.custom_jvp`) is the linearisation
$\nu\nabla^2\dot{\mathbf u} + \dot\nu\nabla^2\mathbf u - \dot A(\mathbf u) + \dot G$: the
Laplacian kernel on the tangent and on the state, and the advection's Jacobian-vector
product in `jax.numpy`. Reverse mode is JAX's transpose of that: the Laplacian kernel on
the zero-padded cotangents and the transpose of the advection's linearisation.
"""

import dataclasses
import functools as ft
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike

from ._laplacian import LaplacianStencil
from ._layouts import Program, launch_tiles
from ._pallas import Launch, Plan, check_padded, checked_spacing, launch_options, plan_launch
from ._primitive import KernelLaunch
from ._reaction_diffusion import packed_parameters
from ._stencils import axis_weights, laplacian_from_shifts, laplacian_reference

NUM_SPATIAL = 2
WIDTH = 1
NUM_COMPONENTS = 2  # u, v
KERNEL = "mac_momentum"


def mac_advection(u_at: Callable, v_at: Callable, spacing: Sequence[float]):
    r"""The centred conservative advection $(\nabla\cdot(\mathbf u u),\ \nabla\cdot(\mathbf
    u v))$ on the faces, from `u_at(offsets)` and `v_at(offsets)`, which return the block of
    each component moved by `offsets` (one integer per axis, each in -1..1). Kernels pass
    loads from a window, the references slices of a padded array, so both evaluate the
    same expression."""
    hx, hy = spacing
    u, v = u_at((0, 0)), v_at((0, 0))
    # u v at the corners north-east of face u[i, j] (x-face i + 1, y-face j + 1), of the
    # face below it and of the face to its west.
    corner = 0.25 * (u + u_at((0, 1))) * (v + v_at((1, 0)))
    corner_south = 0.25 * (u_at((0, -1)) + u) * (v_at((0, -1)) + v_at((1, -1)))
    corner_west = 0.25 * (u_at((-1, 0)) + u_at((-1, 1))) * (v_at((-1, 0)) + v)
    advection_u = ((u + u_at((1, 0))) ** 2 - (u_at((-1, 0)) + u) ** 2) / (4 * hx) + (
        corner - corner_south
    ) / hy
    advection_v = (corner - corner_west) / hx + (
        (v + v_at((0, 1))) ** 2 - (v_at((0, -1)) + v) ** 2
    ) / (4 * hy)
    return advection_u, advection_v


def tendencies(advection, laplacians, viscosity, body_force):
    r"""$\nu\nabla^2 u - A_u + G$ and $\nu\nabla^2 v - A_v$ (shared by the kernel and the
    references, so all evaluate the same expression)."""
    (advection_u, advection_v), (laplacian_u, laplacian_v) = advection, laplacians
    return (
        viscosity * laplacian_u - advection_u + body_force,
        viscosity * laplacian_v - advection_v,
    )


def mac_momentum_kernel(program: Program, params, *, spacing, weights):
    """One tile of both tendencies from the program's window of $(u, v)$ (one halo cell
    per side); `params` holds $(\\nu, G)$. Each shifted block is loaded once."""
    block = program.tiles.block

    def component(c):
        @ft.cache
        def shifted(offsets):
            return program.read((c,), tuple(WIDTH + d for d in offsets), block)

        return shifted

    u_at, v_at = component(0), component(1)
    laplacians = [laplacian_from_shifts(at, weights, WIDTH) for at in (u_at, v_at)]
    viscosity, body_force = params
    result = tendencies(mac_advection(u_at, v_at, spacing), laplacians, viscosity, body_force)
    for c, tendency in enumerate(result):
        program.store((c,), tendency)


# Jitted so that each tile layout is traced once, however often it runs.
@ft.partial(jax.jit, static_argnames=("spacing", "plan"))
def _launch(padded: Array, params: Array, spacing, plan: Plan) -> Array:
    kernel = ft.partial(mac_momentum_kernel, spacing=spacing, weights=axis_weights(2, spacing))
    return launch_tiles(
        kernel,
        padded,
        width=WIDTH,
        plan=plan,
        name=KERNEL,
        num_channels=NUM_COMPONENTS,
        params=params,
    )


@dataclasses.dataclass(frozen=True)
class MacMomentumLaunch(KernelLaunch):
    """The fused launch, `launch(padded, params)`: the primal of `_mac_momentum` (whose
    `jax.custom_jvp` gives its derivatives)."""

    spacing: tuple[float, ...]
    launch: Launch

    width = WIDTH
    num_spatial = NUM_SPATIAL

    def run(self, platform: str, padded: Array, *coefficients: Array) -> Array:
        (params,) = coefficients
        plan = plan_launch(
            self.launch,
            platform,
            KERNEL,
            tuple(n - 2 * WIDTH for n in padded.shape[-NUM_SPATIAL:]),
            width=WIDTH,
            num_channels=NUM_COMPONENTS,
            dtype=padded.dtype,
        )
        return _launch(padded, params, self.spacing, plan)


def _sliced_components(padded: Array):
    """`(u_at, v_at)` over a padded `(..., 2, nx + 2, ny + 2)` array, by slicing."""
    nx, ny = (n - 2 * WIDTH for n in padded.shape[-NUM_SPATIAL:])

    def component(c):
        def shifted(offsets):
            dx, dy = offsets
            return padded[..., c, WIDTH + dx : WIDTH + dx + nx, WIDTH + dy : WIDTH + dy + ny]

        return shifted

    return component(0), component(1)


def unfused_tendencies(padded, params, spacing, launch):
    """The tendencies with the Laplacians from the Laplacian kernel and the advection in
    `jax.numpy`: the unfused form, which JAX differentiates (the Laplacian kernel is a
    linear stencil, differentiable in both modes) and which the fused kernel's tangent is
    the linearisation of."""
    laplacians = LaplacianStencil(spacing, 2, launch)(padded)
    advection = mac_advection(*_sliced_components(padded), spacing)
    result = tendencies(advection, (laplacians[..., 0, :, :], laplacians[..., 1, :, :]), *params)
    return jnp.stack(result, axis=-3)


@ft.partial(jax.custom_jvp, nondiff_argnums=(2, 3))
def _mac_momentum(padded, params, spacing, launch):
    return MacMomentumLaunch(spacing, launch)(padded, params)


@_mac_momentum.defjvp
def _mac_momentum_jvp(spacing, launch, primals, tangents):
    out = _mac_momentum(*primals, spacing, launch)
    unfused = ft.partial(unfused_tendencies, spacing=spacing, launch=launch)
    _, tangent = jax.jvp(unfused, primals, tangents)
    return out, tangent


def _check_components(padded: Array, *, kernel: str) -> None:
    if padded.ndim < 3 or padded.shape[-3] != NUM_COMPONENTS:
        raise ValueError(
            f"{kernel} takes the face velocities (u, v) on axis -3, shape (..., 2, nx + 2, "
            f"ny + 2); got shape {padded.shape}."
        )


def mac_momentum(
    padded: Array,
    spacing: Sequence[float],
    viscosity: ArrayLike,
    body_force: ArrayLike = 0.0,
    *,
    block_shape: Sequence[int] | None = None,
    interpret: bool | None = None,
    backend: str | None = None,
) -> Array:
    r"""The momentum tendency of incompressible flow on a staggered (MAC) grid, before the
    pressure projection: centred conservative advection, the 5-point viscous term and a
    body force along $x$ of both face velocities, fused in one Pallas kernel.

    Differentiable in forward and reverse mode with respect to the velocity, the viscosity
    and the body force.

    **Arguments:**

    - `padded`: the face velocities with one ghost cell per side, shape
      `(..., 2, nx + 2, ny + 2)`: $u$ (`[..., 0, :, :]`, on the faces normal to $x$), then
      $v$. The ghosts carry the boundary conditions (as
      `simlab.models.WalledNavierStokes2D` pads them); the kernel reads the corner ghosts
      north-west of $u$ and south-east of $v$ too.
    - `spacing`: `(h_x, h_y)`.
    - `viscosity`: $\nu$ (a scalar).
    - `body_force`: $G$, a force per unit mass along $x$ (a scalar).
    - `block_shape`, `interpret`, `backend`: as for [`simlab.kernels.laplacian2d`][].

    **Returns:** the tendencies $(F_u, F_v)$, shape `(..., 2, nx, ny)`.

    !!! example

        ```python
        velocity = jax.random.normal(jax.random.key(0), (2, 16, 16))
        padded = jnp.pad(velocity, ((0, 0), (1, 1), (1, 1)), mode="wrap")  # periodic
        simlab.kernels.mac_momentum(padded, (1 / 16, 1 / 16), viscosity=0.01)
        ```
    """
    name = KERNEL
    padded = jnp.asarray(padded)
    spacing = checked_spacing(spacing, NUM_SPATIAL, kernel=name)
    check_padded(padded, NUM_SPATIAL, WIDTH, kernel=name)
    _check_components(padded, kernel=name)
    params = packed_parameters(padded.dtype, (viscosity,), (body_force,), kernel=name)
    launch = launch_options(NUM_SPATIAL, block_shape, interpret, backend)
    return _mac_momentum(padded, params, spacing, launch)


def mac_momentum_reference(
    padded: Array, spacing: Sequence[float], viscosity: ArrayLike, body_force: ArrayLike = 0.0
) -> Array:
    """[`simlab.kernels.mac_momentum`][] in plain `jax.numpy` (the XLA path)."""
    padded = jnp.asarray(padded)
    _check_components(padded, kernel="mac_momentum_reference")
    laplacians = laplacian_reference(padded, spacing, order=2)
    advection = mac_advection(*_sliced_components(padded), spacing)
    result = tendencies(
        advection, (laplacians[..., 0, :, :], laplacians[..., 1, :, :]), viscosity, body_force
    )
    return jnp.stack(result, axis=-3)
