r"""Stochastic PDEs on a `simlab.Grid`: reaction–diffusion driven by additive space–time
white noise, $du = f(u)\,dt + \sigma\,dW(\mathbf x, t)$, by the method of lines.

Space–time white noise has $E[\xi(\mathbf x, t)\,\xi(\mathbf x', t')] = \delta(\mathbf x -
\mathbf x')\,\delta(t - t')$. Its average over a cell of volume $h^d$ is a Brownian motion
of variance $t / h^d$, independent from cell to cell, so each cell's diffusion is
$\sigma / \sqrt{h^d}$: with that scaling, averages of the field over a fixed region
converge as the grid is refined (a scaling without $h$ would make the noise vanish).
"""

from typing import Any, ClassVar

import diffrax as dfx
import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..grid import Grid, laplacian
from ..grid._operators import LAPLACIAN_ORDERS
from ..grid._stability import diffusion_symbol
from ..integrate._sde import SRA1, EulerMaruyama, Milstein
from ..integrate._solvers import largest_stable_step
from ._base import parameter
from ._pde import AbstractGridModel
from ._sde import AbstractSDEModel

# The deterministic Runge–Kutta method each stochastic solver reduces to for additive
# noise, whose stability polynomial bounds its fixed step: Euler–Maruyama and Milstein
# (whose correction vanishes) take forward Euler steps of the drift, SRA1 a two-stage
# second-order one, R(z) = 1 + z + z²/2 as Heun's.
_DRIFT_METHODS = {EulerMaruyama: dfx.Euler(), Milstein: dfx.Euler(), SRA1: dfx.Heun()}


class AbstractStochasticGridModel(AbstractGridModel, AbstractSDEModel):
    r"""A field on a [`simlab.Grid`][] driven by additive space–time white noise of strength
    `noise_strength` $\sigma$: $du = f(t, u)\,dt + \sigma\,dW(\mathbf x, t)$.

    Subclasses implement `drift` and `linear_eigenvalues`; the diffusion is
    $\sigma / \sqrt{h^d}$ in every cell (see the module docstring), diagonal and additive,
    so `simulate` picks SRA1. The state is the field, shape `grid.shape`.
    `max_stable_step` is the stability limit of the solver's drift part (forward Euler for
    Euler–Maruyama and Milstein, $1 + z + z^2/2$ for SRA1), so `dt0=None` picks a stable
    step and a larger `dt0` is refused.
    """

    noise_strength: eqx.AbstractVar[Array]

    additive: ClassVar[bool] = True

    @property
    def channel_shape(self) -> tuple[int, ...]:
        return ()

    def diffusion(self, t, y, args):
        cell_noise = self.noise_strength / jnp.sqrt(self.grid.cell_volume)
        return jnp.broadcast_to(cell_noise, y.shape)

    def max_stable_step(self, solver: Any, y0: Any) -> Array | None:
        drift_method = _DRIFT_METHODS.get(type(solver))
        if drift_method is None:
            return None
        return largest_stable_step(drift_method, self.linear_eigenvalues(jnp.asarray(y0)))

    def _check_fields(self):
        if self.order not in LAPLACIAN_ORDERS:
            raise ValueError(
                f"{type(self).__name__}: order must be one of {LAPLACIAN_ORDERS}; "
                f"got {self.order!r}."
            )

    def _laplacian(self, y: Array) -> Array:
        return laplacian(y, self.grid, order=self.order, impl=self.impl)


class StochasticHeat(AbstractStochasticGridModel):
    r"""The stochastic heat equation (Edwards–Wilkinson), $du = D \nabla^2 u\,dt +
    \sigma\,dW(\mathbf x, t)$ with space–time white noise.

    On a periodic grid the spatial mean has no restoring force: it is a Brownian motion of
    variance $\sigma^2 t / |\Omega|$ ($|\Omega|$ the domain's volume). Every other Fourier
    mode is an Ornstein–Uhlenbeck process with rate $D \lambda_k$, $-\lambda_k$ the discrete
    Laplacian's eigenvalue. In 1-D the field's pointwise variance stays finite as the grid
    is refined; in 2-D and 3-D only averages over fixed regions converge.

    **Arguments:**

    - `diffusivity`: $D \ge 0$ in length²/time (a scalar).
    - `noise_strength`: $\sigma \ge 0$ in field·length^(d/2)/sqrt(time) (a scalar).
    - `grid`: the [`simlab.Grid`][] with its boundary conditions.
    - `order`: 2 or 4, the order of the Laplacian.
    - `impl`: `"auto"`, `"xla"`, `"pallas"` or `"spectral"` (periodic grids).

    !!! example

        ```python
        import jax
        import jax.numpy as jnp
        import simlab

        grid = simlab.Grid((32,), extent=1.0, boundary="periodic")
        model = simlab.models.StochasticHeat(diffusivity=0.1, noise_strength=0.2, grid=grid)
        path = simlab.simulate(
            model, grid.zeros(), jnp.linspace(0.0, 0.1, 3), key=jax.random.key(0),
            adaptive=False, dt0=1e-3,
        )
        path.ys.shape  # (3, 32)
        ```
    """

    diffusivity: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True, unit="length²/time")
    noise_strength: Float[Array, ""] = parameter(
        lower=0.0, lower_inclusive=True, unit="field·length^(d/2)/sqrt(time)"
    )
    grid: Grid
    order: int = eqx.field(static=True, default=2)
    impl: str = eqx.field(static=True, default="auto")

    def drift(self, t, y, args):
        return self.diffusivity * self._laplacian(y)

    def linear_eigenvalues(self, y0):
        return diffusion_symbol(
            jnp.asarray(self.diffusivity, float), self.grid.spacing, self.order, self.impl
        )


class StochasticAllenCahn(AbstractStochasticGridModel):
    r"""The stochastic Allen–Cahn equation, $du = (\varepsilon^2 \nabla^2 u + u - u^3)\,dt
    + \sigma\,dW(\mathbf x, t)$ with space–time white noise.

    Phases $u = \pm 1$ separated by interfaces of width $\sim \varepsilon$; noise nucleates
    and roughens them. Linearised about a phase, $u = \pm 1 + v$, the field is a stochastic
    heat equation with damping, $dv = (\varepsilon^2 \nabla^2 v - 2 v)\,dt + \sigma\,dW$.

    **Arguments:**

    - `epsilon`: $\varepsilon > 0$, the interface width in length units (a scalar).
    - `noise_strength`: $\sigma \ge 0$ in field·length^(d/2)/sqrt(time) (a scalar).
    - `grid`: the [`simlab.Grid`][] with its boundary conditions.
    - `order`: 2 or 4, the order of the Laplacian.
    - `impl`: `"auto"`, `"xla"`, `"pallas"` or `"spectral"` (periodic grids).

    !!! example

        ```python
        import jax
        import jax.numpy as jnp
        import simlab

        grid = simlab.Grid((32,), extent=1.0, boundary="periodic")
        model = simlab.models.StochasticAllenCahn(epsilon=0.05, noise_strength=0.1, grid=grid)
        path = simlab.simulate(
            model, grid.zeros(), jnp.linspace(0.0, 1.0, 3), key=jax.random.key(0),
            adaptive=False, dt0=1e-2,
        )
        path.ys.shape  # (3, 32)
        ```
    """

    epsilon: Float[Array, ""] = parameter(lower=0.0, unit="length")
    noise_strength: Float[Array, ""] = parameter(
        lower=0.0, lower_inclusive=True, unit="field·length^(d/2)/sqrt(time)"
    )
    grid: Grid
    order: int = eqx.field(static=True, default=2)
    impl: str = eqx.field(static=True, default="auto")

    def drift(self, t, y, args):
        return self.epsilon**2 * self._laplacian(y) + y - y**3

    def linear_eigenvalues(self, y0):
        # The reaction's slope 1 - 3u² where |u| is largest, but at least as damping as at
        # the phases (-2): growth near u = 0 is the physics, not a step limit.
        reaction = 1 - 3 * jnp.maximum(jnp.max(jnp.asarray(y0, float) ** 2), 1.0)
        coefficient = jnp.asarray(self.epsilon, float) ** 2
        diffusion = diffusion_symbol(coefficient, self.grid.spacing, self.order, self.impl)
        return diffusion + reaction
