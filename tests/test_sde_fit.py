"""Fits of stochastic models to observed paths by maximum likelihood: the exact
Ornstein–Uhlenbeck MLE against its closed form (an AR(1) regression) with standard errors
from NumPy, recovery of known parameters within their standard errors, and clear refusals.

Data are simulated in NumPy from the exact transition laws with fixed seeds; each
statistical assertion states its confidence.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simlab
from simlab.models import DoubleWell, GeometricBrownianMotion, OrnsteinUhlenbeck

DT, STEPS, BATCH = 0.05, 400, 4
TS = np.arange(STEPS + 1) * DT
OU_TRUE = dict(theta=1.5, mu=0.4, sigma=0.6)
OU_START = OrnsteinUhlenbeck(theta=1.0, mu=0.0, sigma=1.0)
OU_PARAMS = ["theta", "mu", "sigma"]


def exact_ou_paths(seed, theta, mu, sigma):
    """`BATCH` paths from x0 = mu, each step the exact Gaussian transition."""
    rng = np.random.default_rng(seed)
    decay = np.exp(-theta * DT)
    spread = sigma * np.sqrt((1 - decay**2) / (2 * theta))
    x = np.full((BATCH, STEPS + 1), mu)
    for k in range(STEPS):
        x[:, k + 1] = mu + (x[:, k] - mu) * decay + spread * rng.normal(size=BATCH)
    return x[..., None]


def ar1_estimates(paths):
    """The closed-form conditional MLE of OU from its AR(1) form x' = a + b x + e,
    Var e = v, and the standard errors of (theta, mu, sigma) by the delta method from the
    regression's observed information (v (X^T X)^{-1} for (a, b), 2 v^2 / N for v)."""
    before, after = paths[:, :-1, 0].ravel(), paths[:, 1:, 0].ravel()
    design = np.stack([np.ones_like(before), before], axis=1)
    (a, b), *_ = np.linalg.lstsq(design, after, rcond=None)
    v = np.mean((after - a - b * before) ** 2)
    covariance = np.zeros((3, 3))
    covariance[:2, :2] = v * np.linalg.inv(design.T @ design)
    covariance[2, 2] = 2 * v**2 / after.size

    def natural(phi):
        a, b, v = phi
        theta = -np.log(b) / DT
        return np.array([theta, a / (1 - b), np.sqrt(2 * theta * v / (1 - b**2))])

    phi = np.array([a, b, v])
    steps = 1e-6 * np.abs(phi)
    jacobian = np.stack(
        [
            (natural(phi + e) - natural(phi - e)) / (2 * h)
            for e, h in zip(np.diag(steps), steps, strict=True)
        ],
        axis=1,
    )
    return natural(phi), np.sqrt(np.diag(jacobian @ covariance @ jacobian.T))


@pytest.fixture(scope="module")
def ou_paths():
    return exact_ou_paths(0, **OU_TRUE)


@pytest.fixture(scope="module")
def ou_fit(ou_paths):
    return simlab.fit(OU_START, TS, ou_paths, params=OU_PARAMS)


def test_exact_density_mle_is_the_closed_form_ornstein_uhlenbeck_mle(ou_paths, ou_fit):
    """The exact-density fit lands on the AR(1) regression's estimates, and its standard
    errors (inverse Hessian of -log L) equal the regression's by the delta method."""
    estimates, standard_errors = ar1_estimates(ou_paths)
    fitted = np.array([float(ou_fit.params[name]) for name in OU_PARAMS])
    errors = np.array([float(ou_fit.stderr[name]) for name in OU_PARAMS])
    np.testing.assert_allclose(fitted, estimates, rtol=1e-6)
    np.testing.assert_allclose(errors, standard_errors, rtol=1e-4)
    assert int(ou_fit.num_observed) == BATCH * STEPS


def test_exact_density_recovers_ornstein_uhlenbeck_parameters(ou_fit):
    """Each true value within 4 standard errors (99.99 % each, 99.98 % for all three)."""
    for name, true in OU_TRUE.items():
        assert abs(float(ou_fit.params[name]) - true) < 4 * float(ou_fit.stderr[name]), name


def test_euler_maruyama_density_mle_is_its_closed_form(ou_paths):
    """The Euler–Maruyama density of OU is the same AR(1) regression with b = 1 - theta dt
    and v = sigma^2 dt, so its MLE is theta = (1 - b) / dt, mu = a / (1 - b),
    sigma = sqrt(v / dt) from the regression: below the exact MLE by the factors
    (1 - b) / (-log b) and sqrt((1 - b^2) / (-2 log b)), first order in dt."""
    before, after = ou_paths[:, :-1, 0].ravel(), ou_paths[:, 1:, 0].ravel()
    design = np.stack([np.ones_like(before), before], axis=1)
    (a, b), *_ = np.linalg.lstsq(design, after, rcond=None)
    v = np.mean((after - a - b * before) ** 2)
    closed_form = np.array([(1 - b) / DT, a / (1 - b), np.sqrt(v / DT)])
    fit = simlab.fit(OU_START, TS, ou_paths, params=OU_PARAMS, transition="euler_maruyama")
    fitted = np.array([float(fit.params[name]) for name in OU_PARAMS])
    np.testing.assert_allclose(fitted, closed_form, rtol=1e-6)


def test_euler_maruyama_density_recovers_the_double_well_noise():
    """Double-well paths simulated by SRA1 (steps of 0.001), observed every 0.01: the
    Euler–Maruyama density's bias in D is O(dt |f'|), about 2 %, against a standard error
    of about D sqrt(2 / N) = 3.5 % (N = 1,600 transitions): the true D within 4 standard
    errors plus that bias."""
    true = DoubleWell(D=0.5)
    ts = np.arange(401) * 0.01
    paths = np.stack(
        [
            simlab.simulate(
                true, jnp.array([1.0]), ts, key=jax.random.key(seed), adaptive=False, dt0=0.001
            ).ys
            for seed in range(BATCH)
        ]
    )
    fit = simlab.fit(DoubleWell(D=1.0), ts, paths, params=["D"], transition="euler_maruyama")
    assert abs(float(fit.params["D"]) - 0.5) < 4 * float(fit.stderr["D"]) + 0.02 * 0.5
    assert float(fit.stderr["D"]) == pytest.approx(0.5 * np.sqrt(2 / 1600), rel=0.1)


def test_exact_density_recovers_geometric_brownian_motion_parameters():
    """Prices from the exact log-normal law (mu = 0.3, sigma = 0.5): each true value within
    4 standard errors; sigma's standard error is close to its asymptotic value
    sigma / sqrt(2 N) (N = 1600 transitions, observed information: within 10 %)."""
    rng = np.random.default_rng(1)
    mu, sigma = 0.3, 0.5
    increments = (mu - sigma**2 / 2) * DT + sigma * np.sqrt(DT) * rng.normal(size=(BATCH, STEPS))
    log_prices = np.concatenate([np.zeros((BATCH, 1)), np.cumsum(increments, axis=1)], axis=1)
    start = GeometricBrownianMotion(mu=0.0, sigma=1.0)
    fit = simlab.fit(start, TS, np.exp(log_prices)[..., None], params=["mu", "sigma"])
    for name, true in dict(mu=mu, sigma=sigma).items():
        assert abs(float(fit.params[name]) - true) < 4 * float(fit.stderr[name]), name
    asymptotic = float(fit.params["sigma"]) / np.sqrt(2 * BATCH * STEPS)
    assert float(fit.stderr["sigma"]) == pytest.approx(asymptotic, rel=0.1)


@pytest.mark.parametrize(
    ("model", "settings", "message"),
    [
        (OU_START, dict(y0=jnp.array([0.4])), r"leave \['y0'\] out"),
        (OU_START, dict(noise_scale=0.1), r"leave \['noise_scale'\] out"),
        (OU_START, dict(observe=["x"], fit_y0=True), r"leave \['observe', 'fit_y0'\] out"),
        (OU_START, dict(method="least_squares"), "not a sum of squares"),
        (DoubleWell(D=0.5), dict(params=["D"], transition="exact"), "has none"),
        (OU_START, dict(transition="milstein"), "transition must be one of"),
        (
            simlab.models.LotkaVolterra(alpha=0.5, beta=0.02, gamma=0.8, delta=0.02),
            dict(params=["alpha"]),
            "deterministic: pass y0",
        ),
    ],
)
def test_bad_fits_of_paths_are_refused(model, settings, message):
    paths = np.ones((5, 2)) if "alpha" in settings.get("params", ()) else np.ones((5, 1))
    settings = dict(params=["theta"]) | settings
    with pytest.raises(ValueError, match=message):
        simlab.fit(model, TS[:5], paths, **settings)


def test_incomplete_paths_are_refused():
    paths = np.ones((5, 1))
    paths[2] = np.nan
    with pytest.raises(ValueError, match="must be complete paths"):
        simlab.fit(OU_START, TS[:5], paths, params=["theta"])


def test_the_profile_interval_of_theta_agrees_with_its_standard_error(ou_fit):
    """With 1,600 transitions the likelihood is close to quadratic: the 95 % profile
    interval of theta lies within a quarter of a standard error of theta ± 1.96 SE."""
    profile = ou_fit.profile("theta")
    theta, error = float(ou_fit.params["theta"]), float(ou_fit.stderr["theta"])
    assert float(profile.lower) == pytest.approx(theta - 1.96 * error, abs=0.25 * error)
    assert float(profile.upper) == pytest.approx(theta + 1.96 * error, abs=0.25 * error)


def test_predict_draws_the_fitted_path_from_the_key_with_delta_method_errors(ou_fit, ou_paths):
    """The prediction is the path `simulate` draws for the fitted model from the first
    observed state with the same key and step; its standard errors are the delta method
    with that path's parameter derivatives from central differences (same key: common
    random numbers), in float64."""
    ts, key, dt0 = jnp.asarray(TS[:21]), jax.random.key(5), 0.01
    path, stderr = ou_fit.predict(ts, key=key, dt0=dt0)
    y0 = jnp.asarray(ou_paths[0, 0])

    @jax.jit
    @jax.vmap
    def simulated(theta):
        model = OrnsteinUhlenbeck(*theta)
        return simlab.simulate(model, y0, ts, key=key, adaptive=False, dt0=dt0).ys

    assert ou_fit.covariance_labels == ("theta", "mu", "sigma")
    theta = np.array([float(ou_fit.params[name]) for name in ou_fit.covariance_labels])
    steps = np.diag(1e-6 * np.abs(theta))
    paths = np.asarray(
        simulated(jnp.asarray(np.concatenate([theta[None], theta + steps, theta - steps])))
    )
    np.testing.assert_allclose(path, paths[0], rtol=1e-12)
    jacobian = np.stack((paths[1:4] - paths[4:]) / (2 * np.diag(steps))[:, None, None], axis=-1)
    variance = np.einsum("tkp,pq,tkq->tk", jacobian, np.asarray(ou_fit.covariance), jacobian)
    np.testing.assert_allclose(stderr, np.sqrt(variance), rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (dict(dt0=0.01), r"stochastic: predict draws one path.*pass key=jax\.random\.key"),
        (dict(key=jax.random.key(0)), r"takes fixed steps: pass dt0=\.\.\. to predict"),
    ],
)
def test_predict_of_a_path_fit_needs_a_key_and_a_step(ou_fit, settings, message):
    with pytest.raises(ValueError, match=message):
        ou_fit.predict(TS[:5], **settings)


FHN = simlab.models.StochasticFitzHughNagumo(
    current=0.3, a=0.7, b=0.8, epsilon=0.08, noise_strength=0.2
)
SIR = simlab.models.StochasticSIR(beta=0.3, gamma=0.1, population=1000.0)


@pytest.mark.parametrize(
    ("model", "params", "transition", "message"),
    [
        (
            OrnsteinUhlenbeck(theta=1.0, mu=0.0, sigma=0.0),
            ["theta", "mu"],
            "euler_maruyama",
            r"Euler–Maruyama .* degenerate: its diffusion vanishes in \['x'\].*\['sigma'\]",
        ),
        (FHN, ["a"], "euler_maruyama", r"vanishes in \['w'\].*transition_log_density"),
        (SIR, ["beta"], "euler_maruyama", r"G G\^T is singular"),
        (
            OrnsteinUhlenbeck(theta=1.0, mu=0.0, sigma=0.0),
            ["theta", "mu"],
            None,
            "zero likelihood under the exact transition density",
        ),
    ],
)
def test_noise_that_misses_a_component_is_refused(model, params, transition, message):
    """Without noise in some direction a transition density is a point mass: any observed
    path off the drift has zero likelihood, so the fit is refused, naming why."""
    size = len(model.state_names)
    paths = 100.0 + np.arange(5.0 * size).reshape(5, size)
    with pytest.raises(ValueError, match=message):
        simlab.fit(model, TS[:5], paths, params=params, transition=transition)
