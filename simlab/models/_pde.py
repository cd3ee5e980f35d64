"""Partial differential equations on a `simlab.Grid`, solved by the method of lines.

Each model is a final `eqx.Module` whose state is the field array (`grid.shape`, or
`(channels, *grid.shape)`), so `simlab.simulate` integrates it with Diffrax unchanged. The
grid is static; physical parameters are arrays (scalars or, where noted, fields).
"""

import abc
from typing import Any, ClassVar

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .. import kernels
from ..grid import IMPLS, Grid, advection, diffusion, laplacian, pad, resolve_impl
from ..grid._operators import ADVECTION_SCHEMES, LAPLACIAN_ORDERS
from ..grid._spectral import (
    check_periodic,
    fourier_transform,
    impulse_response_symbol,
    inverse_fourier_transform,
)
from ..grid._stability import (
    advection_symbol,
    as_complex,
    diffusion_symbol,
    laplacian_symbol,
)
from ..integrate._solvers import largest_stable_step, stability_function
from ._base import AbstractModel, parameter


class AbstractGridModel(AbstractModel):
    """A PDE on a [`simlab.Grid`][]: the state is a field array whose trailing axes are
    `grid.shape`.

    Subclasses declare `grid` and `impl` fields and implement `linear_eigenvalues`, from
    which `max_stable_step` finds the largest stable fixed step of an explicit solver.
    """

    grid: eqx.AbstractVar[Grid]
    impl: eqx.AbstractVar[str]

    # Channels of a grid state sit on the leading axis, while Trajectory.component indexes
    # the last one; no names, so that component() refuses instead of slicing the grid.
    state_names: ClassVar[tuple[str, ...]] = ()

    @property
    @abc.abstractmethod
    def channel_shape(self) -> tuple[int, ...]:
        """The leading axes of the state before the grid's: `()` for one field, `(2,)` for
        two fields, `(grid.ndim,)` for a vector field."""

    @property
    def state_shape(self) -> tuple[int, ...]:
        """`grid.shape`, after the channel axes of multi-field models."""
        return self.channel_shape + self.grid.shape

    @property
    def is_stiff(self) -> bool:
        """False: explicit steps suit the method of lines on moderate grids; pass
        `solver=simlab.models.implicit_solver()` where diffusion limits the step."""
        return False

    @abc.abstractmethod
    def linear_eigenvalues(self, y0: Array) -> Array:
        """Samples of the eigenvalues of the vector field's Jacobian near `y0` (von Neumann
        analysis of the constant-coefficient problem with the largest coefficients), as a
        `jnp` function of the parameters and `y0`, which may be traced."""

    def max_stable_step(self, solver: Any, y0: Any) -> Array | None:
        r"""The largest fixed step of an explicit Runge–Kutta `solver` for which every
        Fourier mode of the linearised problem stays bounded, $|R(\Delta t\,\lambda)| \le 1$.

        A scalar array computed with `jnp` from the (possibly traced) parameters and `y0`, so
        the same directly and under `jax.jit`/`jax.vmap`; `None` for implicit solvers (no
        limit, a static decision). See `simlab.integrate._solvers.largest_stable_step`.
        """
        if stability_function(solver) is None:
            return None
        return largest_stable_step(solver, self.linear_eigenvalues(jnp.asarray(y0)))

    @abc.abstractmethod
    def _check_fields(self) -> None:
        """Checks the shapes and settings of the subclass's fields (after grid and impl)."""

    def __check_init__(self):
        if not isinstance(self.grid, Grid):
            raise TypeError(
                f"{type(self).__name__}: grid must be a simlab.Grid; "
                f"got {type(self.grid).__name__}."
            )
        if self.impl not in IMPLS:
            raise ValueError(
                f"{type(self).__name__}: impl must be one of {IMPLS}; got {self.impl!r}."
            )
        if self.impl == "spectral":
            check_periodic(self.grid, f"{type(self).__name__} with impl='spectral'")
        self._check_fields()

    def _check_coefficient(self, name: str, *, allow_field: bool, vector: bool = False) -> None:
        shape = jnp.shape(getattr(self, name))
        leading = (self.grid.ndim,) if vector else ()
        allowed = [leading]
        if allow_field:
            allowed.append(leading + self.grid.shape)
        if shape not in allowed:
            raise ValueError(
                f"{type(self).__name__}: {name} must have shape "
                f"{' or '.join(str(s) for s in allowed)}; got {shape}."
            )


class AbstractSplitGridModel(AbstractGridModel):
    r"""A grid model whose vector field is a linear operator plus a nonlinear rest,
    $f(t, u) = L u + N(t, u)$, for IMEX and exponential
    solvers (`simlab.integrate`).

    Subclasses implement:

    - `linear(t, y, args)`: $L u$ in real space (linear in `y`; simlab checks this on a
      random probe before solving);
    - `nonlinear(t, y, args)`: $N(t, u)$, everything else (it may itself be linear, e.g.
      advection that is cheap to treat explicitly);
    - `linear_symbol()`: on a periodic grid, the Fourier multiplier $\lambda$ of $L$ on the
      half spectrum of `jnp.fft.rfftn` (shape `(*grid.shape[:-1], grid.shape[-1] // 2 + 1)`,
      with a leading channel axis where channels have different operators); raise a
      `ValueError` naming the reason where $L$ is not diagonal in Fourier space;
    - `__call__(t, y, args)`: the whole vector field, equal to `linear + nonlinear`, so every
      explicit solver works (a model may compute it in one pass, or with a fused kernel).
    """

    @abc.abstractmethod
    def linear(self, t: Any, y: Array, args: Any) -> Array:
        """The linear part $L u$ (treated implicitly by IMEX, exactly by ETDRK)."""

    @abc.abstractmethod
    def nonlinear(self, t: Any, y: Array, args: Any) -> Array:
        """The rest of the vector field, $N(t, u)$ (treated explicitly)."""

    @abc.abstractmethod
    def linear_symbol(self) -> Array:
        r"""The Fourier multiplier $\lambda$ of the linear part on the rfft half spectrum."""

    def require_fourier(self, solver: str) -> None:
        """Raises a ValueError naming `solver` unless every axis of the grid is periodic."""
        check_periodic(self.grid, solver)

    def to_spectrum(self, y: Array) -> Array:
        """The half spectrum of the field `y` (`simlab.grid.fourier_transform`)."""
        return fourier_transform(y, self.grid)

    def from_spectrum(self, spectrum: Array) -> Array:
        """The real field whose half spectrum is `spectrum`."""
        return inverse_fourier_transform(spectrum, self.grid)

    def nonlinear_spectral(self, t: Any, spectrum: Array, args: Any) -> Array:
        r"""$\widehat{N(u)}$ from $\hat u$: here the transform of the real-space `nonlinear`
        (pseudo-spectral models compute it from the spectrum directly)."""
        field = self.from_spectrum(spectrum)
        return self.to_spectrum(self.nonlinear(t, field, args))


class AbstractAffineSplitGridModel(AbstractSplitGridModel):
    r"""A finite-difference split model: its vector field is an affine stencil part
    $A(u) = L u + A(0)$ plus the rest $R(t, u)$.

    A wall with a nonzero value (Dirichlet $g$, Neumann $q$, Robin $g$) makes a stencil
    affine rather than linear, so the split is $L u = A(u) - A(0)$ and $N = R + A(0)$: the
    boundary values' constant joins the explicit part. $L$ must be a symmetric stencil
    (diffusion and pointwise rates; advection belongs to the rest), so its symbol is real:
    the real part of its response to a unit impulse
    ([`simlab.grid.impulse_response_symbol`][]), exact for constant coefficients on a
    periodic grid (the solvers check it against the stencil on a random probe).

    Subclasses implement `affine_terms` and `other_terms` (their sum is `__call__`) and set
    the class variable `constant_coefficients`: the fields that must be scalars for $L$ to
    have a Fourier symbol. `affine_terms` holds the stencils and linear rates, whose only
    constant comes from the walls (a constant source belongs in `other_terms`): on a grid
    periodic on every axis $A(0) = 0$, and the split costs no extra stencil evaluation.
    """

    constant_coefficients: eqx.AbstractClassVar[tuple[str, ...]]

    @abc.abstractmethod
    def affine_terms(self, t: Any, y: Array, args: Any) -> Array:
        """The stencil terms, affine in `y`: $A(u) = L u + A(0)$."""

    @abc.abstractmethod
    def other_terms(self, t: Any, y: Array, args: Any) -> Array:
        """The rest of the vector field, $R(t, u)$."""

    def linear(self, t, y, args):
        if all(self.grid.is_periodic):  # no walls, no constant
            return self.affine_terms(t, y, args)
        return self.affine_terms(t, y, args) - self.affine_terms(t, jnp.zeros_like(y), args)

    def nonlinear(self, t, y, args):
        if all(self.grid.is_periodic):
            return self.other_terms(t, y, args)
        return self.other_terms(t, y, args) + self.affine_terms(t, jnp.zeros_like(y), args)

    def linear_symbol(self):
        check_periodic(self.grid, f"the Fourier symbol of {type(self).__name__}")
        for name in self.constant_coefficients:
            if jnp.ndim(getattr(self, name)) != 0:
                raise ValueError(
                    f"{type(self).__name__}: an exponential integrator needs a "
                    f"constant-coefficient linear part, but {name} is a field; use an IMEX "
                    "solver such as 'kencarp4', which treats variable coefficients implicitly "
                    "in real space."
                )
        # A symmetric stencil (diffusion, pointwise rates) has a real symbol; its response's
        # imaginary part is roundoff. The solvers check the symbol against the stencil.
        # The impulse takes the parameters' precision, which strict promotion never mixes.
        dtype = jnp.result_type(*self.parameters().values(), float)
        symbol = impulse_response_symbol(
            lambda y: self.linear(0.0, y.astype(dtype), None), self.grid, self.state_shape
        )
        return symbol.real


def _largest(value: ArrayLike) -> Array:
    """The largest magnitude in `value` (a scalar array; traced when `value` is)."""
    return jnp.max(jnp.abs(jnp.asarray(value)))


class Heat(AbstractAffineSplitGridModel):
    r"""Diffusion of heat (or any scalar), $\partial_t u = \nabla \cdot (D \nabla u)$.

    With a scalar diffusivity this is $D \nabla^2 u$, discretised to `order` 2 or 4; a
    diffusivity field $D(\mathbf x)$ is averaged onto cell faces (second order) so the
    total heat is conserved with periodic or zero-flux boundaries.

    **Arguments:**

    - `diffusivity`: $D \ge 0$ in length²/time: a scalar or a field of shape `grid.shape`.
    - `grid`: the [`simlab.Grid`][] with its boundary conditions.
    - `order`: 2 or 4, the order of the Laplacian (4 needs a scalar diffusivity).
    - `impl`: `"auto"`, `"xla"`, `"pallas"` or `"spectral"` (Fourier derivatives on a
      periodic grid) for the stencil.

    The state is the field, shape `grid.shape`. Explicit fixed steps must satisfy the
    diffusion-number limit, $\Delta t \lesssim h^2 / (2 d D)$ for forward Euler in $d$
    dimensions.

    !!! example

        ```python
        grid = simlab.Grid((64,), extent=1.0, boundary="periodic")
        (x,) = grid.coordinates()
        model = simlab.models.Heat(diffusivity=0.01, grid=grid)
        trajectory = simlab.simulate(model, jnp.sin(2 * jnp.pi * x), jnp.linspace(0, 1, 11))
        ```
    """

    diffusivity: Float[Array, "*grid"] = parameter(
        lower=0.0, lower_inclusive=True, unit="length²/time"
    )
    grid: Grid
    order: int = eqx.field(static=True, default=2)
    impl: str = eqx.field(static=True, default="auto")

    constant_coefficients: ClassVar[tuple[str, ...]] = ("diffusivity",)

    @property
    def channel_shape(self) -> tuple[int, ...]:
        return ()

    def _check_fields(self):
        self._check_coefficient("diffusivity", allow_field=True)
        if self.order not in LAPLACIAN_ORDERS:
            raise ValueError(f"Heat: order must be one of {LAPLACIAN_ORDERS}; got {self.order!r}.")
        if self.order == 4 and jnp.ndim(self.diffusivity) != 0:
            raise ValueError("Heat: order=4 needs a scalar diffusivity; use order=2 for a field.")

    def __call__(self, t, y, args):
        if self.order == 4:
            return self.diffusivity * laplacian(y, self.grid, order=4, impl=self.impl)
        return diffusion(y, self.diffusivity, self.grid, impl=self.impl)

    def affine_terms(self, t, y, args):
        return self(t, y, args)

    def other_terms(self, t, y, args):
        return jnp.zeros_like(y)

    def linear_eigenvalues(self, y0):
        return diffusion_symbol(
            _largest(self.diffusivity), self.grid.spacing, self.order, self.impl
        )


class AdvectionDiffusion(AbstractAffineSplitGridModel):
    r"""A scalar carried by a flow and diffusing, $\partial_t u = \nabla\cdot(D\nabla u) -
    \mathbf v \cdot \nabla u$.

    **Arguments:**

    - `diffusivity`: $D \ge 0$ in length²/time: a scalar or a field of shape `grid.shape`.
    - `velocity`: $\mathbf v$ in length/time: a vector of shape `(grid.ndim,)` or a field of
      shape `(grid.ndim, *grid.shape)`.
    - `grid`: the [`simlab.Grid`][].
    - `scheme`: `"upwind"` (first order, monotone) or `"central"` (second order) advection.
    - `impl`: `"auto"`, `"xla"`, `"pallas"` or `"spectral"` (periodic grids).

    The state is the field, shape `grid.shape`. Explicit fixed steps must satisfy both the
    diffusion-number and the CFL limit ($\Delta t \lesssim h/|v|$).

    !!! example

        ```python
        grid = simlab.Grid((128,), extent=1.0)
        (x,) = grid.coordinates()
        model = simlab.models.AdvectionDiffusion(
            diffusivity=1e-3, velocity=jnp.array([0.5]), grid=grid
        )
        trajectory = simlab.simulate(model, jnp.exp(-200 * (x - 0.3) ** 2), jnp.linspace(0, 1, 5))
        ```
    """

    diffusivity: Float[Array, "*grid"] = parameter(
        lower=0.0, lower_inclusive=True, unit="length²/time"
    )
    velocity: Float[Array, "..."] = parameter(unit="length/time")
    grid: Grid
    scheme: str = eqx.field(static=True, default="upwind")
    impl: str = eqx.field(static=True, default="auto")

    constant_coefficients: ClassVar[tuple[str, ...]] = ("diffusivity",)

    @property
    def channel_shape(self) -> tuple[int, ...]:
        return ()

    def _check_fields(self):
        self._check_coefficient("diffusivity", allow_field=True)
        self._check_coefficient("velocity", allow_field=True, vector=True)
        if self.scheme not in ADVECTION_SCHEMES:
            raise ValueError(
                f"AdvectionDiffusion: scheme must be one of {ADVECTION_SCHEMES}; "
                f"got {self.scheme!r}."
            )

    def __call__(self, t, y, args):
        return self.affine_terms(t, y, args) + self.other_terms(t, y, args)

    def affine_terms(self, t, y, args):
        """Diffusion, implicit in IMEX (advection is cheap to treat explicitly)."""
        return diffusion(y, self.diffusivity, self.grid, impl=self.impl)

    def other_terms(self, t, y, args):
        return -advection(y, self.velocity, self.grid, scheme=self.scheme, impl=self.impl)

    def linear_eigenvalues(self, y0):
        velocity = jnp.abs(jnp.asarray(self.velocity)).reshape(self.grid.ndim, -1).max(axis=1)
        diffusion = diffusion_symbol(_largest(self.diffusivity), self.grid.spacing, 2, self.impl)
        advection = advection_symbol(self.grid.spacing, velocity, self.scheme, self.impl)
        return as_complex(diffusion) + advection


class Wave(AbstractGridModel):
    r"""The wave equation $\partial_t^2 u = c^2 \nabla^2 u$ as a first-order system,

    $$
    \partial_t u = w, \qquad \partial_t w = c^2 \nabla^2 u .
    $$

    The discrete energy $E = \tfrac12 \sum (w^2 - c^2 u \nabla^2 u)\,\Delta V$ is conserved by
    the exact semi-discrete flow (periodic or zero-flux boundaries).

    **Arguments:**

    - `wave_speed`: $c \ge 0$ in length/time (a scalar or a field of shape `grid.shape`).
    - `grid`: the [`simlab.Grid`][].
    - `order`: 2 or 4, the order of the Laplacian.
    - `impl`: `"auto"`, `"xla"`, `"pallas"` or `"spectral"` (periodic grids).

    The state has shape `(2, *grid.shape)`: displacement $u$, then velocity $w$. Its
    eigenvalues are imaginary, so forward Euler and Heun are unstable at every step; use
    e.g. `"tsit5"` or `"bosh3"`.

    !!! example

        ```python
        grid = simlab.Grid((128,), extent=1.0)
        (x,) = grid.coordinates()
        model = simlab.models.Wave(wave_speed=1.0, grid=grid)
        y0 = jnp.stack([jnp.sin(2 * jnp.pi * x), jnp.zeros_like(x)])
        trajectory = simlab.simulate(model, y0, jnp.linspace(0, 1, 11))
        ```
    """

    wave_speed: Float[Array, "*grid"] = parameter(
        lower=0.0, lower_inclusive=True, unit="length/time"
    )
    grid: Grid
    order: int = eqx.field(static=True, default=2)
    impl: str = eqx.field(static=True, default="auto")

    @property
    def channel_shape(self) -> tuple[int, ...]:
        return (2,)

    def _check_fields(self):
        self._check_coefficient("wave_speed", allow_field=True)
        if self.order not in LAPLACIAN_ORDERS:
            raise ValueError(f"Wave: order must be one of {LAPLACIAN_ORDERS}; got {self.order!r}.")

    def __call__(self, t, y, args):
        displacement, velocity = y[0], y[1]
        acceleration = self.wave_speed**2 * laplacian(
            displacement, self.grid, order=self.order, impl=self.impl
        )
        return jnp.stack([velocity, acceleration])

    def energy(self, y: Array) -> Array:
        """The conserved discrete energy of a state `y` (or of each state in a trajectory)."""
        channel_axis = jnp.ndim(y) - self.grid.ndim - 1
        displacement = jnp.take(y, 0, axis=channel_axis)
        velocity = jnp.take(y, 1, axis=channel_axis)
        curvature = laplacian(displacement, self.grid, order=self.order, impl=self.impl)
        density = velocity**2 - self.wave_speed**2 * displacement * curvature
        return 0.5 * self.grid.integrate(density)

    def linear_eigenvalues(self, y0):
        # In the default float precision, as the stability estimates expect (strict dtype
        # promotion never mixes a float32 speed with the float64 symbol).
        speed = jnp.asarray(_largest(self.wave_speed), float)
        frequency = speed * np.sqrt(-laplacian_symbol(self.grid.spacing, self.order, self.impl))
        imaginary = 1j * as_complex(frequency.ravel())
        return jnp.concatenate([imaginary, -imaginary])


class Burgers(AbstractAffineSplitGridModel):
    r"""Viscous Burgers equation, $\partial_t \mathbf u + (\mathbf u \cdot \nabla)\mathbf u =
    \nu \nabla^2 \mathbf u$: nonlinear advection steepening into shocks that viscosity smooths.

    **Arguments:**

    - `viscosity`: $\nu > 0$ in length²/time.
    - `grid`: the [`simlab.Grid`][].
    - `scheme`: `"upwind"` (robust) or `"central"` (second order, for resolved flows).
    - `impl`: `"auto"`, `"xla"`, `"pallas"` or `"spectral"` (periodic grids).

    The state is the velocity: shape `grid.shape` in 1-D, `(grid.ndim, *grid.shape)`
    otherwise (one component per axis).

    !!! example

        ```python
        grid = simlab.Grid((256,), extent=2 * jnp.pi)
        (x,) = grid.coordinates()
        model = simlab.models.Burgers(viscosity=0.05, grid=grid)
        trajectory = simlab.simulate(model, jnp.sin(x), jnp.linspace(0, 2, 5))
        ```
    """

    viscosity: Float[Array, ""] = parameter(lower=0.0, unit="length²/time")
    grid: Grid
    scheme: str = eqx.field(static=True, default="upwind")
    impl: str = eqx.field(static=True, default="auto")

    constant_coefficients: ClassVar[tuple[str, ...]] = ()

    def _check_fields(self):
        self._check_coefficient("viscosity", allow_field=False)
        if self.scheme not in ADVECTION_SCHEMES:
            raise ValueError(
                f"Burgers: scheme must be one of {ADVECTION_SCHEMES}; got {self.scheme!r}."
            )

    @property
    def channel_shape(self) -> tuple[int, ...]:
        return () if self.grid.ndim == 1 else (self.grid.ndim,)

    def __call__(self, t, y, args):
        return self.affine_terms(t, y, args) + self.other_terms(t, y, args)

    def affine_terms(self, t, y, args):
        """Viscous diffusion."""
        return self.viscosity * laplacian(y, self.grid, impl=self.impl)

    def other_terms(self, t, y, args):
        r"""Nonlinear transport, $-(\mathbf u \cdot \nabla)\mathbf u$."""
        velocity = y[None] if self.grid.ndim == 1 else y
        return -advection(y, velocity, self.grid, scheme=self.scheme, impl=self.impl)

    def linear_eigenvalues(self, y0):
        speed = jnp.full(self.grid.ndim, _largest(y0))
        diffusion = diffusion_symbol(_largest(self.viscosity), self.grid.spacing, 2, self.impl)
        advection = advection_symbol(self.grid.spacing, speed, self.scheme, self.impl)
        return as_complex(diffusion) + advection


class GrayScott(AbstractAffineSplitGridModel):
    r"""The Gray–Scott reaction–diffusion system, which forms spots, stripes and mazes:

    $$
    \begin{aligned}
    \partial_t u &= D_u \nabla^2 u - u v^2 + F (1 - u), \\
    \partial_t v &= D_v \nabla^2 v + u v^2 - (F + k) v .
    \end{aligned}
    $$

    **Arguments** (dimensionless, all non-negative):

    - `feed_rate`: $F$, the rate at which $u$ is fed (and both are drained).
    - `kill_rate`: $k$, the extra removal rate of $v$.
    - `diffusivity_u`, `diffusivity_v`: $D_u$, $D_v$ (scalars or fields of `grid.shape`).
    - `grid`: the [`simlab.Grid`][] (periodic is usual).
    - `impl`: `"auto"`, `"xla"`, `"pallas"` or `"spectral"` (periodic grids).

    The state has shape `(2, *grid.shape)`: $u$, then $v$. $(u, v) = (1, 0)$ is a
    homogeneous steady state; $F = 0.035$, $k = 0.065$ grows spots from a local seed.

    !!! example

        ```python
        grid = simlab.Grid((64, 64), extent=64.0)
        model = simlab.models.GrayScott(
            feed_rate=0.035, kill_rate=0.065, diffusivity_u=0.2, diffusivity_v=0.1, grid=grid
        )
        y0 = jnp.stack([grid.zeros() + 1.0, grid.zeros()]).at[:, 28:36, 28:36].set(
            jnp.array([0.5, 0.25])[:, None, None]
        )
        trajectory = simlab.simulate(model, y0, jnp.linspace(0, 1000, 5))
        ```
    """

    feed_rate: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True, unit="1/time")
    kill_rate: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True, unit="1/time")
    diffusivity_u: Float[Array, "*grid"] = parameter(
        lower=0.0, lower_inclusive=True, unit="length²/time"
    )
    diffusivity_v: Float[Array, "*grid"] = parameter(
        lower=0.0, lower_inclusive=True, unit="length²/time"
    )
    grid: Grid
    impl: str = eqx.field(static=True, default="auto")

    constant_coefficients: ClassVar[tuple[str, ...]] = ("diffusivity_u", "diffusivity_v")

    @property
    def channel_shape(self) -> tuple[int, ...]:
        return (2,)

    def _check_fields(self):
        self._check_coefficient("feed_rate", allow_field=False)
        self._check_coefficient("kill_rate", allow_field=False)
        self._check_coefficient("diffusivity_u", allow_field=True)
        self._check_coefficient("diffusivity_v", allow_field=True)

    @staticmethod
    def reaction(
        fields: tuple[Array, Array], rates: tuple[ArrayLike, ArrayLike]
    ) -> tuple[Array, Array]:
        r"""The reaction terms $(-u v^2 + F (1 - u),\ u v^2 - (F + k) v)$, pointwise.

        The one home of the model's reaction: the XLA vector field adds it to the
        diffusion terms, and the fused Pallas kernel takes it as its `reaction_fn` (see
        [`simlab.kernels.reaction_diffusion`][]).

        **Arguments:**

        - `fields`: $(u, v)$, arrays of the same shape.
        - `rates`: $(F, k)$.

        **Returns:** the two reaction tendencies.
        """
        u, v = fields
        feed_rate, kill_rate = rates
        conversion = u * v * v
        return (
            -conversion + feed_rate * (1.0 - u),
            conversion - (feed_rate + kill_rate) * v,
        )

    def __call__(self, t, y, args):
        diffusivities = (self.diffusivity_u, self.diffusivity_v)
        rates = (self.feed_rate, self.kill_rate)
        if self._takes_fused_kernel():
            return kernels.reaction_diffusion(
                pad(y, self.grid, 1),
                self.grid.spacing,
                diffusivities,
                rates,
                reaction_fn=GrayScott.reaction,
            )
        u, v = y[0], y[1]
        reaction = self.reaction((u, v), rates)
        return jnp.stack(
            [
                diffusion(field, diffusivity, self.grid, impl=self.impl) + term
                for field, diffusivity, term in zip((u, v), diffusivities, reaction, strict=True)
            ]
        )

    def affine_terms(self, t, y, args):
        r"""Diffusion and the linear drains, $D_u \nabla^2 u - F u$ and
        $D_v \nabla^2 v - (F + k) v$."""
        u, v = y[0], y[1]
        du = diffusion(u, self.diffusivity_u, self.grid, impl=self.impl) - self.feed_rate * u
        dv = diffusion(v, self.diffusivity_v, self.grid, impl=self.impl)
        return jnp.stack([du, dv - (self.feed_rate + self.kill_rate) * v])

    def other_terms(self, t, y, args):
        """The conversion $u v^2$ and the feed $F$."""
        conversion = y[0] * y[1] ** 2
        return jnp.stack([self.feed_rate - conversion, conversion])

    def _takes_fused_kernel(self) -> bool:
        """Whether the fused Pallas vector field serves (one read and one write of each
        field per step): Pallas chosen, a 2-D grid and scalar diffusivities."""
        scalar = self.diffusivity_u.ndim == 0 and self.diffusivity_v.ndim == 0
        return (
            self.grid.ndim == 2
            and scalar
            and resolve_impl(self.impl, "reaction_diffusion") == "pallas"
        )

    def linear_eigenvalues(self, y0):
        u, v = jnp.abs(y0[0]), jnp.abs(y0[1])
        # Largest absolute row sum of the reaction Jacobian [[-v²-F, -2uv], [v², 2uv-F-k]],
        # which bounds its eigenvalues (Gershgorin).
        feed, kill = _largest(self.feed_rate), _largest(self.kill_rate)
        reaction_rate = jnp.max(v**2 + 2 * u * v + feed + kill)
        diffusivity = jnp.maximum(_largest(self.diffusivity_u), _largest(self.diffusivity_v))
        return diffusion_symbol(diffusivity, self.grid.spacing, 2, self.impl) - reaction_rate
