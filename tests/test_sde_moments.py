"""Fits of stochastic models to ensemble statistics by simulated moments with common random
numbers: recovery of Ornstein–Uhlenbeck's rate and noise within standard errors that match
the generalised-method-of-moments formula evaluated in NumPy from the closed-form
Euler–Maruyama moments, Hansen's J statistic against its chi-squared law, the pathwise
gradient of the moment objective against central differences, and clear refusals.

The observed ensemble is simulated in NumPy with its own random numbers (a fixed seed);
each statistical assertion states its confidence.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from test_compile_cache import count_compilations

import simlab
from simlab.models import LotkaVolterra, OrnsteinUhlenbeck

THETA, SIGMA, X0 = 1.5, 0.6, 2.0
DT, STEPS_PER_SAVE, SAVES = 0.05, 10, 3
TS = np.arange(SAVES + 1) * STEPS_PER_SAVE * DT
OBSERVED_PATHS, SIMULATED_PATHS = 300, 300
START = OrnsteinUhlenbeck(theta=1.0, mu=0.0, sigma=1.0)
KEY = jax.random.key(1)


def numpy_euler_ensemble(seed: int) -> np.ndarray:
    """`OBSERVED_PATHS` Euler–Maruyama paths of OU (mu = 0) from X0, saved at TS."""
    rng = np.random.default_rng(seed)
    x = np.full(OBSERVED_PATHS, X0)
    saved = [x.copy()]
    for _ in range(SAVES):
        for _ in range(STEPS_PER_SAVE):
            x = x - THETA * x * DT + SIGMA * np.sqrt(DT) * rng.normal(size=x.size)
        saved.append(x.copy())
    return np.stack(saved, axis=1)[..., None]


def euler_moments(theta: float, sigma: float) -> np.ndarray:
    """The exact mean and variance of the Euler–Maruyama chain at TS[1:] (additive noise
    keeps it Gaussian): m_n = a^n x0, v_n = sigma^2 dt (1 - a^2n) / (1 - a^2), a = 1 - theta dt."""
    a = 1 - theta * DT
    n = np.arange(1, SAVES + 1) * STEPS_PER_SAVE
    return np.concatenate([a**n * X0, sigma**2 * DT * (1 - a ** (2 * n)) / (1 - a**2)])


def gmm_standard_errors() -> np.ndarray:
    """sqrt diag (J^T Omega^-1 J)^-1 at the true parameters: J by central differences of
    the closed-form moments; Omega the Gaussian chain's covariance of (sample means, sample
    variances) across times, Cov(mean_s, mean_t) = c_st, Cov(var_s, var_t) = 2 c_st^2,
    c_st = a^(n_t - n_s) v_s, times (1/M + 1/N)."""
    a = 1 - THETA * DT
    n = np.arange(1, SAVES + 1) * STEPS_PER_SAVE
    v = euler_moments(THETA, SIGMA)[SAVES:]
    c = np.array(
        [[a ** abs(nt - ns) * v[min(i, j)] for j, nt in enumerate(n)] for i, ns in enumerate(n)]
    )
    omega = np.block([[c, np.zeros_like(c)], [np.zeros_like(c), 2 * c**2]])
    omega *= 1 / OBSERVED_PATHS + 1 / SIMULATED_PATHS
    h = 1e-6
    jacobian = np.stack(
        [
            (euler_moments(THETA + h, SIGMA) - euler_moments(THETA - h, SIGMA)) / (2 * h),
            (euler_moments(THETA, SIGMA + h) - euler_moments(THETA, SIGMA - h)) / (2 * h),
        ],
        axis=1,
    )
    return np.sqrt(np.diag(np.linalg.inv(jacobian.T @ np.linalg.solve(omega, jacobian))))


@pytest.fixture(scope="module")
def observed():
    return numpy_euler_ensemble(seed=5)


# The settings of the statistical tests: many simulated paths, the Euler–Maruyama steps
# whose moments `euler_moments` gives in closed form.
FULL = dict(paths=SIMULATED_PATHS, simulate_options=dict(solver="euler_maruyama"))


@pytest.fixture(scope="module")
def moment_fit(observed):
    return fit_with(observed, **FULL)


def test_moment_fit_recovers_ou_rate_and_noise_within_gmm_standard_errors(moment_fit):
    """The reported standard errors agree with the GMM formula from the closed-form moments
    (to 25%: the fit estimates Omega from 300 observed paths, whose fourth moments scatter
    by about 10-15%), and each estimate lies within 3 of them of the truth (99.7% each)."""
    expected = gmm_standard_errors()
    reported = np.array([float(moment_fit.stderr["theta"]), float(moment_fit.stderr["sigma"])])
    np.testing.assert_allclose(reported, expected, rtol=0.25)
    assert abs(float(moment_fit.params["theta"]) - THETA) < 3 * expected[0]
    assert abs(float(moment_fit.params["sigma"]) - SIGMA) < 3 * expected[1]
    assert expected[0] < 0.05 * THETA and expected[1] < 0.05 * SIGMA  # a sharp test
    assert bool(moment_fit.converged)


def test_predicted_path_starts_at_the_fits_start_and_matches_one_from_after_it(moment_fit):
    """Asked from ts[0], predict gives the start state (without uncertainty) and then the
    same path as when asked only after it (the same key, the same Brownian increments)."""
    key = jax.random.key(3)
    from_start, stderr = moment_fit.predict(TS, key=key)
    after_start, later_stderr = moment_fit.predict(TS[1:], key=key)
    np.testing.assert_array_equal(from_start[0], [X0])
    np.testing.assert_array_equal(stderr[0], [0.0])
    np.testing.assert_allclose(from_start[1:], after_start, rtol=1e-12)
    np.testing.assert_allclose(stderr[1:], later_stderr, rtol=1e-12)
    assert np.all(later_stderr > 0)


def test_hansen_j_statistic_lies_in_its_chi_squared_band(moment_fit):
    """2 loss is chi-squared with 6 statistics - 2 parameters = 4 degrees of freedom for
    the right model: inside its central 99% band."""
    assert int(moment_fit.num_observed) == 2 * SAVES
    j_statistic = 2 * float(moment_fit.loss)
    low, high = stats.chi2.ppf([0.005, 0.995], df=2 * SAVES - 2)
    assert low < j_statistic < high, j_statistic


def test_pathwise_gradient_of_the_moment_objective_matches_central_differences(moment_fit):
    """Reverse- and forward-mode derivatives of the objective, with the simulated paths'
    keys fixed, equal central differences in float64 away from the optimum."""
    problem = moment_fit.problem
    y0s = tuple(e.y0 for e in problem.experiments)

    def objective(parameters, adjoint):
        theta, sigma = parameters
        model = OrnsteinUhlenbeck(theta=theta, mu=0.0, sigma=sigma)
        residuals, _ = problem.residuals_at(model, y0s, adjoint)
        return 0.5 * jnp.sum(residuals**2)

    point, h = jnp.array([1.2, 0.8]), 1e-5
    shifted = point[None] + h * jnp.concatenate([jnp.eye(2), -jnp.eye(2)])

    @jax.jit
    def derivatives_and_values():  # one compiled program for all three
        reverse = jax.grad(objective)(point, None)
        forward = jax.jacfwd(objective)(point, "forward")
        return reverse, forward, jax.vmap(lambda p: objective(p, "forward"))(shifted)

    reverse, forward, values = derivatives_and_values()
    central = (values[:2] - values[2:]) / (2 * h)
    np.testing.assert_allclose(reverse, central, rtol=1e-6)
    np.testing.assert_allclose(forward, central, rtol=1e-6)
    assert np.all(np.abs(central) > 1.0)  # far from the optimum, the test has teeth


def fit_with(observed, **changes):
    settings = dict(params=["theta", "sigma"], paths=20, key=KEY, dt0=DT) | changes
    return simlab.fit_moments(START, TS, observed, **settings)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (dict(key=None), r"pass key=jax.random.key"),
        (dict(paths=1), r"paths must be an integer >= 2"),
        (dict(dt0=0.0), r"dt0 must be a positive number"),
        (dict(statistics=("median",)), r"statistics must list some of"),
        (dict(params=["kappa"]), r"unknown parameter 'kappa'"),
        (dict(simulate_options=dict(dt0=DT / 2)), r"pass the step once, as dt0"),
        (dict(simulate_options=dict(adaptive=True)), r"drop adaptive=True"),
    ],
)
def test_bad_settings_are_refused(observed, changes, message):
    with pytest.raises(ValueError, match=message):
        fit_with(observed, **changes)


def test_bad_observations_are_refused(observed):
    with pytest.raises(ValueError, match=r"3 paths for 6 fitted statistics"):
        fit_with(observed[:3])
    moved = observed.copy()
    moved[0, 0] += 1.0
    with pytest.raises(ValueError, match=r"must share their first state"):
        fit_with(moved)
    with pytest.raises(ValueError, match=r"shape \(M, len\(ts\), 1\)"):
        fit_with(observed[:, :2])
    with pytest.raises(ValueError, match=r"LotkaVolterra is deterministic: use simlab.fit"):
        simlab.fit_moments(
            LotkaVolterra(1.0, 0.1, 1.0, 0.1),
            TS,
            observed,
            params=["alpha"],
            paths=4,
            key=KEY,
            dt0=DT,
        )


BOUNDS = {"theta": (0.2, 5.0), "sigma": (0.1, 3.0)}


@pytest.mark.slow
def test_a_multi_start_moment_fit_reaches_the_single_start_optimum(observed, moment_fit):
    """The same paths (the starts' key is split off `key`) give the same objective, so the
    best of three starts drawn over wide ranges lands on the one-start optimum, and every
    start converges there (the OU moment objective has one minimum in these ranges)."""
    fitted = fit_with(observed, bounds=BOUNDS, starts=3, **FULL)
    for name in ("theta", "sigma"):
        np.testing.assert_allclose(fitted.params[name], moment_fit.params[name], rtol=1e-5)
        np.testing.assert_allclose(fitted.starts.params[name], moment_fit.params[name], rtol=1e-4)
    np.testing.assert_allclose(fitted.loss, moment_fit.loss, rtol=1e-8)
    drawn = np.asarray(fitted.starts.initial["theta"])
    assert np.ptp(drawn) > 1.0  # the starts were spread, not all at the same point


@pytest.mark.slow
def test_an_interrupted_moment_fit_resumes_from_its_checkpoint(observed, tmp_path, monkeypatch):
    """A fit stopped right after its first checkpoint (as by a killed process) resumes from
    the file, without compiling again, to the answer of an uninterrupted fit; another key's
    fit refuses the file."""
    from simlab._fit import _loop

    path = tmp_path / "moments.npz"
    settings = dict(paths=50, checkpoint_every=2, bounds=BOUNDS)
    write_checkpoint, stopped_at = _loop.save_checkpoint, []

    def write_then_stop(path, carry, fingerprint):
        write_checkpoint(path, carry, fingerprint)
        stopped_at.append(int(carry.step))
        raise KeyboardInterrupt

    uninterrupted = fit_with(observed, **settings)  # compiles everything the fit runs
    monkeypatch.setattr(_loop, "save_checkpoint", write_then_stop)
    with pytest.raises(KeyboardInterrupt):
        fit_with(observed, checkpoint=path, **settings)
    monkeypatch.undo()
    with count_compilations() as compiled:
        resumed = fit_with(observed, checkpoint=path, **settings)
    assert compiled == []  # the arrays read back have the types the loop was compiled for
    assert 0 < stopped_at[0] < int(resumed.num_steps)
    for name in ("theta", "sigma"):
        np.testing.assert_allclose(resumed.params[name], uninterrupted.params[name], rtol=1e-12)
    with pytest.raises(ValueError, match=r"differs in: data"):
        fit_with(observed, checkpoint=path, key=jax.random.key(2), **settings)
