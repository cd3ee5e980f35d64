"""Fitting orbits with the symplectic solvers: the gravitational parameter, initial state and
eccentricity of a Kepler orbit from noisy positions, with standard errors checked against
SciPy's least squares on the exact (Kepler's equation) orbit; two planets' masses from their
mutually perturbed orbits; forward-mode derivatives through a symplectic solve with traced
step counts against finite differences."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

import simlab
from simlab.models import Kepler, NBody

Z_95 = 1.959963984540054  # the two-sided 95% point of the standard normal

# A Kepler orbit of eccentricity 0.5 (semi-major axis 1, period 2 pi) seen 41 times over
# about 1.6 periods, each position with Gaussian noise of sd 0.01.
MU = 1.0
ECCENTRICITY = 0.5
Y0 = jnp.array([1 - ECCENTRICITY, 0.0, 0.0, np.sqrt((1 + ECCENTRICITY) / (1 - ECCENTRICITY))])
TS = jnp.linspace(0.0, 10.0, 41)
POSITION_NOISE = 0.01
KEPLER_SOLVE = dict(solver="mclachlan4", adaptive=False, dt0=0.02)
# A guess whose period is within 3% of the truth's: far off, the loss of an orbit seen over
# more than a period has a minimum for every number of revolutions.
START_MU = 0.97
START_Y0 = jnp.array([0.55, 0.03, 0.0, 1.6])


def exact_kepler_positions(mu: float, y0: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """Positions `(len(ts), 2)` on the Kepler orbit through the state `y0` at time 0 (an
    ellipse): orbital elements from the state vector, then Kepler's equation
    E - e sin E = M solved by Newton's method to round-off."""
    r0, v0 = np.asarray(y0[:2]), np.asarray(y0[2:])
    radius, speed2 = np.linalg.norm(r0), v0 @ v0
    axis = 1 / (2 / radius - speed2 / mu)
    turning = np.sign(r0[0] * v0[1] - r0[1] * v0[0])  # +1 counter-clockwise
    eccentricity_vector = ((speed2 - mu / radius) * r0 - (r0 @ v0) * v0) / mu
    e = np.linalg.norm(eccentricity_vector)
    periapsis = np.arctan2(eccentricity_vector[1], eccentricity_vector[0])
    rotation = np.array(
        [[np.cos(periapsis), -np.sin(periapsis)], [np.sin(periapsis), np.cos(periapsis)]]
    )
    x0, y0_ = rotation.T @ r0  # in the frame of the ellipse, periapsis on the x-axis
    start = np.arctan2(turning * y0_ / (axis * np.sqrt(1 - e**2)), x0 / axis + e)
    mean_anomaly = start - e * np.sin(start) + np.sqrt(mu / axis**3) * np.asarray(ts)
    anomaly = mean_anomaly.copy()
    for _ in range(50):
        anomaly -= (anomaly - e * np.sin(anomaly) - mean_anomaly) / (1 - e * np.cos(anomaly))
    frame = np.stack(
        [axis * (np.cos(anomaly) - e), turning * axis * np.sqrt(1 - e**2) * np.sin(anomaly)]
    )
    return (rotation @ frame).T


def eccentricity(mu, y0):
    """|e| of the Kepler orbit through `y0`: the Laplace–Runge–Lenz vector over mu."""
    r, v = y0[:2], y0[2:]
    vector = ((v @ v - mu / jnp.linalg.norm(r)) * r - (r @ v) * v) / mu
    return jnp.linalg.norm(vector)


@pytest.fixture(scope="module")
def kepler_data():
    clean = exact_kepler_positions(MU, np.asarray(Y0), np.asarray(TS))
    return clean + POSITION_NOISE * np.random.default_rng(7).standard_normal(clean.shape)


@pytest.fixture(scope="module")
def kepler_fit(kepler_data):
    return simlab.fit(
        Kepler(mu=START_MU),
        TS,
        kepler_data,
        y0=START_Y0,
        params=["mu"],
        fit_y0=True,
        observe=["x", "y"],
        noise_scale=POSITION_NOISE,
        simulate_options=KEPLER_SOLVE,
    )


def test_the_exact_orbit_equals_a_symplectic_solve():
    """The reference orbit (Kepler's equation) and McLachlan's method agree to 1e-6, a
    ten-thousandth of the noise."""
    for y0 in (Y0, START_Y0):
        solved = simlab.simulate(Kepler(mu=0.9), y0, TS, **KEPLER_SOLVE).ys[:, :2]
        exact = exact_kepler_positions(0.9, np.asarray(y0), np.asarray(TS))
        np.testing.assert_allclose(np.asarray(solved), exact, atol=1e-6)


def test_kepler_fit_holds_the_truth_in_its_95_percent_intervals(kepler_fit):
    assert bool(kepler_fit.converged)
    estimates = np.concatenate([[kepler_fit.params["mu"]], kepler_fit.y0])
    stderr = np.concatenate([[kepler_fit.stderr["mu"]], kepler_fit.y0_stderr])
    truth = np.concatenate([[MU], Y0])
    assert np.all(np.isfinite(stderr)) and np.all(stderr > 0)
    assert np.all(np.abs(estimates - truth) < Z_95 * stderr), (estimates - truth) / stderr
    assert float(kepler_fit.stderr["mu"]) < 0.01  # the data do pin mu down


def test_kepler_standard_errors_equal_scipy_least_squares_on_the_exact_orbit(
    kepler_data, kepler_fit
):
    """SciPy's least squares, on residuals from Kepler's equation and a finite-difference
    Jacobian, finds the same optimum and the same covariance (J^T J)^-1."""

    def residuals(theta):
        positions = exact_kepler_positions(theta[0], theta[1:], np.asarray(TS))
        return ((positions - kepler_data) / POSITION_NOISE).ravel()

    start = np.concatenate([[START_MU], START_Y0])
    reference = scipy.optimize.least_squares(
        residuals, start, jac="3-point", x_scale="jac", xtol=1e-14, ftol=1e-14, gtol=1e-14
    )
    assert reference.success
    reference_stderr = np.sqrt(np.diag(np.linalg.inv(reference.jac.T @ reference.jac)))
    estimates = np.concatenate([[kepler_fit.params["mu"]], kepler_fit.y0])
    stderr = np.concatenate([[kepler_fit.stderr["mu"]], kepler_fit.y0_stderr])
    assert np.all(np.abs(estimates - reference.x) < 1e-4 * stderr), (
        estimates - reference.x
    ) / stderr
    np.testing.assert_allclose(stderr, reference_stderr, rtol=1e-5)
    assert float(kepler_fit.loss) == pytest.approx(reference.cost, rel=1e-6)


def test_eccentricity_and_its_delta_method_interval(kepler_fit):
    """e from the fitted mu and state; its standard error by the delta method through the
    covariance; the true 0.5 lies within 1.96 standard errors, the start's does not."""
    theta = jnp.concatenate([kepler_fit.params["mu"][None], kepler_fit.y0])
    of_theta = lambda theta: eccentricity(theta[0], theta[1:])  # noqa: E731
    gradient = jax.grad(of_theta)(theta)
    stderr = jnp.sqrt(gradient @ kepler_fit.covariance @ gradient)
    estimate = of_theta(theta)
    assert abs(float(estimate) - ECCENTRICITY) < Z_95 * float(stderr)
    assert abs(float(eccentricity(START_MU, START_Y0)) - ECCENTRICITY) > 5 * float(stderr)


# Sun and two giant planets near the 2:1 resonance in the plane (G = 1): the inner planet on
# a circle of radius 1, the outer one on an eccentric orbit from radius 1.6. Both planets'
# barycentric positions are seen 61 times over 30 time units (about 5 inner orbits) with
# noise of sd 1e-3; the masses and the whole initial state are fitted.
NAMES = ("Sun", "inner", "outer")
MASSES = np.array([1.0, 0.01, 0.003])
POSITIONS = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, -1.6]])
VELOCITIES = np.array([[0.0, 0.0], [0.0, 1.0], [1 / np.sqrt(1.6), 0.0]])
PLANET_TS = jnp.linspace(0.0, 30.0, 61)
PLANETS_OBSERVED = ["inner.x", "inner.y", "outer.x", "outer.y"]
PLANET_NOISE = 1e-3
PLANET_SOLVE = dict(solver="mclachlan4", adaptive=False, dt0=0.05)


def planets_state(masses: np.ndarray) -> jax.Array:
    """The state with the known positions and velocities; momenta m v, the Sun's balancing
    the planets' so that the barycentre stays at rest."""
    momenta = masses[:, None] * VELOCITIES
    momenta[0] = -momenta[1:].sum(axis=0)
    return jnp.asarray(np.concatenate([POSITIONS.ravel(), momenta.ravel()]))


@pytest.fixture(scope="module")
def planets_fit():
    truth = NBody(masses=MASSES, G=1.0, dimension=2, names=NAMES)
    path = simlab.simulate(truth, planets_state(MASSES), PLANET_TS, **PLANET_SOLVE)
    clean = jnp.stack([path.component(name) for name in PLANETS_OBSERVED], axis=1)
    noise = np.random.default_rng(1).standard_normal(clean.shape)
    # The guess of the masses carries its own momenta m v: with the momenta held, a lighter
    # planet would move faster and leave its orbit.
    guess = MASSES * np.array([1.003, 0.8, 1.3])
    return simlab.fit(
        NBody(masses=guess, G=1.0, dimension=2, names=NAMES),
        PLANET_TS,
        np.asarray(clean) + PLANET_NOISE * noise,
        y0=planets_state(guess),
        params=["masses"],
        fit_y0=True,
        observe=PLANETS_OBSERVED,
        noise_scale=PLANET_NOISE,
        simulate_options=PLANET_SOLVE,
    )


def test_planet_masses_from_their_perturbed_orbits(planets_fit):
    """Each planet's mass shows in the other's orbit: both are recovered, with the Sun's
    mass and the initial state, inside their 95% intervals, to about 1%."""
    assert bool(planets_fit.converged)
    masses, stderr = planets_fit.params["masses"], planets_fit.stderr["masses"]
    assert np.all(np.abs(np.asarray(masses) - MASSES) < Z_95 * np.asarray(stderr))
    assert np.all(np.asarray(stderr[1:]) < 0.01 * MASSES[1:])
    truth = planets_state(MASSES)
    assert np.all(np.abs(planets_fit.y0 - truth) < Z_95 * planets_fit.y0_stderr)


def test_forward_mode_with_traced_step_counts_equals_finite_differences():
    """Under `jit` with traced save times the step counts are traced too; forward mode
    (`adjoint="forward"`, as fits use) differentiates wrt mu and a save time, equal to
    central differences and to reverse mode."""

    def x_at_end(mu, end):
        ts = jnp.stack([jnp.asarray(0.0), end])
        orbit = simlab.simulate(
            Kepler(mu=mu), Y0, ts, solver="verlet", adaptive=False, dt0=0.01, adjoint="forward"
        )
        return orbit.ys[-1, 0]

    mu, end = jnp.asarray(1.2), jnp.asarray(1.995)  # 200 steps, also at end ± 1e-6
    forward = jax.jit(jax.jacfwd(x_at_end, argnums=(0, 1)))(mu, end)
    step = 1e-6
    central = (
        (x_at_end(mu + step, end) - x_at_end(mu - step, end)) / (2 * step),
        (x_at_end(mu, end + step) - x_at_end(mu, end - step)) / (2 * step),
    )
    reverse = jax.grad(
        lambda mu: simlab.simulate(
            Kepler(mu=mu), Y0, jnp.array([0.0, 1.995]), solver="verlet", adaptive=False, dt0=0.01
        ).ys[-1, 0]
    )(mu)
    np.testing.assert_allclose(np.asarray(forward), np.asarray(central), rtol=1e-7)
    assert float(forward[0]) == pytest.approx(float(reverse), rel=1e-12)
