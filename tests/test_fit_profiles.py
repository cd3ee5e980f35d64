"""Multi-start fits and profile likelihoods: global optima, interval coverage, open intervals."""

from typing import ClassVar

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
import scipy.stats
from jaxtyping import Array, Float

import simlab
import simlab.plot
from simlab.models import AbstractODEModel, parameter


class Oscillator(AbstractODEModel):
    """x'' = -frequency² x: x(t) = cos(frequency t) from (1, 0). Its least-squares loss in
    the frequency has a local minimum near every multiple of the sampling's aliasing."""

    frequency: Float[Array, ""] = parameter(lower=0.0)
    state_names: ClassVar[tuple[str, ...]] = ("x", "v")

    def __call__(self, t, y, args):
        return jnp.stack([y[1], -(self.frequency**2) * y[0]])


class Decay(AbstractODEModel):
    rate: Float[Array, ""] = parameter(lower=0.0)
    state_names: ClassVar[tuple[str, ...]] = ("x",)

    def __call__(self, t, y, args):
        return -self.rate * y


OSC_TS = jnp.linspace(0.0, 10.0, 41)
OSC_FIT = dict(y0=jnp.array([1.0, 0.0]), params=["frequency"], observe=["x"], noise_scale=0.05)


def oscillator_loss(frequency, observations):
    return 0.5 * np.sum(((np.cos(frequency * OSC_TS) - observations) / 0.05) ** 2)


@pytest.fixture(scope="module")
def oscillator_data():
    clean = np.cos(3.0 * np.asarray(OSC_TS))
    return clean + 0.05 * np.asarray(jr.normal(jr.key(0), clean.shape))


def test_multi_start_finds_the_optimum_a_single_start_misses(oscillator_data):
    observations = oscillator_data[:, None]
    single = simlab.fit(Oscillator(frequency=1.0), OSC_TS, observations, **OSC_FIT)
    # The single start converged, to a local minimum: the loss rises on both sides of it,
    # and lies far above the global one.
    f = float(single.params["frequency"])
    assert bool(single.converged) and abs(f - 3.0) > 0.5
    loss = oscillator_loss(f, oscillator_data)
    assert (
        oscillator_loss(f - 1e-3, oscillator_data)
        > loss
        < oscillator_loss(f + 1e-3, oscillator_data)
    )
    many = simlab.fit(
        Oscillator(frequency=1.0),
        OSC_TS,
        observations,
        **OSC_FIT,
        starts=32,
        bounds={"frequency": (0.2, 6.0)},
        key=jr.key(1),
    )
    grid = np.linspace(0.2, 6.0, 20_001)  # the global minimum by brute force
    best = grid[np.argmin([oscillator_loss(g, oscillator_data) for g in grid])]
    np.testing.assert_allclose(many.params["frequency"], best, atol=1e-3)
    assert float(many.loss) < 0.1 * float(single.loss)
    starts = many.starts
    assert starts.loss.shape == starts.initial["frequency"].shape == (32,)
    np.testing.assert_allclose(many.loss, jnp.min(starts.loss), rtol=1e-10)
    # Latin hypercube: one start in each of the 32 log-spaced strata.
    strata = np.floor(32 * np.log(starts.initial["frequency"] / 0.2) / np.log(30.0))
    assert sorted(strata.astype(int)) == list(range(32))
    hits = np.sum(np.abs(np.asarray(starts.params["frequency"]) - best) < 1e-3)
    assert 1 <= hits < 32  # found more than by chance, and not by every start
    axes = simlab.plot.waterfall(many)
    assert axes.get_yscale() == "log" and len(axes.lines[0].get_xdata()) == 32


def test_multi_start_input_is_checked(oscillator_data):
    observations = oscillator_data[:, None]
    model = Oscillator(frequency=1.0)
    with pytest.raises(ValueError, match="pass key="):
        simlab.fit(
            model, OSC_TS, observations, **OSC_FIT, starts=4, bounds={"frequency": (0.2, 6.0)}
        )
    with pytest.raises(ValueError, match="finite ends"):
        simlab.fit(model, OSC_TS, observations, **OSC_FIT, starts=4, key=jr.key(0))
    with pytest.raises(ValueError, match="'frequency'.*strictly inside"):
        simlab.fit(
            model,
            OSC_TS,
            observations,
            **OSC_FIT,
            starts=4,
            key=jr.key(0),
            bounds={"frequency": (2.0, 6.0)},
        )
    for starts in (0, -3, True):
        with pytest.raises(ValueError, match="starts must be a positive integer"):
            simlab.fit(model, OSC_TS, observations, **OSC_FIT, starts=starts, key=jr.key(0))


# --- profile likelihoods -----------------------------------------------------------------

DECAY_TS = jnp.linspace(0.0, 3.0, 30)
DECAY_TRUTH = (20.0, 0.8)  # initial value, rate
FAST = dict(solver="rk4", adaptive=False, dt0=0.05)  # the lean loop: fast under vmap


def decay_fit(observations, noise, **settings):
    return simlab.fit(
        Decay(rate=0.5),
        DECAY_TS,
        observations,
        y0=jnp.array([15.0]),
        params=["rate"],
        fit_y0=True,
        noise=noise,
        simulate_options=FAST,
        throw=False,
        **settings,
    )


@jax.jit
def _gaussian_intervals(observations):
    def one(obs):
        profile = decay_fit(obs, "gaussian", noise_scale=1.0).profile("rate", num_points=15)
        return profile.lower, profile.upper, jnp.all(profile.converged)

    return jax.vmap(one)(observations)


@jax.jit
def _poisson_intervals(observations):
    def one(obs):
        profile = decay_fit(obs, "poisson").profile("rate", num_points=15)
        return profile.lower, profile.upper, jnp.all(profile.converged)

    return jax.vmap(one)(observations)


def clean_decay():
    return DECAY_TRUTH[0] * np.exp(-DECAY_TRUTH[1] * np.asarray(DECAY_TS))[:, None]


NUM_REPLICATES = 400


def coverage_band(level, count):
    """The range a correct interval's coverage falls in with probability 0.999."""
    low, high = scipy.stats.binom.interval(0.999, count, level)
    return low / count, high / count


@pytest.mark.parametrize("noise", ["gaussian", "poisson"])
def test_profile_intervals_cover_the_truth_95_percent_of_the_time(noise):
    key = jr.key(7 if noise == "gaussian" else 8)
    shape = (NUM_REPLICATES, *clean_decay().shape)
    if noise == "gaussian":
        observations = clean_decay()[None] + jr.normal(key, shape)
        lower, upper, converged = _gaussian_intervals(observations)
    else:
        observations = jr.poisson(key, jnp.broadcast_to(clean_decay(), shape)).astype(float)
        lower, upper, converged = _poisson_intervals(observations)
    assert bool(jnp.all(converged))
    assert bool(jnp.all(jnp.isfinite(lower) & jnp.isfinite(upper)))
    covered = float(jnp.mean((lower <= DECAY_TRUTH[1]) & (DECAY_TRUTH[1] <= upper)))
    low, high = coverage_band(0.95, NUM_REPLICATES)
    print(f"{noise}: coverage {covered:.4f} over {NUM_REPLICATES} (band {low:.4f}-{high:.4f})")
    assert 0.93 <= covered <= 0.97 and low <= covered <= high


def test_profile_of_an_unidentifiable_parameter_is_open():
    truth = simlab.models.DampedPendulum(length=1.5, damping=0.3)
    y0 = jnp.array([1.0, 0.0])
    ts = jnp.linspace(0.0, 8.0, 25)
    clean = simlab.simulate(truth, y0, ts).ys
    observations = clean + 0.02 * jr.normal(jr.key(2), clean.shape)
    start = simlab.models.DampedPendulum(length=1.0, damping=0.5, gravity=9.81)
    result = simlab.fit(
        start, ts, observations, y0=y0, params=["length", "damping"], noise_scale=0.02
    )
    profiles = result.profile(["length", "damping"], num_points=11)
    for name, profile in profiles.items():
        # Identifiable: closed, containing the estimate, near the Wald interval.
        assert not bool(profile.lower_open) and not bool(profile.upper_open)
        assert profile.lower < result.params[name] < profile.upper
        half_width = 0.5 * (profile.upper - profile.lower)
        np.testing.assert_allclose(half_width, 1.96 * result.stderr[name], rtol=0.1)
        assert float(profile.nll[5]) == pytest.approx(0.0, abs=1e-8)
    # Gravity and length enter only as their ratio: with gravity fitted too, the profile of
    # length is flat (re-fitting gravity compensates), and the interval is open both ways.
    with pytest.warns(simlab._fit.UnidentifiableWarning):
        both = simlab.fit(
            start,
            ts,
            observations,
            y0=y0,
            params=["length", "gravity", "damping"],
            noise_scale=0.02,
        )
    flat = both.profile("length", num_points=7, span=1.0)
    assert bool(flat.lower_open) and bool(flat.upper_open)
    assert np.isinf(flat.lower) and np.isinf(flat.upper)
    assert float(jnp.max(flat.nll)) < 1e-3
    axes = simlab.plot.profiles(profiles)
    assert len(axes) == 2


class Ramp(AbstractODEModel):
    """dx/dt = rate + acceleration t: x(t) = x(0) + rate t + acceleration t²/2, linear in
    all three, so the profile of each is an exact parabola."""

    rate: Float[Array, ""] = parameter()
    acceleration: Float[Array, ""] = parameter()
    state_names: ClassVar[tuple[str, ...]] = ("x",)

    def __call__(self, t, y, args):
        return jnp.broadcast_to(self.rate + self.acceleration * t, y.shape)


def test_profiles_of_a_linear_model_are_the_exact_marginal_parabolas():
    """For a model linear in its parameters with known Gaussian noise, the profile of θ_k
    is (c − θ̂_k)² / (2 Var θ̂_k) exactly, with the *marginal* variance: the other
    parameters (the other rate and the fitted initial value) must be re-optimised at every
    point, and each profile must pin its own parameter, though both run in one program."""
    ts = jnp.linspace(0.0, 2.0, 12)
    sigma = 0.2
    clean = 1.0 + 0.5 * ts - 0.8 * ts**2 / 2
    observations = (clean + sigma * jr.normal(jr.key(5), ts.shape))[:, None]
    result = simlab.fit(
        Ramp(rate=0.0, acceleration=0.0),
        ts,
        observations,
        y0=jnp.array([0.0]),
        params=["rate", "acceleration"],
        fit_y0=True,
        noise_scale=sigma,
        simulate_options=dict(solver="rk4", adaptive=False, dt0=0.25),  # exact: cubic in t
    )
    profiles = result.profile(["rate", "acceleration"], num_points=7, span=3.0)
    design = np.stack([np.ones(ts.shape), np.asarray(ts), np.asarray(ts) ** 2 / 2], axis=1)
    covariance = sigma**2 * np.linalg.inv(design.T @ design)  # x0, rate, acceleration
    for name, index in (("rate", 1), ("acceleration", 2)):
        profile = profiles[name]
        estimate = float(result.params[name])
        expected = (np.asarray(profile.values) - estimate) ** 2 / (2 * covariance[index, index])
        np.testing.assert_allclose(profile.nll, expected, rtol=1e-6, atol=1e-9)
        # The ends interpolate linearly between grid points one standard error apart.
        stderr = np.sqrt(covariance[index, index])
        half_width = np.sqrt(scipy.stats.chi2.ppf(0.95, 1)) * stderr
        np.testing.assert_allclose(
            [profile.lower, profile.upper],
            [estimate - half_width, estimate + half_width],
            rtol=0,
            atol=0.05 * stderr,
        )
        assert bool(jnp.all(profile.converged))
