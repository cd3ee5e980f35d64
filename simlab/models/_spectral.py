"""Pseudo-spectral models on periodic grids: stiff linear operators, mild nonlinearities.

Each is a final [`AbstractSpectralGridModel`][simlab.models.AbstractSpectralGridModel]: its
linear part is a Fourier symbol (integrated exactly by ETDRK4, implicitly by IMEX) and its
nonlinearity is evaluated pseudo-spectrally with dealiasing. The state is the real field,
shape `grid.shape`; the grid must be periodic on every axis.
"""

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..grid import Grid
from ..grid._spectral import (
    apply_symbol,
    check_periodic,
    dealiasing_mask,
    fourier_transform,
    inverse_fourier_transform,
    spectral_gradient,
    squared_wavenumber,
    wavenumbers,
)
from ._base import parameter
from ._split import AbstractSpectralGridModel


def _largest(value) -> Array:
    return jnp.max(jnp.abs(jnp.asarray(value)))  # traced when value is


def _check_spectral_fields(model, name: str) -> None:
    check_periodic(model.grid, name)
    fraction = model.dealiasing_fraction
    if not isinstance(fraction, int | float) or not 0 < fraction <= 1:
        raise ValueError(f"{name}: dealiasing_fraction must lie in (0, 1]; got {fraction!r}.")


class KuramotoSivashinsky(AbstractSpectralGridModel):
    r"""The Kuramoto–Sivashinsky equation, spatio-temporal chaos from a long-wave
    instability balanced by fourth-order damping (flame fronts, thin films):

    $$
    \partial_t u = -\psi_1 \nabla^2 u - \psi_2 \nabla^4 u
      - \tfrac{b}{2}\bigl(|\nabla u|^2 - \langle |\nabla u|^2 \rangle\bigr),
    $$

    with $\nabla^4 = \nabla^2\nabla^2$ the biharmonic operator and $\langle\cdot\rangle$ the
    spatial mean. In 1-D, $v = u_x$ obeys the conservative form $v_t = -\psi_1 v_{xx} -
    \psi_2 v_{xxxx} - b\, v v_x$. Subtracting the mean of $|\nabla u|^2$ keeps the mean of
    $u$ constant (no other mode feels it; otherwise it drifts without bound), as Exponax's
    `KuramotoSivashinsky` does. Modes with $|\mathbf k|^2 < \psi_1/\psi_2$ grow; a 1-D
    domain longer than about $2\pi \cdot 10$ (with unit coefficients) is chaotic.

    The linear part $-\psi_1\nabla^2 - \psi_2\nabla^4$ has the symbol $\psi_1|\mathbf k|^2
    - \psi_2|\mathbf k|^4$; the gradient is spectral and the square is dealiased with
    `dealiasing_fraction` (2/3 rule by default).

    **Arguments** (dimensionless):

    - `grid`: a periodic [`simlab.Grid`][] in 1, 2 or 3 dimensions.
    - `anti_diffusivity`: $\psi_1 > 0$, the destabilising second-order coefficient (default 1).
    - `hyperdiffusivity`: $\psi_2 > 0$, the stabilising fourth-order coefficient (default 1).
    - `gradient_norm_scale`: $b$, the strength of the nonlinearity (default 1).
    - `dealiasing_fraction`: the kept fraction of each axis's wavenumbers in the product.

    The state is $u$, shape `grid.shape`.

    !!! example

        ```python
        grid = simlab.Grid((128,), extent=32 * jnp.pi)
        (x,) = grid.coordinates()
        model = simlab.models.KuramotoSivashinsky(grid=grid)
        from simlab.integrate import ETDRK4

        y0 = jnp.cos(x / 16) * (1 + jnp.sin(x / 16))  # Kassam & Trefethen's start
        ys, result, stats = ETDRK4().solve(
            model, jnp.linspace(0.0, 50.0, 11), y0, None, dt0=0.25, max_steps=1000
        )
        ```
    """

    grid: Grid
    anti_diffusivity: Float[Array, ""] = parameter(lower=0.0, default=1.0)
    hyperdiffusivity: Float[Array, ""] = parameter(lower=0.0, default=1.0)
    gradient_norm_scale: Float[Array, ""] = parameter(default=1.0)
    dealiasing_fraction: float = eqx.field(static=True, default=2 / 3)

    impl: ClassVar[str] = "xla"  # spectral: jnp.fft, no stencil kernels

    def _check_fields(self):
        _check_spectral_fields(self, "KuramotoSivashinsky")
        for name in ("anti_diffusivity", "hyperdiffusivity", "gradient_norm_scale"):
            self._check_coefficient(name, allow_field=False)

    def linear_symbol(self):
        k2 = squared_wavenumber(self.grid)
        return self.anti_diffusivity * k2 - self.hyperdiffusivity * k2**2

    def nonlinear_spectral(self, t, spectrum, args):
        mask = dealiasing_mask(self.grid, self.dealiasing_fraction)
        kept = apply_symbol(mask, spectrum)
        gradient_norm = sum(
            inverse_fourier_transform(apply_symbol(1j * k, kept), self.grid) ** 2
            for k in wavenumbers(self.grid)
        )
        axes = tuple(range(-self.grid.ndim, 0))
        gradient_norm = gradient_norm - jnp.mean(gradient_norm, axis=axes, keepdims=True)
        factor = jnp.where(mask, -0.5 * self.gradient_norm_scale, 0.0)
        return apply_symbol(factor, fourier_transform(gradient_norm, self.grid))

    def linear_eigenvalues(self, y0):
        symbol = jnp.asarray(self.linear_symbol())
        slope = _largest(spectral_gradient(y0, self.grid))
        k = np.sqrt(squared_wavenumber(self.grid))
        return jax.lax.complex(symbol, _largest(self.gradient_norm_scale) * slope * k)


class SwiftHohenberg(AbstractSpectralGridModel):
    r"""The Swift–Hohenberg equation, the prototype of pattern selection (convection rolls,
    hexagons), which picks the wavenumber $q$:

    $$
    \partial_t u = r u - (q^2 + \nabla^2)^2 u + g u^2 - u^3 .
    $$

    For $r > 0$ a band of modes around $|\mathbf k| = q$ grows and the cubic term saturates
    it; $g \ne 0$ breaks $u \to -u$ and favours hexagons in 2-D. The linear part has the
    symbol $r - (q^2 - |\mathbf k|^2)^2$; the polynomial is dealiased with
    `dealiasing_fraction` (1/2 removes every alias of a cubic).

    **Arguments** (dimensionless):

    - `grid`: a periodic [`simlab.Grid`][] in 1, 2 or 3 dimensions.
    - `reactivity`: $r$, the distance from onset (default 0.7).
    - `critical_wavenumber`: $q > 0$, the selected wavenumber (default 1).
    - `quadratic_coefficient`: $g$ (default 1).
    - `dealiasing_fraction`: the kept fraction of each axis's wavenumbers (default 1/2).

    The state is $u$, shape `grid.shape`.

    !!! example

        ```python
        grid = simlab.Grid((64, 64), extent=20 * jnp.pi)
        model = simlab.models.SwiftHohenberg(grid=grid, reactivity=0.3)
        y0 = 0.1 * jax.random.normal(jax.random.PRNGKey(0), grid.shape)
        from simlab.integrate import ETDRK4

        ys, result, stats = ETDRK4().solve(
            model, jnp.linspace(0.0, 20.0, 5), y0, None, dt0=0.5, max_steps=100
        )
        ```
    """

    grid: Grid
    reactivity: Float[Array, ""] = parameter(default=0.7)
    critical_wavenumber: Float[Array, ""] = parameter(lower=0.0, default=1.0)
    quadratic_coefficient: Float[Array, ""] = parameter(default=1.0)
    dealiasing_fraction: float = eqx.field(static=True, default=1 / 2)

    impl: ClassVar[str] = "xla"  # spectral: jnp.fft, no stencil kernels

    def _check_fields(self):
        _check_spectral_fields(self, "SwiftHohenberg")
        for name in ("reactivity", "critical_wavenumber", "quadratic_coefficient"):
            self._check_coefficient(name, allow_field=False)

    def linear_symbol(self):
        k2 = squared_wavenumber(self.grid)
        return self.reactivity - (self.critical_wavenumber**2 - k2) ** 2

    def nonlinear_spectral(self, t, spectrum, args):
        mask = dealiasing_mask(self.grid, self.dealiasing_fraction)
        u = inverse_fourier_transform(apply_symbol(mask, spectrum), self.grid)
        return apply_symbol(
            mask, fourier_transform(self.quadratic_coefficient * u**2 - u**3, self.grid)
        )

    def linear_eigenvalues(self, y0):
        amplitude = _largest(y0)
        rate = 2 * _largest(self.quadratic_coefficient) * amplitude + 3 * amplitude**2
        return jnp.asarray(self.linear_symbol()) + rate
