r"""Incompressible flow in two dimensions on periodic grids, in vorticity form.

`NavierStokes2D` is a pseudo-spectral split model: viscosity and drag are its Fourier
symbol (integrated exactly by ETDRK4), advection and forcing its nonlinear part. The
set-ups are functions giving initial (or exact) vorticity fields: the Taylor–Green vortex,
a random field of prescribed spectrum for decaying turbulence, and the laminar state of
Kolmogorov flow. Velocity, energy and spectra are in `simlab.grid` (`velocity`,
`kinetic_energy`, `energy_spectrum`, `cfl_step`, ...).
"""

import functools
from collections.abc import Callable
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .._misc import is_concrete, warn_at_caller
from ..grid import Grid
from ..grid._spectral import (
    _derivative_wavenumbers,
    apply_symbol,
    dealiasing_mask,
    fourier_transform,
    inverse_fourier_transform,
    squared_wavenumber,
)
from ..grid._vorticity import (
    _check_plane,
    courant_number,
    energy_spectrum,
    kinetic_energy,
    spectral_shells,
    velocity_from_spectrum,
    velocity_symbols,
)
from ..integrate import ETDRK4
from ._base import parameter
from ._split import AbstractSpectralGridModel

# ETDRK4 with the linear part off is classical RK4, stable on the imaginary axis up to
# |z| = 2√2: the bound on Δt times the fastest rotation rate of a kept mode.
_RK4_IMAGINARY_AXIS_LIMIT = 2 * np.sqrt(2)


class _WholeGridFourier:
    """The transforms of a field held whole on one device: `rfft2`, `irfft2`, and Fourier
    multipliers as they are.

    A batch of fields is transformed one field at a time: XLA's CPU runtime runs each FFT
    on one thread but independent ones concurrently, so separate transforms of a stage's
    fields share the cores where one batched transform would hold one."""

    def __init__(self, grid: Grid):
        self.grid = grid

    def _each(self, transform: Callable[[Array, Grid], Array], batch: Array) -> Array:
        leading = batch.shape[: batch.ndim - self.grid.ndim]
        if not leading:
            return transform(batch, self.grid)
        items = batch.reshape(-1, *batch.shape[len(leading) :])
        fields = [transform(item, self.grid) for item in items]
        return jnp.stack(fields).reshape(*leading, *fields[0].shape)

    def forward(self, field: Array) -> Array:
        return self._each(fourier_transform, field)

    def inverse(self, spectrum: Array) -> Array:
        return self._each(inverse_fourier_transform, spectrum)

    def multiplier(self, symbol: ArrayLike) -> Array:
        return jnp.asarray(symbol)


FORCING_MODE_DEFAULT = 4  # NavierStokes2D's forcing periods along y


class NavierStokes2D(AbstractSpectralGridModel):
    r"""The incompressible Navier–Stokes equations in two dimensions, as the vorticity
    equation on a periodic grid, with linear drag, Kolmogorov forcing and an optional
    passive scalar $c$:

    $$
    \partial_t\omega + \mathbf u\cdot\nabla\omega = \nu\nabla^2\omega - \alpha\omega + f,
    \qquad
    \partial_t c + \mathbf u\cdot\nabla c = \kappa\nabla^2 c,
    $$

    with $\mathbf u = (\partial_y\psi, -\partial_x\psi)$ and $\nabla^2\psi = -\omega$, so
    $\nabla\cdot\mathbf u = 0$ and $\omega = \partial_x v - \partial_y u$.

    **Kolmogorov forcing.** The body force $\mathbf F = \chi\sin(n y)\,\hat{\mathbf x}$,
    $n = 2\pi m / L_y$ for the integer `forcing_mode` $m$, enters the vorticity equation as
    its curl, $f = -\chi n\cos(n y)$. Its laminar steady state is $u = U\sin(ny)$,
    $U = \chi/(\nu n^2 + \alpha)$
    ([`kolmogorov_laminar_vorticity`][simlab.models.kolmogorov_laminar_vorticity]), stable
    at low Reynolds number $Re = U/(\nu n)$.

    **Numerics.** The linear part has the symbol $-\nu|\mathbf k|^2 - \alpha$ (and
    $-\kappa|\mathbf k|^2$ for $c$); the advection is pseudo-spectral, in flux form
    $\nabla\cdot(\mathbf u\,\omega)$ (equal to $\mathbf u\cdot\nabla\omega$, the
    spectral velocity being divergence-free), its factors and product truncated by
    Orszag's 2/3 rule (`dealiasing_fraction`), so the truncated system conserves energy
    and enstrophy exactly when $\nu = \alpha = f = 0$. Solve it with `solver="etdrk4"`
    and a fixed step from [`simlab.grid.cfl_step`][].

    **Step limit.** ETDRK4 integrates viscosity and drag exactly, but advection explicitly:
    the flow turns a kept mode $\mathbf k$ at the rate $|\mathbf u\cdot\mathbf k| \le
    |u|\,k_{x,\max} + |v|\,k_{y,\max}$ (the largest kept wavenumbers), and a step is stable
    when that rate times $\Delta t$ stays within RK4's $2\sqrt2$ on the imaginary axis:
    $\Delta t \le 2\sqrt2 / \max(|u|\,k_{x,\max} + |v|\,k_{y,\max})$ over the initial
    velocity (a Courant number $\Delta t\max(|u|/h_x + |v|/h_y)$ of about 1.35 after 2/3
    dealiasing). `simulate` refuses a larger `dt0`, naming it and the limit, and with
    `dt0=None` steps at 0.9 times the limit; explicit solvers are bound by the viscous
    limit too (`max_stable_step`).

    **Arguments** (in consistent units, e.g. lengths in $L/2\pi$):

    - `grid`: a periodic 2-D [`simlab.Grid`][].
    - `viscosity`: $\nu \ge 0$ (default $10^{-3}$).
    - `drag`: the linear (Ekman) drag $\alpha \ge 0$ (default 0).
    - `forcing_amplitude`: $\chi$, the amplitude of the body force (default 0: unforced).
    - `forcing_mode`: $m$, the integer number of forcing periods along $y$ (default 4).
    - `passive_scalar`: whether the state carries a passive scalar (default `False`).
    - `scalar_diffusivity`: $\kappa \ge 0$ of the passive scalar (default $10^{-3}$).
    - `dealiasing_fraction`: the kept fraction of each axis's wavenumbers (default 2/3).

    The state is $\omega$, shape `grid.shape`; with a passive scalar it is $(\omega, c)$,
    shape `(2, *grid.shape)`.

    !!! example

        ```python
        grid = simlab.Grid((64, 64), extent=2 * jnp.pi)
        model = simlab.models.NavierStokes2D(grid=grid, viscosity=3e-3)  # k_max·η ≈ 1.04
        w0 = simlab.models.random_vorticity(jax.random.PRNGKey(0), grid)
        dt = float(simlab.grid.cfl_step(w0, grid))
        trajectory = simlab.simulate(
            model, w0, jnp.linspace(0.0, 2.0, 5), solver="etdrk4", adaptive=False, dt0=dt
        )
        ```
    """

    grid: Grid
    viscosity: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True, default=1e-3)
    drag: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True, default=0.0)
    forcing_amplitude: Float[Array, ""] = parameter(default=0.0)
    forcing_mode: int = eqx.field(static=True, default=FORCING_MODE_DEFAULT)
    passive_scalar: bool = eqx.field(static=True, default=False)
    scalar_diffusivity: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True, default=1e-3)
    dealiasing_fraction: float = eqx.field(static=True, default=2 / 3)

    impl: ClassVar[str] = "xla"  # spectral: jnp.fft, no stencil kernels
    step_limit: ClassVar[str] = (
        "ETDRK4: the advective CFL limit of the initial velocity on the kept wavenumbers; "
        "explicit solvers: that and the viscous limit. simlab.grid.cfl_step(w0, grid) gives "
        "a step well inside"
    )

    def _check_fields(self):
        if self.grid.ndim == 2 and not all(self.grid.is_periodic):
            raise ValueError(
                "NavierStokes2D is spectral and needs a periodic grid on both axes; got "
                f"boundaries {self.grid.boundaries}. For walls use "
                "simlab.models.WalledNavierStokes2D (e.g. its lid_driven_cavity or channel)."
            )
        _check_plane(self.grid, "NavierStokes2D")
        fraction = self.dealiasing_fraction
        if not isinstance(fraction, int | float) or not 0 < fraction <= 1:
            raise ValueError(
                f"NavierStokes2D: dealiasing_fraction must lie in (0, 1]; got {fraction!r}."
            )
        for name in ("viscosity", "drag", "forcing_amplitude", "scalar_diffusivity"):
            self._check_coefficient(name, allow_field=False)
        self._check_forcing_mode()
        if not isinstance(self.passive_scalar, bool):
            raise ValueError(
                "NavierStokes2D: passive_scalar must be True or False; got "
                f"{self.passive_scalar!r}."
            )

    def _check_forcing_mode(self):
        # Checked for an unforced flow too: forcing_amplitude is a parameter, which fits
        # and sweeps change without building the model again.
        mode, num_y = self.forcing_mode, self.grid.shape[1]
        highest = (num_y - 1) // 2
        if isinstance(mode, int) and 1 <= mode <= highest:
            return
        if highest < 1:
            raise ValueError(
                f"NavierStokes2D: {num_y} cells along y hold no forcing_mode below their "
                "Nyquist mode: use at least 3 cells along y."
            )
        problem = (
            f"NavierStokes2D: forcing_mode must be an integer in [1, {highest}] on {num_y} "
            f"cells along y (below their Nyquist mode); got {mode!r}"
        )
        if isinstance(mode, int) and mode == FORCING_MODE_DEFAULT:
            problem += " (the default)"
        amplitude = self.forcing_amplitude
        if is_concrete(amplitude) and np.all(np.asarray(amplitude) == 0):
            raise ValueError(
                f"{problem}. The flow is unforced (forcing_amplitude = 0), so any mode in "
                "range gives the same flow: pass forcing_mode=1."
            )
        modes = {1: "forcing_mode=1", 2: "forcing_mode=1 or 2"}.get(
            highest, f"forcing_mode from 1 to {highest}"
        )
        if isinstance(mode, int) and mode >= 1:
            modes += f", or use at least {2 * mode + 1} cells along y"
        raise ValueError(f"{problem}. Pass {modes}.")

    @property
    def channel_shape(self) -> tuple[int, ...]:
        return (2,) if self.passive_scalar else ()

    @property
    def forcing_wavenumber(self) -> float:
        r"""$n = 2\pi m / L_y$, the angular wavenumber of the forcing."""
        return 2 * np.pi * self.forcing_mode / self.grid.extent[1]

    def _forcing_shape(self) -> np.ndarray:
        r"""$-n\cos(n y)$ at the cell centres, in NumPy: static, so its transform is a
        constant of the compiled step rather than an FFT at every stage."""
        (_, num_y), (_, spacing), (_, origin) = self.grid.shape, self.grid.spacing, self.grid.origin
        y = origin + spacing * (np.arange(num_y) + 0.5)
        n = self.forcing_wavenumber
        return np.broadcast_to(-n * np.cos(n * y), self.grid.shape)

    def vorticity_forcing(self) -> Array:
        r"""The forcing of the vorticity equation, $f = -\chi n\cos(n y)$, shape `grid.shape`."""
        return self.forcing_amplitude * jnp.asarray(self._forcing_shape())

    def linear_symbol(self):
        k2 = squared_wavenumber(self.grid)
        vorticity_symbol = -self.viscosity * k2 - self.drag
        if not self.passive_scalar:
            return vorticity_symbol
        return jnp.stack([vorticity_symbol, -self.scalar_diffusivity * k2])

    def nonlinear_spectral(self, t, spectrum, args):
        return self.nonlinear_spectral_with(_WholeGridFourier(self.grid), t, spectrum, args)

    def nonlinear_spectral_with(self, fourier, t, spectrum, args):
        r"""`nonlinear_spectral` with the transforms of `fourier`: its `forward` and
        `inverse` between fields and spectra, and its `multiplier`, which lays a Fourier
        multiplier on the half spectrum out as its spectra are. On one device these are
        `rfft2`, `irfft2` and the identity; [`simlab.decomposition.SlabFFT`][] gives the
        same on a field split into slabs over devices."""
        kept = dealiasing_mask(self.grid, self.dealiasing_fraction)
        kx, ky = _derivative_wavenumbers(self.grid)
        # Flux form, u·∇c = ∇·(u c): the spectral velocity is divergence-free exactly, and
        # the 2/3 rule makes both forms exact on the kept modes. It takes three transforms
        # to the grid (u, v, ω) and two back (uω, vω) per stage, where the advective form
        # takes four and one, and XLA's CPU runtime runs each pair concurrently. Each batch
        # stacks whole fields, so XLA slices every one back out without a copy.
        dtype = spectrum.dtype
        to_u, to_v = (
            fourier.multiplier(s * kept).astype(dtype) for s in velocity_symbols(self.grid)
        )
        to_x, to_y = (fourier.multiplier(1j * k * kept).astype(dtype) for k in (kx, ky))
        mask = fourier.multiplier(kept)
        channels = spectrum.reshape(-1, *mask.shape)
        truncated = [apply_symbol(mask, channel) for channel in channels]
        spectra = [to_u * channels[0], to_v * channels[0], *truncated]
        u, v, *advected = fourier.inverse(jnp.stack(spectra))
        fluxes = fourier.forward(jnp.stack([w * c for w in (u, v) for c in advected]))
        flux_x, flux_y = jnp.split(fluxes, 2)
        tendency = -(to_x[None] * flux_x + to_y[None] * flux_y).reshape(spectrum.shape)
        shape_spectrum = fourier.multiplier(np.fft.rfft2(self._forcing_shape()))
        forcing = apply_symbol(self.forcing_amplitude, shape_spectrum.astype(tendency.dtype))
        if self.passive_scalar:
            return tendency.at[0].add(forcing)  # the scalar is not forced
        return tendency + forcing

    def max_stable_step(self, solver, y0):
        r"""The largest stable fixed step from `y0`: for ETDRK4 the advective CFL limit
        $2\sqrt2 / \max(|u|\,k_{x,\max} + |v|\,k_{y,\max})$ (infinite for a flow at rest);
        for explicit Runge–Kutta solvers the limit of `linear_eigenvalues`, viscous and
        advective; `None` for implicit solvers. Warns first if the grid is too coarse for
        a concrete `y0` (see the class's *Resolution*)."""
        self._warn_if_under_resolved(y0)
        return self._stable_step(solver, y0)

    def _stable_step(self, solver, y0):
        if not isinstance(solver, ETDRK4):
            return super().max_stable_step(solver, y0)
        largest_kept = self._largest_kept_wavenumbers()
        u, v = jax.lax.stop_gradient(self._initial_velocity(jnp.asarray(y0)))
        rate = jnp.max(jnp.abs(u) * largest_kept[0] + jnp.abs(v) * largest_kept[1])
        return jnp.where(
            rate > 0, _RK4_IMAGINARY_AXIS_LIMIT / jnp.where(rate > 0, rate, 1.0), jnp.inf
        )

    def _largest_kept_wavenumbers(self) -> list[float]:
        """The largest kept $|k_x|$ and $|k_y|$ after dealiasing."""
        kept = dealiasing_mask(self.grid, self.dealiasing_fraction)
        return [float(np.max(np.abs(k) * kept)) for k in _derivative_wavenumbers(self.grid)]

    def dissipation_wavenumber(self, y0: ArrayLike) -> Array:
        r"""Kraichnan's dissipation wavenumber of the enstrophy cascade,
        $k_\eta = 1/\eta = (\beta/\nu^3)^{1/6}$, with the enstrophy dissipation rate
        $\beta = 2\nu P$ of the vorticity `y0`, $P = \tfrac12\langle|\nabla\omega|^2\rangle$
        its palinstrophy: $k_\eta = (2P/\nu^2)^{1/6}$. Scales below $1/k_\eta$ are damped
        by viscosity; a grid resolves the flow when its largest kept wavenumber reaches
        $k_\eta$ ($k_{\max}\eta \ge 1$). Decaying turbulence first steepens its gradients,
        so $P$, and $k_\eta$, grow for a while: the estimate from `y0` is a lower bound.

        **Returns:** $k_\eta$, a scalar array (infinite for $\nu = 0$: the truncated Euler
        equations have no dissipation scale).

        !!! example

            ```python
            grid = simlab.Grid((64, 64), extent=2 * jnp.pi)
            model = simlab.models.NavierStokes2D(grid=grid, viscosity=1e-3)
            w0 = simlab.models.random_vorticity(jax.random.PRNGKey(0), grid)
            model.dissipation_wavenumber(w0)  # about 29, above k_max = 21: too coarse
            ```
        """
        y0 = jnp.asarray(y0)
        vorticity = y0[0] if self.passive_scalar else y0
        kx, ky = _derivative_wavenumbers(self.grid)
        spectrum = fourier_transform(vorticity, self.grid)
        gradient = inverse_fourier_transform(
            jnp.stack([apply_symbol(1j * kx, spectrum), apply_symbol(1j * ky, spectrum)]),
            self.grid,
        )
        palinstrophy = 0.5 * jnp.mean(jnp.sum(gradient**2, axis=0))
        viscosity = jnp.asarray(self.viscosity, palinstrophy.dtype)
        safe = jnp.where(viscosity > 0, viscosity, 1.0)
        return jnp.where(viscosity > 0, (2 * palinstrophy / safe**2) ** (1 / 6), jnp.inf)

    def _warn_if_under_resolved(self, y0) -> None:
        if not (is_concrete(y0) and is_concrete(self.viscosity)) or float(self.viscosity) == 0:
            return
        dissipation = float(self.dissipation_wavenumber(y0))
        largest = min(self._largest_kept_wavenumbers())
        if largest >= dissipation or not np.isfinite(dissipation):  # overflowed: blown up
            return
        # k_max scales with the number of cells: this many resolve k_eta on each axis.
        needed = [int(np.ceil(n * dissipation / largest)) for n in self.grid.shape]
        warn_at_caller(
            f"NavierStokes2D: the grid {self.grid.shape} may be too coarse for this flow: its "
            f"largest kept wavenumber k_max = {largest:.3g} is below the dissipation "
            f"wavenumber of the enstrophy cascade, k_eta = (2P/nu^2)^(1/6) = {dissipation:.3g} "
            f"estimated from y0 (P its palinstrophy), so k_max·eta = {largest / dissipation:.2f}"
            f" < 1. Energy reaching the grid scale is not dissipated there; resolving it takes "
            f"about {tuple(needed)} cells or a larger viscosity (an under-resolved run made on "
            "purpose may ignore this).",
            UserWarning,
        )

    def describe_blow_up(self, solver, y, dt0):
        vorticity = y[0] if self.passive_scalar else y
        courant = float(courant_number(vorticity, self.grid, dt0))
        text = f"the Courant number dt0·max(|u|/h_x + |v|/h_y) was {courant:.3g}"
        limit = self._stable_step(solver, y)
        if limit is None or not float(limit) < float(dt0):
            return text + "."
        return (
            f"{text}, and the largest stable step of that flow {float(limit):.3g}, below "
            f"dt0={float(dt0):g}: the flow sped up past the CFL limit of its initial state. "
            f"Pass a smaller dt0, e.g. simlab.grid.cfl_step of the fastest flow expected."
        )

    def _initial_velocity(self, y0: Array) -> Array:
        vorticity = y0[0] if self.passive_scalar else y0
        return velocity_from_spectrum(fourier_transform(vorticity, self.grid), self.grid)

    def linear_eigenvalues(self, y0):
        flow = self._initial_velocity(y0)
        speed = jnp.max(jnp.sqrt(jnp.sum(flow**2, axis=0)))
        # Advection by the fastest flow turns mode k at the rate |u|max |k|.
        k = np.sqrt(squared_wavenumber(self.grid))
        symbol = jnp.broadcast_to(self.linear_symbol(), (*self.channel_shape, *k.shape))
        rotation = jnp.broadcast_to(speed * k, symbol.shape).astype(symbol.dtype)
        return jax.lax.complex(symbol, rotation)


def kolmogorov_laminar_vorticity(model: NavierStokes2D) -> Array:
    r"""The laminar steady state of Kolmogorov flow, $\omega = -U n\cos(n y)$ with
    $U = \chi/(\nu n^2 + \alpha)$: the velocity $U\sin(ny)\,\hat{\mathbf x}$ whose
    viscous and drag losses balance the force exactly (it is not advected, as
    $\mathbf u\cdot\nabla\omega = 0$).

    **Arguments:**

    - `model`: a [`simlab.models.NavierStokes2D`][] with $\nu n^2 + \alpha > 0$.

    **Returns:** $\omega$, shape `model.grid.shape`.

    !!! example

        ```python
        grid = simlab.Grid((32, 32), extent=2 * jnp.pi)
        model = simlab.models.NavierStokes2D(grid=grid, viscosity=0.5, forcing_amplitude=1.0,
                                             forcing_mode=1)
        w = simlab.models.kolmogorov_laminar_vorticity(model)  # -2 cos(y): U = 1/0.5
        ```
    """
    n = model.forcing_wavenumber
    return model.vorticity_forcing() / (model.viscosity * n**2 + model.drag)


def taylor_green_vorticity(
    grid: Grid,
    *,
    time: ArrayLike = 0.0,
    viscosity: ArrayLike = 0.0,
    drag: ArrayLike = 0.0,
    mode: int = 1,
    speed: ArrayLike = 1.0,
) -> Array:
    r"""The Taylor–Green vortex at `time`, an exact solution of `NavierStokes2D` (its
    advection vanishes, as $\omega \propto \psi$):

    $$
    \psi = \frac{U}{k_y}\sin(k_x x)\sin(k_y y)\,e^{-\lambda t},\quad
    \omega = |\mathbf k|^2\psi,\quad
    \lambda = \nu|\mathbf k|^2 + \alpha,
    $$

    with $k_i = 2\pi m / L_i$, so $u = U\sin(k_x x)\cos(k_y y)e^{-\lambda t}$. On a square
    of side $2\pi$ with $m = 1$ this is $\omega = 2U\sin x\sin y\,e^{-(2\nu + \alpha)t}$.

    **Arguments:**

    - `grid`: a periodic 2-D [`simlab.Grid`][].
    - `time`: $t$ (default 0: the initial field).
    - `viscosity`, `drag`: $\nu$ and $\alpha$ of the decay.
    - `mode`: $m$, the integer number of periods along each axis (default 1).
    - `speed`: $U$, the largest $u$ at $t = 0$ (default 1).

    **Returns:** $\omega$, shape `grid.shape`.

    !!! example

        ```python
        grid = simlab.Grid((32, 32), extent=2 * jnp.pi)
        w0 = simlab.models.taylor_green_vorticity(grid)  # 2 sin x sin y
        ```
    """
    _check_plane(grid, "taylor_green_vorticity")
    if not isinstance(mode, int) or not 1 <= mode < min(grid.shape) / 2:
        raise ValueError(
            f"taylor_green_vorticity: mode must be an integer in [1, {(min(grid.shape) - 1) // 2}] "
            f"(below the grid's Nyquist mode); got {mode!r}."
        )
    kx, ky = (2 * np.pi * mode / length for length in grid.extent)
    x, y = grid.mesh()
    k2 = kx**2 + ky**2
    decay = jnp.exp(-(jnp.asarray(viscosity) * k2 + jnp.asarray(drag)) * jnp.asarray(time))
    return (k2 * jnp.asarray(speed) / ky) * jnp.sin(kx * x) * jnp.sin(ky * y) * decay


def peaked_spectrum(k: ArrayLike, peak_wavenumber: float) -> Array:
    r"""$E(k) = (k/k_p)^4 e^{-2(k/k_p)^2}$, unnormalised: energy-containing eddies of size
    $\sim 2\pi/k_p$ (the spectrum peaks at $k_p$), a common start of decaying turbulence."""
    ratio = jnp.asarray(k) / peak_wavenumber
    return ratio**4 * jnp.exp(-2 * ratio**2)


def random_vorticity(
    key: Array,
    grid: Grid,
    *,
    peak_wavenumber: float = 4.0,
    energy: float = 0.5,
    spectrum: Callable[[Array], Array] | None = None,
    dealiasing_fraction: float = 2 / 3,
) -> Array:
    r"""A random vorticity field with a prescribed isotropic energy spectrum: the initial
    state of decaying turbulence.

    Every Fourier mode gets a random phase; the moduli are equal within each shell of
    [`simlab.grid.energy_spectrum`][] and set so that the shell's energy is $E(k)$ exactly
    (the lattice's uneven count of modes per shell is compensated). Modes outside the
    `dealiasing_fraction` box are left empty (the model never resolves them), and the
    field is scaled to the kinetic energy `energy`.

    **Arguments:**

    - `key`: a JAX PRNG key.
    - `grid`: a periodic 2-D [`simlab.Grid`][].
    - `peak_wavenumber`: $k_p$ of the default spectrum
      ([`peaked_spectrum`][simlab.models.peaked_spectrum], $E \propto k^4 e^{-2(k/k_p)^2}$).
    - `energy`: the kinetic energy per unit area $E = \tfrac12\langle|\mathbf u|^2\rangle$.
    - `spectrum`: a function $k \mapsto E(k)$ (unnormalised, `jnp`) instead of the default.
    - `dealiasing_fraction`: the model's; the modes it removes stay empty.

    **Returns:** $\omega$, shape `grid.shape`, with zero mean.

    !!! example

        ```python
        grid = simlab.Grid((64, 64), extent=2 * jnp.pi)
        w0 = simlab.models.random_vorticity(jax.random.PRNGKey(0), grid, peak_wavenumber=5.0)
        ```
    """
    _check_plane(grid, "random_vorticity")
    if not peak_wavenumber > 0 or not energy > 0:
        raise ValueError(
            f"random_vorticity: peak_wavenumber and energy must be positive; got "
            f"{peak_wavenumber!r} and {energy!r}."
        )
    if spectrum is None:
        spectrum = functools.partial(peaked_spectrum, peak_wavenumber=peak_wavenumber)
    noise = fourier_transform(jax.random.normal(key, grid.shape), grid)
    tiny = jnp.finfo(noise.real.dtype).tiny
    unit_modulus = 1 / jnp.maximum(jnp.abs(noise), tiny)
    kept = jnp.where(dealiasing_mask(grid, dealiasing_fraction), unit_modulus, 0.0)
    phases = apply_symbol(kept, noise)
    wavenumbers, unit_energies = energy_spectrum(inverse_fourier_transform(phases, grid), grid)
    target = jnp.asarray(spectrum(jnp.asarray(wavenumbers)), unit_energies.dtype)
    occupied = unit_energies > 0
    gain = jnp.where(occupied, jnp.sqrt(target / jnp.where(occupied, unit_energies, 1.0)), 0.0)
    _, shells = spectral_shells(grid)
    field = inverse_fourier_transform(apply_symbol(gain[shells], phases), grid)
    return field * jnp.sqrt(energy / kinetic_energy(field, grid))
