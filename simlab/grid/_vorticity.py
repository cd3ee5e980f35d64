r"""Two-dimensional incompressible flow from its vorticity, on periodic grids.

Conventions (those of `simlab.models.NavierStokes2D`): the streamfunction $\psi$ solves
$\nabla^2\psi = -\omega$ with zero mean, the velocity is $\mathbf u = (u, v) =
(\partial_y\psi, -\partial_x\psi)$, so that $\nabla\cdot\mathbf u = 0$ and
$\omega = \partial_x v - \partial_y u$. Energy and enstrophy are domain means,
$E = \tfrac12\langle|\mathbf u|^2\rangle$ and $Z = \tfrac12\langle\omega^2\rangle$, so an
unforced flow dissipates $dE/dt = -2\nu Z$. All are exact Fourier operations; the mean of
$\omega$ carries no velocity and is ignored.
"""

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

from ._grid import Grid
from ._spectral import (
    _derivative_wavenumbers,
    apply_symbol,
    check_periodic,
    fourier_transform,
    inverse_fourier_transform,
    squared_wavenumber,
)

DEFAULT_COURANT = 0.5


def _check_plane(grid: Grid, what: str) -> None:
    if grid.ndim != 2:
        raise ValueError(f"{what} works on 2-D grids; got a {grid.ndim}-D grid {grid.shape}.")
    check_periodic(grid, what)


def inverse_laplacian_symbol(grid: Grid) -> np.ndarray:
    r"""$1/|\mathbf k|^2$ on the half spectrum, with 0 at $\mathbf k = 0$ (the zero-mean
    solution of Poisson's equation): $\hat\psi = \hat\omega / |\mathbf k|^2$."""
    k2 = squared_wavenumber(grid)
    return np.where(k2 > 0, 1 / np.where(k2 > 0, k2, 1.0), 0.0)


def velocity_symbols(grid: Grid) -> np.ndarray:
    r"""The multipliers taking $\hat\omega$ to $(\hat u, \hat v) = (i k_y, -i k_x)\,
    \hat\omega/|\mathbf k|^2$, shape `(2, *spectral_shape(grid))` (NumPy, static)."""
    kx, ky = _derivative_wavenumbers(grid)
    stream = inverse_laplacian_symbol(grid)
    return np.stack(np.broadcast_arrays(1j * ky * stream, -1j * kx * stream))


def velocity_from_spectrum(vorticity_spectrum: Array, grid: Grid) -> Array:
    r"""The velocity $(u, v)$, shape `(2, *grid.shape)`, from $\hat\omega$ (the rfft half
    spectrum)."""
    symbols = jnp.asarray(velocity_symbols(grid), vorticity_spectrum.dtype)
    return inverse_fourier_transform(symbols * vorticity_spectrum[None], grid)


def streamfunction(vorticity: ArrayLike, grid: Grid) -> Array:
    r"""The streamfunction $\psi$ with $\nabla^2\psi = -\omega$ and zero mean.

    **Arguments:**

    - `vorticity`: $\omega$, a real array of shape `grid.shape`.
    - `grid`: a periodic 2-D [`simlab.Grid`][].

    **Returns:** $\psi$, shape `grid.shape`.

    !!! example

        ```python
        grid = simlab.Grid((32, 32), extent=2 * jnp.pi)
        x, y = grid.mesh()
        simlab.grid.streamfunction(2 * jnp.sin(x) * jnp.sin(y), grid)  # sin(x) sin(y)
        ```
    """
    _check_plane(grid, "streamfunction")
    spectrum = fourier_transform(vorticity, grid)
    return inverse_fourier_transform(apply_symbol(inverse_laplacian_symbol(grid), spectrum), grid)


def velocity(vorticity: ArrayLike, grid: Grid) -> Array:
    r"""The divergence-free velocity $(u, v) = (\partial_y\psi, -\partial_x\psi)$ whose curl
    is $\omega$ (less its mean).

    **Arguments:**

    - `vorticity`: $\omega$, a real array of shape `grid.shape`.
    - `grid`: a periodic 2-D [`simlab.Grid`][].

    **Returns:** an array of shape `(2, *grid.shape)`: $u$ (along x), then $v$.

    !!! example

        ```python
        grid = simlab.Grid((32, 32), extent=2 * jnp.pi)
        x, y = grid.mesh()
        u, v = simlab.grid.velocity(2 * jnp.sin(x) * jnp.sin(y), grid)  # sin x cos y, -cos x sin y
        ```
    """
    _check_plane(grid, "velocity")
    return velocity_from_spectrum(fourier_transform(vorticity, grid), grid)


def kinetic_energy(vorticity: ArrayLike, grid: Grid) -> Array:
    r"""The kinetic energy per unit area, $E = \tfrac12\langle u^2 + v^2\rangle$.

    **Arguments:**

    - `vorticity`: $\omega$, shape `grid.shape` (or `(..., *grid.shape)`: one value each).
    - `grid`: a periodic 2-D [`simlab.Grid`][].

    **Returns:** $E$, a scalar per field.
    """
    return jnp.sum(energy_spectrum(vorticity, grid)[1], axis=-1)


def enstrophy(vorticity: ArrayLike, grid: Grid) -> Array:
    r"""The enstrophy per unit area, $Z = \tfrac12\langle\omega^2\rangle$ (the mean of
    $\omega$ included: it is conserved, and dissipated by drag only).

    **Arguments:**

    - `vorticity`: $\omega$, shape `grid.shape` (or `(..., *grid.shape)`).
    - `grid`: a periodic 2-D [`simlab.Grid`][].

    **Returns:** $Z$, a scalar per field.
    """
    _check_plane(grid, "enstrophy")
    return 0.5 * jnp.mean(jnp.asarray(vorticity) ** 2, axis=(-2, -1))


def _half_spectrum_weights(grid: Grid) -> np.ndarray:
    """How often each mode of the rfft half spectrum stands in the full spectrum: twice,
    except the last axis's zero and (even length) Nyquist columns."""
    n = grid.shape[-1]
    weights = np.full(n // 2 + 1, 2.0)
    weights[0] = 1.0
    if n % 2 == 0:
        weights[-1] = 1.0
    return weights


def spectral_shells(grid: Grid) -> tuple[float, np.ndarray]:
    r"""The shell width $\Delta k = 2\pi/\max(L_x, L_y)$ and the shell of each mode of
    the half spectrum, $j = \operatorname{round}(|\mathbf k|/\Delta k)$."""
    shell_width = 2 * np.pi / max(grid.extent)
    return shell_width, np.rint(np.sqrt(squared_wavenumber(grid)) / shell_width).astype(int)


def energy_spectrum(vorticity: ArrayLike, grid: Grid) -> tuple[np.ndarray, Array]:
    r"""The isotropic kinetic energy spectrum $E(k)$: the energy of the modes in shells of
    $|\mathbf k|$, so that $\sum_k E(k) = E$ (Parseval).

    Shell $j$ holds the modes with $(j - \tfrac12)\Delta k \le |\mathbf k| < (j + \tfrac12)
    \Delta k$, $\Delta k = 2\pi/\max(L_x, L_y)$ (on a $2\pi$-periodic square, integer
    wavenumbers). The energy per shell width, $E(k)/\Delta k$, is the spectral density
    that a $k^{-3}$ or $k^{-5/3}$ law describes.

    **Arguments:**

    - `vorticity`: $\omega$, shape `grid.shape` (or `(..., *grid.shape)`: one spectrum each).
    - `grid`: a periodic 2-D [`simlab.Grid`][].

    **Returns:** `(k, E)`: the shells' wavenumbers $j\Delta k$, $j = 0, 1, \dots$, up to the
    largest $|\mathbf k|$ on the grid (numpy), and the energy in each (trailing axis).

    !!! example

        ```python
        grid = simlab.Grid((32, 32), extent=2 * jnp.pi)
        x, y = grid.mesh()
        k, E = simlab.grid.energy_spectrum(2 * jnp.sin(x) * jnp.sin(y), grid)
        # E[1] = 0.25, all of E: |k| = sqrt(2) rounds to the shell k = 1
        ```
    """
    _check_plane(grid, "energy_spectrum")
    vorticity = jnp.asarray(vorticity)
    spectrum = fourier_transform(vorticity, grid)
    shell_width, shells = spectral_shells(grid)
    num_points = float(np.prod(grid.shape))
    # |û|² + |v̂|² = (k_x² + k_y²)|ω̂|²/|k|⁴ with velocity()'s derivative wavenumbers (no
    # odd derivative of a Nyquist mode), and <|u|²> = Σ |û|² / N² over the full spectrum.
    kx, ky = _derivative_wavenumbers(grid)
    gain = (kx**2 + ky**2) * inverse_laplacian_symbol(grid) ** 2
    density = _half_spectrum_weights(grid) * gain / (2 * num_points**2)
    power = jnp.abs(spectrum) ** 2
    energies = power * jnp.broadcast_to(jnp.asarray(density, power.dtype), power.shape)
    num_shells = int(shells.max()) + 1
    flat = energies.reshape(*energies.shape[:-2], -1)
    by_shell = jnp.zeros((*flat.shape[:-1], num_shells), flat.dtype)
    by_shell = by_shell.at[..., shells.ravel()].add(flat)
    return shell_width * np.arange(num_shells), by_shell


def courant_number(vorticity: ArrayLike, grid: Grid, dt: ArrayLike) -> Array:
    r"""The Courant number $C = \Delta t\,\max(|u|/h_x + |v|/h_y)$ of a step `dt` on the
    flow with vorticity $\omega$."""
    _check_plane(grid, "courant_number")
    u, v = velocity(vorticity, grid)
    hx, hy = grid.spacing
    return jnp.asarray(dt) * jnp.max(jnp.abs(u) / hx + jnp.abs(v) / hy)


def cfl_step(vorticity: ArrayLike, grid: Grid, *, courant: float = DEFAULT_COURANT) -> Array:
    r"""The time step of Courant number `courant` for the flow with vorticity $\omega$:
    $\Delta t = C / \max(|u|/h_x + |v|/h_y)$.

    With an exponential integrator the viscous term sets no limit; advection, treated
    explicitly, does. Its fastest Fourier mode rotates at $|u|\,k_\max$ with $k_\max =
    \pi/h$ (less after 2/3 dealiasing), and RK4-type stages are stable on the imaginary
    axis up to $2\sqrt2$, so $C = 0.5$ (the default) leaves a margin of more than five
    and keeps the time-stepping error well below the spatial one.

    **Arguments:**

    - `vorticity`: $\omega$, shape `grid.shape` (the largest velocity expected, usually
      the initial field of a decaying or the laminar field of a forced flow).
    - `grid`: a periodic 2-D [`simlab.Grid`][].
    - `courant`: the Courant number $C > 0$.

    **Returns:** $\Delta t$, a scalar array (infinite for a flow at rest).

    !!! example

        ```python
        grid = simlab.Grid((64, 64), extent=2 * jnp.pi)
        x, y = grid.mesh()
        simlab.grid.cfl_step(2 * jnp.sin(x) * jnp.sin(y), grid)  # 0.5 h: max |u| + |v| = 1
        ```
    """
    if not courant > 0:
        raise ValueError(f"cfl_step: courant must be positive; got {courant!r}.")
    return courant / courant_number(vorticity, grid, 1.0)
