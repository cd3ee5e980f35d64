"""simlab.fit: recovery of known parameters, real data, uncertainty, robustness, bad input."""

import math
from typing import ClassVar

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import optax
import pytest
from helpers import LOTKA_VOLTERRA
from jaxtyping import Array, Float

import simlab
from simlab._fit import _loop, _uncertainty
from simlab._fit._problem import make_problem
from simlab.models import AbstractODEModel, parameter

LV_PARAMS = ["alpha", "beta", "gamma", "delta"]


class Decay(AbstractODEModel):
    """dx/dt = -rate x: x(t) = x0 exp(-rate t)."""

    rate: Float[Array, ""] = parameter(lower=0.0)
    state_names: ClassVar[tuple[str, ...]] = ("x",)

    def __call__(self, t, y, args):
        return -self.rate * y


EVALUATED_RATES = []


class BoundedDecay(AbstractODEModel):
    """Decay with rate in (0.5, 2) that records every rate it is evaluated at."""

    rate: Float[Array, ""] = parameter(lower=0.5, upper=2.0)
    state_names: ClassVar[tuple[str, ...]] = ("x",)

    def __call__(self, t, y, args):
        jax.debug.callback(lambda rate: EVALUATED_RATES.append(float(rate)), self.rate)
        return -self.rate * y


class FragileDecay(AbstractODEModel):
    """Decay whose vector field turns NaN for rate > 1.5, so trial points there fail."""

    rate: Float[Array, ""] = parameter(lower=0.0)
    state_names: ClassVar[tuple[str, ...]] = ("x",)

    def __call__(self, t, y, args):
        return jnp.where(self.rate > 1.5, jnp.nan, -self.rate * y)


def noisy(key, clean, relative):
    return clean * (1 + relative * jr.normal(key, clean.shape))


@pytest.fixture(scope="module")
def lynx_hare():
    return simlab.datasets.lynx_hare()


@pytest.fixture(scope="module")
def lynx_hare_fit(lynx_hare):
    start = simlab.models.LotkaVolterra(alpha=0.5, beta=0.02, gamma=0.8, delta=0.02)
    return simlab.fit(
        start,
        lynx_hare.ts,
        lynx_hare.observations,
        y0=lynx_hare.observations[0],
        params=LV_PARAMS,
        fit_y0=True,
    )


def test_dataset_has_its_records(lynx_hare):
    assert lynx_hare.year[0] == 1900 and lynx_hare.year[-1] == 1920
    assert lynx_hare.observations.shape == (21, 2)
    np.testing.assert_allclose(lynx_hare.observations[4], [36.3, 59.4])
    assert "MacLulich" in simlab.datasets.lynx_hare.__doc__


def test_lynx_hare_fit(lynx_hare_fit):
    result = lynx_hare_fit
    assert bool(result.converged)
    # Least squares on these data (as in the literature): prey growth ~0.48/yr,
    # predator death ~0.93/yr, with finite, sensible uncertainties.
    np.testing.assert_allclose(result.params["alpha"], 0.481, rtol=0.02)
    np.testing.assert_allclose(result.params["gamma"], 0.926, rtol=0.02)
    for name in LV_PARAMS:
        assert 0 < result.stderr[name] < 0.3 * result.params[name]
    assert result.covariance.shape == (6, 6)
    assert result.covariance_labels[-2:] == ("y0.prey", "y0.predator")
    np.testing.assert_allclose(result.covariance, result.covariance.T, rtol=1e-8)
    assert np.all(np.linalg.eigvalsh(np.asarray(result.covariance)) > 0)
    # σ² is the residual variance: 2·loss / (N − p).
    np.testing.assert_allclose(result.noise_variance, 2 * result.loss / (42 - 6))
    history = np.asarray(result.loss_history)[: int(result.num_steps) + 1]
    assert np.all(np.diff(history) <= 1e-9 * history[0])  # LM accepts only improvements
    prediction, stderr = result.predict(jnp.linspace(0.0, 20.0, 41))
    assert prediction.shape == stderr.shape == (41, 2)
    assert np.all(np.isfinite(stderr)) and np.all(stderr > 0)


def test_skipping_the_covariance_changes_nothing_else(lynx_hare, lynx_hare_fit):
    start = simlab.models.LotkaVolterra(alpha=0.5, beta=0.02, gamma=0.8, delta=0.02)
    arguments = (start, lynx_hare.ts, lynx_hare.observations)
    options = dict(y0=lynx_hare.observations[0], params=LV_PARAMS, fit_y0=True)
    quick = simlab.fit(*arguments, **options, covariance=False)
    for name in LV_PARAMS:
        np.testing.assert_allclose(quick.params[name], lynx_hare_fit.params[name], rtol=1e-12)
        assert np.isnan(quick.stderr[name])
    np.testing.assert_allclose(quick.loss, lynx_hare_fit.loss, rtol=1e-12)
    np.testing.assert_allclose(quick.aic, lynx_hare_fit.aic, rtol=1e-12)
    assert quick.covariance.shape == (6, 6) and np.all(np.isnan(quick.covariance))
    with pytest.raises(TypeError, match="covariance"):
        simlab.fit(*arguments, **options, covariance="no")


def test_lotka_volterra_recovery_with_5_percent_noise(lynx_hare, lynx_hare_fit):
    truth = LOTKA_VOLTERRA
    y0 = jnp.array([30.0, 4.0])
    clean = simlab.simulate(truth, y0, lynx_hare.ts).ys
    observations = noisy(jr.key(0), clean, 0.05)
    start = simlab.models.LotkaVolterra(alpha=0.5, beta=0.02, gamma=0.8, delta=0.02)
    # Same shapes and settings as the lynx–hare fit: the compiled loop is reused.
    result = simlab.fit(
        start, lynx_hare.ts, observations, y0=observations[0], params=LV_PARAMS, fit_y0=True
    )
    for name in LV_PARAMS:
        true = getattr(truth, name)
        assert abs(result.params[name] - true) < 4 * result.stderr[name], name
        assert abs(result.params[name] - true) < 0.1 * true, name


@pytest.mark.slow  # 16 s; make test keeps the other recoveries (pendulum, lynx-hare, ...)
def test_sir_recovery_observing_only_infected():
    truth = simlab.models.SIR(beta=0.3, gamma=0.1, population=1000.0)
    y0 = jnp.array([990.0, 10.0, 0.0])
    ts = jnp.linspace(0.0, 60.0, 16)
    infected = simlab.simulate(truth, y0, ts).ys[:, 1:2]
    observations = noisy(jr.key(1), infected, 0.05)
    start = simlab.models.SIR(beta=0.2, gamma=0.2, population=1000.0)
    result = simlab.fit(
        start,
        ts,
        observations,
        y0=y0,
        params=["beta", "gamma"],
        observe=["I"],
        noise_scale=0.05 * infected,
    )
    for name in ("beta", "gamma"):
        assert abs(result.params[name] - getattr(truth, name)) < 4 * result.stderr[name]
        assert abs(result.params[name] - getattr(truth, name)) < 0.05 * getattr(truth, name)
    assert np.asarray(result.model.population).tobytes() == np.asarray(start.population).tobytes()
    assert set(result.params) == {"beta", "gamma"}


@pytest.fixture(scope="module")
def pendulum_data():
    truth = simlab.models.DampedPendulum(length=1.5, damping=0.3)
    y0 = jnp.array([1.0, 0.0])
    ts = jnp.linspace(0.0, 8.0, 25)
    clean = simlab.simulate(truth, y0, ts).ys
    scale = 0.05 * jnp.max(jnp.abs(clean), axis=0)
    return truth, y0, ts, clean + scale[None] * jr.normal(jr.key(2), clean.shape), scale


def test_pendulum_recovery(pendulum_data):
    truth, y0, ts, observations, scale = pendulum_data
    start = simlab.models.DampedPendulum(length=1.0, damping=0.5, gravity=9.81)
    result = simlab.fit(
        start, ts, observations, y0=y0, params=["length", "damping"], noise_scale=scale
    )
    for name in ("length", "damping"):
        assert abs(result.params[name] - getattr(truth, name)) < 4 * result.stderr[name]
    assert float(result.model.gravity) == float(start.gravity)  # frozen exactly
    # With the right noise scale, the reduced chi-square is about one.
    assert 0.5 < float(result.noise_variance) < 1.6


def test_unidentifiable_parameters_are_reported(pendulum_data):
    _, y0, ts, observations, scale = pendulum_data
    start = simlab.models.DampedPendulum(length=1.0, damping=0.3, gravity=9.0)
    # The dynamics depend on gravity / length only: any pair with the same ratio fits.
    with pytest.warns(simlab._fit.UnidentifiableWarning, match=r"\['length', 'gravity'\]"):
        result = simlab.fit(
            start, ts, observations, y0=y0, params=["length", "gravity"], noise_scale=scale
        )
    assert math.isinf(result.stderr["length"]) and math.isinf(result.stderr["gravity"])
    np.testing.assert_allclose(
        result.params["gravity"] / result.params["length"], 9.81 / 1.5, rtol=0.02
    )


def test_covariance_inverts_the_informative_directions_and_flags_the_others():
    """sigma^2 (J^T J)^-1 where J has full rank; where two columns are collinear (to 1e-12),
    both are flagged and get infinite variance, while an orthogonal column keeps its exact
    variance sigma^2 / |b|^2, whatever the columns' units."""
    rng = np.random.default_rng(0)
    a, b, c = np.linalg.qr(rng.normal(size=(12, 3)))[0].T * np.array([[2.0], [3.0], [0.5]])
    sigma2 = 0.7
    full_rank = np.stack([a + c, b, 1e6 * c], axis=1)
    cov, flags = _uncertainty.covariance(jnp.asarray(full_rank), jnp.asarray(sigma2))
    expected = sigma2 * np.linalg.inv(full_rank.T @ full_rank)  # entries from 4e-12 to 0.3
    np.testing.assert_allclose(cov, expected, rtol=1e-10, atol=1e-16)
    assert not np.any(flags)

    collinear = np.stack([a, 2e-6 * a + 1e-18 * c, 1e6 * b], axis=1)
    cov, flags = _uncertainty.covariance(jnp.asarray(collinear), jnp.asarray(sigma2))
    np.testing.assert_array_equal(flags, [True, True, False])
    assert np.all(np.isinf(np.diag(cov)[:2]))
    assert np.isnan(cov[0, 1]) and np.isnan(cov[0, 2]) and np.isnan(cov[2, 1])
    np.testing.assert_allclose(cov[2, 2], sigma2 / (1e12 * b @ b), rtol=1e-10)

    # A column of zeros (a parameter with no effect) is flagged; the others keep their values.
    with_zero = np.stack([a + c, np.zeros(12), b], axis=1)
    cov, flags = _uncertainty.covariance(jnp.asarray(with_zero), jnp.asarray(sigma2))
    np.testing.assert_array_equal(flags, [False, True, False])
    assert np.isinf(cov[1, 1]) and np.isnan(cov[0, 1]) and np.isnan(cov[2, 1])
    kept = with_zero[:, [0, 2]]
    np.testing.assert_allclose(
        cov[np.ix_([0, 2], [0, 2])], sigma2 * np.linalg.inv(kept.T @ kept), rtol=1e-10, atol=1e-16
    )


def test_a_direction_is_uninformative_relative_to_the_best_determined_one():
    """The singular-value test compares each squared singular value of the unit-column
    Jacobian with the largest one (1e-14 of it), not with any other."""
    rng = np.random.default_rng(1)
    a, b, c = np.linalg.qr(rng.normal(size=(12, 3)))[0].T
    jacobian = np.stack([a, a + 0.1 * b, a + 3e-8 * c], axis=1)
    unit = jacobian / np.linalg.norm(jacobian, axis=0)
    values = np.linalg.svd(unit, compute_uv=False) ** 2
    # Below the threshold relative to the largest value, above it relative to the second.
    assert values[2] <= 1e-14 * values[0] and values[2] > 1e-14 * values[1]
    cov, flags = _uncertainty.covariance(jnp.asarray(jacobian), jnp.asarray(1.0))
    assert flags[0] and flags[2] and np.isinf(cov[2, 2])


def test_constrained_parameter_stays_in_range_for_every_iterate():
    ts = jnp.linspace(0.0, 2.0, 9)
    # The data decay at rate 3, outside the declared (0.5, 2): the fit must press against
    # the bound without ever reaching it, at every point it evaluates (trial points too).
    observations = jnp.exp(-3.0 * ts)[:, None]
    # (Gradient descent shares the transform; its loop is exercised by the tests below.)
    # Fixed steps keep the number of recorded evaluations (host callbacks) small.
    result = simlab.fit(
        BoundedDecay(rate=1.0),
        ts,
        observations,
        y0=jnp.array([1.0]),
        params=["rate"],
        max_steps=200,
        throw=False,
        simulate_options=dict(solver="heun", adaptive=False, dt0=0.125),
    )
    assert 1.9 < float(result.params["rate"]) < 2.0
    assert len(EVALUATED_RATES) > 100
    assert 0.5 < min(EVALUATED_RATES) and max(EVALUATED_RATES) < 2.0


# One optimiser instance and one data set, so that the tests below share one compiled loop.
FRAGILE_TS = jnp.linspace(0.0, 2.0, 9)
FRAGILE_FIT = dict(
    y0=jnp.array([1.0]),
    params=["rate"],
    method="gradient",
    optimiser=optax.sgd(1.0),
    max_steps=300,
    throw=False,
)


def _fragile_fit(**settings):
    observations = jnp.exp(-1.4 * FRAGILE_TS)[:, None]
    return simlab.fit(
        FragileDecay(rate=0.5), FRAGILE_TS, observations, **{**FRAGILE_FIT, **settings}
    )


@pytest.fixture(scope="module")
def fragile_fit():
    return _fragile_fit()


def test_failed_trial_solves_are_rejected_not_propagated(fragile_fit):
    # Plain gradient steps this long overshoot into rate > 1.5, where the solve fails.
    history = np.asarray(fragile_fit.loss_history)[: int(fragile_fit.num_steps) + 1]
    assert np.all(np.isfinite(history))
    np.testing.assert_allclose(fragile_fit.params["rate"], 1.4, rtol=1e-4)


@jax.jit
def _calibration_fits(observations, ts):
    def one(obs):
        result = simlab.fit(
            Decay(rate=0.5), ts, obs, y0=jnp.array([1.0]), params=["rate"], fit_y0=True, throw=False
        )
        return result.params["rate"], result.stderr["rate"], result.converged

    return jax.vmap(one)(observations)


def test_standard_errors_are_calibrated_over_200_replicates():
    ts = jnp.linspace(0.0, 3.0, 40)
    clean = jnp.exp(-0.8 * ts)[:, None]
    noise = 0.05 * jr.normal(jr.key(3), (200, *clean.shape))
    rates, stderrs, converged = _calibration_fits(clean[None] + noise, ts)
    assert bool(jnp.all(converged))
    coverage = float(jnp.mean(jnp.abs(rates - 0.8) <= 1.96 * stderrs))
    assert 0.90 <= coverage <= 1.0
    # The standard error also matches the spread of the estimates themselves.
    np.testing.assert_allclose(jnp.std(rates), jnp.mean(stderrs), rtol=0.2)


@pytest.mark.slow
def test_objective_gradient_matches_finite_differences():
    truth = LOTKA_VOLTERRA
    ts = jnp.linspace(0.0, 10.0, 8)
    observations = noisy(jr.key(4), simlab.simulate(truth, jnp.array([30.0, 4.0]), ts).ys, 0.05)
    start = simlab.models.LotkaVolterra(alpha=0.5, beta=0.03, gamma=0.8, delta=0.02)
    problem, _ = make_problem(
        start,
        ts,
        observations,
        y0=jnp.array([30.0, 4.0]),
        params=LV_PARAMS,
        observe=None,
        fit_y0=False,
        noise_scale=None,
        simulate_options={"rtol": 1e-11, "atol": 1e-11},
    )
    u0 = problem.initial_unconstrained()
    flat, unflatten = jax.flatten_util.ravel_pytree(u0)

    @jax.jit
    def loss(flat):
        return 0.5 * jnp.sum(problem.residuals(unflatten(flat), "checkpoint")[0] ** 2)

    gradient = jax.grad(loss)(flat)
    step = 1e-5
    basis = jnp.eye(flat.size)
    central = jnp.array(
        [(loss(flat + step * e) - loss(flat - step * e)) / (2 * step) for e in basis]
    )
    np.testing.assert_allclose(gradient, central, rtol=1e-5)


def _decay_batch(batch, key):
    ts = jnp.linspace(0.0, 2.0, 10)
    y0 = 1.0 + jr.uniform(key, (batch, 1))
    clean = y0[:, None, :] * jnp.exp(-0.7 * ts)[None, :, None]
    return ts, clean + 0.01 * jr.normal(jr.fold_in(key, 1), clean.shape), y0


def test_data_parallel_over_four_devices_equals_one_device():
    assert len(jax.devices()) == 4
    ts, observations, y0 = _decay_batch(8, jr.key(5))
    kwargs = dict(y0=y0, params=["rate"])
    one = simlab.fit(Decay(rate=0.3), ts, observations, **kwargs)
    sharded = simlab.fit(Decay(rate=0.3), ts, observations, devices=jax.devices(), **kwargs)
    np.testing.assert_allclose(sharded.params["rate"], one.params["rate"], rtol=1e-10)
    np.testing.assert_allclose(sharded.stderr["rate"], one.stderr["rate"], rtol=1e-8)
    np.testing.assert_allclose(one.params["rate"], 0.7, rtol=0.02)
    with pytest.raises(ValueError, match="not divisible by 3 devices"):
        simlab.fit(Decay(rate=0.3), ts, observations, devices=jax.devices()[:3], **kwargs)


def test_several_data_sets_share_parameters():
    ts_a, ts_b = jnp.linspace(0.0, 2.0, 6), jnp.linspace(0.0, 4.0, 11)
    obs_a = 2.0 * jnp.exp(-0.7 * ts_a)[:, None]
    obs_b = 0.5 * jnp.exp(-0.7 * ts_b)[:, None]
    result = simlab.fit(
        Decay(rate=0.3),
        [ts_a, ts_b],
        [obs_a, obs_b],
        y0=[jnp.array([1.0]), jnp.array([1.0])],
        params=["rate"],
        fit_y0=True,
    )
    np.testing.assert_allclose(result.params["rate"], 0.7, rtol=1e-6)
    np.testing.assert_allclose(result.y0[0], [2.0], rtol=1e-6)
    np.testing.assert_allclose(result.y0[1], [0.5], rtol=1e-6)
    assert result.covariance_labels == ("rate", "y0[0].x", "y0[1].x")


def test_noise_scale_downweights_an_outlier():
    # Same shapes as the data-parallel test's single-device fit: its compiled loop is reused.
    ts, _, y0 = _decay_batch(8, jr.key(5))
    observations = (y0[:, None, :] * jnp.exp(-0.7 * ts)[None, :, None]).at[3, 4, 0].set(5.0)
    scale = jnp.ones_like(observations).at[3, 4, 0].set(1e6)
    result = simlab.fit(
        Decay(rate=0.3), ts, observations, y0=y0, params=["rate"], noise_scale=scale
    )
    np.testing.assert_allclose(result.params["rate"], 0.7, rtol=1e-5)


def test_checkpoint_resumes_where_it_stopped(tmp_path, monkeypatch, fragile_fit):
    path = tmp_path / "fit.npz"
    saves = []
    original = _loop.save_checkpoint

    def interrupted(*args):
        original(*args)
        saves.append(1)
        if len(saves) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(_loop, "save_checkpoint", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _fragile_fit(checkpoint=path, checkpoint_every=20)
    monkeypatch.setattr(_loop, "save_checkpoint", original)
    assert path.exists() and not list(tmp_path.glob(".fit.npz.*"))
    # Count the steps the resumed run takes: it starts at the saved step 40, not at 0.
    starts, original_advance = [], _loop.advance

    def counted(problem, stepper, carry, stop_step):
        starts.append(int(carry.step))
        return original_advance(problem, stepper, carry, stop_step)

    monkeypatch.setattr(_loop, "advance", counted)
    resumed = _fragile_fit(checkpoint=path, checkpoint_every=20)
    monkeypatch.setattr(_loop, "advance", original_advance)
    assert starts[0] == 40 and starts == sorted(starts)
    assert int(resumed.num_steps) == int(fragile_fit.num_steps) > 40
    np.testing.assert_array_equal(resumed.params["rate"], fragile_fit.params["rate"])
    with pytest.raises(ValueError, match="does not match this fit"):
        _fragile_fit(checkpoint=path, max_steps=50)


# --- bad input: each is a clear error before anything compiles --------------------------

TS = jnp.linspace(0.0, 1.0, 5)
OBS = jnp.ones((5, 1))


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        (dict(params=[]), ValueError, "params is empty"),
        (dict(params="rate"), TypeError, "list of names"),
        (dict(params=["speed"]), ValueError, "unknown parameter 'speed'.*\\['rate'\\]"),
        (dict(params=["rate", "rate"]), ValueError, "twice"),
        (dict(observations=jnp.ones((4, 1))), ValueError, r"must have shape \(len\(ts\), 1\)"),
        (dict(observations=OBS * jnp.nan), ValueError, "all NaN: nothing is observed"),
        (dict(observations=OBS.at[2, 0].set(jnp.inf)), ValueError, "1 inf value"),
        (dict(y0=jnp.ones(2)), ValueError, r"y0 has shape \(2,\); expected \(1,\)"),
        (dict(y0=jnp.array([jnp.nan])), ValueError, "y0 holds 1 NaN"),
        (dict(ts=TS[::-1]), ValueError, "strictly increasing"),
        (dict(observe=["y"]), ValueError, "unknown state components \\['y'\\]"),
        (dict(noise_scale=-1.0), ValueError, "noise_scale must be positive"),
        (dict(noise_scale=jnp.ones(3)), ValueError, "does not broadcast"),
        (dict(method="newton"), ValueError, "unknown method 'newton'"),
        (dict(optimiser=optax.adam(0.1)), TypeError, "method='gradient'"),
        (dict(method="gradient", optimiser="adam"), TypeError, "optax.GradientTransformation"),
        (dict(max_steps=0), ValueError, "max_steps must be a positive integer"),
        (dict(simulate_options={"adjoint": "forward"}), ValueError, "may not set 'adjoint'"),
    ],
)
def test_bad_input_is_reported_clearly(change, error, match):
    arguments = dict(
        model=Decay(rate=0.3), ts=TS, observations=OBS, y0=jnp.ones(1), params=["rate"]
    )
    arguments.update(change)
    model, ts, observations = (arguments.pop(k) for k in ("model", "ts", "observations"))
    with pytest.raises(error, match=match):
        simlab.fit(model, ts, observations, **arguments)


def test_start_on_a_bound_and_mismatched_lists_are_reported():
    pendulum = simlab.models.DampedPendulum(length=1.0, damping=0.0)
    with pytest.raises(ValueError, match="'damping'.*strictly inside"):
        simlab.fit(pendulum, TS, jnp.ones((5, 2)), y0=jnp.ones(2), params=["damping"])
    with pytest.raises(ValueError, match="lists of equal length"):
        simlab.fit(Decay(rate=0.3), [TS, TS], [OBS], y0=[jnp.ones(1)] * 2, params=["rate"])
    with pytest.raises(ValueError, match="cannot be simulated at the starting"):
        simlab.fit(FragileDecay(rate=2.0), TS, OBS, y0=jnp.ones(1), params=["rate"])


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.parametrize("bounds", [(0.5, 2.0), (0.0, math.inf), (1.0, math.inf), (-math.inf, 3.0)])
def test_transforms_never_reach_the_bound(bounds, dtype):
    from simlab._fit._transforms import Transform

    transform = Transform(*bounds)
    u = jnp.array([-1e4, -800.0, -50.0, 0.0, 30.0, 50.0], dtype)
    theta = transform.to_natural(u)
    assert np.all(transform.strictly_inside(np.asarray(theta))), theta
    middle = transform.to_natural(jnp.array([-2.0, 0.5, 3.0], dtype))
    np.testing.assert_allclose(transform.to_unconstrained(middle), [-2.0, 0.5, 3.0], rtol=1e-5)


def test_a_closed_range_is_reached_and_never_left_and_its_map_is_never_flat_inside():
    from simlab._fit._transforms import Transform

    transform = Transform(-5.0, 5.0, closed=True)
    u = jnp.linspace(-40.0, 40.0, 2001)
    theta = transform.to_natural(u)
    assert np.all(transform.strictly_inside(np.asarray(theta)))
    np.testing.assert_allclose(transform.to_natural(jnp.array(transform.branch)), [-5.0, 5.0])
    inside = jnp.array([-4.9, -1.0, 0.0, 2.5, 4.99])
    back = transform.to_natural(transform.to_unconstrained(inside))
    np.testing.assert_allclose(back, inside, rtol=1e-12)
    # g'(u) = 5 cos u: flat only on a bound, where a sigmoid's is below 1e-13 at u = 30.
    slope = jax.vmap(jax.grad(transform.to_natural))(transform.to_unconstrained(inside))
    np.testing.assert_allclose(slope, np.sqrt(25.0 - np.asarray(inside) ** 2), rtol=1e-9)
