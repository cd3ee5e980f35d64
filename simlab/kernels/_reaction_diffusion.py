r"""Reaction–diffusion, fused: the Laplacian of every field plus a pointwise reaction in
one pass,

$$
\partial_t y_c = D_c \nabla^2 y_c + R_c(y_1, \dots, y_C;\ \theta),
$$

for $C$ fields on a 2-D grid with scalar diffusivities $D_c$. The reaction $R$ is a
static callable `reaction_fn(fields, parameters) -> tendencies`, so each model keeps its
reaction term in one place (e.g. `simlab.models.GrayScott.reaction`) and a new
reaction–diffusion model needs no new kernel.

Unfused, XLA reads each field for the Laplacian and again for the reaction; the kernel
reads the window of every field once per tile and writes every tendency once. Its
tangent (a `jax.custom_jvp`) is the linearisation
$D_c \nabla^2 \dot y_c + \dot D_c \nabla^2 y_c + \dot R_c$: the Laplacian kernel on the
tangent and on the state, and the reaction's Jacobian-vector product by `jax.jvp`. Reverse
mode is JAX's transpose of that: the Laplacian kernel on the scaled, zero-padded
cotangents (the stencil is its own transpose) and the reaction's pointwise VJP.
"""

import dataclasses
import functools as ft
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike

from ._laplacian import LaplacianStencil
from ._layouts import Program, launch_tiles
from ._pallas import (
    Launch,
    Plan,
    check_padded,
    checked_spacing,
    launch_options,
    plan_launch,
)
from ._primitive import KernelLaunch
from ._stencils import axis_weights, laplacian_from_shifts, laplacian_reference

NUM_SPATIAL = 2
WIDTH = 1
INTERIOR = (Ellipsis, slice(WIDTH, -WIDTH), slice(WIDTH, -WIDTH))


def tendencies(fields, laplacians, diffusivities, parameters, reaction_fn):
    """$D_c \\nabla^2 y_c + R_c$ per field, from the fields and their Laplacians (shared by
    the kernels and the references, so all evaluate the same expression). A `reaction_fn`
    of `None` is pure diffusion."""
    diffusion = [d * lap for d, lap in zip(diffusivities, laplacians, strict=True)]
    if reaction_fn is None:
        return tuple(diffusion)
    reaction = reaction_fn(tuple(fields), tuple(parameters))
    return tuple(d + r for d, r in zip(diffusion, reaction, strict=True))


def reaction_diffusion_kernel(program: Program, params, *, num_channels, weights, reaction_fn):
    """One tile of every tendency from the program's window of the `num_channels` fields
    (one halo cell per side); `params` holds $(D_1, \\dots, D_C, \\theta_1, \\dots)$."""
    block = program.tiles.block

    def channel(c):
        return lambda offsets: program.read((c,), tuple(WIDTH + d for d in offsets), block)

    fields = [channel(c)((0, 0)) for c in range(num_channels)]
    laplacians = [
        laplacian_from_shifts(channel(c), weights, WIDTH, centre=field)
        for c, field in enumerate(fields)
    ]
    result = tendencies(
        fields, laplacians, params[:num_channels], params[num_channels:], reaction_fn
    )
    for c, tendency in enumerate(result):
        program.store((c,), tendency)


# Jitted so that each tile layout is traced once, however often it runs.
@ft.partial(jax.jit, static_argnames=("spacing", "reaction_fn", "plan"))
def _launch(padded: Array, params: Array, spacing, reaction_fn: Callable | None, plan: Plan):
    kernel = ft.partial(
        reaction_diffusion_kernel,
        num_channels=padded.shape[-3],
        weights=axis_weights(2, spacing),
        reaction_fn=reaction_fn,
    )
    return launch_tiles(
        kernel,
        padded,
        width=WIDTH,
        plan=plan,
        name="reaction_diffusion",
        num_channels=padded.shape[-3],
        params=params,
    )


@dataclasses.dataclass(frozen=True)
class ReactionDiffusionLaunch(KernelLaunch):
    """The fused launch, `launch(padded, params)`: the primal of `_reaction_diffusion`
    (whose `jax.custom_jvp` gives its derivatives)."""

    spacing: tuple[float, ...]
    reaction_fn: Callable | None
    launch: Launch

    width = WIDTH
    num_spatial = NUM_SPATIAL

    def run(self, platform: str, padded: Array, *coefficients: Array) -> Array:
        (params,) = coefficients
        plan = plan_launch(
            self.launch,
            platform,
            "reaction_diffusion",
            tuple(n - 2 * WIDTH for n in padded.shape[-NUM_SPATIAL:]),
            width=WIDTH,
            num_channels=padded.shape[-3],
            dtype=padded.dtype,
        )
        return _launch(padded, params, self.spacing, self.reaction_fn, plan)


def laplacian_tendencies(padded, params, spacing, reaction_fn, launch):
    """The tendencies with the Laplacians from the Laplacian kernel and the reaction in
    `jax.numpy`: the unfused form, which JAX differentiates (the Laplacian kernel is a
    linear stencil, differentiable in both modes) and which the fused kernel's tangent is
    the linearisation of."""
    num_channels = padded.shape[-3]
    laplacians = LaplacianStencil(spacing, 2, launch)(padded)
    interior = padded[INTERIOR]
    result = tendencies(
        [interior[..., c, :, :] for c in range(num_channels)],
        [laplacians[..., c, :, :] for c in range(num_channels)],
        [params[c] for c in range(num_channels)],
        [params[i] for i in range(num_channels, params.shape[0])],
        reaction_fn,
    )
    return jnp.stack(result, axis=-3)


@ft.partial(jax.custom_jvp, nondiff_argnums=(2, 3, 4))
def _reaction_diffusion(padded, params, spacing, reaction_fn, launch):
    return ReactionDiffusionLaunch(spacing, reaction_fn, launch)(padded, params)


@_reaction_diffusion.defjvp
def _reaction_diffusion_jvp(spacing, reaction_fn, launch, primals, tangents):
    # The linearisation D_c lap(dy_c) + dD_c lap(y_c) + dR: the Laplacian kernel on the
    # tangent, and the reaction's Jacobian-vector product. Reverse mode transposes it: the
    # same stencil on the scaled, zero-padded cotangents, and the reaction's VJP.
    out = _reaction_diffusion(*primals, spacing, reaction_fn, launch)
    unfused = ft.partial(
        laplacian_tendencies, spacing=spacing, reaction_fn=reaction_fn, launch=launch
    )
    _, tangent = jax.jvp(unfused, primals, tangents)
    return out, tangent


def packed_parameters(
    dtype, diffusivities: Sequence[ArrayLike], parameters: Sequence[ArrayLike], *, kernel: str
) -> Array:
    """The scalars a launch passes to every program, in one vector:
    $(D_1, \\dots, D_C, \\theta_1, \\dots)$ (and a caller's extras before them)."""
    values = (*diffusivities, *parameters)
    for value in values:
        if jnp.ndim(value) != 0:
            raise ValueError(
                f"{kernel}: coefficients and parameters must be scalars (the fused kernel does "
                f"not take coefficient fields; use a model with impl='xla'); got shape "
                f"{jnp.shape(value)}."
            )
    return jnp.stack([jnp.asarray(value, dtype) for value in values])


def check_channels(state: Array, diffusivities: Sequence, *, kernel: str) -> None:
    num_channels = len(diffusivities)
    if num_channels < 1 or state.ndim < 3 or state.shape[-3] != num_channels:
        raise ValueError(
            f"{kernel} takes one diffusivity per field and the fields on axis -3, shape "
            f"(..., {num_channels}, nx, ny); got {num_channels} diffusivities and shape "
            f"{state.shape}."
        )


def reaction_diffusion(
    padded: Array,
    spacing: Sequence[float],
    diffusivities: Sequence[ArrayLike],
    parameters: Sequence[ArrayLike] = (),
    *,
    reaction_fn: Callable | None,
    block_shape: Sequence[int] | None = None,
    interpret: bool | None = None,
    backend: str | None = None,
) -> Array:
    r"""The reaction–diffusion right-hand side $D_c \nabla^2 y_c + R_c(y; \theta)$ of $C$
    fields on a 2-D grid, fused in one Pallas kernel (5-point Laplacian).

    Differentiable in forward and reverse mode with respect to the fields, the
    diffusivities and the reaction's parameters (`reaction_fn` is differentiated by JAX).

    **Arguments:**

    - `padded`: the fields with one ghost cell per side, shape `(..., C, nx + 2, ny + 2)`
      (e.g. `simlab.grid.pad(state, grid, 1)`).
    - `spacing`: `(h_x, h_y)`.
    - `diffusivities`: $D_1, \dots, D_C$ (scalars).
    - `parameters`: the reaction's scalar parameters $\theta$.
    - `reaction_fn`: `reaction_fn(fields, parameters) -> tendencies`, pointwise, taking
      and returning tuples of `C` arrays (`parameters` arrives as a tuple of scalars);
      `None` for pure diffusion. It is static: pass a module-level function (not a new
      lambda per call) so that each layout compiles once.
    - `block_shape`, `interpret`, `backend`: as for [`simlab.kernels.laplacian2d`][].

    **Returns:** the tendencies, shape `(..., C, nx, ny)`.

    !!! example

        ```python
        padded = simlab.grid.pad(state, model.grid, 1)
        simlab.kernels.reaction_diffusion(
            padded,
            model.grid.spacing,
            (model.diffusivity_u, model.diffusivity_v),
            (model.feed_rate, model.kill_rate),
            reaction_fn=simlab.models.GrayScott.reaction,
        )  # == model(t, state, args) with scalar diffusivities
        ```
    """
    name = "reaction_diffusion"
    padded = jnp.asarray(padded)
    spacing = checked_spacing(spacing, NUM_SPATIAL, kernel=name)
    check_padded(padded, NUM_SPATIAL, WIDTH, kernel=name)
    check_channels(padded, diffusivities, kernel=name)
    params = packed_parameters(padded.dtype, diffusivities, parameters, kernel=name)
    launch = launch_options(NUM_SPATIAL, block_shape, interpret, backend)
    return _reaction_diffusion(padded, params, spacing, reaction_fn, launch)


def reaction_diffusion_reference(
    padded: Array,
    spacing: Sequence[float],
    diffusivities: Sequence[ArrayLike],
    parameters: Sequence[ArrayLike] = (),
    *,
    reaction_fn: Callable | None,
) -> Array:
    """[`simlab.kernels.reaction_diffusion`][] in plain `jax.numpy` (the XLA path)."""
    padded = jnp.asarray(padded)
    interior = padded[INTERIOR]
    laplacians = laplacian_reference(padded, spacing, order=2)
    channels = range(padded.shape[-3])
    result = tendencies(
        [interior[..., c, :, :] for c in channels],
        [laplacians[..., c, :, :] for c in channels],
        diffusivities,
        parameters,
        reaction_fn,
    )
    return jnp.stack(result, axis=-3)
