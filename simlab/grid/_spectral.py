r"""Fourier-spectral operators on periodic grids: derivatives exact for band-limited fields.

A real field $u$ on a periodic grid of $N_i$ cells along each axis is a trigonometric
polynomial $u(\mathbf x) = \sum_{\mathbf m} \hat u_{\mathbf m}\, e^{i \mathbf k_{\mathbf m}
\cdot \mathbf x}$ with angular wavenumbers $k_{m,i} = 2\pi m_i / L_i$. Derivatives act on each
coefficient by multiplication: $\partial_i \to i k_i$, $\nabla^2 \to -|\mathbf k|^2$. The
coefficients are `jnp.fft.rfftn` over the trailing (spatial) axes, so the last axis holds
only $m \ge 0$ (the real transform's half spectrum); leading axes are channels.

On an even axis the Nyquist mode $m = N/2$ is its own mirror image: an odd derivative of
it is not real, so the first derivative drops it (second derivatives keep it), as
spectral codes usually do (Trefethen, *Spectral Methods in MATLAB*, ch. 3).

Products of fields create wavenumbers beyond the grid's, which fold back onto resolved
ones (aliasing). Orszag's 2/3 rule keeps only modes with $|m_i| < \tfrac23 \cdot N_i/2$
in each factor and in the product: the folded modes then land only on discarded ones, so
the kept part of a quadratic product is exact.
"""

from collections.abc import Callable, Sequence

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

from ._grid import Grid, check_field_shape

DEFAULT_DEALIASING_FRACTION = 2 / 3


def check_periodic(grid: Grid, what: str) -> None:
    """Raises a ValueError naming `what` unless every axis of `grid` is periodic."""
    if not all(grid.is_periodic):
        raise ValueError(
            f"{what} works in Fourier space and needs a periodic grid on every axis; got "
            f"boundaries {grid.boundaries}. Build the grid with boundary='periodic', or use "
            "the finite-difference stencils (impl='auto' or 'xla') for walls."
        )


def _spatial_axes(grid: Grid) -> tuple[int, ...]:
    return tuple(range(-grid.ndim, 0))


def fourier_transform(field: ArrayLike, grid: Grid) -> Array:
    r"""The real Fourier transform $\hat u$ of `field` over the grid's axes (`jnp.fft.rfftn`).

    **Arguments:**

    - `field`: a real array whose trailing axes are `grid.shape` (leading axes are channels).
    - `grid`: a periodic [`simlab.Grid`][].

    **Returns:** a complex array whose trailing axes are `spectral_shape(grid)`.
    """
    field = jnp.asarray(field)
    check_field_shape(field, grid)
    check_periodic(grid, "fourier_transform")
    return jnp.fft.rfftn(field, axes=_spatial_axes(grid))


def inverse_fourier_transform(spectrum: Array, grid: Grid) -> Array:
    """The real field whose [`fourier_transform`][simlab.grid.fourier_transform] is
    `spectrum` (`jnp.fft.irfftn` back onto `grid.shape`)."""
    return jnp.fft.irfftn(spectrum, s=grid.shape, axes=_spatial_axes(grid))


def apply_symbol(symbol: ArrayLike, spectrum: Array) -> Array:
    r"""The product $\lambda \hat u$ of a Fourier multiplier and a spectrum.

    `symbol` (real or complex, numpy or JAX) is cast to the spectrum's complex dtype and
    broadcast against its leading channel axes, so a float64 symbol never silently widens a
    complex64 spectrum (nor meets a complex128 one under strict promotion).
    """
    symbol = jnp.asarray(symbol).astype(spectrum.dtype)
    return jnp.broadcast_to(symbol, spectrum.shape) * spectrum


def spectral_shape(grid: Grid) -> tuple[int, ...]:
    """The shape of a real field's half spectrum: `grid.shape` with the last axis `N // 2 + 1`."""
    return (*grid.shape[:-1], grid.shape[-1] // 2 + 1)


def _mode_numbers(grid: Grid) -> list[np.ndarray]:
    """The integer mode numbers $m_i$ of each axis, shaped to broadcast over the half spectrum."""
    modes = []
    for axis, n in enumerate(grid.shape):
        last = axis == grid.ndim - 1
        numbers = np.fft.rfftfreq(n, 1 / n) if last else np.fft.fftfreq(n, 1 / n)
        shape = [1] * grid.ndim
        shape[axis] = numbers.size
        modes.append(numbers.reshape(shape))
    return modes


def wavenumbers(grid: Grid) -> tuple[np.ndarray, ...]:
    r"""The angular wavenumbers $k_i = 2\pi m_i / L_i$ of each axis on the half spectrum.

    Each is a numpy array that broadcasts against `spectral_shape(grid)` (it is long only
    along its own axis), so `sum(k**2 for k in wavenumbers(grid))` is $|\mathbf k|^2$.
    """
    return tuple(
        2 * np.pi * m / extent for m, extent in zip(_mode_numbers(grid), grid.extent, strict=True)
    )


def squared_wavenumber(grid: Grid) -> np.ndarray:
    r"""$|\mathbf k|^2$ on the half spectrum, shape `spectral_shape(grid)`; $-|\mathbf k|^2$
    is the symbol of the Laplacian."""
    return np.broadcast_to(sum(k**2 for k in wavenumbers(grid)), spectral_shape(grid))


def _derivative_wavenumbers(grid: Grid) -> tuple[np.ndarray, ...]:
    """The wavenumbers of a first derivative: as `wavenumbers`, with the Nyquist mode of each
    even axis set to zero (its odd derivative is not a real field)."""
    result = []
    for k, m, n in zip(wavenumbers(grid), _mode_numbers(grid), grid.shape, strict=True):
        nyquist = (n % 2 == 0) & (np.abs(m) == n // 2)
        result.append(np.where(nyquist, 0.0, k))
    return tuple(result)


def dealiasing_mask(grid: Grid, fraction: float = DEFAULT_DEALIASING_FRACTION) -> np.ndarray:
    r"""The modes a dealiased product keeps: $|m_i| < \text{fraction} \cdot N_i / 2$ on every
    axis (a box in mode space), as a boolean array of shape `spectral_shape(grid)`.

    `fraction=2/3` is Orszag's rule for quadratic products; `1/2` removes every alias of a
    cubic one.
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"the dealiasing fraction must lie in (0, 1]; got {fraction!r}.")
    keep = np.ones(spectral_shape(grid), dtype=bool)
    for m, n in zip(_mode_numbers(grid), grid.shape, strict=True):
        keep = keep & (np.abs(m) < fraction * n / 2)
    return keep


def spectral_gradient(field: ArrayLike, grid: Grid) -> Array:
    r"""The gradient $\nabla u$ by Fourier differentiation, $\widehat{\partial_i u} = i k_i
    \hat u$: exact (to roundoff) for fields resolved by the grid.

    **Arguments:**

    - `field`: a real array whose trailing axes are `grid.shape`.
    - `grid`: a periodic [`simlab.Grid`][].

    **Returns:** an array of shape `(grid.ndim, *field.shape)`; component `i` is
    $\partial u / \partial x_i$.

    !!! example

        ```python
        grid = simlab.Grid((32,), extent=2 * jnp.pi)
        (x,) = grid.coordinates()
        simlab.grid.spectral_gradient(jnp.sin(3 * x), grid)[0]  # 3 cos(3x) to 1e-14
        ```
    """
    spectrum = fourier_transform(field, grid)
    return jnp.stack(
        [
            inverse_fourier_transform(apply_symbol(1j * k, spectrum), grid)
            for k in _derivative_wavenumbers(grid)
        ]
    )


def spectral_divergence(vector_field: ArrayLike, grid: Grid) -> Array:
    r"""The divergence $\nabla \cdot \mathbf F$ by Fourier differentiation,
    $\widehat{\nabla\cdot\mathbf F} = \sum_i i k_i \hat F_i$ (Nyquist modes of odd
    derivatives dropped, as in [`spectral_gradient`][simlab.grid.spectral_gradient]).

    **Arguments:**

    - `vector_field`: a real array of shape `(grid.ndim, *grid.shape)`.
    - `grid`: a periodic [`simlab.Grid`][].

    **Returns:** an array of shape `grid.shape`.
    """
    spectrum = fourier_transform(vector_field, grid)
    total = sum(
        apply_symbol(1j * k, spectrum[axis]) for axis, k in enumerate(_derivative_wavenumbers(grid))
    )
    return inverse_fourier_transform(total, grid)


def spectral_laplacian(field: ArrayLike, grid: Grid) -> Array:
    r"""The Laplacian $\nabla^2 u$ by Fourier differentiation, $\widehat{\nabla^2 u} =
    -|\mathbf k|^2 \hat u$: exact (to roundoff) for fields resolved by the grid.

    **Arguments:**

    - `field`: a real array whose trailing axes are `grid.shape`.
    - `grid`: a periodic [`simlab.Grid`][].

    **Returns:** an array of the same shape as `field`.

    !!! example

        ```python
        grid = simlab.Grid((32, 32), extent=2 * jnp.pi)
        x, y = grid.mesh()
        simlab.grid.spectral_laplacian(jnp.sin(2 * x) * jnp.cos(y), grid)  # -5 sin(2x) cos(y)
        ```
    """
    spectrum = fourier_transform(field, grid)
    return inverse_fourier_transform(apply_symbol(-squared_wavenumber(grid), spectrum), grid)


def dealias(field: ArrayLike, grid: Grid, fraction: float = DEFAULT_DEALIASING_FRACTION) -> Array:
    """`field` with the modes outside [`dealiasing_mask`][simlab.grid.dealiasing_mask] removed."""
    mask = dealiasing_mask(grid, fraction)
    return inverse_fourier_transform(apply_symbol(mask, fourier_transform(field, grid)), grid)


def dealiased_product(
    factors: Sequence[ArrayLike], grid: Grid, *, fraction: float = DEFAULT_DEALIASING_FRACTION
) -> Array:
    r"""The product of fields without aliasing: each factor and the product are truncated to
    the [`dealiasing_mask`][simlab.grid.dealiasing_mask].

    With `fraction=2/3` and two factors (or `1/2` and three), the result equals the exact
    product of the truncated factors, truncated to the same modes: what a grid fine enough
    to hold the whole product would give.

    **Arguments:**

    - `factors`: two or more real arrays whose trailing axes are `grid.shape`.
    - `grid`: a periodic [`simlab.Grid`][].
    - `fraction`: the kept fraction of each axis's wavenumbers (2/3 for quadratic products).

    **Returns:** an array of the broadcast shape of the factors.

    !!! example

        ```python
        grid = simlab.Grid((64,), extent=2 * jnp.pi)
        (x,) = grid.coordinates()
        u = jnp.sin(20 * x)
        simlab.grid.dealiased_product([u, u], grid)  # 1/2: the cos(40x) half is beyond the grid
        ```
    """
    if len(factors) < 2:
        raise ValueError(f"a product needs at least two factors; got {len(factors)}.")
    product = 1.0
    for factor in factors:
        product = product * dealias(factor, grid, fraction)
    return dealias(product, grid, fraction)


def impulse_response_symbol(
    linear_fn: Callable[[Array], Array], grid: Grid, shape: tuple[int, ...]
) -> Array:
    r"""The Fourier symbol of a translation-invariant linear operator on a periodic grid,
    read off its response to a unit impulse: $\lambda = \mathcal F(L\delta)$.

    A constant-coefficient stencil is a circular convolution, $Lu = \kappa \ast u$ with
    $\kappa = L\delta$, and the DFT turns convolution into multiplication, so the symbol
    is exact to roundoff.

    **Arguments:**

    - `linear_fn`: $u \mapsto L u$, for arrays of shape `shape` (channels are not mixed).
    - `grid`: a periodic [`simlab.Grid`][].
    - `shape`: the state's shape (leading channel axes, then `grid.shape`).

    **Returns:** a complex array of shape `(*shape[:-grid.ndim], *spectral_shape(grid))`.

    !!! example

        ```python
        grid = simlab.Grid((16,), extent=1.0)
        symbol = simlab.grid.impulse_response_symbol(
            lambda u: simlab.grid.laplacian(u, grid), grid, grid.shape
        )  # (2 cos(k h) - 2) / h², the 3-point stencil's multiplier
        ```
    """
    impulse = jnp.zeros(shape).at[(...,) + (0,) * grid.ndim].set(1.0)
    return fourier_transform(linear_fn(impulse), grid)
