"""Fourier-spectral operators: exact derivatives of band-limited fields, alias-free products."""

import jax.numpy as jnp
import numpy as np
import pytest

import simlab
from simlab.grid import (
    dealiased_product,
    dealiasing_mask,
    spectral_gradient,
    spectral_laplacian,
    wavenumbers,
)


@pytest.mark.parametrize(
    ("shape", "extent"),
    [((32,), (3.0,)), ((24, 18), (2 * np.pi, 5.0)), ((8, 12, 10), (1.0, 2.0, 3.0))],
)
def test_spectral_laplacian_is_exact_to_roundoff_for_band_limited_fields(shape, extent):
    grid = simlab.Grid(shape, extent=extent, origin=0.3)
    coords = grid.mesh()
    field, exact = 0.0, 0.0
    # Two separable modes, the first one below Nyquist on every axis: band-limited.
    for modes, phase in (([n // 2 - 1 for n in shape], 0.4), ([1] * len(shape), -1.1)):
        k = [2 * np.pi * m / length for m, length in zip(modes, extent, strict=True)]
        term = 1.0
        for x, kx in zip(coords, k, strict=True):
            term = term * jnp.sin(kx * x + phase)
        field = field + term
        exact = exact - sum(kx**2 for kx in k) * term
    error = jnp.max(jnp.abs(spectral_laplacian(field, grid) - exact))
    assert error < 1e-13 * jnp.max(jnp.abs(exact))


def test_spectral_gradient_is_exact_and_drops_the_nyquist_mode():
    grid = simlab.Grid((16, 12), extent=(2 * np.pi, 3.0))
    x, y = grid.mesh()
    ky = 2 * np.pi * 5 / 3.0
    field = jnp.sin(7 * x) * jnp.cos(ky * y)
    gradient = spectral_gradient(field, grid)
    assert gradient.shape == (2, 16, 12)
    np.testing.assert_allclose(gradient[0], 7 * jnp.cos(7 * x) * jnp.cos(ky * y), atol=1e-12)
    np.testing.assert_allclose(gradient[1], -ky * jnp.sin(7 * x) * jnp.sin(ky * y), atol=1e-12)
    # cos(8x) is the Nyquist mode of 16 cells: its derivative is not representable.
    nyquist = spectral_gradient(jnp.cos(8 * x), grid)[0]
    assert float(jnp.max(jnp.abs(nyquist))) < 1e-12
    # ...while the second derivative keeps it: -64 cos(8x).
    np.testing.assert_allclose(
        spectral_laplacian(jnp.cos(8 * x), grid), -64 * jnp.cos(8 * x), atol=1e-11
    )


def test_wavenumbers_are_those_of_numpy_rfft():
    grid = simlab.Grid((6, 5), extent=(3.0, 2.0))
    kx, ky = wavenumbers(grid)
    np.testing.assert_allclose(kx.ravel(), 2 * np.pi * np.fft.fftfreq(6, 3.0 / 6))
    np.testing.assert_allclose(ky.ravel(), 2 * np.pi * np.fft.rfftfreq(5, 2.0 / 5))


def _zero_padded_product(a, b, fine):
    """The exact product of two fields' trigonometric interpolants: both resampled by zero
    padding onto a grid fine enough to hold the product, multiplied there, and truncated
    back to the coarse modes (numpy's FFT only)."""
    coarse = a.shape[0]
    spectra = [np.fft.rfft(f) for f in (a, b)]
    padded = [np.fft.irfft(s, fine) * fine / coarse for s in spectra]
    product_spectrum = np.fft.rfft(padded[0] * padded[1]) * coarse / fine
    return product_spectrum[: coarse // 2 + 1]


def test_two_thirds_rule_product_is_the_exact_truncated_product():
    grid = simlab.Grid((48,), extent=2 * np.pi)
    mask = dealiasing_mask(grid, 2 / 3)
    assert int(np.sum(mask)) == 16  # |m| < 16: modes 0..15
    rng = np.random.default_rng(0)
    spectra = rng.standard_normal((2, 25)) + 1j * rng.standard_normal((2, 25))
    spectra[:, 0] = spectra[:, 0].real
    spectra *= mask  # band-limited to the kept modes
    a, b = (np.fft.irfft(s, 48) for s in spectra)
    result = np.fft.rfft(np.asarray(dealiased_product([a, b], grid)))
    full = _zero_padded_product(a, b, fine=96)
    exact = full * mask
    np.testing.assert_allclose(result, exact, atol=1e-12 * np.max(np.abs(exact)))
    # Without the truncation the coarse grid's product is aliased: modes 16..24 are wrong.
    aliased = np.fft.rfft(a * b)
    assert np.max(np.abs(aliased - full)) > 1e-3 * np.max(np.abs(exact))


def test_spectral_operators_refuse_walls_and_bad_fractions():
    walls = simlab.Grid((16,), boundary="dirichlet")
    with pytest.raises(ValueError, match="periodic grid"):
        spectral_laplacian(jnp.zeros(16), walls)
    with pytest.raises(ValueError, match=r"dealiasing fraction must lie in \(0, 1\]"):
        dealiasing_mask(simlab.Grid((16,)), 1.5)
    with pytest.raises(ValueError, match="at least two factors"):
        dealiased_product([jnp.zeros(16)], simlab.Grid((16,)))
