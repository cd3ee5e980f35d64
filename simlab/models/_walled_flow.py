r"""Incompressible flow in two dimensions with walls: velocity and pressure on a staggered
(MAC) grid, second order in space, with a projection at every right-hand side.

The vector field of `WalledNavierStokes2D` is the discrete Leray projection of the momentum
tendency (advection, viscosity, a body force), so it is divergence-free to roundoff and
any explicit Runge–Kutta solver of `simlab.simulate` is a projection method: every stage
stays divergence-free. The pressure Poisson equation is solved exactly by fast transforms
(a DCT-II along walled axes, an FFT along periodic ones), which diagonalise the 5-point
Laplacian with zero normal derivative at the walls; with an outlet held at $p = 0$, by
conjugate gradients preconditioned with those transforms.
"""

import math
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.fft import dct, idct
from jaxtyping import Array, ArrayLike, Float

from .. import kernels
from .._misc import is_concrete, warn_at_caller
from ..grid import Dirichlet, Grid, Inflow, Outflow, pad_axis, resolve_impl
from ..grid._stability import advection_symbol, as_complex, diffusion_symbol
from ..grid._vorticity import DEFAULT_COURANT
from ._base import parameter
from ._krylov import conjugate_gradient
from ._pde import AbstractGridModel

# y0 counts as divergence-free when max|div u| h stays below this many ulps of max|u|.
_DIVERGENCE_ULPS = 1000
# Centred advection–diffusion, steady and in 1-D, is free of grid-scale wiggles exactly when
# the cell Péclet (here Reynolds) number |u| h / nu is at most 2.
CELL_REYNOLDS_BOUND = 2.0
PRESSURE_SOLVES = ("auto", "transform", "krylov")


class WalledNavierStokes2D(AbstractGridModel):
    r"""The incompressible Navier–Stokes equations in velocity–pressure form on a rectangle
    with walls,

    $$
    \partial_t\mathbf u + \nabla\cdot(\mathbf u\mathbf u) = -\nabla p + \nu\nabla^2\mathbf u
    + G\,\hat{\mathbf x}, \qquad \nabla\cdot\mathbf u = 0,
    $$

    discretised by finite volumes on a staggered (MAC) grid: pressure at the cell centres,
    $u$ on the faces normal to $x$, $v$ on the faces normal to $y$. Advection is the
    conservative centred (second-order) scheme of Harlow and Welch, viscosity the 5-point
    Laplacian. The vector field is the projected tendency $P\,F(\mathbf u)$, with
    $P = I - \nabla L^{-1}\nabla\cdot$ and $L$ the pressure Laplacian with zero normal
    derivative at walls, solved exactly by a DCT-II along walled axes and an FFT along
    periodic ones (zero-mean pressure). The tendency is thus discretely divergence-free,
    and every explicit Runge–Kutta stage keeps a divergence-free state divergence-free.

    **Walls** are the grid's non-periodic sides. Every wall is impermeable (zero normal
    velocity); its boundary condition applies to the *tangential* velocity through ghost
    values: `simlab.Dirichlet(g)` is a wall sliding at speed $g$ (0: no slip; the lid of a
    cavity), `simlab.Neumann(0.0)` a free-slip wall. A periodic axis may carry the flow
    through (a channel); the body force $G$ then drives it. Along a walled $x$-axis the
    force is balanced by pressure and drives nothing.

    **Open sides**: `simlab.Inflow` on the low-$x$ side prescribes the normal velocity
    entering through each face (and a tangential one, as a wall's), `simlab.Outflow` on
    the high-$x$ side lets the flow leave with zero normal gradient of velocity and
    $p = 0$ there ([`open_channel`][simlab.models.WalledNavierStokes2D.open_channel]).
    The inflow counts in the divergence of a state, not in that of the tendency (it is
    steady), so the flux through every section stays the inlet's. The pressure is then
    solved by preconditioned conjugate gradients
    ([`pressure_krylov`][simlab.models.WalledNavierStokes2D.pressure_krylov]).

    **State layout**: shape `(2, nx, ny)`. `y[0, i, j]` is $u$ on the face between cells
    $(i, j)$ and $(i + 1, j)$ (the high-$x$ face of cell $(i, j)$), `y[1, i, j]` is $v$ on
    the high-$y$ face of cell $(i, j)$. Along a walled axis the last faces are the wall,
    where the normal velocity is zero: `y[0, -1, :]` (walled $x$) and `y[1, :, -1]`
    (walled $y$) stay 0; along a periodic axis they are the faces shared with cell 0; at
    an outflow they are the outlet's faces, open. An inflow's faces are boundary data,
    not in the state.

    **Initial state**: `simulate` refuses (for fixed steps, where it asks
    `max_stable_step`) a concrete `y0` that is not divergence-free to roundoff or has a
    nonzero normal velocity at a wall: the projected tendency would carry that divergence
    unchanged. `model.project(y0)` gives the nearest field that is (the discrete Leray
    projection); a traced `y0` is not checked.

    **Resolution**: with fixed steps, `simulate` warns when the cell Reynolds number
    $\max(U_x h_x, U_y h_y)/\nu$ of `y0` and the walls
    ([`cell_reynolds_number`][simlab.models.WalledNavierStokes2D.cell_reynolds_number])
    exceeds 2, the bound beyond which centred advection–diffusion can leave grid-scale
    wiggles in a steady boundary layer. The bound is sufficient, not necessary (the
    cavity at $Re = 100$ on $32^2$ cells, cell Reynolds number 3.1, still agrees with Ghia
    et al. to $2\times10^{-3}$), hence a warning and not an error.

    **Time step**: explicit solvers are bound by the viscous limit and the advective CFL
    limit, the latter from the fastest of the initial velocity and the walls' speeds;
    `max_stable_step` gives the largest stable step, `simulate` refuses a larger `dt0` and
    takes 0.9 of it without one. `cfl_step` gives the step of a chosen Courant number.

    **Arguments:**

    - `viscosity`: $\nu \ge 0$, the kinematic viscosity ($Re = UL/\nu$).
    - `grid`: a 2-D [`simlab.Grid`][]: each axis periodic or walled on both sides.
    - `body_force`: $G$, a force per unit mass along $x$ (a constant pressure gradient
      $-\partial_x p$ that the periodic pressure cannot hold).
    - `impl`: the momentum tendency's path: `"xla"` (shifted arrays), `"pallas"` (the
      fused kernel [`simlab.kernels.mac_momentum`][], on the velocity padded with the
      walls' ghosts) or `"auto"` (Pallas where it was measured faster: a TPU). The projection
      is XLA's on every path.
    - `pressure_solve`: `"auto"` (fast transforms, or conjugate gradients with an outlet),
      `"transform"` or `"krylov"` (conjugate gradients everywhere).

    !!! example

        ```python
        model, y0 = simlab.models.WalledNavierStokes2D.lid_driven_cavity(num_cells=16)
        trajectory = simlab.simulate(model, y0, jnp.array([0.0, 1.0]), solver="rk4",
                                     adaptive=False)
        y, u = model.centreline_profile(trajectory.ys[-1])  # u on x = 1/2
        ```
    """

    viscosity: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True, unit="length²/time")
    grid: Grid
    body_force: Float[Array, ""] = parameter(default=0.0, unit="length/time²")
    impl: str = eqx.field(static=True, default="auto")
    pressure_solve: str = eqx.field(static=True, default="auto")

    presets: ClassVar[tuple[str, ...]] = ("lid_driven_cavity", "channel", "open_channel")
    step_limit: ClassVar[str] = (
        "the viscous limit and the advective CFL limit of the initial velocity and the wall "
        "speeds; model.cfl_step(y0) gives the step of a Courant number"
    )

    def _check_fields(self):
        if self.grid.ndim != 2:
            raise ValueError(
                f"WalledNavierStokes2D: the grid must be 2-D; got shape {self.grid.shape}."
            )
        for name in ("viscosity", "body_force"):
            self._check_coefficient(name, allow_field=False)
        if self.pressure_solve not in PRESSURE_SOLVES:
            raise ValueError(
                f"WalledNavierStokes2D: pressure_solve must be one of {PRESSURE_SOLVES}; got "
                f"{self.pressure_solve!r}."
            )
        self._check_open_sides()
        if self.impl == "spectral":
            raise ValueError(
                "WalledNavierStokes2D: impl must be 'auto', 'xla' or 'pallas' (finite volumes "
                "on a staggered grid); got 'spectral'. Use simlab.models.NavierStokes2D for "
                "Fourier-spectral flow on a periodic grid."
            )

    def _check_open_sides(self) -> None:
        """Inflow on the low-$x$ side only, Outflow on the high-$x$ side only, an inflow
        always with an outflow (the mass it brings must leave), one profile value per
        face, and the transforms only without an outlet."""
        (low_x, high_x), y_sides = self.grid.boundaries
        misplaced = [
            f"{type(side).__name__}() on the {where} side"
            for side, where, allowed in (
                (low_x, "low-x", Inflow),
                (high_x, "high-x", Outflow),
                (y_sides[0], "low-y", None),
                (y_sides[1], "high-y", None),
            )
            if isinstance(side, Inflow | Outflow) and not (allowed and isinstance(side, allowed))
        ]
        if misplaced:
            raise ValueError(
                f"WalledNavierStokes2D: open sides carry a flow along x, entering through "
                f"simlab.Inflow on the low-x side and leaving through simlab.Outflow on the "
                f"high-x side; got {', '.join(misplaced)}. Move it, or use a wall there."
            )
        if isinstance(low_x, Inflow) and not self._has_outlet():
            raise ValueError(
                "WalledNavierStokes2D: an Inflow needs an outlet for the mass it brings; put "
                "simlab.Outflow() on the high-x side."
            )
        if isinstance(low_x, Inflow) and low_x.velocity.shape not in ((), self.grid.shape[1:]):
            raise ValueError(
                f"WalledNavierStokes2D: the Inflow velocity must be a scalar or one value per "
                f"face of the low-x side, shape {self.grid.shape[1:]}; got shape "
                f"{low_x.velocity.shape}."
            )
        if self.pressure_solve == "transform" and self._has_outlet():
            raise ValueError(
                "WalledNavierStokes2D: pressure_solve='transform' cannot hold p = 0 at an "
                "Outflow (the transforms diagonalise zero normal derivative only); use "
                "'auto' or 'krylov'."
            )

    @property
    def channel_shape(self) -> tuple[int, ...]:
        return (2,)

    # -- presets ---------------------------------------------------------------------------

    @classmethod
    def lid_driven_cavity(
        cls, num_cells: int = 32, reynolds: float = 100.0, lid_speed: ArrayLike = 1.0
    ) -> tuple["WalledNavierStokes2D", Array]:
        r"""The lid-driven cavity: the unit square with no-slip walls, the top one ($y = 1$)
        sliding at `lid_speed` $U$ along $x$; $\nu = U/Re$. Starts from rest.

        **Returns:** `(model, y0)`.
        """
        if not isinstance(num_cells, int) or num_cells < 4:
            raise ValueError(
                f"lid_driven_cavity: num_cells must be an integer of at least 4; got {num_cells!r}."
            )
        if not reynolds > 0:
            raise ValueError(f"lid_driven_cavity: reynolds must be positive; got {reynolds!r}.")
        lid = (Dirichlet(0.0), Dirichlet(lid_speed))
        grid = Grid((num_cells, num_cells), extent=1.0, boundary=["dirichlet", lid])
        model = cls(viscosity=jnp.abs(jnp.asarray(lid_speed, float)) / reynolds, grid=grid)
        return model, grid.zeros(channels=2)

    @classmethod
    def channel(
        cls,
        num_cells: tuple[int, int] = (4, 16),
        viscosity: float = 1.0,
        body_force: float = 8.0,
        length: float = 1.0,
    ) -> tuple["WalledNavierStokes2D", Array]:
        r"""Plane Poiseuille flow: no-slip walls at $y = 0$ and $y = 1$, periodic in $x$
        over `length`, driven by the body force $G$ (`body_force`). Starts from rest and
        tends to $u = G\,y(1 - y)/(2\nu)$
        ([`poiseuille_velocity`][simlab.models.poiseuille_velocity]).

        **Returns:** `(model, y0)`.
        """
        grid = Grid(num_cells, extent=(length, 1.0), boundary=["periodic", "dirichlet"])
        model = cls(viscosity=viscosity, grid=grid, body_force=body_force)
        return model, grid.zeros(channels=2)

    @classmethod
    def open_channel(
        cls,
        num_cells: tuple[int, int] = (32, 8),
        length: float = 4.0,
        viscosity: ArrayLike = 1.0,
        inflow_speed: ArrayLike = 1.0,
        profile: str = "uniform",
    ) -> tuple["WalledNavierStokes2D", Array]:
        r"""A channel with open ends: no-slip walls at $y = 0$ and $y = 1$, fluid entering
        at $x = 0$ with mean speed $\bar U$ (`inflow_speed`) and no tangential velocity,
        leaving at $x$ = `length` with zero normal gradient of velocity and $p = 0$.
        `profile` is `"uniform"` or `"parabolic"` ([`simlab.Inflow.parabolic`][]); far
        downstream the flow is plane Poiseuille flow of the same flux. The pressure solve
        is [`pressure_krylov`][simlab.models.WalledNavierStokes2D.pressure_krylov].
        Starts from the projection of rest: the potential flow of the inflow.

        **Returns:** `(model, y0)`.

        !!! example

            ```python
            model, y0 = simlab.models.WalledNavierStokes2D.open_channel((16, 8), length=2.0)
            ```
        """
        if profile not in ("uniform", "parabolic"):
            raise ValueError(
                f"open_channel: profile must be 'uniform' or 'parabolic'; got {profile!r}."
            )
        speed = jnp.asarray(inflow_speed, float)
        inflow = Inflow.parabolic(speed, num_cells[1]) if profile == "parabolic" else Inflow(speed)
        boundary = [(inflow, Outflow()), "dirichlet"]
        grid = Grid(num_cells, extent=(length, 1.0), boundary=boundary)
        model = cls(viscosity=viscosity, grid=grid)
        return model, model.project(grid.zeros(channels=2))

    # -- the vector field ------------------------------------------------------------------

    def __call__(self, t, y, args):
        # The inflow is steady: the tendency's projection keeps the flux through every side.
        tendency = self.momentum_tendency(y)
        return tendency - self._gradient(self.solve_pressure(self._divergence(tendency, 0.0)))

    def momentum_tendency(self, y: Array) -> Array:
        r"""$F(\mathbf u) = -\nabla\cdot(\mathbf u\mathbf u) + \nu\nabla^2\mathbf u +
        G\hat{\mathbf x}$ on the faces, before the projection (zero on wall faces)."""
        momentum = (
            kernels.mac_momentum
            if resolve_impl(self.impl, "mac_momentum") == "pallas"
            else kernels.mac_momentum_reference
        )
        tendency = momentum(
            self._padded_velocity(y), self.grid.spacing, self.viscosity, self.body_force
        )
        return tendency * self._open_faces(y.dtype)

    def _padded_velocity(self, y: Array) -> Array:
        """$(u, v)$ with one ghost cell per side: across walls and open sides, the
        tangential ghosts of their conditions; along the normal axis (and then at the
        corners), wrapped where periodic. Along a walled $y$-axis the wrap serves too: the
        face beyond the last is the wall face, which holds zero. Along a walled $x$-axis
        the low ghost is the low side's normal velocity (a wall's 0, an inflow's profile),
        the high one a copy of the last face (zero normal gradient at an outflow; at a wall
        only the wall face's own tendency, which is zero, reads it)."""
        u = pad_axis(y[0], self.grid, 1, 1)
        if self.grid.is_periodic[0]:
            u = jnp.pad(u, ((1, 1), (0, 0)), mode="wrap")
        else:
            inlet = jnp.broadcast_to(self._inflow_velocity(y.dtype), y.shape[2:])
            u = jnp.concatenate([pad_axis(inlet[None], self.grid, 1, 1), u, u[-1:]])
        v = jnp.pad(pad_axis(y[1], self.grid, 0, 1), ((0, 0), (1, 1)), mode="wrap")
        return jnp.stack([u, v])

    @eqx.filter_jit
    def project(self, y: Array) -> Array:
        r"""The discrete Leray projection $P\mathbf u = \mathbf u - \nabla p$ with
        $L p = \nabla\cdot\mathbf u$: the nearest divergence-free field (in the discrete
        $L^2$ norm) with zero normal velocity at the walls. Use it to make an initial
        field admissible.

        !!! example

            ```python
            model, _ = simlab.models.WalledNavierStokes2D.lid_driven_cavity(num_cells=8)
            y0 = model.project(jax.random.normal(jax.random.PRNGKey(0), (2, 8, 8)))
            float(jnp.max(jnp.abs(model.divergence(y0))))  # roundoff
            ```
        """
        y = jnp.asarray(y) * self._open_faces(jnp.asarray(y).dtype)
        return y - self._gradient(self.solve_pressure(self.divergence(y)))

    def divergence(self, y: Array) -> Array:
        r"""$\nabla\cdot\mathbf u$ in every cell, shape `grid.shape`: the net outflow
        through its four faces over its area (the wall faces carry none, an inflow its
        prescribed velocity)."""
        return self._divergence(y, self._inflow_velocity(y.dtype))

    def _divergence(self, y: Array, inflow: ArrayLike) -> Array:
        """The divergence with `inflow` on the low-$x$ faces of a walled $x$-axis."""
        hx, hy = self.grid.spacing
        u, v = y[0], y[1]
        return (u - self._west_faces(u, inflow)) / hx + (v - jnp.roll(v, 1, 1)) / hy

    def _west_faces(self, u: Array, inflow: ArrayLike) -> Array:
        """$u$ on the low-$x$ face of every cell: wrapped on a periodic $x$-axis, else the
        normal velocity `inflow` through the low side (0 at a wall) for the first cells.
        (Along $y$, `roll` serves walls too: the face beyond the last is the wall's 0.)"""
        if self.grid.is_periodic[0]:
            return jnp.roll(u, 1, 0)
        inlet = jnp.broadcast_to(jnp.asarray(inflow, u.dtype), u.shape[1:])
        return jnp.concatenate([inlet[None], u[:-1]])

    def _inflow_velocity(self, dtype: Any) -> Array:
        """The normal velocity through the low-$x$ side: an inflow's, else 0."""
        inlet = self.grid.boundaries[0][0]
        return inlet.velocity.astype(dtype) if isinstance(inlet, Inflow) else jnp.zeros((), dtype)

    def _has_outlet(self) -> bool:
        return isinstance(self.grid.boundaries[0][1], Outflow)

    @eqx.filter_jit
    def solve_pressure(self, source: Array) -> Array:
        r"""The pressure $p$ with $L p = s$ ($s - \bar s$ without an outlet, where $p$ has
        zero mean): $L$ the 5-point Laplacian on the cell centres, with zero normal
        derivative at walls and inflows, periodic along periodic axes, and $p = 0$ on an
        outlet's faces. Fast transforms (a DCT-II along walled axes, an FFT along periodic
        ones) diagonalise it without an outlet; with one, or with
        `pressure_solve="krylov"`, conjugate gradients solve it
        ([`pressure_krylov`][simlab.models.WalledNavierStokes2D.pressure_krylov])."""
        if self._uses_krylov():
            return self.pressure_krylov(source)[0]
        return self._transform_solve(source, constant_mode=0.0)

    @eqx.filter_jit
    def pressure_krylov(self, source: Array, *, preconditioned: bool = True) -> tuple[Array, Array]:
        r"""$L p = s$ by conjugate gradients (Lineax's `CG`, matrix-free), preconditioned
        by the fast-transform solve of the nearest problem without an outlet (zero normal
        derivative there too). That problem's constant mode is singular; the
        preconditioner maps it to $1/\lambda_0$, $\lambda_0 = -2/(n_x h_x^2)$ the
        Rayleigh quotient of $L$ on a constant (only the outlet's cells feel it). The
        residual ends below $100\epsilon$ of $\max|s|$ ($2\times10^{-14}$ in float64).

        **Returns:** `(p, iterations)`.

        !!! example

            ```python
            model, _ = simlab.models.WalledNavierStokes2D.open_channel((16, 8))
            source = jax.random.normal(jax.random.PRNGKey(0), (16, 8))
            p, steps = model.pressure_krylov(source)  # 12 steps; 94 without preconditioning
            ```
        """
        source = jnp.asarray(source)
        outlet = self._has_outlet()
        if not outlet:  # all Neumann: the solvable part, and p of zero mean
            source = source - jnp.mean(source)
        hx = self.grid.spacing[0]
        constant_mode = -self.grid.shape[0] * hx**2 / 2 if outlet else 0.0
        pressure, steps = conjugate_gradient(
            lambda p: -self.pressure_laplacian(p),
            (lambda r: -self._transform_solve(r, constant_mode)) if preconditioned else None,
            -source,
        )
        return (pressure if outlet else pressure - jnp.mean(pressure)), steps

    def pressure_laplacian(self, pressure: Array) -> Array:
        r"""$L p = \nabla\cdot\nabla p$ on the cell centres, the operator of the pressure
        solve: the divergence of the pressure gradient on the open faces (none through
        walls or inflows; $p = 0$ on an outlet)."""
        return self._divergence(self._gradient(pressure), 0.0)

    def _transform_solve(self, source: Array, constant_mode: float) -> Array:
        """$L^{-1}$ of the all-Neumann/periodic Laplacian by fast transforms, the constant
        mode multiplied by `constant_mode`."""
        spectrum = source
        for axis in self._walled_axes():
            spectrum = dct(spectrum, type=2, norm="ortho", axis=axis)
        periodic = self._periodic_axes()
        if periodic:
            spectrum = jnp.fft.fftn(spectrum, axes=periodic)
        symbol = self._inverse_laplacian_symbol(constant_mode)
        spectrum = spectrum * jnp.asarray(symbol, spectrum.dtype)
        if periodic:
            spectrum = jnp.fft.ifftn(spectrum, axes=periodic).real
        for axis in self._walled_axes():
            spectrum = idct(spectrum, type=2, norm="ortho", axis=axis)
        return spectrum

    def _uses_krylov(self) -> bool:
        return self.pressure_solve == "krylov" or self._has_outlet()

    def _gradient(self, pressure: Array) -> Array:
        r"""$\nabla p$ on the faces (zero on wall faces; at an outlet, from $p = 0$ on its
        face half a cell beyond the last centre)."""
        gradient = []
        for axis, h in enumerate(self.grid.spacing):
            n = pressure.shape[axis]
            first, last = (jax.lax.slice_in_dim(pressure, i, i + 1, axis=axis) for i in (0, n - 1))
            beyond = first if self.grid.is_periodic[axis] else -last  # 2 * 0 - p
            ahead = jnp.concatenate(
                [jax.lax.slice_in_dim(pressure, 1, n, axis=axis), beyond], axis=axis
            )
            gradient.append((ahead - pressure) / h)
        return jnp.stack(gradient) * self._open_faces(pressure.dtype)

    def _walled_axes(self) -> tuple[int, ...]:
        return tuple(axis for axis, periodic in enumerate(self.grid.is_periodic) if not periodic)

    def _periodic_axes(self) -> tuple[int, ...]:
        return tuple(axis for axis, periodic in enumerate(self.grid.is_periodic) if periodic)

    def _open_faces(self, dtype: Any) -> Array:
        """1 on the faces that carry a velocity, 0 on the wall faces (static); an outlet's
        faces are open."""
        mask = np.ones((2, *self.grid.shape))
        for axis in self._walled_axes():
            if axis == 0 and self._has_outlet():
                continue
            index = [axis, slice(None), slice(None)]
            index[1 + axis] = -1
            mask[tuple(index)] = 0.0
        return jnp.asarray(mask, dtype)

    def _inverse_laplacian_symbol(self, constant_mode: float) -> np.ndarray:
        r"""$1/\lambda$ of the all-Neumann/periodic pressure Laplacian per transformed mode;
        `constant_mode` for the constant one, where $\lambda = 0$ (0 fixes the pressure's
        mean at zero)."""
        eigenvalues = 0.0
        for axis, (n, h) in enumerate(zip(self.grid.shape, self.grid.spacing, strict=True)):
            period = n if self.grid.is_periodic[axis] else 2 * n
            angle = 2 * np.pi * np.arange(n) / period
            shape = [1, 1]
            shape[axis] = n
            eigenvalues = eigenvalues + ((2 * np.cos(angle) - 2) / h**2).reshape(shape)
        constant = eigenvalues == 0
        return np.where(constant, constant_mode, 1.0 / np.where(constant, 1.0, eigenvalues))

    # -- diagnostics -----------------------------------------------------------------------

    def centreline_profile(self, y: Array, component: str = "u") -> tuple[Array, Array]:
        r"""A velocity profile across the middle of the box: `"u"` on the vertical line
        through the centre, against $y$; `"v"` on the horizontal line, against $x$ (the
        profiles Ghia, Ghia & Shin tabulate for the cavity).

        **Returns:** `(positions, velocity)` at the cell-centre coordinates across the
        line (one face value where the line is a row of faces, the mean of the two faces
        around it on an odd number of cells).
        """
        if component not in ("u", "v"):
            raise ValueError(
                f"centreline_profile: component must be 'u' or 'v'; got {component!r}."
            )
        axis = 0 if component == "u" else 1
        field = jnp.asarray(y)[axis]
        n = self.grid.shape[axis]
        if n % 2 == 0:
            profile = jnp.take(field, n // 2 - 1, axis=axis)
        else:
            below = jnp.take(field, (n - 1) // 2 - 1, axis=axis)
            profile = 0.5 * (below + jnp.take(field, (n - 1) // 2, axis=axis))
        return self.grid.coordinates(profile.dtype)[1 - axis], profile

    def cell_velocity(self, y: ArrayLike) -> Array:
        r"""$(u, v)$ at the cell centres, shape `(2, *grid.shape)`: the mean of the two
        faces of each cell normal to the component (a wall face holds zero), for drawing.

        !!! example

            ```python
            model, _ = simlab.models.WalledNavierStokes2D.channel()
            u, v = model.cell_velocity(simlab.models.poiseuille_velocity(model))
            ```
        """
        y = jnp.asarray(y)
        west = self._west_faces(y[0], self._inflow_velocity(y.dtype))
        return 0.5 * jnp.stack([y[0] + west, y[1] + jnp.roll(y[1], 1, 1)])

    def kinetic_energy(self, y: Array) -> Array:
        r"""$E = \tfrac12\int|\mathbf u|^2\,dA$, each component summed over its faces."""
        return 0.5 * jnp.sum(jnp.asarray(y) ** 2) * self.grid.cell_volume

    def cfl_step(self, y: ArrayLike, *, courant: float = DEFAULT_COURANT) -> Array:
        r"""The step of Courant number $C$: $\Delta t = C / (U_x/h_x + U_y/h_y)$, with
        $U_x$ the largest of $|u|$ and the walls' speeds along $x$ ($U_y$ likewise).

        RK4-type stages are stable on the imaginary axis up to $2\sqrt2$, so the default
        $C = 0.5$ leaves a wide margin for advection; the viscous limit, which
        `max_stable_step` includes, may be smaller on fine grids at low $Re$.

        **Returns:** $\Delta t$, a scalar array (infinite for a fluid at rest).
        """
        if not courant > 0:
            raise ValueError(f"cfl_step: courant must be positive; got {courant!r}.")
        rate = self._advective_rate(jnp.asarray(y))
        return jnp.where(rate > 0, courant / jnp.where(rate > 0, rate, 1.0), jnp.inf)

    def _speeds(self, y: Array) -> Array:
        """$(U_x, U_y)$: the largest of each velocity component and of the wall speeds
        along it (the tangential values of the walls and inflows normal to the other axis,
        and an inflow's speed)."""
        speeds = []
        for component in (0, 1):
            walls = self.grid.boundaries[1 - component]
            values = [side.value.astype(y.dtype) for side in walls if isinstance(side, Dirichlet)]
            values += [
                jnp.max(jnp.abs(side.tangential if component else side.velocity)).astype(y.dtype)
                for side in self.grid.boundaries[0]
                if isinstance(side, Inflow)
            ]
            candidates = jnp.abs(jnp.stack([jnp.max(jnp.abs(y[component])), *values]))
            speeds.append(jnp.max(candidates))
        return jax.lax.stop_gradient(jnp.stack(speeds))

    def _advective_rate(self, y: Array) -> Array:
        speeds = self._speeds(y)
        hx, hy = self.grid.spacing
        return speeds[0] / hx + speeds[1] / hy

    def linear_eigenvalues(self, y0):
        viscous = diffusion_symbol(jnp.abs(self.viscosity), self.grid.spacing, 2)
        advective = advection_symbol(self.grid.spacing, self._speeds(jnp.asarray(y0)), "central")
        return as_complex(viscous) + advective

    def max_stable_step(self, solver, y0):
        self._check_incompressible(y0)
        self._warn_if_under_resolved(y0)
        return super().max_stable_step(solver, y0)

    def cell_reynolds_number(self, y: ArrayLike) -> Array:
        r"""The cell Reynolds number $\max(U_x h_x,\ U_y h_y)/\nu$, with $U_x$ the largest
        of $|u|$ and the walls' speeds along $x$ ($U_y$ likewise): the ratio of advection
        to diffusion across one cell. Centred advection–diffusion is free of grid-scale
        wiggles in the steady 1-D problem when it is at most 2.

        **Returns:** a scalar array (infinite for $\nu = 0$ with a moving fluid or wall).

        !!! example

            ```python
            model, y0 = simlab.models.WalledNavierStokes2D.lid_driven_cavity(64, 100.0)
            model.cell_reynolds_number(y0)  # 1/64 / 0.01 = 1.56: the lid at 1, nu = 1/100
            ```
        """
        speeds = self._speeds(jnp.asarray(y))
        cell_speeds = speeds * jnp.asarray(self.grid.spacing, speeds.dtype)
        advection = jnp.max(cell_speeds)
        viscosity = jnp.asarray(self.viscosity, advection.dtype)
        safe = jnp.where(viscosity > 0, viscosity, 1.0)
        return jnp.where(viscosity > 0, advection / safe, jnp.where(advection > 0, jnp.inf, 0.0))

    def _warn_if_under_resolved(self, y0) -> None:
        if not (is_concrete(y0) and is_concrete(self.viscosity)):
            return
        cell_reynolds = float(self.cell_reynolds_number(y0))
        if cell_reynolds <= CELL_REYNOLDS_BOUND:
            return
        remedy = "a larger viscosity"
        if float(self.viscosity) > 0:
            # Cells along each axis for U h / nu = 2, i.e. h = 2 nu / U.
            speeds = np.asarray(self._speeds(jnp.asarray(y0)))
            cells = (
                speeds
                * np.asarray(self.grid.extent)
                / (CELL_REYNOLDS_BOUND * float(self.viscosity))
            )
            needed = tuple(
                max(int(np.ceil(c)), n) for c, n in zip(cells, self.grid.shape, strict=True)
            )
            remedy = f"about {needed} cells, or {remedy},"
        warn_at_caller(
            f"WalledNavierStokes2D: the cell Reynolds number max(U_x h_x, U_y h_y)/nu of y0 "
            f"and the walls is {cell_reynolds:.3g}, above {CELL_REYNOLDS_BOUND:g}, the bound "
            f"for centred advection-diffusion to stay free of grid-scale wiggles in steady "
            f"boundary layers. The grid {self.grid.shape} may be too coarse for this Reynolds "
            f"number: {remedy} would bring it to {CELL_REYNOLDS_BOUND:g}.",
            UserWarning,
        )

    def describe_blow_up(self, solver, y, dt0):
        courant = float(dt0) * float(self._advective_rate(jnp.asarray(y)))
        return (
            f"the Courant number dt0·(U_x/h_x + U_y/h_y) of the last saved flow was {courant:.3g}."
        )

    def _check_incompressible(self, y0: Any) -> None:
        """Refuses a concrete `y0` that is not divergence-free to roundoff, or that moves
        through a wall."""
        if not is_concrete(y0):
            return
        y0 = np.asarray(y0)
        scale = float(np.max(np.abs(y0)))
        tolerance = _DIVERGENCE_ULPS * np.finfo(y0.dtype).eps * scale
        through_walls = float(np.max(np.abs(y0 * (1 - np.asarray(self._open_faces(y0.dtype))))))
        divergence = float(np.max(np.abs(self.divergence(jnp.asarray(y0))))) * min(
            self.grid.spacing
        )
        if through_walls > tolerance or divergence > tolerance or not math.isfinite(divergence):
            raise ValueError(
                "WalledNavierStokes2D: y0 must be divergence-free with zero normal velocity at "
                f"the walls; got max|div u|·h = {divergence:.3g} and {through_walls:.3g} on the "
                f"wall faces, above roundoff ({tolerance:.3g}). Pass model.project(y0), its "
                "discrete Leray projection."
            )


def poiseuille_velocity(model: WalledNavierStokes2D) -> Array:
    r"""The exact steady flow of a channel with no-slip walls at $y = y_0$ and
    $y = y_0 + H$, periodic in $x$, driven by the body force $G$:
    $u = G\,\eta(H - \eta)/(2\nu)$, $\eta = y - y_0$, $v = 0$.

    **Returns:** the state, shape `(2, *grid.shape)` ($u$ at the cell-centre heights of the
    $x$-faces).

    !!! example

        ```python
        model, _ = simlab.models.WalledNavierStokes2D.channel()
        exact = simlab.models.poiseuille_velocity(model)  # u at most G/(8 nu) = 1
        ```
    """
    grid = model.grid
    if grid.is_periodic != (True, False):
        raise ValueError(
            "poiseuille_velocity: the grid must be periodic along x and walled along y; got "
            f"periodic axes {grid.is_periodic}."
        )
    (_, eta), height = grid.mesh(), grid.extent[1]
    eta = eta - grid.origin[1]
    u = model.body_force * eta * (height - eta) / (2 * model.viscosity)
    return jnp.stack([u, jnp.zeros_like(u)])
