"""Paths of `simulate` the mutation run found unchecked by the fast simulate tests, each
against an analytic solution."""

import jax
import jax.numpy as jnp
import numpy as np

import simlab


def test_forward_mode_through_an_imex_solve_equals_the_exact_sensitivity():
    """Heat on a periodic line, one Fourier mode: the semi-discrete amplitude is
    exp(D lam t) with lam = (2 cos(k h) - 2) / h², so d(amplitude)/dD = lam t exp(D lam t).
    `adjoint="forward"` must reach the KenCarp solve (jax.jacfwd through it)."""
    n, extent, t1 = 16, 2 * np.pi, 0.3
    grid = simlab.Grid((n,), extent=extent)
    (x,) = grid.coordinates()
    h, k = extent / n, 2.0
    lam = (2 * np.cos(k * h) - 2) / h**2
    y0 = jnp.sin(k * x)

    def amplitude(diffusivity):
        model = simlab.models.Heat(diffusivity=diffusivity, grid=grid)
        ys = simlab.simulate(
            model, y0, jnp.array([0.0, t1]), solver="kencarp4", rtol=1e-10, atol=1e-12,
            adjoint="forward",
        ).ys  # fmt: skip
        return jnp.sum(ys[-1] * y0) / jnp.sum(y0 * y0)

    diffusivity = jnp.asarray(0.5)
    value, slope = jax.jvp(amplitude, (diffusivity,), (jnp.ones_like(diffusivity),))
    np.testing.assert_allclose(value, np.exp(0.5 * lam * t1), rtol=1e-7)
    np.testing.assert_allclose(slope, lam * t1 * np.exp(0.5 * lam * t1), rtol=1e-6)
