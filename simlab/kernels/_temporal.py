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
(Dirichlet) ghost cells for the linear heat equation; for a nonlinear reaction (such as
Gray–Scott's), periodic and zero-flux Neumann sides only.

The field is padded by the caller's `pad_fn(field, width)` (e.g. `simlab.grid.pad` with a
grid's boundary conditions), so the kernels stay plain array code.

Both modes of autodiff go through the launches. Without a reaction a launch is linear in
the field, the symmetric stencil $(\delta + \Delta t\, D \nabla^2)^s$, so it is a
`LinearStencil`: its tangent is the same launch on the tangent, its transpose the same
launch on the zero-padded cotangent. With a reaction, the launch has a `jax.custom_jvp`
whose tangent linearises its $s$ steps one at a time with the Laplacian kernel (the
intermediate states are recomputed), and reverse mode transposes that linearisation.

Where the state lives between the steps of a launch is up to the target (see
`simlab.kernels._layouts`): in registers, sliced one ring smaller per step, in the
interpreter; in rotated registers on a TPU; in shared memory with Mosaic GPU; in a
per-program scratch buffer with Triton, which can neither slice nor shift registers.
"""

import dataclasses
import functools as ft
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike

from ._laplacian import LaplacianStencil
from ._layouts import Program, launch_tiles
from ._linear import LinearStencil
from ._pallas import (
    Launch,
    Plan,
    checked_spacing,
    launch_options,
    plan_launch,
)
from ._primitive import KernelLaunch
from ._reaction_diffusion import (
    INTERIOR,
    check_channels,
    laplacian_tendencies,
    packed_parameters,
    reaction_diffusion_reference,
    tendencies,
)
from ._stencils import axis_weights, laplacian_from_shifts

NUM_SPATIAL = 2


def euler_step(read: Callable, num_channels: int, params: Sequence, weights, reaction_fn):
    r"""One forward-Euler step, $y + \Delta t\,(D_c \nabla^2 y_c + R_c)$, per channel, from
    `read(c, offsets)`: channel `c` of the state one cell further on plus `offsets` (so
    the result starts one ring in). `params` $= (\Delta t, D_1, \dots, D_C, \theta_1,
    \dots)$."""
    centres = [read(c, (0, 0)) for c in range(num_channels)]
    laplacians = [
        laplacian_from_shifts(ft.partial(read, c), weights, 1, centre=centre)
        for c, centre in enumerate(centres)
    ]
    result = tendencies(
        centres,
        laplacians,
        params[1 : 1 + num_channels],
        params[1 + num_channels :],
        reaction_fn,
    )
    return [centre + params[0] * r for centre, r in zip(centres, result, strict=True)]


def temporal2d_kernel(program: Program, params, *, num_channels, num_steps, reaction_fn, weights):
    """`num_steps` steps on a window with `num_steps` halo cells per side; the state
    between steps is kept as the program's target keeps it."""
    for step in range(num_steps):
        region = program.step_shape(step)

        def read(c, offsets, region=region):
            return program.read((c,), tuple(1 + d for d in offsets), region)

        state = euler_step(read, num_channels, params, weights, reaction_fn)
        if step < num_steps - 1:
            program.keep(state)
    for c, value in enumerate(state):
        program.store((c,), value)


# Jitted so that each tile layout is traced once, however often it runs.
@ft.partial(jax.jit, static_argnames=("spacing", "num_steps", "reaction_fn", "plan"))
def _launch(padded, params, spacing, num_steps: int, reaction_fn: Callable | None, plan: Plan):
    """One launch over a `(..., C, X + 2s, Y + 2s)` array padded with `s = num_steps`
    ghost cells; returns `(..., C, X, Y)`."""
    kernel = ft.partial(
        temporal2d_kernel,
        num_channels=padded.shape[-3],
        num_steps=num_steps,
        reaction_fn=reaction_fn,
        weights=axis_weights(2, spacing),
    )
    return launch_tiles(
        kernel,
        padded,
        width=num_steps,
        plan=plan,
        name=f"temporal2d_{num_steps}",
        num_channels=padded.shape[-3],
        params=params,
    )


def _run(launch: Launch, platform, padded, params, spacing, num_steps, reaction_fn):
    """One launch of `num_steps` steps as laid out for `platform`."""
    plan = plan_launch(
        launch,
        platform,
        "temporal2d",
        tuple(n - 2 * num_steps for n in padded.shape[-NUM_SPATIAL:]),
        width=num_steps,
        num_channels=padded.shape[-3],
        dtype=padded.dtype,
    )
    return _launch(padded, params, spacing, num_steps, reaction_fn, plan)


@dataclasses.dataclass(frozen=True)
class HeatStepsStencil(LinearStencil):
    r"""One reaction-free launch as a linear stencil: `num_steps` steps $u_c \leftarrow
    (1 + a_c \nabla^2) u_c$, $a_c = \Delta t\, D_c$, on a field padded with `num_steps`
    ghost cells; called as `stencil(padded, params)` with `params` $= (\Delta t, D_1,
    \dots)$.

    On the valid region the launch is the stencil $(\delta + a_c \nabla^2)^{s}$, a power
    of the symmetric 5-point stencil, so it is linear in the field with itself as
    transpose (see `simlab.kernels._linear`); its derivative in $a_c$ is
    $s \nabla^2 (\delta + a_c \nabla^2)^{s - 1}$ (the factors commute)."""

    spacing: tuple[float, ...]
    num_steps: int
    launch: Launch

    @property
    def width(self) -> int:
        return self.num_steps

    @property
    def num_spatial(self) -> int:
        return NUM_SPATIAL

    def run(self, platform: str, padded: Array, *coefficients: Array) -> Array:
        (params,) = coefficients
        return _run(self.launch, platform, padded, params, self.spacing, self.num_steps, None)

    def coefficient_tangent(
        self, padded: Array, coefficients: Sequence[Array], tangents: Sequence[Array]
    ) -> Array:
        (params,), (params_tangent,) = coefficients, tangents
        num_channels = padded.shape[-3]
        diffusivities = params[1 : 1 + num_channels]
        # d(dt D_c) = d(dt) D_c + dt dD_c, per field.
        rate_tangent = (
            params_tangent[0] * diffusivities + params[0] * params_tangent[1 : 1 + num_channels]
        )
        previous = padded
        if self.num_steps > 1:
            previous = dataclasses.replace(self, num_steps=self.num_steps - 1)(padded, params)
        laplacian = LaplacianStencil(self.spacing, 2, self.launch)(previous)
        rate_tangent = rate_tangent.reshape((1,) * (laplacian.ndim - 3) + (num_channels, 1, 1))
        return self.num_steps * rate_tangent * laplacian


def window_steps(padded, params, spacing, num_steps, reaction_fn, launch):
    """What one launch computes, as `num_steps` steps on the whole padded array, each one
    ring smaller, with the Laplacian kernel and the reaction in `jax.numpy`: a form JAX
    differentiates in both modes (see `laplacian_tendencies`)."""
    for _ in range(num_steps):
        tendency = laplacian_tendencies(padded, params[1:], spacing, reaction_fn, launch)
        padded = padded[INTERIOR] + params[0] * tendency
    return padded


@dataclasses.dataclass(frozen=True)
class ReactionStepsLaunch(KernelLaunch):
    """One launch of `num_steps` steps with a reaction, `launch(padded, params)`: the
    primal of `_reaction_steps` (whose `jax.custom_jvp` gives its derivatives)."""

    spacing: tuple[float, ...]
    num_steps: int
    reaction_fn: Callable
    launch: Launch

    num_spatial = NUM_SPATIAL

    @property
    def width(self) -> int:
        return self.num_steps

    def run(self, platform: str, padded: Array, *coefficients: Array) -> Array:
        (params,) = coefficients
        return _run(
            self.launch, platform, padded, params, self.spacing, self.num_steps, self.reaction_fn
        )


@ft.partial(jax.custom_jvp, nondiff_argnums=(2, 3, 4, 5))
def _reaction_steps(padded, params, spacing, num_steps, reaction_fn, launch):
    return ReactionStepsLaunch(spacing, num_steps, reaction_fn, launch)(padded, params)


@_reaction_steps.defjvp
def _reaction_steps_jvp(spacing, num_steps, reaction_fn, launch, primals, tangents):
    # The tangent of the launch's steps, taken step by step: the intermediate states are
    # recomputed (by the Laplacian kernel), and each step's tangent is the linearised
    # reaction-diffusion step. Reverse mode transposes that linearisation.
    out = _reaction_steps(*primals, spacing, num_steps, reaction_fn, launch)
    steps = ft.partial(
        window_steps,
        spacing=spacing,
        num_steps=num_steps,
        reaction_fn=reaction_fn,
        launch=launch,
    )
    _, tangent = jax.jvp(steps, primals, tangents)
    return out, tangent


def _launch_steps(padded, params, spacing, num_steps, reaction_fn, launch):
    """One differentiable launch: linear (with its own transpose) without a reaction."""
    if reaction_fn is None:
        return HeatStepsStencil(spacing, num_steps, launch)(padded, params)
    return _reaction_steps(padded, params, spacing, num_steps, reaction_fn, launch)


def _checked_state(state, diffusivities, spacing, num_steps, steps_per_launch, *, name):
    state = jnp.asarray(state)
    check_channels(state, diffusivities, kernel=name)
    if not jnp.issubdtype(state.dtype, jnp.floating):
        raise TypeError(f"{name} takes a floating-point field; got dtype {state.dtype}.")
    spacing = checked_spacing(spacing, NUM_SPATIAL, kernel=name)
    if not isinstance(num_steps, int) or num_steps < 0:
        raise ValueError(f"{name}: num_steps must be a non-negative integer; got {num_steps!r}.")
    smallest = min(state.shape[-NUM_SPATIAL:])
    if not isinstance(steps_per_launch, int) or not 1 <= steps_per_launch <= smallest:
        raise ValueError(
            f"{name}: steps_per_launch must be an integer from 1 to the smallest grid axis "
            f"{smallest} (it is the halo width); got {steps_per_launch!r}."
        )
    return state, spacing


def _check_pad_fn(pad_fn, state, widths, *, name, noun):
    """A ValueError, naming the shape expected, unless `pad_fn(state, width)` adds `width`
    cells on each side of the two trailing axes of `state` (and keeps its dtype) for every
    width in `widths`: checked on shapes alone, before a launch is traced."""
    abstract = jax.ShapeDtypeStruct(state.shape, state.dtype)
    for width in sorted(set(widths)):
        returned = jax.eval_shape(lambda y, width=width: pad_fn(y, width), abstract)
        expected = (
            *state.shape[:-NUM_SPATIAL],
            *(n + 2 * width for n in state.shape[-NUM_SPATIAL:]),
        )
        if not isinstance(returned, jax.ShapeDtypeStruct):
            got = f"a {type(returned).__name__}"
        elif returned.shape != expected:
            got = f"shape {returned.shape}"
        elif returned.dtype != state.dtype:
            got = f"dtype {returned.dtype} (expected {state.dtype})"
        else:
            continue
        raise ValueError(
            f"{name}: pad_fn({noun}, {width}) on a {noun} of shape {state.shape} must return "
            f"shape {expected} ({width} ghost cells on each side of the two trailing axes); "
            f"it returned {got}. Pad by the width it is given, e.g. pad_fn=lambda y, w: "
            "simlab.grid.pad(y, grid, w)."
        )


def reaction_diffusion_steps(
    state: ArrayLike,
    spacing: Sequence[float],
    *,
    pad_fn: Callable[[Array, int], Array],
    diffusivities: Sequence[ArrayLike],
    parameters: Sequence[ArrayLike] = (),
    reaction_fn: Callable | None,
    dt: ArrayLike,
    num_steps: int,
    steps_per_launch: int = 4,
    block_shape: Sequence[int] | None = None,
    interpret: bool | None = None,
    backend: str | None = None,
) -> Array:
    r"""`num_steps` forward-Euler steps of reaction–diffusion, $y \leftarrow y + \Delta t\,
    (D_c \nabla^2 y_c + R_c(y; \theta))$ (see [`simlab.kernels.reaction_diffusion`][]),
    `steps_per_launch` steps per kernel launch.

    Equal to repeated single steps (each padding the state with `pad_fn`) when the ghost
    cells evolve like the cells they copy: always for periodic sides; for a nonlinear
    reaction with more than one step per launch, only periodic and zero-flux
    (`Neumann(0.0)`) sides.

    Differentiable in forward and reverse mode with respect to the state, `dt`, the
    diffusivities and the parameters. Without a reaction a launch is linear in the
    field, so its tangent is the same launch on the tangent (and its transpose the same
    launch on the zero-padded cotangent); with one, the tangent is taken one step at a
    time with the Laplacian kernel, which recomputes the launch's intermediate states.

    **Arguments:**

    - `state`: shape `(..., C, nx, ny)`; leading axes are a batch.
    - `spacing`: `(h_x, h_y)`.
    - `pad_fn`: `pad_fn(state, width)` adds `width` ghost cells per side of the two
      trailing axes, e.g. `lambda y, w: simlab.grid.pad(y, grid, w)`.
    - `diffusivities`, `parameters`, `reaction_fn`: as for
      [`simlab.kernels.reaction_diffusion`][].
    - `dt`: the step $\Delta t$.
    - `num_steps`: the number of steps.
    - `steps_per_launch`: steps fused per launch (the halo width); 1 is the single-step
      kernel.
    - `block_shape`, `interpret`, `backend`: as for [`simlab.kernels.laplacian2d`][].

    **Returns:** the state after `num_steps` steps.

    !!! example

        ```python
        grid = simlab.Grid((256, 256), extent=256.0)
        state = simlab.kernels.reaction_diffusion_steps(
            state, grid.spacing, pad_fn=lambda y, w: simlab.grid.pad(y, grid, w),
            diffusivities=(0.2, 0.1), parameters=(0.035, 0.065),
            reaction_fn=simlab.models.GrayScott.reaction, dt=1.0, num_steps=100,
            steps_per_launch=5,
        )
        ```
    """
    return _steps(
        state,
        spacing,
        pad_fn=pad_fn,
        diffusivities=diffusivities,
        parameters=parameters,
        reaction_fn=reaction_fn,
        dt=dt,
        num_steps=num_steps,
        steps_per_launch=steps_per_launch,
        block_shape=block_shape,
        interpret=interpret,
        backend=backend,
        name="reaction_diffusion_steps",
        noun="state",
    )


def _steps(
    state,
    spacing,
    *,
    pad_fn,
    diffusivities,
    parameters,
    reaction_fn,
    dt,
    num_steps,
    steps_per_launch,
    block_shape,
    interpret,
    backend,
    name,
    noun,
):
    """`reaction_diffusion_steps`, its errors naming the kernel called (`name`) and what it
    steps (`noun`)."""
    state, spacing = _checked_state(
        state, diffusivities, spacing, num_steps, steps_per_launch, name=name
    )
    params = packed_parameters(state.dtype, (dt, *diffusivities), parameters, kernel=name)
    launch = launch_options(NUM_SPATIAL, block_shape, interpret, backend)

    def run(state, steps):
        return _launch_steps(pad_fn(state, steps), params, spacing, steps, reaction_fn, launch)

    full_launches, remainder = divmod(num_steps, steps_per_launch)
    widths = ([steps_per_launch] if full_launches else []) + ([remainder] if remainder else [])
    _check_pad_fn(pad_fn, state, widths, name=name, noun=noun)
    state = jax.lax.fori_loop(0, full_launches, lambda _, s: run(s, steps_per_launch), state)
    return run(state, remainder) if remainder else state


def heat_steps(
    field: ArrayLike,
    spacing: Sequence[float],
    *,
    pad_fn: Callable[[Array, int], Array],
    diffusivity: ArrayLike,
    dt: ArrayLike,
    num_steps: int,
    steps_per_launch: int = 4,
    block_shape: Sequence[int] | None = None,
    interpret: bool | None = None,
    backend: str | None = None,
) -> Array:
    r"""`num_steps` forward-Euler steps of the heat equation, $u \leftarrow u + \Delta t\, D
    \nabla^2 u$ (5-point Laplacian), `steps_per_launch` steps per kernel launch: the
    reaction-free case of [`simlab.kernels.reaction_diffusion_steps`][].

    Equal to repeated single steps for mirrored, odd-reflected and periodic ghost cells
    (every `simlab.Grid` boundary condition). Forward Euler is stable for
    $D\,\Delta t \sum_a h_a^{-2} \le 1/2$. Differentiable in forward and reverse mode
    with respect to the field, `diffusivity` and `dt`: the tangent of a launch is the same
    launch on the tangent (plus the derivative in $\Delta t\, D$).

    **Arguments:**

    - `field`: shape `(..., nx, ny)` (leading axes are a batch).
    - `spacing`, `pad_fn`, `dt`, `num_steps`, `steps_per_launch`, `block_shape`,
      `interpret`, `backend`: as for [`simlab.kernels.reaction_diffusion_steps`][].
    - `diffusivity`: $D$ (a scalar).

    **Returns:** the field after `num_steps` steps, the shape of `field`.

    !!! example

        ```python
        grid = simlab.Grid((256, 256), extent=1.0, boundary="neumann")
        u = simlab.kernels.heat_steps(
            u0, grid.spacing, pad_fn=lambda u, w: simlab.grid.pad(u, grid, w),
            diffusivity=0.1, dt=1e-6, num_steps=64, steps_per_launch=8,
        )
        ```
    """
    return _as_heat(
        _steps,
        field,
        diffusivity,
        spacing=spacing,
        pad_fn=pad_fn,
        parameters=(),
        dt=dt,
        num_steps=num_steps,
        steps_per_launch=steps_per_launch,
        block_shape=block_shape,
        interpret=interpret,
        backend=backend,
        name="heat_steps",
        noun="field",
    )


def _as_heat(steps_fn: Callable, field, diffusivity, **settings) -> Array:
    """`steps_fn` (a reaction–diffusion stepper) on `field` as one field without reaction."""
    state = steps_fn(
        jnp.asarray(field)[..., None, :, :],
        diffusivities=(diffusivity,),
        reaction_fn=None,
        **settings,
    )
    return state[..., 0, :, :]


def reaction_diffusion_steps_reference(
    state, spacing, *, pad_fn, diffusivities, parameters=(), reaction_fn, dt, num_steps
):
    """[`simlab.kernels.reaction_diffusion_steps`][] as repeated single steps in plain
    `jax.numpy`."""

    def step(_, y):
        tendency = reaction_diffusion_reference(
            pad_fn(y, 1), spacing, diffusivities, parameters, reaction_fn=reaction_fn
        )
        return y + dt * tendency

    return jax.lax.fori_loop(0, num_steps, step, jnp.asarray(state))


def heat_steps_reference(field, spacing, *, pad_fn, diffusivity, dt, num_steps):
    """[`simlab.kernels.heat_steps`][] as repeated single steps in plain `jax.numpy`."""
    return _as_heat(
        reaction_diffusion_steps_reference,
        field,
        diffusivity,
        spacing=spacing,
        pad_fn=pad_fn,
        dt=dt,
        num_steps=num_steps,
    )
