r"""The Gray–Scott vector field, fused: both Laplacians and the reactions in one pass.

$$
\begin{aligned}
\partial_t u &= D_u \nabla^2 u - u v^2 + F (1 - u), \\
\partial_t v &= D_v \nabla^2 v + u v^2 - (F + k) v .
\end{aligned}
$$

Unfused, XLA reads each field for the Laplacian and again for the reaction terms; the
kernel reads the window of $u$ and $v$ once per tile and writes both tendencies once.
"""

import functools as ft
from collections.abc import Sequence

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jaxtyping import Array, ArrayLike

from ._laplacian import _launch as _laplacian_launch
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
WIDTH = 1


def reaction_tendencies(u, v, lap_u, lap_v, feed_rate, kill_rate, diffusivity_u, diffusivity_v):
    """The right-hand side from the fields and their Laplacians (shared by kernel and
    reference, so both evaluate the same expression)."""
    reaction = u * v * v
    du = diffusivity_u * lap_u - reaction + feed_rate * (1 - u)
    dv = diffusivity_v * lap_v + reaction - (feed_rate + kill_rate) * v
    return du, dv


def gray_scott_kernel(window_ref, params_ref, out_ref, *, block_shape, weights):
    """One tile of both tendencies. `window_ref` is `(2, bx + 2, by + 2)` (u, v with their
    halo); `params_ref` holds $(F, k, D_u, D_v)$."""
    bx, by = block_shape

    def channel(c):
        return lambda offsets: window_ref[c, pl.ds(1 + offsets[0], bx), pl.ds(1 + offsets[1], by)]

    u_shifted, v_shifted = channel(0), channel(1)
    u, v = u_shifted((0, 0)), v_shifted((0, 0))
    lap_u = laplacian_from_shifts(u_shifted, weights, WIDTH, centre=u)
    lap_v = laplacian_from_shifts(v_shifted, weights, WIDTH, centre=v)
    du, dv = reaction_tendencies(
        u, v, lap_u, lap_v, params_ref[0], params_ref[1], params_ref[2], params_ref[3]
    )
    out_ref[0, :, :] = du.astype(out_ref.dtype)
    out_ref[1, :, :] = dv.astype(out_ref.dtype)


# Jitted so that each tile layout is traced and compiled once, however often it runs.
@ft.partial(jax.jit, static_argnames=("spacing", "launch"))
def _launch(padded: Array, params: Array, spacing, launch: Launch) -> Array:
    kernel = ft.partial(
        gray_scott_kernel, block_shape=launch.block_shape, weights=axis_weights(2, spacing)
    )
    return launch_tiles(
        kernel,
        padded,
        width=WIDTH,
        launch=launch,
        name="gray_scott",
        num_channels=2,
        params=params,
    )


@ft.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _gray_scott(padded, params, spacing, launch):
    return _launch(padded, params, spacing, launch)


def _gray_scott_fwd(padded, params, spacing, launch):
    return _launch(padded, params, spacing, launch), (padded, params)


def _gray_scott_bwd(spacing, launch, residuals, cotangent):
    padded, params = residuals
    feed, kill, diffusivity_u, diffusivity_v = params
    interior = (Ellipsis, slice(WIDTH, -WIDTH), slice(WIDTH, -WIDTH))
    u, v = padded[interior][..., 0, :, :], padded[interior][..., 1, :, :]
    g_u, g_v = cotangent[..., 0, :, :], cotangent[..., 1, :, :]
    # Diffusion: the transposed (same) stencil on the scaled, zero-padded cotangents.
    scaled = jnp.stack([diffusivity_u * g_u, diffusivity_v * g_v], axis=-3)
    g_padded = _laplacian_launch(zero_pad(scaled, 2 * WIDTH, NUM_SPATIAL), spacing, 2, launch)
    # Reaction: pointwise, on the interior cells only.
    g_reaction_u = -g_u * (v * v + feed) + g_v * v * v
    g_reaction_v = 2 * u * v * (g_v - g_u) - g_v * (feed + kill)
    g_padded = g_padded.at[interior].add(jnp.stack([g_reaction_u, g_reaction_v], axis=-3))
    laplacians = _laplacian_launch(padded, spacing, 2, launch)
    g_params = jnp.stack(
        [
            jnp.sum(g_u * (1 - u) - g_v * v),
            -jnp.sum(g_v * v),
            jnp.sum(g_u * laplacians[..., 0, :, :]),
            jnp.sum(g_v * laplacians[..., 1, :, :]),
        ]
    )
    return g_padded, g_params.astype(params.dtype)


_gray_scott.defvjp(_gray_scott_fwd, _gray_scott_bwd)


def gray_scott_tendency(
    padded: Array,
    spacing: Sequence[float],
    feed_rate: ArrayLike,
    kill_rate: ArrayLike,
    diffusivity_u: ArrayLike,
    diffusivity_v: ArrayLike,
    *,
    block_shape: Sequence[int] | None = None,
    interpret: bool | None = None,
    backend: str | None = None,
) -> Array:
    r"""The Gray–Scott right-hand side $(\partial_t u, \partial_t v)$ on a 2-D grid, fused in
    one Pallas kernel.

    Differentiable in reverse mode with respect to the field and all four parameters
    (the backward pass runs the Laplacian stencil on the cotangents); not in forward mode.

    **Arguments:**

    - `padded`: the state with one ghost cell per side, shape `(..., 2, nx + 2, ny + 2)`
      ($u$ then $v$; e.g. `simlab.grid.pad(state, grid, 1)`).
    - `spacing`: `(h_x, h_y)`.
    - `feed_rate`, `kill_rate`: $F$, $k$ (scalars).
    - `diffusivity_u`, `diffusivity_v`: $D_u$, $D_v$ (scalars).
    - `block_shape`, `interpret`, `backend`: as for [`simlab.kernels.laplacian2d`][].

    **Returns:** the tendencies, shape `(..., 2, nx, ny)`; the same as a
    `simlab.models.GrayScott` vector field with scalar diffusivities.

    !!! example

        ```python
        padded = simlab.grid.pad(state, model.grid, 1)
        simlab.kernels.gray_scott_tendency(padded, model.grid.spacing, model.feed_rate,
                                           model.kill_rate, model.diffusivity_u,
                                           model.diffusivity_v)
        ```
    """
    padded = jnp.asarray(padded)
    spacing = checked_spacing(spacing, NUM_SPATIAL, kernel="gray_scott_tendency")
    check_padded(padded, NUM_SPATIAL, WIDTH, kernel="gray_scott_tendency")
    if padded.ndim < 3 or padded.shape[-3] != 2:
        raise ValueError(
            "gray_scott_tendency takes the state (u, v) on axis -3, shape (..., 2, nx + 2, "
            f"ny + 2); got shape {padded.shape}."
        )
    params = _parameters(padded.dtype, feed_rate, kill_rate, diffusivity_u, diffusivity_v)
    interior = tuple(n - 2 * WIDTH for n in padded.shape[-NUM_SPATIAL:])
    launch = resolve_launch(interior, block_shape, interpret, backend, kernel="gray_scott")
    return _gray_scott(padded, params, spacing, launch)


def _parameters(dtype, *values) -> Array:
    names = ("feed_rate", "kill_rate", "diffusivity_u", "diffusivity_v")
    for name, value in zip(names, values, strict=True):
        if jnp.ndim(value) != 0:
            raise ValueError(
                f"gray_scott_tendency: {name} must be a scalar (the fused kernel does not take "
                f"coefficient fields; use the model with impl='xla'); got shape "
                f"{jnp.shape(value)}."
            )
    return jnp.stack([jnp.asarray(value, dtype) for value in values])


def gray_scott_tendency_reference(
    padded: Array,
    spacing: Sequence[float],
    feed_rate: ArrayLike,
    kill_rate: ArrayLike,
    diffusivity_u: ArrayLike,
    diffusivity_v: ArrayLike,
) -> Array:
    """[`simlab.kernels.gray_scott_tendency`][] in plain `jax.numpy` (the XLA path)."""
    padded = jnp.asarray(padded)
    interior = padded[..., WIDTH:-WIDTH, WIDTH:-WIDTH]
    laplacians = laplacian_reference(padded, spacing, order=2)
    du, dv = reaction_tendencies(
        interior[..., 0, :, :],
        interior[..., 1, :, :],
        laplacians[..., 0, :, :],
        laplacians[..., 1, :, :],
        feed_rate,
        kill_rate,
        diffusivity_u,
        diffusivity_v,
    )
    return jnp.stack([du, dv], axis=-3)
