"""4D-Var on the periodic Navier–Stokes flow: the initial vorticity recovered by `fit` from
sparse, noisy observations of the flow at a later time, with a spectral background term."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import simlab
from simlab.integrate import ETDRK4
from simlab.models import NavierStokes2D, random_vorticity

GRID = simlab.Grid((16, 16), extent=2 * np.pi)
MODEL = NavierStokes2D(grid=GRID, viscosity=0.01)
PEAK_WAVENUMBER = 1.5
TRUTH = random_vorticity(jax.random.PRNGKey(0), GRID, peak_wavenumber=PEAK_WAVENUMBER)
TS = jnp.array([0.0, 1.0])  # the background at t = 0, the observations at t = 1
SOLVE = {"solver": "etdrk4", "adaptive": False, "dt0": 1 / 16}
EVERY = 2  # every 2nd grid point along each axis: 64 of 256 values
# Background error standard deviations per Fourier mode: random_vorticity's moduli (the same
# for every draw, only the phases are random), floored at a tenth of the largest so that
# the empty modes stay fittable and the cost well conditioned.
_MODULI = jnp.abs(
    jnp.fft.rfft2(random_vorticity(jax.random.PRNGKey(1), GRID, peak_wavenumber=PEAK_WAVENUMBER))
)
_WEIGHTS = (GRID.shape[0] / jnp.maximum(_MODULI, 0.1 * jnp.max(_MODULI))).astype(complex)
OPTIMISER = optax.lbfgs(learning_rate=1.0, linesearch=None)  # one object: one compiled loop


def whiten(w):
    """$B^{-1/2}\\omega$, scaled so that a field of the prior has unit variance per point."""
    return jnp.fft.irfft2(jnp.fft.rfft2(w) * _WEIGHTS, s=GRID.shape)


def observe(w):
    """The sampled points, then the whitened field (the background term's residuals)."""
    return jnp.concatenate([w[::EVERY, ::EVERY].ravel(), whiten(w).ravel()])


def assimilate(observed, sigma):
    """4D-Var by `fit`: the background (zero) is an observation of the whitened state at
    t = 0, the sampled points one at t = 1; NaN leaves out what each time does not see."""
    num_points, num_field = observed.size, GRID.shape[0] * GRID.shape[1]
    missing_points, missing_field = jnp.full(num_points, jnp.nan), jnp.full(num_field, jnp.nan)
    observations = jnp.stack(
        [
            jnp.concatenate([missing_points, jnp.zeros(num_field)]),
            jnp.concatenate([observed, missing_field]),
        ]
    )
    scale = jnp.concatenate([jnp.full(num_points, sigma), jnp.ones(num_field)])
    return simlab.fit(
        MODEL,
        TS,
        observations,
        y0=jnp.zeros(GRID.shape),
        params=[],
        fit_y0=True,
        observe=observe,
        noise_scale=scale,
        method="gradient",
        optimiser=OPTIMISER,
        rtol=1e-5,
        max_steps=1000,
        simulate_options=SOLVE,
    )


@pytest.fixture(scope="module")
def recoveries():
    final = simlab.simulate(MODEL, TRUTH, TS, **SOLVE).ys[-1]
    exact = final[::EVERY, ::EVERY].ravel()
    rms = float(jnp.sqrt(jnp.mean(final**2)))
    noise = jax.random.normal(jax.random.PRNGKey(2), exact.shape)
    return {level: assimilate(exact + level * rms * noise, level * rms) for level in (0.2, 0.05)}


def _relative_error(w):
    return float(jnp.linalg.norm(w - TRUTH) / jnp.linalg.norm(TRUTH))


def test_4dvar_recovers_the_initial_vorticity_within_its_posterior_uncertainty(recoveries):
    for level, result in recoveries.items():
        assert bool(result.converged)
        # The fit's covariance (J^T J)^{-1} is the Gauss–Newton posterior of 4D-Var: the
        # noise sigma and the background B together. For a truth drawn from the prior the
        # expected squared error is its trace; this truth holds nothing in the floored
        # modes, where the prior allows a tenth of the peak, so it must do better.
        expected = float(jnp.sqrt(jnp.trace(result.covariance)) / jnp.linalg.norm(TRUTH))
        error = _relative_error(result.y0)
        print(f"noise {level:.0%} of rms: relative L2 error {error:.3f}, "
              f"posterior {expected:.3f}, {int(result.num_steps)} steps")  # fmt: skip
        assert error < expected < 1.0  # 1: the background alone (zero)


def test_4dvar_error_falls_with_the_noise(recoveries):
    noisy, precise = (_relative_error(recoveries[level].y0) for level in (0.2, 0.05))
    # The observations, not the background, set the error: a quarter of the noise at
    # least halves it (a linear estimate would quarter it; the prior's share remains).
    assert precise < 0.5 * noisy


def test_etdrk4_with_a_run_time_step_count_differentiates_forward_with_adjoint_forward():
    # A traced dt0 makes the step count a run-time value: adjoint="forward" runs it in a
    # loop forward mode differentiates (fit's covariance needs jax.jacfwd), and the
    # directional derivative equals reverse mode's.
    direction = random_vorticity(jax.random.PRNGKey(3), GRID, peak_wavenumber=2.0)

    @jax.jit
    def derivatives(w, dt):
        def final(w, adjoint):
            ys = ETDRK4().solve(MODEL, TS, w, None, dt0=dt, max_steps=64, adjoint=adjoint)[0]
            return jnp.sum(ys[-1] ** 3)

        _, forward = jax.jvp(lambda w: final(w, "forward"), (w,), (direction,))
        reverse = jnp.vdot(jax.grad(final)(w, None), direction)
        return forward, reverse

    forward, reverse = derivatives(TRUTH, jnp.asarray(1 / 16))
    np.testing.assert_allclose(forward, reverse, rtol=1e-12)
    with pytest.raises(ValueError, match="adjoint must be one of"):
        ETDRK4().solve(MODEL, TS, TRUTH, None, dt0=0.1, max_steps=64, adjoint="reversible")
